"""JSON-RPC batches through the real ``loopwarden mcp-proxy`` process: a batch stays a batch.

A client of protocol 2025-03-26 may send several messages as one JSON array. The proxy hands
the server the batch as an array and the client gets what the server answers: nothing from a
server that ignores batches (the MCP SDKs' servers), one array from a server that answers them
(``batching.py`` in front of the Python test server). Calls the guard blocks inside a batch are
answered by the proxy in that same array; a batch of notifications gets no answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from test_mcp_proxy import _free_port, _start_http_server, _url
from test_passthrough import npm_server

from _support import require_module

HERE = Path(__file__).resolve().parent
SERVER = [sys.executable, str(HERE / "server.py")]
BATCHING = [sys.executable, str(HERE / "batching.py"), "--", *SERVER]
# The interpreter that runs the proxy (.ci/run points it to a venv with mcp 2.x).
PROXY_PYTHON = os.environ.get("LOOPWARDEN_TEST_PROXY_PYTHON", sys.executable)
PROXY = [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--set=profile=recommended", "--"]
LIMIT = 60.0  # seconds a client may wait in all before the test fails
SENTINEL = 999  # a ping sent last: everything the client reads before its answer is compared


@pytest.fixture(autouse=True)
def _mcp_sdk() -> None:
    require_module("mcp", "mcp")


class Client:
    """A raw JSON-RPC client over pipes: what it sends and reads is exactly what crosses."""

    def __init__(self, argv: list[str], env: dict[str, str], answers_batches: bool) -> None:
        self.answers_batches = answers_batches
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        # A read that waits for ever fails the test instead: the process is killed.
        self.watchdog = threading.Timer(LIMIT, self.proc.kill)
        self.watchdog.start()
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-03-26",
                    "capabilities": {},
                    "clientInfo": {"name": "batches", "version": "0"},
                },
            }
        )
        assert self.until(0)[-1]["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def until(self, request_id: int | None) -> list[Any]:
        """Every message read up to and including the answer to ``request_id``.

        ``None``: up to the first array.
        """
        assert self.proc.stdout is not None
        seen = []
        while True:
            line = self.proc.stdout.readline()
            assert line, "the process closed its stdout"
            seen.append(json.loads(line))
            if request_id is None:
                if isinstance(seen[-1], list):
                    return seen
            elif isinstance(seen[-1], dict) and seen[-1].get("id") == request_id:
                return seen

    def exchange(self, batch: list[Any]) -> list[Any]:
        """Send ``batch``, then a ping; what came back before the ping's answer.

        A batch with requests may be answered after the ping (a server may answer in any
        order): its answer, an array, is waited for first when the batch expects one.
        """
        self.send(batch)
        seen = self.until(None) if _expects_answer(batch) and self.answers_batches else []
        self.send({"jsonrpc": "2.0", "id": SENTINEL, "method": "ping"})
        return seen + self.until(SENTINEL)[:-1]

    def close(self) -> None:
        self.watchdog.cancel()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


def _expects_answer(batch: list[Any]) -> bool:
    return any(isinstance(item, dict) and "id" in item for item in batch)


def call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def ping(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "ping"}


NOTIFICATION = {
    "jsonrpc": "2.0",
    "method": "notifications/cancelled",
    "params": {"requestId": 12345, "reason": "nothing to cancel"},
}


def seen_directly_and_proxied(
    server: list[str], batches: list[list[Any]], answers_batches: bool
) -> list[list[list[Any]]]:
    """What a client reads after each batch: directly, then through the proxy."""
    seen = []
    for argv in (server, [*PROXY, *server]):
        client = Client(argv, dict(os.environ), answers_batches)
        try:
            seen.append([client.exchange(batch) for batch in batches])
        finally:
            client.close()
    return seen


def by_id(array: list[Any]) -> list[Any]:
    return sorted(array, key=lambda message: json.dumps(message.get("id")))


@pytest.mark.parametrize("server", ["python", "everything"])
def test_a_server_that_ignores_batches_answers_none_through_the_proxy(server: str) -> None:
    """Issue: the proxy split a batch, so such a server answered each of its requests."""
    if server == "python":
        argv, echo = SERVER, {"text": "hello"}
    else:
        argv, echo = [str(npm_server("mcp-server-everything"))], {"message": "hello"}
    batches = [[call(1, "echo", echo), ping(2)], [NOTIFICATION], [ping(3), NOTIFICATION]]
    direct, proxied = seen_directly_and_proxied(argv, batches, answers_batches=False)
    assert proxied == direct
    answered = {message.get("id") for seen in proxied for message in seen}
    assert not answered & {1, 2, 3}


def test_a_batch_is_answered_with_one_array_as_directly() -> None:
    batches = [
        [call(1, "echo", {"text": "a"}), ping(2), NOTIFICATION],
        [NOTIFICATION],  # notifications only: no answer
        [ping(3)],
    ]
    direct, proxied = seen_directly_and_proxied(BATCHING, batches, answers_batches=True)
    assert [len(seen) for seen in direct] == [1, 0, 1]
    assert [len(seen) for seen in proxied] == [1, 0, 1]
    for seen_direct, seen_proxied in zip(direct, proxied, strict=True):
        for array_direct, array_proxied in zip(seen_direct, seen_proxied, strict=True):
            assert isinstance(array_proxied, list)
            assert by_id(array_proxied) == by_id(array_direct)


def action(answer: dict[str, Any]) -> str:
    meta = answer["result"].get("_meta") or {}
    return str(meta.get("loopwarden/action", "ran"))


def test_calls_the_guard_answers_are_in_the_batchs_array(tmp_path: Path) -> None:
    counter = tmp_path / "executions.txt"
    env = {**os.environ, "LOOPWARDEN_TEST_COUNTER": str(counter)}
    client = Client([*PROXY, *BATCHING], env, answers_batches=True)
    # Another run (its _meta key is taken out before the server sees the call): never stopped.
    other = call(11, "echo", {"text": "b"})
    other["params"]["_meta"] = {"loopwarden/runId": "another-run"}
    try:
        polls = [client.exchange([call(n, "poll", {"job": "7"})]) for n in range(1, 4)]
        mixed = client.exchange([call(10, "poll", {"job": "7"}), other, NOTIFICATION])
        alone = client.exchange([call(20, "poll", {"job": "7"}), NOTIFICATION])
    finally:
        client.close()
    for seen in polls:
        assert len(seen) == 1 and isinstance(seen[0], list) and len(seen[0]) == 1
    assert [action(seen[0][0]) for seen in polls] == ["ran", "ran", "ran"]
    # The blocked call is answered by the proxy, the other by the server: one array.
    assert len(mixed) == 1 and isinstance(mixed[0], list)
    answers = {answer["id"]: answer for answer in mixed[0]}
    assert sorted(answers) == [10, 11]
    assert action(answers[10]) == "block" and answers[10]["result"]["isError"]
    assert answers[11]["result"]["content"][0]["text"] == "b"
    # Only blocked calls (and a notification): the proxy's own array, as the server would.
    assert len(alone) == 1 and isinstance(alone[0], list) and len(alone[0]) == 1
    assert alone[0][0]["id"] == 20 and action(alone[0][0]) in ("block", "stop")
    assert counter.read_text().split() == ["poll", "poll", "poll", "echo"]


def test_a_batch_the_server_ignores_times_out_as_one_array(tmp_path: Path) -> None:
    counter = tmp_path / "executions.txt"
    argv = [*PROXY[:-1], "--call-timeout=1", "--", *SERVER]
    client = Client(argv, {**os.environ, "LOOPWARDEN_TEST_COUNTER": str(counter)}, False)
    try:
        for n in range(1, 4):  # three identical polls one by one: the next one is blocked
            client.send(call(n, "poll", {"job": "7"}))
            assert client.until(n)[-1]["result"]["isError"] is False
        client.send([call(10, "poll", {"job": "7"}), call(11, "echo", {"text": "b"}), ping(12)])
        client.send(ping(13))
        before = client.until(13)  # answered at once; the batch waits for its timeout
        after = client.until(None)  # the next message without an id: the array
    finally:
        client.close()
    assert all(isinstance(message, dict) for message in before)
    answers = {answer["id"]: answer for answer in after[-1]}
    assert sorted(answers) == [10, 11, 12]
    assert action(answers[10]) == "block"
    assert "did not answer within 1 s" in answers[11]["result"]["content"][0]["text"]
    assert "did not answer within 1 s" in answers[12]["error"]["message"]
    assert counter.read_text().split() == ["poll", "poll", "poll"]


def test_a_batch_to_an_http_server_is_answered_with_one_array(tmp_path: Path) -> None:
    """The SDK's HTTP transport takes single messages: the proxy sends the batch's one by one
    and answers the client with one array of the server's answers and its own."""
    counter = tmp_path / "executions.txt"
    port = _free_port()
    server = _start_http_server(port, counter)
    client = Client([*PROXY[:-1], "--url", _url(port)], dict(os.environ), answers_batches=True)
    try:
        polls = [client.exchange([call(n, "poll", {"job": "7"})]) for n in range(1, 4)]
        mixed = client.exchange([call(10, "poll", {"job": "7"}), call(11, "echo", {"text": "b"})])
        notified = client.exchange([NOTIFICATION])
    finally:
        client.close()
        server.kill()
        server.wait(timeout=10)
    assert all(len(seen) == 1 and isinstance(seen[0], list) for seen in polls), polls
    assert len(mixed) == 1 and isinstance(mixed[0], list)
    answers = {answer["id"]: answer for answer in mixed[0]}
    assert sorted(answers) == [10, 11] and action(answers[10]) == "block"
    assert notified == []
    assert counter.read_text().split() == ["poll", "poll", "poll", "echo"]

"""The proxy is transparent: a client sees through it exactly what it sees directly.

Real servers over stdio: the MCP reference servers from the npm registry (``everything`` and
``filesystem``, pinned in ``tests/mcp_proxy/servers/package.json``, installed by ``npm ci``)
and the Python test server. The official Python client runs the same scenario twice, once
against the server and once through ``loopwarden mcp-proxy``, with and without each client
capability (roots, sampling, elicitation), and everything it saw is compared: the
``initialize`` result (capabilities, server title, instructions), listings and their pages,
prompts, resources, completions, logging, progress, the server's own requests to the client,
and cancellation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _support import require_module

HERE = Path(__file__).resolve().parent
BIN = HERE / "servers" / "node_modules" / ".bin"
SERVER = HERE / "server.py"
PROXY_PYTHON = os.environ.get("LOOPWARDEN_TEST_PROXY_PYTHON", sys.executable)  # see .ci/run
LIMIT = 90.0


@pytest.fixture(autouse=True)
def _mcp_sdk() -> None:
    require_module("mcp", "mcp")


def npm_server(name: str) -> Path:
    """A reference server installed by npm, or skip (fail under CI) saying how to get it."""
    path = BIN / name
    if path.exists() and shutil.which("node"):
        return path
    reason = (
        f"{path} missing: run npm ci --prefix tests/mcp_proxy/servers"
        if shutil.which("npm")
        else "npm is not installed: the MCP reference servers come from the npm registry"
    )
    if os.environ.get("LOOPWARDEN_REQUIRE_ALL") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def proxied(argv: list[str]) -> list[str]:
    return [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--", *argv]


def dumped(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# The client's side of the server's requests: fixed answers, so both runs see the same.
async def _sampling(context: Any, params: Any) -> Any:
    from mcp import types

    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="sampled: forty-two"),
        model="test-model",
    )


async def _elicitation(context: Any, params: Any) -> Any:
    from mcp import types

    return types.ElicitResult(action="decline")


CAPABILITIES = ("roots", "sampling", "elicitation")


class Observer:
    """An official client session that writes down everything it sees, in order."""

    def __init__(self, capabilities: tuple[str, ...], roots: list[str]) -> None:
        self.capabilities = capabilities
        self.roots = roots
        self.seen: list[tuple[str, Any]] = []
        self.notifications: list[str] = []
        self.logs: list[Any] = []
        self.server_requests: list[str] = []

    def session_kwargs(self) -> dict[str, Any]:
        from mcp import types

        async def list_roots(context: Any) -> Any:
            self.server_requests.append("roots/list")
            return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in self.roots])

        async def sampling(context: Any, params: Any) -> Any:
            self.server_requests.append("sampling/createMessage")
            return await _sampling(context, params)

        async def elicitation(context: Any, params: Any) -> Any:
            self.server_requests.append("elicitation/create")
            return await _elicitation(context, params)

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification):
                self.notifications.append(getattr(message, "root", message).method)

        async def on_log(params: Any) -> None:
            self.logs.append(dumped(params))

        kwargs: dict[str, Any] = {"message_handler": on_message, "logging_callback": on_log}
        if "roots" in self.capabilities:
            kwargs["list_roots_callback"] = list_roots
        if "sampling" in self.capabilities:
            kwargs["sampling_callback"] = sampling
        if "elicitation" in self.capabilities:
            kwargs["elicitation_callback"] = elicitation
        return kwargs

    async def step(self, name: str, action: Callable[[], Awaitable[Any]]) -> Any:
        """Run one request; its result, or its error, is what the client saw."""
        try:
            result = await action()
        except Exception as exc:
            self.seen.append((name, f"{type(exc).__name__}: {exc}"))
            return None
        self.seen.append((name, dumped(result)))
        return result


Scenario = Callable[[Any, Observer], Awaitable[None]]


async def observe(argv: list[str], observer: Observer, scenario: Scenario) -> Observer:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write, **observer.session_kwargs()) as session,
        ):
            await observer.step("initialize", session.initialize)
            await anyio.sleep(0.5)  # servers register tools and ask for roots after initialized
            await scenario(session, observer)
    return observer


def compare(argv: list[str], capabilities: tuple[str, ...], scenario: Scenario, roots: list[str]):
    """Run ``scenario`` directly and through the proxy; return both observers."""

    async def body() -> tuple[Observer, Observer]:
        with anyio.fail_after(LIMIT):
            direct = await observe(argv, Observer(capabilities, roots), scenario)
            through = await observe(proxied(argv), Observer(capabilities, roots), scenario)
            return direct, through

    direct, through = anyio.run(body)
    for (name, seen_direct), (_, seen_proxied) in zip(direct.seen, through.seen, strict=True):
        assert seen_proxied == seen_direct, name
    assert through.server_requests == direct.server_requests
    assert sorted(set(through.notifications)) == sorted(set(direct.notifications))
    assert through.logs == direct.logs
    return direct, through


def _all_pages(session: Any, method: str) -> Callable[[], Awaitable[Any]]:
    """Every page of a listing (the cursor passed back as the server gave it)."""
    return lambda: _pages(session, method, None)


async def _pages(session: Any, method: str, cursor: str | None) -> Any:
    """Pages from ``cursor`` on; the same calls on the mcp 1.x and 2.x clients."""
    from mcp import types

    collected = []
    while True:
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await getattr(session, method)(params=params)
        collected.append(page)
        # mcp 1.x: nextCursor; mcp 2.x: next_cursor.
        cursor = getattr(page, "nextCursor", None) or getattr(page, "next_cursor", None)
        if not cursor:
            return _Pages(collected)


class _Pages:
    def __init__(self, pages: list[Any]) -> None:
        self.pages = pages

    def model_dump(self, **kwargs: Any) -> Any:
        return [page.model_dump(**kwargs) for page in self.pages]


# ---------------------------------------------------------------------------- everything


async def everything_scenario(session: Any, seen: Observer) -> None:
    from mcp import types

    await seen.step("tools", _all_pages(session, "list_tools"))
    await seen.step("prompts", _all_pages(session, "list_prompts"))
    await seen.step("resources", _all_pages(session, "list_resources"))
    await seen.step("templates", _all_pages(session, "list_resource_templates"))
    await seen.step("bad cursor", lambda: _pages(session, "list_tools", "no-such-cursor"))
    await seen.step(
        "read", lambda: session.read_resource("demo://resource/static/document/architecture.md")
    )
    await seen.step("prompt", lambda: session.get_prompt("args-prompt", {"city": "Paris"}))
    await seen.step(
        "complete",
        lambda: session.complete(
            types.PromptReference(type="ref/prompt", name="completable-prompt"),
            {"name": "department", "value": "E"},
        ),
    )
    await seen.step("set level", lambda: session.set_logging_level("debug"))
    await seen.step("echo", lambda: session.call_tool("echo", {"message": "hello"}))
    await seen.step("sum", lambda: session.call_tool("get-sum", {"a": 2, "b": 40}))
    await seen.step("image", lambda: session.call_tool("get-tiny-image", {}))
    await seen.step(
        "structured", lambda: session.call_tool("get-structured-content", {"location": "Chicago"})
    )
    progress: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    await seen.step(
        "progress",
        lambda: session.call_tool(
            "trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            progress_callback=on_progress,
        ),
    )
    seen.seen.append(("progress notifications", progress))
    await seen.step("roots tool", lambda: session.call_tool("get-roots-list", {}))
    await seen.step(
        "sampling tool",
        lambda: session.call_tool(
            "trigger-sampling-request", {"prompt": "meaning?", "maxTokens": 8}
        ),
    )
    await seen.step(
        "elicitation tool", lambda: session.call_tool("trigger-elicitation-request", {})
    )
    await seen.step("unknown tool", lambda: session.call_tool("no-such-tool", {}))
    await seen.step("unknown prompt", lambda: session.get_prompt("no-such-prompt"))


@pytest.mark.parametrize(
    "capabilities",
    [(), ("roots",), ("sampling",), ("elicitation",), CAPABILITIES],
    ids=["none", "roots", "sampling", "elicitation", "all"],
)
def test_everything_server_is_seen_as_directly(capabilities: tuple[str, ...]) -> None:
    server = [str(npm_server("mcp-server-everything"))]
    _, through = compare(server, capabilities, everything_scenario, ["file:///work/project"])
    init = dict(through.seen)["initialize"]
    assert init["serverInfo"]["title"] == "Everything Reference Server"
    tools = {t["name"] for page in dict(through.seen)["tools"] for t in page["tools"]}
    # Tools that need a client capability are offered only to a client that has it.
    assert ("get-roots-list" in tools) == ("roots" in capabilities)
    assert ("trigger-sampling-request" in tools) == ("sampling" in capabilities)
    assert ("trigger-elicitation-request" in tools) == ("elicitation" in capabilities)
    assert dict(through.seen)["progress notifications"] == [
        (1.0, 3.0, None),
        (2.0, 3.0, None),
        (3.0, 3.0, None),
    ]


# ---------------------------------------------------------------------------- filesystem


def test_filesystem_server_uses_the_clients_roots_as_directly(tmp_path: Path) -> None:
    allowed, rooted = tmp_path / "allowed", tmp_path / "rooted"
    for folder in (allowed, rooted):
        folder.mkdir()
        (folder / "note.txt").write_text(f"in {folder.name}\n", encoding="utf-8")
    server = [str(npm_server("mcp-server-filesystem")), str(allowed)]

    async def scenario(session: Any, seen: Observer) -> None:
        await seen.step("tools", _all_pages(session, "list_tools"))
        await seen.step("allowed", lambda: session.call_tool("list_allowed_directories", {}))
        await seen.step("list", lambda: session.call_tool("list_directory", {"path": str(rooted)}))
        await seen.step(
            "read", lambda: session.call_tool("read_text_file", {"path": str(rooted / "note.txt")})
        )
        await seen.step(
            "outside", lambda: session.call_tool("read_text_file", {"path": "/etc/hostname"})
        )

    for capabilities in [(), ("roots",)]:
        _, through = compare(server, capabilities, scenario, [rooted.as_uri()])
        allowed_text = dict(through.seen)["allowed"]["content"][0]["text"]
        # With roots the client's roots replace the command-line folders, as directly.
        assert (str(rooted) in allowed_text) == ("roots" in capabilities)


def test_large_file_from_the_filesystem_server_is_seen_as_directly(tmp_path: Path) -> None:
    """A 3 MB answer from a TypeScript server (it writes the id last) arrives as directly."""
    big = tmp_path / "big.txt"
    big.write_text("".join(f"line {i:07d} of a large file\n" for i in range(110_000)))
    server = [str(npm_server("mcp-server-filesystem")), str(tmp_path)]

    async def scenario(session: Any, seen: Observer) -> None:
        for _ in range(2):
            await seen.step("read", lambda: session.call_tool("read_text_file", {"path": str(big)}))

    _, through = compare(server, (), scenario, [])
    text = dict(through.seen)["read"]["content"][0]["text"]
    assert text == big.read_text()


# ---------------------------------------------------------------------------- the Python server


def test_python_server_is_seen_as_directly(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("LOOPWARDEN_TEST_COUNTER", str(tmp_path / "executions.txt"))

    async def scenario(session: Any, seen: Observer) -> None:
        await seen.step("tools", _all_pages(session, "list_tools"))
        await seen.step("prompts", _all_pages(session, "list_prompts"))
        await seen.step("resources", _all_pages(session, "list_resources"))
        await seen.step("read", lambda: session.read_resource("counter://info"))
        await seen.step("prompt", lambda: session.get_prompt("greet", {"name": "Ada"}))
        await seen.step("set level", lambda: session.set_logging_level("info"))
        await seen.step("progress", lambda: session.call_tool("progress", {"steps": 2}))
        await seen.step("sampling", lambda: session.call_tool("ask_model", {"question": "q?"}))
        await seen.step("roots", lambda: session.call_tool("roots", {}))
        await seen.step("failing", lambda: session.call_tool("boom", {}))
        await seen.step("ping", session.send_ping)

    for capabilities in [(), CAPABILITIES]:
        compare([sys.executable, str(SERVER)], capabilities, scenario, ["file:///work/project"])


# ---------------------------------------------------------------------------- cancellation


def _raw(argv: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
    )
    _answer(proc, 1)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return proc


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], request_id: int) -> tuple[dict[str, Any], list[Any]]:
    """The answer to ``request_id`` and the ids of the other answers read before it."""
    assert proc.stdout is not None
    others = []
    while True:
        line = proc.stdout.readline()
        assert line, "the process closed its stdout"
        message = json.loads(line)
        if "method" in message:
            continue
        if message.get("id") == request_id:
            return message, others
        others.append(message.get("id"))


def test_cancellation_behaves_as_directly() -> None:
    """A cancelled call: the server stops it and answers what it answers directly (TS: nothing)."""
    server = [str(npm_server("mcp-server-everything"))]
    outcomes = []
    for argv in (server, proxied(server)):
        proc = _raw(argv)
        try:
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {
                        "name": "trigger-long-running-operation",
                        "arguments": {"duration": 30, "steps": 3},
                    },
                },
            )
            time.sleep(0.3)
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 2, "reason": "test"},
                },
            )
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"message": "after"}},
                },
            )
            answer, before = _answer(proc, 3)
            outcomes.append((answer["result"], before))
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=30)
    assert outcomes[1] == outcomes[0]
    assert outcomes[0][1] == []  # the cancelled call is never answered by this server

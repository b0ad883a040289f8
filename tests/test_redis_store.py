"""RedisStore against a real, private redis-server: same verdicts as the memory store, across
processes, with TTL expiry, bounded failure when Redis is gone, and no credentials in messages."""

from __future__ import annotations

import gzip
import json
import logging
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.core.patterns import SAME_OUTCOME_NAMED
from loopwarden.store import GuardSession, session_state_from_records
from loopwarden.stores import StoreUnavailableError
from test_conformance import verdict_dict

from _support import data_path, require_binary, require_module

SECRET = "pw-Zq81-s3cret"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _free_cluster_port() -> int:
    """A free port whose cluster-bus port (port + 10000) is free too."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randint(20_000, 50_000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10_000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair for a test cluster")


@dataclass
class RedisServer:
    """A private redis-server on a loopback port, in its own temp dir."""

    binary: str
    port: int
    workdir: Path
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [self.binary, *self.extra, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
             str(self.workdir), "--save", "", "--appendonly", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=self.workdir,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith((b"+PONG", b"-NOAUTH")):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    require_module("redis", "redis")
    binary = require_binary("redis-server", "apt-get install redis-server")
    server = RedisServer(binary, _free_port(), tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def url(redis_server: RedisServer) -> str:
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


def _store(url: str, **kwargs: Any) -> Any:
    from loopwarden.stores.redis import RedisStore

    return RedisStore(url, **kwargs)


# ---------------------------------------------------------------------------------------------
# Keys and the history diff


@pytest.mark.parametrize("session", ["s", "", "}", "{", "{a}", "a{b}c", "%", "%7B", "ü{x"])
def test_both_keys_of_a_session_share_one_cluster_slot(url: str, session: str) -> None:
    from redis.crc import key_slot

    store = _store(url)
    history_key, meta_key = store.keys_for(session)
    assert key_slot(history_key.encode()) == key_slot(meta_key.encode())
    assert history_key.startswith("lw:{") and meta_key.endswith(":m")


def test_a_session_id_with_a_lone_surrogate_has_keys_of_its_own(url: str) -> None:
    # Issue 24: a name of any Unicode string; "s\udc00" could not be sent to Redis (UTF-8).
    store = _store(url)
    names = ["s\udc00", "s%uDC00", "s\\udc00", "s"]
    for i, name in enumerate(names):
        store.update(name, lambda session, i=i: session.warning_buckets.__setitem__("k", i))
    store.clear_cache()
    for i, name in enumerate(names):
        stored = store.peek(name)
        assert stored is not None and stored.warning_buckets["k"] == i, name
    assert len({store.keys_for(name) for name in names}) == len(names)


def test_distinct_sessions_never_share_keys(url: str) -> None:
    store = _store(url)
    sessions = ["", "%", "{", "%7B", "}", "%7D", "a", "a%", "%25"]
    keys = [store.keys_for(s) for s in sessions]
    assert len(set(keys)) == len(sessions)


def _record(i: int, result: str | None = None) -> lw.ToolCallRecord:
    return lw.ToolCallRecord("t", f"t:{i}", None, None, result, None, float(i))


def test_any_history_rewrite_reaches_redis_exactly(url: str) -> None:
    """Append, trim, fill in place, or replace wholesale: a second worker reads the same list."""
    rng = random.Random(7)
    writer, reader = _store(url), _store(url)
    expected: list[lw.ToolCallRecord] = []
    for step in range(150):
        records = list(expected)
        kind = rng.choice(["append", "append_trim", "fill", "replace", "shrink"])
        if kind in ("append", "append_trim"):
            records.append(_record(1000 + step))
            if kind == "append_trim" and len(records) > 3:
                del records[: rng.randint(1, 3)]
        elif kind == "fill" and records:
            i = rng.randrange(len(records))
            records[i] = _record(int(records[i].timestamp), f"r{step}")
        elif kind == "replace":
            records = [_record(rng.randint(0, 50)) for _ in range(rng.randint(0, 8))]
        elif records:
            del records[rng.randrange(len(records)) :]
        expected = records

        def apply(session: GuardSession, new: list[lw.ToolCallRecord] = records) -> None:
            session.state = session_state_from_records(replace(r) for r in new)

        writer.update("diff", apply)
        peeked = reader.peek("diff")
        assert peeked is not None
        assert peeked.state.history == expected, f"step {step} ({kind})"


def test_a_very_long_history_is_written_in_one_update(url: str) -> None:
    records = [_record(i) for i in range(9000)]

    def fill(session: GuardSession) -> None:
        session.state = session_state_from_records(records)

    _store(url).update("long", fill)
    peeked = _store(url).peek("long")
    assert peeked is not None and peeked.state.history == records


# ---------------------------------------------------------------------------------------------
# Conformance: tests/data/conformance replayed through the store, alternating two workers


def _scenarios() -> list[dict[str, Any]]:
    path = data_path("conformance", "scenarios.jsonl.gz")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _step(step: dict[str, Any], config: Any) -> Callable[[GuardSession], Any]:
    op, tool, params, run = step["op"], step["tool"], step["params"], step.get("run")

    def detect(session: GuardSession) -> Any:
        return verdict_dict(lw.detect(session.state, tool, params, config, run_id=run))

    def call(session: GuardSession) -> Any:
        lw.record_call(session.state, tool, params, step["id"], config, run)
        return ...

    def outcome(session: GuardSession) -> Any:
        kwargs: dict[str, Any] = {}
        if "result" in step:
            kwargs["result"] = step["result"]
        if "error" in step:
            error = step["error"]
            kwargs["error"] = Exception(error) if step.get("errorIsErrorObject") else error
        record = lw.record_outcome(
            session.state, tool, params, step["id"], config=config, run_id=run, **kwargs
        )
        if record is None:
            return None
        return {"resultHash": record.result_hash, "unknownToolName": record.unknown_tool_name}

    def hash_(session: GuardSession) -> Any:
        return lw.hash_tool_call(tool, params)

    return {"detect": detect, "call": call, "outcome": outcome, "hash": hash_}[op]


def test_conformance_scenarios_through_two_redis_workers(url: str) -> None:
    workers = [_store(url), _store(url)]
    scenarios = _scenarios()
    assert len(scenarios) == 400
    mismatches: list[str] = []
    for scenario in scenarios:
        key = f"conf:{scenario['id']}"
        outputs = []
        for i, step in enumerate(scenario["steps"]):
            # Every 3 steps the other worker takes over: its cached copy is stale, its first
            # write is refused and it re-runs the step on the state Redis hands back.
            out = workers[(i // 3) % 2].update(key, _step(step, scenario["config"]))
            if out is not ...:
                outputs.append(out)
        final = workers[0].peek(key)
        length = 0 if final is None else len(final.state.history)
        expected = scenario["expected"]
        if outputs != expected["outputs"] or length != expected["historyLength"]:
            mismatches.append(scenario["id"])
    assert mismatches == []


# ---------------------------------------------------------------------------------------------
# The guard: Redis-backed guards decide exactly like one in-memory guard

TOOLS = [
    ("exec", {"command": "npm test"}),
    ("exec", {"command": "ls"}),
    ("read", {"path": "a.txt"}),
    ("process", {"action": "poll", "id": "p1"}),
    ("command_status", {"id": 3}),
]
RESULTS: list[Any] = [
    "same",
    {"content": [{"type": "text", "text": "1 failing"}], "details": {"status": "completed"}},
    "other",
]


def _random_ops(rng: random.Random, n: int) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for i in range(n):
        roll = rng.random()
        session = rng.choice(["s1", "s2"])
        run = rng.choice([None, "r1", "r2"])
        if roll < 0.03:
            ops.append({"op": "compaction", "session": session, "run": run})
        elif roll < 0.05:
            ops.append({"op": "start", "session": session, "run": run})
        elif roll < 0.07:
            ops.append({"op": "end", "session": session, "run": run})
        else:
            tool, params = TOOLS[min(int(rng.expovariate(1.2)), len(TOOLS) - 1)]
            op: dict[str, Any] = {"op": "call", "session": session, "run": run, "tool": tool}
            op["params"] = params
            op["id"] = f"c{i}" if rng.random() < 0.5 else None
            if rng.random() < 0.1:
                op["error"] = "Unknown tool: ghost"
            else:
                op["result"] = RESULTS[min(int(rng.expovariate(2.0)), len(RESULTS) - 1)]
            ops.append(op)
    return ops


def _apply(guard: lw.LoopGuard, op: dict[str, Any]) -> Any:
    """Run one op on a guard; a comparable summary of what the guard answered."""
    session, run = op["session"], op["run"]
    if op["op"] == "compaction":
        guard.on_compaction_retry(session, run_id=run)
        return None
    if op["op"] == "start":
        guard.start_run(session, run)
        return None
    if op["op"] == "end":
        record = guard.end_run(session, run)
        assert record is not None
        return [record.outcome, record.stop_reason, [_event(e) for e in record.events]]
    tool, params, call_id = op["tool"], op["params"], op["id"]
    before = guard.before_tool_call(session, tool, params, run_id=run, tool_call_id=call_id)
    answer = [_decision(before)]
    if before.allowed:
        after = guard.after_tool_call(
            session,
            tool,
            params,
            result=op.get("result", lw.UNDEFINED),
            error=op.get("error"),
            run_id=run,
            tool_call_id=call_id,
        )
        answer.append(_decision(after))
    return answer


def _decision(decision: lw.Decision) -> list[Any]:
    verdict = decision.verdict
    summary = None
    if verdict is not None:
        summary = [verdict.stuck, verdict.level, verdict.detector, verdict.count]
    return [decision.action, decision.message, summary, decision.blocked_result]


def _unnamed(value: Any) -> Any:
    """``value`` without the same-outcome detector's excerpt: a memory guard names the outcome
    that keeps coming back, a stored session keeps no piece of a result (docs/stores.md)."""
    if isinstance(value, str):
        return value.split(SAME_OUTCOME_NAMED)[0]
    if isinstance(value, dict):
        return {key: _unnamed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unnamed(item) for item in value]
    return value


def _event(event: lw.LoopEvent) -> dict[str, Any]:
    data = event.to_dict()
    data.pop("timestamp")
    return data


CONFIG = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 6, "historySize": 12}
# The recommended profile adds per-run counters (blocks, error streaks) the store must carry.
CONFIGS = [CONFIG, {**CONFIG, "profile": "recommended"}]


@pytest.mark.parametrize("config", CONFIGS, ids=["openclaw", "recommended"])
def test_redis_backed_guards_decide_exactly_like_one_memory_guard(
    url: str, config: dict[str, Any]
) -> None:
    ops = _random_ops(random.Random(11), 700)
    memory = lw.LoopGuard(config)
    workers = [lw.LoopGuard(config, store=_store(url)) for _ in range(3)]
    memory_events: list[dict[str, Any]] = []
    redis_events: list[dict[str, Any]] = []
    memory.subscribe(lambda e: memory_events.append(_event(e)))
    for worker in workers:
        worker.subscribe(lambda e: redis_events.append(_event(e)))
    actions = set()
    for i, op in enumerate(ops):
        want = _apply(memory, op)
        got = _apply(workers[i % 3], op)
        assert _unnamed(got) == _unnamed(want), f"op {i}: {op}"
        if op["op"] == "call":
            actions.add(want[0][0])
    assert actions >= {"allow", "warn", "block"}  # the sequence really exercises the detectors
    assert _unnamed(redis_events) == _unnamed(memory_events)
    for session in ("s1", "s2"):
        for run in (None, "r1", "r2"):
            got_record = [_event(e) for e in workers[0].run_record(session, run)]
            assert _unnamed(got_record) == _unnamed(
                [_event(e) for e in memory.run_record(session, run)]
            )


def test_a_loop_surviving_compaction_stops_the_run_across_workers(url: str) -> None:
    workers = [lw.LoopGuard({"enabled": True}, store=_store(url)) for _ in range(2)]
    workers[0].on_compaction_retry("s", run_id="r")
    decisions = []
    for i in range(3):
        worker = workers[i % 2]
        assert worker.before_tool_call("s", "exec", {"c": 1}, run_id="r").action == "allow"
        decisions.append(worker.after_tool_call("s", "exec", {"c": 1}, result="x", run_id="r"))
    assert [d.action for d in decisions] == ["allow", "allow", "stop"]
    assert decisions[2].error is not None
    # Every worker now sees the run as stopped, with the same reason.
    again = workers[1].before_tool_call("s", "read", {}, run_id="r")
    assert again.action == "stop" and again.message == decisions[2].message


# ---------------------------------------------------------------------------------------------
# Real worker processes sharing one Redis

_WORKER = r"""
import json, sys
import loopwarden as lw
from loopwarden.stores.redis import RedisStore

config = json.loads(sys.argv[2])
guard = lw.LoopGuard(config, store=RedisStore(sys.argv[1]))
for line in sys.stdin:
    op = json.loads(line)
    if op["op"] == "hammer":
        for i in range(op["n"]):
            params, call_id = {"worker": op["tag"], "i": i}, f"{op['tag']}-{i}"
            guard.before_tool_call(op["session"], "exec", params, tool_call_id=call_id)
            guard.after_tool_call(op["session"], "exec", params, result=i, tool_call_id=call_id)
        print(json.dumps("done"), flush=True)
        continue
    d = guard.before_tool_call(op["session"], op["tool"], op["params"], run_id=op["run"])
    if d.allowed:
        guard.after_tool_call(op["session"], op["tool"], op["params"], result=op["result"],
                              run_id=op["run"])
    print(json.dumps([d.action, d.message]), flush=True)
"""


class _Workers:
    """N python processes, each with its own LoopGuard on a RedisStore; driven line by line."""

    def __init__(self, url: str, config: dict[str, Any], n: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", _WORKER, url, json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(n)
        ]

    def send(self, index: int, op: dict[str, Any]) -> None:
        proc = self.procs[index]
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(op) + "\n")
        proc.stdin.flush()

    def receive(self, index: int) -> Any:
        proc = self.procs[index]
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"worker {index} exited with {proc.wait(timeout=10)}"
        return json.loads(line)

    def close(self) -> None:
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.close()
        for proc in self.procs:
            proc.wait(timeout=30)


def test_four_worker_processes_block_at_exactly_the_in_process_call(url: str) -> None:
    config = {"enabled": True, "warningThreshold": 4, "criticalThreshold": 8}
    # A ping-pong loop interleaved with a repeating poll, spread round-robin over 4 processes.
    calls = []
    for i in range(40):
        if i % 3 == 2:
            calls.append(("command_status", {"id": 1}, "still running"))
        else:
            calls.append(("read", {"path": "a" if i % 2 else "b"}, f"content {i % 2}"))
    memory = lw.LoopGuard(config)
    want = []
    for tool, params, result in calls:
        d = memory.before_tool_call("shared", tool, params, run_id="r")
        if d.allowed:
            memory.after_tool_call("shared", tool, params, result=result, run_id="r")
        want.append([d.action, d.message])
    assert "block" in [w[0] for w in want]
    workers = _Workers(url, config, 4)
    try:
        got = []
        for i, (tool, params, result) in enumerate(calls):
            op = {"session": "shared", "tool": tool, "params": params, "run": "r"}
            workers.send(i % 4, {**op, "op": "call", "result": result})
            got.append(workers.receive(i % 4))
    finally:
        workers.close()
    assert got == want
    first_block = [w[0] for w in want].index("block")
    assert [g[0] for g in got].index("block") == first_block


def test_four_processes_hammering_one_session_lose_no_update(url: str) -> None:
    config = {"enabled": True, "historySize": 1000}
    workers = _Workers(url, config, 4)
    try:
        for index in range(4):
            workers.send(index, {"op": "hammer", "session": "hot", "tag": index, "n": 60})
        assert [workers.receive(index) for index in range(4)] == ["done"] * 4
    finally:
        workers.close()
    state = _store(url).peek("hot")
    assert state is not None
    history = state.state.history
    assert len(history) == 240  # every call recorded once
    assert all(record.result_hash is not None for record in history)  # every outcome attached
    assert len({record.tool_call_id for record in history}) == 240


# ---------------------------------------------------------------------------------------------
# TTL


def test_idle_sessions_expire_and_activity_refreshes_the_ttl(url: str) -> None:
    import redis

    store = _store(url, session_ttl=0.6)
    guard = lw.LoopGuard({"enabled": True}, store=store)
    guard.before_tool_call("idle", "exec", {"c": 1})
    client = redis.Redis.from_url(url)
    history_key, meta_key = store.keys_for("idle")
    assert 0 < client.pttl(history_key) <= 600 and 0 < client.pttl(meta_key) <= 600
    deadline = time.monotonic() + 10
    while client.exists(history_key, meta_key) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.exists(history_key, meta_key) == 0
    assert store.peek("idle") is None
    guard.before_tool_call("idle", "exec", {"c": 1})  # a fresh session, not the cached one
    state = store.peek("idle")
    assert state is not None and len(state.state.history) == 1
    assert len(store) == 1


def test_no_ttl_keeps_sessions(url: str) -> None:
    import redis

    store = _store(url, session_ttl=None)
    lw.LoopGuard({"enabled": True}, store=store).before_tool_call("keep", "exec", {})
    assert redis.Redis.from_url(url).pttl(store.keys_for("keep")[1]) == -1


# ---------------------------------------------------------------------------------------------
# Failure modes: unreachable, hanging, killed and restarted; never a credential in a message


@pytest.fixture()
def all_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def _assert_no_secret(texts: list[str]) -> None:
    for text in texts:
        assert SECRET not in text and "alice" not in text, text


def test_unreachable_redis_allows_by_default_without_leaking_credentials(
    all_logs: pytest.LogCaptureFixture,
) -> None:
    require_module("redis", "redis")
    store = _store(f"redis://alice:{SECRET}@127.0.0.1:{_free_port()}/0", timeout=0.5)
    guard = lw.LoopGuard({"enabled": True}, store=store)
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    started = time.monotonic()
    decisions = [guard.before_tool_call("s", "exec", {"c": 1}) for _ in range(3)]
    elapsed = time.monotonic() - started
    assert [d.action for d in decisions] == ["allow"] * 3
    assert elapsed < 15  # bounded by the socket timeouts, never a hang
    with pytest.raises(StoreUnavailableError) as caught:
        store.update("s", lambda session: None)
    assert caught.value.policy == "allow"
    assert "127.0.0.1" in caught.value.message  # says where, without the credentials
    texts = [r.getMessage() for r in all_logs.records] + [all_logs.text]
    texts += [str(caught.value), repr(caught.value), repr(store), str(events)]
    _assert_no_secret(texts)
    assert any(r.levelno >= logging.ERROR for r in all_logs.records)  # the error is logged


def test_a_server_that_never_answers_times_out(all_logs: pytest.LogCaptureFixture) -> None:
    require_module("redis", "redis")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)  # accepts connections (kernel backlog) and never replies
        port = listener.getsockname()[1]
        store = _store(f"redis://alice:{SECRET}@127.0.0.1:{port}/0", timeout=0.3)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.update("s", lambda session: None)
        assert time.monotonic() - started < 15
    assert "Timeout" in caught.value.message
    _assert_no_secret([str(caught.value), all_logs.text])


@pytest.mark.parametrize(
    "template",
    [
        "redis+cluster://alice:{secret}@127.0.0.1:{port}",
        "redis+sentinel://alice:{secret}@127.0.0.1:{port}/mymaster?sentinel_password={secret}",
    ],
)
def test_cluster_and_sentinel_urls_fail_cleanly_when_unreachable(
    template: str, all_logs: pytest.LogCaptureFixture
) -> None:
    require_module("redis", "redis")
    store = _store(template.format(secret=SECRET, port=_free_port()), timeout=0.3)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        store.update("s", lambda session: None)
    assert time.monotonic() - started < 30
    _assert_no_secret([str(caught.value), repr(store), all_logs.text])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"redis://alice:{SECRET}@h:1/0", "redis://***@h:1/0"),
        (f"rediss://:{SECRET}@h:1", "rediss://***@h:1"),
        (
            f"redis+sentinel://h:1,h:2/m?sentinel_password={SECRET}&db=2",
            "redis+sentinel://h:1,h:2/m?sentinel_password=***&db=2",
        ),
        ("redis://h:1/0", "redis://h:1/0"),
    ],
)
def test_urls_are_shown_without_credentials(url: str, shown: str) -> None:
    from loopwarden.stores.redis import redact_url

    assert redact_url(url) == shown
    assert redact_url(f"error talking to {url}: refused") == f"error talking to {shown}: refused"


def test_bad_urls_and_settings_are_rejected_clearly() -> None:
    require_module("redis", "redis")
    with pytest.raises(ValueError, match="unsupported scheme 'http'") as caught:
        _store(f"http://alice:{SECRET}@host/0")
    _assert_no_secret([str(caught.value)])
    with pytest.raises(ValueError, match="on_store_error must be 'allow'"):
        _store("redis://127.0.0.1:1/0", on_store_error="deny")
    with pytest.raises(ValueError, match="name the service"):
        _store(f"redis+sentinel://alice:{SECRET}@127.0.0.1:1").update("s", lambda s: None)


def test_block_policy_raises_a_blocking_store_error() -> None:
    require_module("redis", "redis")
    store = _store(f"redis://alice:{SECRET}@127.0.0.1:{_free_port()}/0", on_store_error="block")
    with pytest.raises(StoreUnavailableError) as caught:
        store.update("s", lambda session: None)
    assert caught.value.policy == "block"
    _assert_no_secret([str(caught.value)])


def test_block_policy_blocks_the_call_at_the_guard() -> None:
    require_module("redis", "redis")
    store = _store(f"redis://alice:{SECRET}@127.0.0.1:{_free_port()}/0", on_store_error="block")
    guard = lw.LoopGuard({"enabled": True}, store=store)
    decision = guard.before_tool_call("s", "exec", {"c": 1})
    assert decision.action == "block"
    assert decision.blocked_result is not None
    _assert_no_secret([str(decision.message)])


def test_killing_the_server_mid_run_then_restarting_it(
    tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    require_module("redis", "redis")
    server = RedisServer(
        require_binary("redis-server", "apt-get install redis-server"), _free_port(), tmp_path
    )
    server.start()
    try:
        config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
        store = _store(server.url, timeout=0.5, breaker_probe_every=0.1)
        guard = lw.LoopGuard(config, store=store)
        actions = [_loop_call(guard) for _ in range(3)]
        assert actions == ["allow", "allow", "warn"]
        server.stop()
        down = [_loop_call(guard) for _ in range(3)]
        assert down == ["allow"] * 3  # on_store_error="allow": calls proceed
        assert any("Redis store at" in r.getMessage() for r in all_logs.records)
        server.start()  # an empty server (no persistence): detection starts over, and works
        time.sleep(0.15)  # the breaker opened during the outage: past its next probe
        after = [_loop_call(guard) for _ in range(5)]
        assert after == ["allow", "allow", "warn", "allow", "block"]
        assert any("reachable again" in r.getMessage() for r in all_logs.records)
    finally:
        server.stop()


def _loop_call(guard: lw.LoopGuard) -> str:
    decision = guard.before_tool_call("s", "exec", {"c": 1}, run_id="r")
    if decision.allowed:
        guard.after_tool_call("s", "exec", {"c": 1}, result="same", run_id="r")
    return decision.action


# ---------------------------------------------------------------------------------------------
# Redis Cluster and Sentinel, for real


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import redis

    require_module("redis", "redis")
    binary = require_binary("redis-server", "apt-get install redis-server")
    cli = require_binary("redis-cli", "apt-get install redis-tools")
    root = tmp_path_factory.mktemp("cluster")
    nodes = [
        RedisServer(binary, _free_cluster_port(), root / str(i), ("--cluster-enabled", "yes"))
        for i in range(3)
    ]
    try:
        for node in nodes:
            node.start()
        addresses = [f"127.0.0.1:{node.port}" for node in nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        deadline = time.monotonic() + 30
        for node in nodes:
            client = redis.Redis(port=node.port)
            while client.cluster("info")["cluster_state"] != "ok":
                assert time.monotonic() < deadline, "the test cluster did not become ready"
                time.sleep(0.1)
            client.close()
        yield f"redis+cluster://127.0.0.1:{nodes[0].port}"
    finally:
        for node in nodes:
            node.stop()


def test_redis_cluster_keeps_each_session_on_one_node_and_decides_like_memory(
    cluster: str,
) -> None:
    from redis.cluster import RedisCluster

    stores = [_store(cluster), _store(cluster)]
    workers = [lw.LoopGuard(CONFIG, store=store) for store in stores]
    memory = lw.LoopGuard(CONFIG)
    ops = _random_ops(random.Random(5), 300)
    sessions = [f"tenant-{n}" for n in range(6)]  # spread over the three nodes' slots
    for i, op in enumerate(ops):
        op = {**op, "session": sessions[i % len(sessions)]}
        assert _apply(workers[i % 2], op) == _apply(memory, op), f"op {i}"
    client = RedisCluster.from_url(cluster.replace("redis+cluster", "redis"))
    homes = set()
    for session in sessions:
        history_key, meta_key = stores[0].keys_for(session)
        home = client.get_node_from_key(history_key).name
        assert client.get_node_from_key(meta_key).name == home
        assert client.exists(history_key) == 1 and client.exists(meta_key) == 1
        homes.add(home)
    assert len(homes) > 1  # the sessions really live on different nodes
    assert len(stores[0]) == len(sessions)
    client.close()


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    require_module("redis", "redis")
    binary = require_binary("redis-server", "apt-get install redis-server")
    root = tmp_path_factory.mktemp("sentinel")
    master = RedisServer(binary, _free_port(), root / "master", ("--requirepass", SECRET))
    sentinel_port = _free_port()
    conf = root / "sentinel.conf"
    conf.write_text(
        f"port {sentinel_port}\nbind 127.0.0.1\n"
        f"sentinel monitor mymaster 127.0.0.1 {master.port} 1\n"
        f"sentinel auth-pass mymaster {SECRET}\n"
    )
    node = RedisServer(binary, sentinel_port, root / "sentinel", (str(conf), "--sentinel"))
    try:
        master.start()
        node.start()
        yield sentinel_port, master.port
    finally:
        node.stop()
        master.stop()


def test_redis_sentinel_finds_the_master_and_authenticates(
    sentinel: tuple[int, int], all_logs: pytest.LogCaptureFixture
) -> None:
    sentinel_port, _ = sentinel
    url = f"redis+sentinel://:{SECRET}@127.0.0.1:{sentinel_port}/mymaster/0"
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
    guard = lw.LoopGuard(config, store=_store(url, timeout=2.0))
    memory = lw.LoopGuard(config)
    got = [_loop_call(guard) for _ in range(4)]
    assert got == [_loop_call(memory) for _ in range(4)]
    assert got[-1] == "block"
    wrong = _store(f"redis+sentinel://:wrong-{SECRET}@127.0.0.1:{sentinel_port}/mymaster")
    with pytest.raises(StoreUnavailableError) as caught:
        wrong.update("s", lambda session: None)
    assert "Error" in caught.value.message
    _assert_no_secret([str(caught.value), repr(wrong), all_logs.text])


# ---------------------------------------------------------------------------------------------
# Passwords with URL delimiters: refused at construction, never shown (issue 13, item 3)

# Two halves, so a leak of either side of the delimiter is caught too.
_LEFT, _RIGHT = "pwL3ft", "Zq81-r1ght"


def _assert_no_password_piece(texts: list[str]) -> None:
    for text in texts:
        assert _LEFT not in text and _RIGHT not in text, text


@pytest.mark.parametrize("delimiter", ["/", "#", "?"])
@pytest.mark.parametrize(
    "template", ["redis://alice:{pw}@127.0.0.1:{port}/0", "rediss://:{pw}@h:1"]
)
def test_an_unencoded_delimiter_in_the_password_is_refused_without_the_secret(
    delimiter: str, template: str, all_logs: pytest.LogCaptureFixture
) -> None:
    require_module("redis", "redis")
    url = template.format(pw=f"{_LEFT}{delimiter}{_RIGHT}", port=_free_port())
    with pytest.raises(ValueError) as caught:
        _store(url, timeout=0.3)
    message = str(caught.value)
    assert "percent-encode" in message and "%2F" in message, message
    _assert_no_password_piece([message, repr(caught.value), all_logs.text])
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize("delimiter", ["/", "#", "?", "@"])
def test_a_percent_encoded_password_works_and_is_never_shown(
    delimiter: str, tmp_path: Path, all_logs: pytest.LogCaptureFixture
) -> None:
    from urllib.parse import quote

    require_module("redis", "redis")
    password = f"{_LEFT}{delimiter}{_RIGHT}"
    server = RedisServer(
        require_binary("redis-server", "apt-get install redis-server"),
        _free_port(),
        tmp_path,
        ("--requirepass", password),
    )
    server.start()
    try:
        url = f"redis://:{quote(password, safe='')}@127.0.0.1:{server.port}/0"
        store = _store(url, timeout=2.0)
        config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
        guard = lw.LoopGuard(config, store=lw_store_check(store))
        assert [_loop_call(guard) for _ in range(3)] == ["allow", "allow", "warn"]
        _assert_no_password_piece([repr(store), str(store), all_logs.text])
    finally:
        server.stop()


def lw_store_check(store: Any) -> Any:
    """The store, after one update proved it authenticated (a failure would only be logged)."""
    store.update("probe", lambda session: None)
    return store


def test_an_unencoded_at_sign_in_the_password_is_never_shown(
    all_logs: pytest.LogCaptureFixture,
) -> None:
    require_module("redis", "redis")
    url = f"redis://alice:{_LEFT}@{_RIGHT}@127.0.0.1:{_free_port()}/0"
    store = _store(url, timeout=0.3)  # unambiguous: the host follows the last '@'
    guard = lw.LoopGuard({"enabled": True}, store=store)
    assert [guard.before_tool_call("s", "exec", {"c": i}).action for i in range(3)] == ["allow"] * 3
    with pytest.raises(StoreUnavailableError) as caught:
        store.update("s", lambda session: None)
    assert "127.0.0.1" in caught.value.message
    texts = [repr(store), str(store), str(caught.value), all_logs.text]
    _assert_no_password_piece(texts + [r.getMessage() for r in all_logs.records])


def test_bad_ports_hosts_and_sentinel_lists_are_refused_at_construction() -> None:
    require_module("redis", "redis")
    with pytest.raises(ValueError, match="port") as caught:
        _store(f"redis://alice:{_LEFT}@127.0.0.1:99999/0")
    with pytest.raises(ValueError, match="database number"):
        _store(f"redis://alice:{_LEFT}@127.0.0.1:6379/zero")
    with pytest.raises(ValueError, match="not host:port"):
        _store(f"redis+sentinel://alice:{_LEFT}@127.0.0.1:1,nohost/mymaster")
    _assert_no_password_piece([str(caught.value)])


# ---------------------------------------------------------------------------------------------
# Batches across workers


def test_one_batch_decided_by_two_workers_runs_no_more_calls_than_one_at_a_time(
    url: str,
) -> None:
    # Two guards (two workers) share one Redis store; their threads race on the calls of one
    # batch, every call decided before any outcome. The calls in flight live in the stored
    # session, so the batch is counted once: as many run as one call at a time would let run.
    config = {"profile": "recommended"}
    params = {"path": "src/app.py"}
    sequential = lw.LoopGuard(config)
    runs_one_by_one = 0
    while sequential.before_tool_call("s", "read_file", params, run_id="r").allowed:
        sequential.after_tool_call("s", "read_file", params, result="x", run_id="r")
        runs_one_by_one += 1

    workers = [lw.LoopGuard(config, store=_store(url)) for _ in range(2)]
    size = 12
    decided = threading.Barrier(size)
    actions: list[str] = []
    lock = threading.Lock()

    def one(guard: lw.LoopGuard) -> None:
        decision = guard.before_tool_call("s", "read_file", params, run_id="r", batch="t1")
        with lock:
            actions.append(decision.action)
        decided.wait(timeout=30)
        if decision.allowed:
            guard.after_tool_call("s", "read_file", params, result="x", run_id="r", batch="t1")

    threads = [threading.Thread(target=one, args=(workers[i % 2],)) for i in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(actions) == size
    assert sum(a in ("allow", "warn") for a in actions) == runs_one_by_one
    assert "stop" not in actions


# ---------------------------------------------------------------------------------------------
# A hung server: the circuit breaker (issue 24)


def _outage_logs(caplog: pytest.LogCaptureFixture) -> tuple[list[str], list[str], list[str]]:
    """(error lines, recovery lines, calls refused without trying Redis) from the logs."""
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    errors = [m for level, m in messages if level >= logging.ERROR and "Redis" in m]
    recovered = [m for _, m in messages if "reachable again after an outage of" in m]
    refused = [m for _, m in messages if "the call was not tried" in m]
    return errors, recovered, refused


@pytest.fixture()
def hung_server(tmp_path: Path) -> Iterator[RedisServer]:
    require_module("redis", "redis")
    server = RedisServer(
        require_binary("redis-server", "apt-get install redis-server"), _free_port(), tmp_path
    )
    server.start()
    yield server
    if server.process is not None:
        server.process.send_signal(signal.SIGCONT)
    server.stop()


def test_a_hung_redis_is_given_up_on_after_a_few_timeouts_then_probed(
    hung_server: RedisServer, all_logs: pytest.LogCaptureFixture
) -> None:
    # Issue 24: after SIGSTOP of the server every tool call waited for two socket timeouts,
    # forever, and each logged an ERROR line.
    store = _store(hung_server.url, timeout=0.3, breaker_probe_every=0.5)
    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    guard = lw.LoopGuard(config, store=store)
    assert [_loop_call(guard) for _ in range(3)] == ["allow", "allow", "warn"]
    assert hung_server.process is not None
    hung_server.process.send_signal(signal.SIGSTOP)
    down = [_loop_call(guard) for _ in range(20)]  # 40 store operations
    assert down == ["allow"] * 20  # on_store_error="allow"
    errors, recovered, refused = _outage_logs(all_logs)
    assert len(errors) == 1, errors  # one line for the outage
    assert len(refused) >= 30, len(refused)  # decided at once, not after a timeout each
    hung_server.process.send_signal(signal.SIGCONT)
    time.sleep(0.6)  # past the next probe
    # The session's history is still there (a write that timed out may have landed when the
    # server resumed: the count is 3 or 4), so the loop is blocked at its 4th call.
    assert [_loop_call(guard) for _ in range(2)][-1] == "block"
    errors, recovered, _ = _outage_logs(all_logs)
    assert len(errors) == 1 and len(recovered) == 1, (errors, recovered)


def test_a_hung_redis_costs_async_tasks_a_few_timeouts_not_one_each(
    hung_server: RedisServer, all_logs: pytest.LogCaptureFixture
) -> None:
    import asyncio

    from loopwarden.stores.redis import AsyncRedisStore

    async def main() -> list[str]:
        store = AsyncRedisStore(hung_server.url, timeout=0.3, breaker_probe_every=60)
        guard = lw.LoopGuard({"enabled": True}, store=store)
        await guard.abefore_tool_call("s0", "exec", {"c": 0})
        assert hung_server.process is not None
        hung_server.process.send_signal(signal.SIGSTOP)

        async def task(i: int) -> str:
            for _ in range(5):  # each task's calls come one after another
                decision = await guard.abefore_tool_call(f"s{i % 20}", "exec", {"c": i})
            return decision.action

        actions = await asyncio.gather(*(task(i) for i in range(200)))
        await store.aclose()
        return list(actions)

    assert asyncio.run(main()) == ["allow"] * 200
    errors, _, refused = _outage_logs(all_logs)
    assert len(errors) == 1, errors
    # The first wave of calls was in flight before the breaker opened; every later one was not.
    assert len(refused) >= 4 * 200, len(refused)

"""``loopwarden mcp-proxy`` over real stdio, real processes, the real ``mcp`` SDK client.

Each test launches ``python -m loopwarden mcp-proxy ... -- python server.py`` as a subprocess
and talks MCP to it with the SDK's ``ClientSession``. The test server counts its own tool
executions in a file, so "the server never saw the blocked call" is checked at the server.
Every wait is bounded (``anyio.fail_after`` / subprocess timeouts): a regression fails, it
does not hang the suite.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from loopwarden.core.config import resolve_config

from _support import require_binary

SERVER = Path(__file__).with_name("server.py")
# The interpreter that runs the proxy: the mcp 2.x pass of .ci/run points it to a venv with
# mcp 2.x, while the tests' client and server stay on this interpreter's SDK.
PROXY_PYTHON = os.environ.get("LOOPWARDEN_TEST_PROXY_PYTHON", sys.executable)
COUNTER_ENV = "LOOPWARDEN_TEST_COUNTER"
LIMIT = 60.0  # seconds any single test body may take before it counts as a hang


def executions(counter: Path) -> Counter[str]:
    """How many times each tool really ran inside the test server."""
    if not counter.exists():
        return Counter()
    return Counter(counter.read_text(encoding="utf-8").split())


def proxy_argv(*options: str, server: tuple[str, ...] | None = None) -> list[str]:
    """argv of the proxy wrapping the test server (or ``server``) over stdio."""
    target = server if server is not None else (sys.executable, str(SERVER))
    return [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", *options, "--", *target]


def env_for(counter: Path) -> dict[str, str]:
    return {**os.environ, COUNTER_ENV: str(counter)}


def run(body: Callable[[], Awaitable[None]]) -> None:
    """Run one async test body with a hard bound on its duration."""

    async def bounded() -> None:
        with anyio.fail_after(LIMIT):
            await body()

    anyio.run(bounded)


@asynccontextmanager
async def connect(
    argv: list[str], env: dict[str, str], errlog: Any = None, **session_kwargs: Any
) -> AsyncIterator[Any]:
    """An initialized SDK ``ClientSession`` to a process started from ``argv``."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with (
        stdio_client(params, errlog=errlog or sys.stderr) as (read, write),
        ClientSession(read, write, **session_kwargs) as session,
    ):
        await session.initialize()
        yield session


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if block.type == "text"]


def dumped(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# ---------------------------------------------------------------------------- passthrough


def test_listings_are_identical_to_the_direct_server(counter: Path) -> None:
    async def body() -> None:
        env = env_for(counter)
        direct_argv = [sys.executable, str(SERVER)]
        listings = []
        for argv in (direct_argv, proxy_argv()):
            async with connect(argv, env) as session:
                listings.append(
                    {
                        "tools": dumped(await session.list_tools()),
                        "prompts": dumped(await session.list_prompts()),
                        "resources": dumped(await session.list_resources()),
                        "prompt": dumped(await session.get_prompt("greet", {"name": "Ada"})),
                        "read": dumped(await session.read_resource("counter://info")),
                    }
                )
        direct, proxied = listings
        assert proxied == direct
        assert {tool["name"] for tool in proxied["tools"]["tools"]} >= {"poll", "echo", "boom"}

    run(body)


def test_server_identity_and_capabilities_pass_through(counter: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def initialize(argv: list[str]) -> Any:
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=env_for(counter))
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await session.initialize()

    async def body() -> None:
        direct = await initialize([sys.executable, str(SERVER)])
        proxied = await initialize(proxy_argv())
        assert proxied.serverInfo.name == direct.serverInfo.name
        assert proxied.instructions == direct.instructions
        assert dumped(proxied.capabilities) == dumped(direct.capabilities)

    run(body)


def test_notifications_progress_and_logging_pass_through(counter: Path) -> None:
    from mcp import types

    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []
    notices: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: Any) -> None:
        logs.append(params.data)

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ServerNotification):
            notices.append(type(message.root).__name__)

    async def body() -> None:
        async with connect(
            proxy_argv(), env_for(counter), logging_callback=on_log, message_handler=on_message
        ) as session:
            result = await session.call_tool(
                "progress", {"steps": 3}, progress_callback=on_progress
            )
            assert texts(result) == ["done after 3 steps"]
            assert [p[0] for p in progress] == [1, 2, 3]
            assert logs == ["progress tool started"]
            before = {tool.name for tool in (await session.list_tools()).tools}
            await session.call_tool("add_tool", {})
            with anyio.fail_after(10):
                while "ToolListChangedNotification" not in notices:
                    await anyio.sleep(0.02)
            after = {tool.name for tool in (await session.list_tools()).tools}
            assert after - before == {"late"}
            assert texts(await session.call_tool("late", {})) == ["late tool answered"]

    run(body)


def test_server_requests_to_the_client_are_forwarded(counter: Path) -> None:
    from mcp import types

    questions: list[str] = []

    async def sampling(context: Any, params: Any) -> Any:
        questions.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="test-model",
        )

    async def list_roots(context: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project")])

    async def body() -> None:
        async with connect(
            proxy_argv(),
            env_for(counter),
            sampling_callback=sampling,
            list_roots_callback=list_roots,
        ) as session:
            answered = await session.call_tool("ask_model", {"question": "meaning?"})
            listed = await session.call_tool("roots", {})
        assert texts(answered) == ["forty-two"] and questions == ["meaning?"]
        assert texts(listed) == ["file:///work/project"]
        # A client without sampling support: the server gets the client's own refusal, as
        # it does without the proxy (the proxy claims no capability the client lacks).
        refusals = []
        for argv in ([sys.executable, str(SERVER)], proxy_argv()):
            async with connect(argv, env_for(counter)) as session:
                refusals.append(await session.call_tool("ask_model", {"question": "again?"}))
        direct, refused = refusals
        assert refused.isError and dumped(refused) == dumped(direct)
        assert "Sampling not supported" in texts(refused)[0]

    run(body)


# ---------------------------------------------------------------------------- the guard


def test_identical_polls_warn_at_thresholds_then_block_without_reaching_the_server(
    counter: Path, tmp_path: Path
) -> None:
    config = resolve_config({"enabled": True, "warningThreshold": 3, "criticalThreshold": 8})
    warn, critical = config.warning_threshold, config.critical_threshold
    events_path = tmp_path / "events.jsonl"
    secret = "job-secret-7f3a"  # must never appear in the events file (privacy)
    calls = critical + 4

    async def body() -> None:
        argv = proxy_argv(
            f"--set=warningThreshold={warn}",
            f"--set=criticalThreshold={critical}",
            f"--events={events_path}",
        )
        async with connect(argv, env_for(counter)) as session:
            results = [await session.call_tool("poll", {"job": secret}) for _ in range(calls)]
            echoed = await session.call_tool("echo", {"text": "still fine"})

        # Through the guard: before call k the history holds k-1 identical calls with identical
        # results. generic_repeat warns once per warningThreshold bucket (k-1 = 3, 6) and
        # blocks once the no-progress streak reaches criticalThreshold (k-1 >= 8).
        for k, result in enumerate(results, start=1):
            body_texts = texts(result)
            if k - 1 >= critical:
                assert result.isError, k
                assert body_texts[0].startswith("CRITICAL:"), k
                assert result.meta is not None and result.meta["loopwarden/action"] == "block"
                continue
            assert not result.isError, k
            assert body_texts[0] == f"job {secret}: still running"
            warned = (k - 1) >= warn and (k - 1) % warn == 0
            assert len(body_texts) == (2 if warned else 1), (k, body_texts)
            if warned:
                assert body_texts[1].startswith("WARNING:") and "poll" in body_texts[1]
        assert not echoed.isError and texts(echoed) == ["still fine"]

    run(body)
    ran = executions(counter)
    assert ran["poll"] == critical  # blocked calls never reached the server
    assert ran["echo"] == 1

    lines = events_path.read_text(encoding="utf-8").splitlines()
    assert secret not in "\n".join(lines)
    events = [json.loads(line) for line in lines]
    warnings = [e for e in events if e["action"] == "warn"]
    blocks = [e for e in events if e["action"] == "block"]
    assert [e["count"] for e in warnings] == list(range(warn, critical, warn))
    assert len(blocks) == calls - critical
    assert {e["tool_name"] for e in events} == {"poll"}
    assert {e["type"] for e in events} == {"tool.loop"}
    assert len({e["session"] for e in events}) == 1


def test_record_writes_run_records_that_runs_lists(counter: Path, tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    critical = 4

    async def body() -> None:
        argv = proxy_argv(
            "--set=warningThreshold=2", f"--set=criticalThreshold={critical}", f"--record={db}"
        )
        async with connect(argv, env_for(counter)) as session:
            for _ in range(critical + 2):
                await session.call_tool("poll", {"job": "rec-secret"})

    run(body)
    listed = subprocess.run(
        [sys.executable, "-m", "loopwarden", "runs", "list", "--db", str(db), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    runs = runs["runs"] if isinstance(runs, dict) else runs
    assert len(runs) == 1 and runs[0]["blocks"] == 2 and runs[0]["warnings"] >= 1
    assert b"rec-secret" not in db.read_bytes()


def test_run_id_meta_scopes_detection_per_run(counter: Path) -> None:
    critical = 4

    async def body() -> None:
        argv = proxy_argv("--set=warningThreshold=2", f"--set=criticalThreshold={critical}")
        async with connect(argv, env_for(counter)) as session:
            first = [
                await session.call_tool("poll", {"job": "a"}, meta={"loopwarden/runId": "run-1"})
                for _ in range(critical + 1)
            ]
            other_run = await session.call_tool(
                "poll", {"job": "a"}, meta={"loopwarden/runId": "run-2"}
            )
            assert [r.isError for r in first] == [False] * critical + [True]
            assert not other_run.isError  # a new run starts with its own history

    run(body)
    assert executions(counter)["poll"] == critical + 1


def test_loopwarden_meta_keys_are_not_forwarded(counter: Path) -> None:
    async def body() -> None:
        async with connect(proxy_argv(), env_for(counter)) as session:
            meta = {"loopwarden/runId": "r1", "loopwarden/compacted": True, "vendor/trace": "t"}
            seen = await session.call_tool("meta_keys", {}, meta=meta)
            plain = await session.call_tool("meta_keys", {})
        assert texts(seen) == ["vendor/trace"]
        assert texts(plain) == [""]

    run(body)


def test_wrongly_typed_meta_is_ignored_with_a_warning(counter: Path, tmp_path: Path) -> None:
    errlog_path = tmp_path / "proxy-stderr.txt"

    async def body() -> None:
        with errlog_path.open("w") as errlog:
            async with connect(proxy_argv(), env_for(counter), errlog=errlog) as session:
                bad = {"loopwarden/runId": 7, "loopwarden/compacted": "yes"}
                result = await session.call_tool("echo", {"text": "x"}, meta=bad)
        assert not result.isError and texts(result) == ["x"]

    run(body)
    log = errlog_path.read_text()
    assert "ignoring _meta['loopwarden/runId']: expected a non-empty string, got int" in log
    assert "ignoring _meta['loopwarden/compacted']: expected true or false, got str" in log


def test_compaction_meta_arms_the_post_compaction_guard_and_stops_the_run(
    counter: Path, tmp_path: Path
) -> None:
    window = resolve_config({}).post_compaction_window
    events_path = tmp_path / "events.jsonl"

    async def body() -> None:
        # Thresholds high enough that only the post-compaction guard can act.
        argv = proxy_argv("--set=warningThreshold=50", "--events", str(events_path))
        async with connect(argv, env_for(counter)) as session:
            meta = {"loopwarden/runId": "turn-1"}
            compacted = {**meta, "loopwarden/compacted": True}
            first = await session.call_tool("poll", {"job": "x"}, meta=compacted)
            rest = [
                await session.call_tool("poll", {"job": "x"}, meta=meta) for _ in range(window - 1)
            ]
            later = [await session.call_tool("echo", {"text": "hi"}, meta=meta) for _ in range(2)]
            elsewhere = await session.call_tool("echo", {"text": "hi"})

            assert not first.isError and len(texts(first)) == 1
            stop_note = texts(rest[-1])[-1]
            assert "compaction" in stop_note and stop_note.startswith("CRITICAL:")
            for result in later:
                assert result.isError and texts(result) == [stop_note]
                assert result.meta is not None and result.meta["loopwarden/action"] == "stop"
            assert not elsewhere.isError  # the connection's own run is not stopped

    run(body)
    ran = executions(counter)
    assert ran["poll"] == window
    assert ran["echo"] == 1  # only the call outside the stopped run reached the server
    events = [json.loads(line) for line in events_path.read_text("utf-8").splitlines()]
    assert [(e["type"], e["action"], e["run_id"]) for e in events] == [
        ("compaction.loop_persisted", "stop", "turn-1")
    ]


def test_unknown_tool_errors_count_as_errors(counter: Path) -> None:
    threshold = 3

    async def body() -> None:
        argv = proxy_argv(f"--set=unknownToolThreshold={threshold}")
        async with connect(argv, env_for(counter)) as session:
            results = [await session.call_tool("no_such_tool", {}) for _ in range(threshold + 1)]
        assert all(r.isError for r in results)
        assert "Unknown tool" in texts(results[0])[0]
        assert texts(results[-1])[0].startswith("CRITICAL: attempted unavailable tool")

    run(body)


def test_failing_tool_result_passes_through(counter: Path) -> None:
    async def body() -> None:
        async with connect(proxy_argv(), env_for(counter)) as session:
            result = await session.call_tool("boom", {})
        assert result.isError and "boom" in texts(result)[0]

    run(body)
    assert executions(counter)["boom"] == 1


# ---------------------------------------------------------------------------- failures


def test_downstream_crash_gives_an_error_result_then_a_fresh_server(
    counter: Path, tmp_path: Path
) -> None:
    errlog_path = tmp_path / "proxy-stderr.txt"
    pids: list[int] = []

    async def body() -> None:
        with errlog_path.open("w") as errlog:
            async with connect(proxy_argv(), env_for(counter), errlog=errlog) as session:
                pids.append(int(texts(await session.call_tool("pid", {}))[0]))
                crashed = await session.call_tool("crash", {})
                pids.append(int(texts(await session.call_tool("pid", {}))[0]))
                after = await session.call_tool("echo", {"text": "anyone?"})
        assert crashed.isError and "not available" in texts(crashed)[0]
        assert "closed the connection" in texts(crashed)[0]
        assert texts(after) == ["anyone?"]  # served by a restarted server

    run(body)
    first, second = pids
    assert first != second and _gone(first)
    assert executions(counter)["crash"] == 1
    log = errlog_path.read_text()
    assert "closed the connection" in log and "reconnected to the MCP server" in log


def test_server_that_cannot_restart_gives_clear_errors(counter: Path, tmp_path: Path) -> None:
    once = tmp_path / "started-once"
    argv = proxy_argv(server=(sys.executable, str(SERVER), "--once", str(once)))

    async def body() -> None:
        async with connect(argv, env_for(counter)) as session:
            crashed = await session.call_tool("crash", {})
            retried = await session.call_tool("echo", {"text": "x"})
            listing_error = None
            try:
                await session.list_tools()
            except Exception as exc:
                listing_error = str(exc)
        assert crashed.isError and "closed the connection" in texts(crashed)[0]
        assert retried.isError and "restarting it failed" in texts(retried)[0]
        assert "could not start the MCP server" in texts(retried)[0]
        assert listing_error is not None and "not available" in listing_error

    run(body)
    assert executions(counter)["echo"] == 0


def test_downstream_hang_times_out_with_a_clear_error(counter: Path, tmp_path: Path) -> None:
    errlog_path = tmp_path / "proxy-stderr.txt"

    async def body() -> None:
        argv = proxy_argv("--call-timeout=1")
        with errlog_path.open("w") as errlog:
            async with connect(argv, env_for(counter), errlog=errlog) as session:
                hung = await session.call_tool("hang", {})
                alive = await session.call_tool("echo", {"text": "still here"})
                # While still connected (a disconnect would cancel it anyway), the abandoned
                # request is cancelled at the server: the proxy forwarded notifications/cancelled.
                with anyio.fail_after(10):
                    while executions(counter)["hang_cancelled"] == 0:
                        await anyio.sleep(0.05)
                # The server answers the cancelled request late ("Request cancelled"): the
                # client already has its answer, so the late one is dropped, quietly.
                after = await session.call_tool("echo", {"text": "after"})
        assert hung.isError and "did not answer within 1 s" in texts(hung)[0]
        assert texts(alive) == ["still here"] and texts(after) == ["after"]

    run(body)
    log = errlog_path.read_text()
    assert "not valid JSON-RPC" not in log and "ERROR" not in log, log


def test_a_request_times_out_at_its_own_deadline_after_others_were_answered(
    counter: Path,
) -> None:
    """One timer watches every request in flight: a request forwarded after others were
    answered in time still times out at its own deadline, neither sooner nor never."""

    async def body() -> None:
        async with connect(proxy_argv("--call-timeout=1"), env_for(counter)) as session:
            assert texts(await session.call_tool("echo", {"text": "first"})) == ["first"]
            await anyio.sleep(0.6)  # the first call's deadline passes while the next one hangs
            started = time.monotonic()
            with anyio.fail_after(10):
                hung = await session.call_tool("hang", {})
            waited = time.monotonic() - started
            assert hung.isError and "did not answer within 1 s" in texts(hung)[0]
            assert waited >= 0.95, waited
            assert texts(await session.call_tool("echo", {"text": "after"})) == ["after"]

    run(body)


def test_server_that_exits_at_once_gives_its_status_and_stderr(counter: Path) -> None:
    script = "import sys; sys.stderr.write('fatal: no API key in MCP_DEMO_KEY\\n'); sys.exit(4)"
    proc = subprocess.Popen(
        proxy_argv(server=(sys.executable, "-c", script)),
        stdin=subprocess.PIPE,  # held open: the proxy must exit on its own
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        code = proc.wait(timeout=LIMIT)
        assert proc.stdout is not None and proc.stderr is not None
        stdout, stderr = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(timeout=LIMIT)
        assert proc.stdin is not None
        proc.stdin.close()
    assert code == 1
    assert "could not start the MCP server" in stderr
    assert "exited with status 4" in stderr
    assert "last stderr lines: fatal: no API key in MCP_DEMO_KEY" in stderr
    assert "BrokenResourceError" not in stderr and stdout == ""


def test_downstream_garbage_is_reported_and_the_session_survives(
    counter: Path, tmp_path: Path
) -> None:
    errlog_path = tmp_path / "proxy-stderr.txt"

    async def body() -> None:
        with errlog_path.open("w") as errlog:
            async with connect(proxy_argv(), env_for(counter), errlog=errlog) as session:
                result = await session.call_tool("garbage", {})
                again = await session.call_tool("echo", {"text": "ok"})
        assert texts(result) == ["answered after garbage"]
        assert texts(again) == ["ok"]

    run(body)
    log = errlog_path.read_text()
    assert "not valid JSON-RPC" in log
    assert "this is not json-rpc" not in log  # privacy: the line itself is not logged


def test_malformed_result_gives_a_clear_error(counter: Path, tmp_path: Path) -> None:
    errlog_path = tmp_path / "proxy-stderr.txt"

    async def body() -> None:
        with errlog_path.open("w") as errlog:
            async with connect(proxy_argv(), env_for(counter), errlog=errlog) as session:
                bad = await session.call_tool("bad_result", {})
                fine = await session.call_tool("echo", {"text": "ok"})
        assert bad.isError
        assert "sent a malformed answer" in texts(bad)[0] and "'content'" in texts(bad)[0]
        assert "not-a-list" not in texts(bad)[0]  # the offending value is not echoed
        assert texts(fine) == ["ok"]

    run(body)
    assert "not-a-list" not in errlog_path.read_text()


@pytest.mark.parametrize(
    ("spec", "shown"),
    [
        ({"command": ("npx", "-y", "@mcp/server-files", "/home/me")}, "npx"),
        ({"command": ("python", "srv.py", "--token", "s3cret")}, "python"),
        ({"command": ("bash", "-c", "exec server.py --api-key s3cret")}, "bash"),
        ({"command": ("/opt/srv/bin/files", "s3cret")}, "files"),
        ({"command": ("python", "s3cret"), "name": "files"}, "files"),
        ({"url": "https://mcp.example.com/mcp", "name": "files"}, "files"),
        (
            {"url": "https://u:s3cret@mcp.example.com:8443/mcp?key=s3cret"},
            "https://mcp.example.com:8443/mcp",
        ),
    ],
)
def test_server_names_in_messages_leave_out_secrets(spec: dict[str, Any], shown: str) -> None:
    from loopwarden.mcp_proxy import DownstreamSpec

    assert DownstreamSpec(**spec).describe() == shown


def test_a_crash_never_shows_the_server_arguments_to_the_client_or_the_log(
    counter: Path, tmp_path: Path
) -> None:
    # Issue 24: a crash answered "the MCP server 'bash server.py --api-key SECRET' is not
    # available" to the client (and so to the model), and logged the same.
    errlog_path = tmp_path / "proxy-stderr.txt"
    inner = f"exec {sys.executable} {SERVER} --api-key s3cret-key-value"
    shown: list[str] = []

    async def body() -> None:
        for options in ((), ("--name", "test-files")):
            argv = proxy_argv(*options, server=("bash", "-c", inner))
            with errlog_path.open("a") as errlog:
                async with connect(argv, env_for(counter), errlog=errlog) as session:
                    crashed = await session.call_tool("crash", {})
            assert crashed.isError
            shown.append(texts(crashed)[0])

    run(body)
    assert "'bash' is not available" in shown[0], shown
    assert "'test-files' is not available" in shown[1], shown
    log = errlog_path.read_text()
    assert "s3cret" not in "".join(shown) + log
    assert "MCP server bash:" in log and "MCP server test-files:" in log, log


def test_missing_server_command_fails_fast_with_a_clear_message(counter: Path) -> None:
    done = subprocess.run(
        proxy_argv(server=("loopwarden-no-such-server-binary",)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        env=env_for(counter),
        check=False,
    )
    assert done.returncode == 1
    assert "could not start the MCP server" in done.stderr
    assert "loopwarden-no-such-server-binary" in done.stderr
    assert done.stdout == ""  # stdout is the protocol: nothing else may be written there


def test_invalid_config_file_exits_2_listing_the_problem(tmp_path: Path) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text('{tools: {loopDetection: {criticalThreshold: "many"}}}', encoding="utf-8")
    done = subprocess.run(
        [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--config", str(config), "--", "x"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 2
    assert "tools.loopDetection.criticalThreshold" in done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--url", "http://127.0.0.1:1/mcp", "--", "python", "x.py"], "not both"),
        ([], "no MCP server given"),
        (["--header", "X: y", "--", "python", "x.py"], "--header only applies"),
        (["--url", "http://h/mcp", "--header", "nocolon"], "expected 'NAME: VALUE'"),
        (["--set", "warningThreshold", "--", "python", "x.py"], "expected KEY=VALUE"),
        (["--set", "repeatThreshold=3", "--", "python", "x.py"], "repeatThreshold"),
        (["--events", "/nonexistent-dir/e.jsonl", "--", "python", "x.py"], "folder exists"),
    ],
)
def test_bad_arguments_exit_2_with_a_specific_message(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", *argv],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


# ---------------------------------------------------------------------------- shutdown


def _jsonrpc_line(message: Any) -> bytes:
    from mcp import types

    return (
        types.JSONRPCMessage(message).model_dump_json(by_alias=True, exclude_none=True) + "\n"
    ).encode()


def _start_raw_proxy(counter: Path, **popen: Any) -> tuple[subprocess.Popen[bytes], int]:
    """Start the proxy with plain pipes, handshake with SDK models, return it and the server pid."""
    from mcp import types

    proc = subprocess.Popen(
        proxy_argv(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env_for(counter),
        **popen,
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = types.InitializeRequestParams(
        protocolVersion=types.LATEST_PROTOCOL_VERSION,
        capabilities=types.ClientCapabilities(),
        clientInfo=types.Implementation(name="raw-test", version="0"),
    )
    messages = [
        types.JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize", params=dumped(init)),
        types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"),
        types.JSONRPCRequest(
            jsonrpc="2.0", id=2, method="tools/call", params={"name": "pid", "arguments": {}}
        ),
    ]
    for message in messages:
        proc.stdin.write(_jsonrpc_line(message))
    proc.stdin.flush()
    answers = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert answers[0]["id"] == 1 and "serverInfo" in answers[0]["result"]
    server_pid = int(answers[1]["result"]["content"][0]["text"])
    return proc, server_pid


def _gone(pid: int, within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_client_disconnect_exits_cleanly_and_leaves_no_child(counter: Path) -> None:
    proc, server_pid = _start_raw_proxy(counter)
    assert not _gone(server_pid, within=0.2)  # the server is really running
    assert proc.stdin is not None
    proc.stdin.close()  # the client disconnects
    assert proc.wait(timeout=LIMIT) == 0
    assert _gone(server_pid), f"server pid {server_pid} orphaned"


def test_client_cancellation_reaches_the_server(counter: Path) -> None:
    from mcp import types

    proc, server_pid = _start_raw_proxy(counter)
    assert proc.stdin is not None and proc.stdout is not None
    call = types.JSONRPCRequest(
        jsonrpc="2.0", id=3, method="tools/call", params={"name": "hang", "arguments": {}}
    )
    cancel = types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/cancelled", params={"requestId": 3}
    )
    try:
        proc.stdin.write(_jsonrpc_line(call))
        proc.stdin.flush()
        deadline = time.monotonic() + 15
        while executions(counter)["hang"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.stdin.write(_jsonrpc_line(cancel))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())  # the SDK answers a cancelled request
        assert answer["id"] == 3 and "error" in answer
        # Still connected: only a forwarded notifications/cancelled stops the server's handler.
        while executions(counter)["hang_cancelled"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert executions(counter)["hang_cancelled"] == 1
        # ...and the proxy and its server keep serving after the cancellation.
        echo = types.JSONRPCRequest(
            jsonrpc="2.0",
            id=4,
            method="tools/call",
            params={"name": "echo", "arguments": {"text": "on"}},
        )
        proc.stdin.write(_jsonrpc_line(echo))
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        assert answer["id"] == 4 and answer["result"]["content"][0]["text"] == "on"
        assert not _gone(server_pid, within=0.2)
    finally:
        proc.stdin.close()
        proc.wait(timeout=LIMIT)


def test_sigterm_stops_the_proxy_and_its_server(counter: Path) -> None:
    proc, server_pid = _start_raw_proxy(counter)
    proc.send_signal(signal.SIGTERM)  # stdin stays open, as when a client kills the proxy
    try:
        assert proc.wait(timeout=LIMIT) == 0
    finally:
        proc.kill()
    assert _gone(server_pid), f"server pid {server_pid} orphaned"


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_a_ctrl_c_for_the_clients_group_stops_the_proxy_and_never_hits_the_server(
    counter: Path, tmp_path: Path
) -> None:
    """The server runs in a process group of its own, in the proxy's session.

    Its own group: a terminal's Ctrl-C (SIGINT to the foreground group: the client and the
    proxy) reaches the proxy, which stops the server in order. The same session: a new one
    would also be a scheduling group of its own on Linux (autogroup), which slows the server.
    """
    stderr = tmp_path / "stderr.txt"
    with stderr.open("wb") as errors:
        # The proxy leads a group of its own here, as a terminal's foreground job does.
        proc, server_pid = _start_raw_proxy(counter, start_new_session=True, stderr=errors)
        try:
            assert os.getpgid(server_pid) == server_pid != os.getpgid(proc.pid)
            assert os.getsid(server_pid) == os.getsid(proc.pid)
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=LIMIT) == 0
        finally:
            proc.kill()
    assert _gone(server_pid), f"server pid {server_pid} orphaned"
    assert "KeyboardInterrupt" not in stderr.read_text()  # the server was not interrupted


def _silent_server(token: str) -> tuple[str, ...]:
    """A "server" that never answers ``initialize``; ``token`` makes its command line unique."""
    return (sys.executable, "-c", "import sys, time; time.sleep(600)", token)


def _pids_with(token: str) -> list[int]:
    """Live processes whose command line contains ``token`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline and b"mcp-proxy" not in cmdline:
                found.append(int(entry.name))
    return found


def _wait_for(predicate: Callable[[], bool], within: float = 15.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def proc_fs() -> None:
    if not Path("/proc/self/cmdline").exists():
        pytest.skip("needs Linux /proc to find the server process")


@pytest.mark.usefixtures("proc_fs")
def test_server_that_never_initializes_fails_within_connect_timeout(counter: Path) -> None:
    from mcp import types

    token = f"loopwarden-silent-{uuid.uuid4().hex}"
    init = types.InitializeRequestParams(
        protocolVersion=types.LATEST_PROTOCOL_VERSION,
        capabilities=types.ClientCapabilities(),
        clientInfo=types.Implementation(name="raw-test", version="0"),
    )
    request = types.JSONRPCRequest(jsonrpc="2.0", id=1, method="initialize", params=dumped(init))
    # The client's initialize is forwarded when it comes (the proxy never initializes a server
    # on its own): stdin stays open until the proxy has given up and exited.
    proc = subprocess.Popen(
        proxy_argv("--connect-timeout=1", server=_silent_server(token)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(_jsonrpc_line(request))
        proc.stdin.flush()
        proc.wait(timeout=LIMIT)
        stdout, stderr = proc.stdout.read(), proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(timeout=LIMIT)
        proc.stdin.close()
    assert proc.returncode == 1
    assert "no answer to 'initialize' within 1 s" in stderr.decode()
    answer = json.loads(stdout)
    assert answer["id"] == 1 and "no answer to 'initialize'" in answer["error"]["message"]
    assert _wait_for(lambda: not _pids_with(token)), "silent server left running"


@pytest.mark.usefixtures("proc_fs")
def test_sigterm_during_startup_stops_the_server_too(counter: Path) -> None:
    token = f"loopwarden-silent-{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        proxy_argv("--connect-timeout=120", server=_silent_server(token)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert _wait_for(lambda: bool(_pids_with(token))), "server never started"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=LIMIT) == 0
    finally:
        proc.kill()
        proc.wait(timeout=LIMIT)
    assert _wait_for(lambda: not _pids_with(token)), "server orphaned"


# ---------------------------------------------------------------------------- HTTP downstream


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_http_server(port: int, counter: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        env=env_for(counter),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        if proc.poll() is not None:
            pytest.fail("test HTTP server exited")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("test HTTP server did not start listening within 30 s")


@pytest.fixture
def http_port(counter: Path) -> Any:
    port = _free_port()
    servers = [_start_http_server(port, counter)]
    yield port, servers
    for proc in servers:
        proc.kill()
        proc.wait(timeout=10)


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


def test_http_downstream_lists_and_guards(counter: Path, http_port: Any) -> None:
    http_server = _url(http_port[0])
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    critical = 3

    async def body() -> None:
        async with (
            streamable_http_client(http_server) as (read, write, _),
            ClientSession(read, write) as direct,
        ):
            await direct.initialize()
            direct_tools = dumped(await direct.list_tools())
        argv = [
            PROXY_PYTHON,
            "-m",
            "loopwarden",
            "mcp-proxy",
            "--set=warningThreshold=2",
            f"--set=criticalThreshold={critical}",
            "--url",
            http_server,
        ]
        async with connect(argv, env_for(counter)) as session:
            assert dumped(await session.list_tools()) == direct_tools
            results = [await session.call_tool("poll", {"job": "h"}) for _ in range(critical + 2)]
        assert [r.isError for r in results] == [False] * critical + [True, True]

    run(body)
    assert executions(counter)["poll"] == critical


# ---------------------------------------------------------------------------- the docs


def _documented_entry() -> tuple[str, dict[str, Any]]:
    """The ``mcpServers`` entry after the ``tested-client-entry`` marker in docs/mcp-proxy.md."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "mcp-proxy.md").read_text("utf-8")
    after_marker = doc.split("<!-- tested-client-entry -->", 1)[1]
    block = after_marker.split("```json", 1)[1].split("```", 1)[0]
    servers = json.loads(block)["mcpServers"]
    assert len(servers) == 1
    name, entry = next(iter(servers.items()))
    return name, entry


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "printf", "version": "0"},
    },
}
_REQUESTS = [
    _INIT,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "last words"}},
    },
]


def _answers_after_input_closes(
    argv: list[str], counter: Path, requests: list[dict[str, Any]] = _REQUESTS
) -> dict[Any, Any]:
    """Send every request at once, close the proxy's stdin, read what it answers (every line
    the client gets must be a whole JSON-RPC message)."""
    data = "".join(json.dumps(message) + "\n" for message in requests)
    done = subprocess.run(
        argv, input=data, capture_output=True, text=True, env=env_for(counter), timeout=LIMIT
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {answer.get("id"): answer for answer in answers}


def test_requests_sent_before_the_client_closes_its_input_are_all_answered(
    counter: Path,
) -> None:
    # Issue 24: `printf '<initialize>\n<tools/list>\n' | loopwarden mcp-proxy -- <a server
    # that takes 3 s to start>` printed nothing: the proxy waited 2 s for the server and exited.
    argv = proxy_argv(server=(sys.executable, str(SERVER), "--slow-start", "3"))
    answers = _answers_after_input_closes(argv, counter)
    assert set(answers) == {1, 2, 3}, answers
    assert answers[1]["result"]["serverInfo"]["name"] == "loopwarden-test-server"
    assert "echo" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    assert answers[3]["result"]["content"][0]["text"] == "last words"


def test_requests_sent_before_the_client_closes_its_input_are_answered_over_http(
    counter: Path, http_port: Any
) -> None:
    argv = [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--url", _url(http_port[0])]
    answers = _answers_after_input_closes(argv, counter)
    assert set(answers) == {1, 2, 3}, answers
    assert answers[3]["result"]["content"][0]["text"] == "last words"


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def test_a_server_dying_mid_answer_never_sends_the_client_a_broken_message(
    counter: Path,
) -> None:
    # Issue 24: 7.3 MB of a 22 MB line reached the client, then the isError answer.
    requests = [*_REQUESTS[:2], _call(3, "die_mid_answer", {"size": 3_000_000})]
    answers = _answers_after_input_closes(proxy_argv(), counter, requests)
    assert set(answers) == {1, 3}, answers
    assert answers[3]["result"]["isError"] is True
    assert "is not available" in answers[3]["result"]["content"][0]["text"]
    assert executions(counter)["die_mid_answer"] == 1


def test_an_http_server_dying_mid_call_gives_the_error_result(
    counter: Path, http_port: Any
) -> None:
    # Issue 24: a JSON-RPC -32000 (mcp 2.x) or no answer until the call timeout (mcp 1.x).
    argv = [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--url", _url(http_port[0])]
    requests = [*_REQUESTS[:2], _call(3, "crash", {})]
    answers = _answers_after_input_closes(argv, counter, requests)
    assert set(answers) == {1, 3}, answers
    result = answers[3]["result"]
    assert result["isError"] is True, answers[3]
    assert "in the middle of an answer" in result["content"][0]["text"], result


def test_documented_client_entry_works_as_written(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    _, entry = _documented_entry()
    command = require_binary(entry["command"], "pip install -e '.[mcp]' puts it on PATH")
    repo = Path(__file__).resolve().parents[2]
    # As a desktop client does: the entry's command, args and env, run from the repo root.
    # The env's relative counter path is redirected into tmp_path so the test leaves no file.
    env = {**os.environ, **entry.get("env", {})}
    counter = tmp_path / env[COUNTER_ENV]
    env[COUNTER_ENV] = str(counter)
    params = StdioServerParameters(command=command, args=entry["args"], env=env, cwd=repo)
    args = entry["args"]
    settings = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "--set")
    warn, critical = int(settings["warningThreshold"]), int(settings["criticalThreshold"])

    async def body() -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert "poll" in names
            results = [
                await session.call_tool("poll", {"job": "demo"}) for _ in range(critical + 1)
            ]
        assert any(len(texts(r)) == 2 for r in results[:critical])  # a warning was appended
        assert [r.isError for r in results] == [False] * critical + [True]
        assert texts(results[warn])[-1].startswith("WARNING:")

    run(body)
    assert executions(counter)["poll"] == critical


def test_http_downstream_restarted_server_is_reconnected(counter: Path, http_port: Any) -> None:
    port, servers = http_port

    async def body() -> None:
        argv = [PROXY_PYTHON, "-m", "loopwarden", "mcp-proxy", "--url", _url(port)]
        async with connect(argv, env_for(counter)) as session:
            before = await session.call_tool("pid", {})
            servers[0].kill()
            servers[0].wait(timeout=10)
            down = await session.call_tool("echo", {"text": "down"})
            servers.append(_start_http_server(port, counter))
            await anyio.sleep(RETRY_AFTER)  # past the failed restart's back-off
            after = await session.call_tool("pid", {})
        assert down.isError and "not available" in texts(down)[0]
        assert not after.isError and texts(after) != texts(before)

    from loopwarden.mcp_proxy._proxy import RETRY_AFTER

    run(body)


# ---------------------------------------------------------------------------- large results


def test_large_results_pass_whole_and_are_still_guarded(counter: Path) -> None:
    """Multi-megabyte answers pass whole, and a repeat still warns and blocks."""
    size = 3_000_000  # several reads of 1 MiB each
    warn, critical = 2, 4

    async def body() -> None:
        async with connect([sys.executable, str(SERVER)], env_for(counter)) as session:
            direct = dumped(await session.call_tool("blob", {"size": size}))
        argv = proxy_argv(f"--set=warningThreshold={warn}", f"--set=criticalThreshold={critical}")
        async with connect(argv, env_for(counter)) as session:
            results = [await session.call_tool("blob", {"size": size}) for _ in range(critical + 1)]
        assert dumped(results[0]) == direct and len(texts(results[0])[0]) == size
        # Before call k the history holds k-1 identical calls with identical results.
        assert dumped(results[warn - 1]) == direct  # nothing to add
        warned = texts(results[warn])  # the 3rd call: a warning known before it ran
        assert len(warned) == 2 and warned[0] == texts(results[0])[0]
        assert warned[1].startswith("WARNING:")
        assert results[critical].isError and texts(results[critical])[0].startswith("CRITICAL:")

    run(body)
    assert executions(counter)["blob"] == 1 + critical


def test_no_config_ends_a_loop_after_three_executions(counter: Path) -> None:
    """``loopwarden mcp-proxy -- SERVER`` alone runs the recommended profile: a client that
    repeats one call gets three real executions, a block, then the stop for the rest."""
    answers: list[Any] = []

    async def body() -> None:
        async with connect(proxy_argv(), env_for(counter)) as session:
            for _ in range(12):
                answers.append(await session.call_tool("echo", {"text": "again"}))

    run(body)
    assert executions(counter)["echo"] == 3
    actions = [(a.meta or {}).get("loopwarden/action") for a in answers]
    assert actions[:4] == [None, None, None, "block"]
    assert actions[4:] == ["stop"] * 8
    assert all(a.isError for a in answers[3:])


def test_a_warning_reaches_structured_content_where_the_output_schema_allows_it(
    counter: Path,
) -> None:
    """Clients such as Claude Code give the model ``structuredContent`` instead of ``content``
    when a result has both: the warning goes there too, unless the tool's output schema is
    closed. The SDK client validates every structured result against the tool's schema."""
    results: dict[str, list[Any]] = {}

    async def body() -> None:
        async with connect(proxy_argv("--set=warningThreshold=2"), env_for(counter)) as session:
            await session.list_tools()
            for tool in ("forecast", "strict_forecast"):
                calls = [session.call_tool(tool, {"city": "Paris"}) for _ in range(3)]
                results[tool] = [await call for call in calls]

    run(body)
    plain = {"city": "Paris", "celsius": 21}
    open_results, closed_results = results["forecast"], results["strict_forecast"]
    assert [r.structuredContent for r in open_results[:2]] == [plain, plain]
    warned = open_results[2]
    assert texts(warned)[-1].startswith("WARNING:")
    assert warned.structuredContent == {**plain, "loopwarden_warning": texts(warned)[-1]}
    # A closed schema keeps its shape: the warning is in content only.
    assert texts(closed_results[2])[-1].startswith("WARNING:")
    assert closed_results[2].structuredContent == plain

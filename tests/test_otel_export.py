"""loopwarden's own processes export loop events over OTLP when the environment says where.

The MCP proxy and the coding-CLI hooks have no application to configure OpenTelemetry for
them: ``OTEL_EXPORTER_OTLP_ENDPOINT`` alone turns their export on. Here they run for real (the
proxy between the ``mcp`` SDK's client and a FastMCP server over stdio; ``loopwarden hook
claude-code`` processes fed captured payloads, with the resident hook server) against a real
OTLP/HTTP receiver that decodes the protobuf requests the OTLP exporter sends
(``tests/_otlp.py``). What arrives is compared with the events loopwarden wrote to its own
events file or answered to the CLI.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import anyio
import pytest

from _support import require_module

try:
    require_module("opentelemetry.exporter.otlp.proto.http", "test")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from _otlp import OtlpReceiver, claude_code_loop

LIMIT = 60.0  # seconds a test body may take before it counts as a hang
SERVER = Path(__file__).parent / "mcp_proxy" / "server.py"


def exporting_env(receiver: OtlpReceiver, **more: str) -> dict[str, str]:
    """This environment, with the worktree's loopwarden, exporting to ``receiver``."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # the batch processor exports within 0.2 s
        **more,
    }


def test_the_mcp_proxy_exports_each_loop_event_to_the_otlp_endpoint(tmp_path: Path) -> None:
    require_module("mcp", "mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    events_file = tmp_path / "events.jsonl"
    secret = "a-secret-text-7f3a"  # the call's argument: never exported

    with OtlpReceiver() as receiver:
        argv = [sys.executable, "-m", "loopwarden", "mcp-proxy", f"--events={events_file}"]
        argv += ["--", sys.executable, str(SERVER)]
        params = StdioServerParameters(
            command=argv[0],
            args=argv[1:],
            env=exporting_env(receiver, OTEL_SERVICE_NAME="proxy-under-test"),
        )

        async def body() -> None:
            with anyio.fail_after(LIMIT):
                async with (
                    stdio_client(params) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    for _ in range(6):
                        await session.call_tool("echo", {"text": secret})

        anyio.run(body)  # the proxy exits with the session: its exporter flushes at exit
        written = [json.loads(line) for line in events_file.read_text().splitlines()]
        exported = receiver.loop_events(len(written))
        resources = [resource for resource, _ in receiver.spans()]
        raw = b"".join(receiver.raw)

    assert {event["action"] for event in written} >= {"block", "stop"}
    assert [
        (e["loopwarden.action"], e["loopwarden.detector"], e["loopwarden.count"]) for e in exported
    ] == [(e["action"], e["detector"], e["count"]) for e in written]
    assert [e["gen_ai.tool.name"] for e in exported] == [e["tool_name"] for e in written]
    assert {r["service.name"] for r in resources} == {"proxy-under-test"}
    assert secret.encode() not in raw


def test_a_hook_exports_even_when_a_resident_server_started_without_the_endpoint(
    tmp_path: Path,
) -> None:
    """The hook hands its events to a resident server; one that was started by an earlier hook
    without ``OTEL_EXPORTER_OTLP_*`` would not export, so a hook told to export must not use it."""
    state = {
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LOOPWARDEN_HOOK_IDLE": "3",  # the servers leave (and flush) soon after the test
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    quiet = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    claude_code_loop({**quiet, **state}, calls=1, session="without-export")
    sockets = tmp_path / "state" / "loopwarden"
    deadline = time.monotonic() + 20
    while not list(sockets.glob("hookd-*.sock")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(sockets.glob("hookd-*.sock")), "the first hook started no resident server"

    with OtlpReceiver() as receiver:
        done = claude_code_loop(exporting_env(receiver, **state), session="with-export")
        answers = [process.stdout for process in done[::2]]  # the PreToolUse ones
        denied = sum("deny" in answer for answer in answers)
        # The warning and one event per denied call; they may arrive in separate exports.
        events = receiver.loop_events(1 + denied)
        raw = b"".join(receiver.raw)

    assert denied >= 1
    actions = [e["loopwarden.action"] for e in events]
    assert actions[0] == "warn" and sum(a in ("block", "stop") for a in actions) == denied
    assert all("with-export" in e["gen_ai.conversation.id"] for e in events)
    assert {e["gen_ai.tool.name"] for e in events} == {"Bash"}
    assert b"npm test" not in raw

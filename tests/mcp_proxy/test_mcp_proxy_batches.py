"""Identical ``tools/call``s sent together through the real ``loopwarden mcp-proxy`` process.

The official MCP client sends 40 identical calls at once to the proxy (``profile:
recommended``) wrapping the test server, whose slow tool keeps each call in flight for a while.
The proxy groups calls that arrive while others are in flight into one batch, so the calls in
flight count as repeats: the server runs the tool no more often than when the calls come one
after another, the others get ``isError`` blocks, and that first batch never stops the run.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from loopwarden.core.config import resolve_config

from _support import require_module

SERVER = Path(__file__).with_name("server.py")
PROFILE = resolve_config({"profile": "recommended"})
TOGETHER = 40
LIMIT = 90.0  # seconds a test body may take before it counts as a hang


@pytest.fixture(autouse=True)
def _mcp_sdk() -> None:
    require_module("mcp", "mcp")


def executions(counter: Path) -> Counter[str]:
    if not counter.exists():
        return Counter()
    return Counter(counter.read_text(encoding="utf-8").split())


async def call_together(session: Any, count: int) -> list[Any]:
    """``count`` identical calls sent at once; their results in sending order."""
    results: list[Any] = [None] * count

    async def one(i: int) -> None:
        results[i] = await session.call_tool("slow_echo", {"text": "same"})

    async with anyio.create_task_group() as tg:
        for i in range(count):
            tg.start_soon(one, i)
    return results


def action(result: Any) -> str:
    """``block``/``stop`` for the proxy's own answers, ``ran`` for a server's result."""
    meta = result.meta or {}
    return str(meta.get("loopwarden/action", "ran"))


def through_proxy(counter: Path, body: Any) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    argv = [
        sys.executable,
        "-m",
        "loopwarden",
        "mcp-proxy",
        "--set=profile=recommended",
        "--",
        sys.executable,
        str(SERVER),
    ]
    params = StdioServerParameters(
        command=argv[0], args=argv[1:], env={**os.environ, "LOOPWARDEN_TEST_COUNTER": str(counter)}
    )

    async def main() -> None:
        with anyio.fail_after(LIMIT):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await body(session)

    anyio.run(main)


def test_forty_identical_calls_sent_together_run_no_more_than_one_at_a_time(
    tmp_path: Path,
) -> None:
    # Baseline from the same proxy and server: the calls one after another.
    one_by_one: list[str] = []

    async def sequential(session: Any) -> None:
        for _ in range(TOGETHER):
            one_by_one.append(action(await session.call_tool("slow_echo", {"text": "same"})))
            if one_by_one[-1] == "stop":
                break

    sequential_counter = tmp_path / "sequential.txt"
    through_proxy(sequential_counter, sequential)
    sequential_runs = executions(sequential_counter)["slow_echo"]
    assert 0 < sequential_runs <= PROFILE.consecutive_critical_threshold + 1

    batches: list[list[str]] = []

    async def together(session: Any) -> None:
        batches.append([action(r) for r in await call_together(session, TOGETHER)])
        # The model read the blocks; it sends the same calls again in its next turn.
        batches.append([action(r) for r in await call_together(session, 3)])

    counter = tmp_path / "together.txt"
    through_proxy(counter, together)
    first, second = batches
    ran = executions(counter)["slow_echo"]
    assert ran == first.count("ran") == sequential_runs
    assert first.count("block") == TOGETHER - ran
    assert "stop" not in first  # the model must see a block before the run is stopped
    if PROFILE.stop_after_blocks == 2:
        assert "stop" in second and "ran" not in second

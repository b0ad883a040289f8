"""Benchmark: per-call latency of LoopGuard's async methods through each store, next to the sync
methods on the same store in the same run.

Run from the repository root:

    python bench/bench_async_stores.py                  # starts a private redis-server
    python bench/bench_async_stores.py --url redis://127.0.0.1:6379/0 --calls 5000

The calls are bench_stores.py's (a full 30-record history, detection on, repeated and fresh
calls). ``sync`` is ``before_tool_call`` / ``after_tool_call``; ``async`` awaits
``abefore_tool_call`` / ``aafter_tool_call`` one at a time on one event loop, so the numbers
are each call's own cost (the async path's point, not stalling other tasks, is tested in
tests/test_redis_async.py). Rows: the memory store (async: no thread), SQLite (async: a worker
thread per update), RedisStore (sync client; async: a worker thread) and AsyncRedisStore
(redis.asyncio; no sync path).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_stores import CONFIG, _calls, _report, _start_redis

import loopwarden as lw
from loopwarden.store import MemoryStore


async def _ameasure(guard: lw.LoopGuard, calls: list[tuple[str, dict[str, Any], str]]) -> list[int]:
    samples: list[int] = []
    for tool, params, result in calls:
        start = time.perf_counter_ns()
        decision = await guard.abefore_tool_call("bench", tool, params, run_id="r")
        middle = time.perf_counter_ns()
        if decision.allowed:
            await guard.aafter_tool_call("bench", tool, params, result=result, run_id="r")
            samples.append(time.perf_counter_ns() - middle)
        samples.append(middle - start)
    return samples


def _measure(guard: lw.LoopGuard, calls: list[tuple[str, dict[str, Any], str]]) -> list[int]:
    samples: list[int] = []
    for tool, params, result in calls:
        start = time.perf_counter_ns()
        decision = guard.before_tool_call("bench", tool, params, run_id="r")
        middle = time.perf_counter_ns()
        if decision.allowed:
            guard.after_tool_call("bench", tool, params, result=result, run_id="r")
            samples.append(time.perf_counter_ns() - middle)
        samples.append(middle - start)
    return samples


def _run_async(name: str, store: Any, calls: int) -> None:
    guard = lw.LoopGuard(CONFIG, store=store)

    async def main() -> list[int]:
        await _ameasure(guard, _calls(200))  # warm-up
        return await _ameasure(guard, _calls(calls))

    _report(name, asyncio.run(main()))


def _run_sync(name: str, store: Any, calls: int) -> None:
    guard = lw.LoopGuard(CONFIG, store=store)
    _measure(guard, _calls(200))
    _report(name, _measure(guard, _calls(calls)))


def main() -> None:
    """Run the benchmark and print one line per store and path."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="tool calls per row")
    parser.add_argument("--url", help="an existing Redis (default: start a private one)")
    args = parser.parse_args()
    from loopwarden.stores.redis import AsyncRedisStore, RedisStore
    from loopwarden.stores.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        _run_sync("memory, sync", MemoryStore(), args.calls)
        _run_async("memory, async", MemoryStore(), args.calls)
        _run_sync("sqlite, sync", SQLiteStore(Path(tmp) / "a.db"), args.calls)
        _run_async("sqlite, async (thread)", SQLiteStore(Path(tmp) / "b.db"), args.calls)
        proc = None
        url = args.url
        if url is None:
            proc, url = _start_redis(Path(tmp))
        try:
            _run_sync("RedisStore, sync", RedisStore(url, prefix="b1"), args.calls)
            _run_async("RedisStore, async (thread)", RedisStore(url, prefix="b2"), args.calls)
            _run_async("AsyncRedisStore, async", AsyncRedisStore(url, prefix="b3"), args.calls)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()

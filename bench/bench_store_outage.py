"""Benchmark: what an outage of each session store costs a tool call (issue 24).

Run from the repository root (needs redis-server on PATH and redis-py):

    python -m bench.bench_store_outage
    python -m bench.bench_store_outage --calls 40 --tasks 200

Redis: a private redis-server is stopped with SIGSTOP (a hung server: connections stay open,
nothing answers) while a guard makes tool calls (``before_tool_call`` then
``after_tool_call``, the store's default ``timeout=1.0``). Printed: the time of the first calls
of the outage, the median of the rest, and for ``AsyncRedisStore`` the wall time of
``--tasks`` tasks on 20 sessions, each making 5 calls, during the outage.

SQLite: another process holds the file's write lock (``BEGIN IMMEDIATE``, never committed)
while a guard with ``SQLiteStore`` (default ``timeout=2.0``) makes tool calls.

Each outage ends with the calls decided per ``on_store_error`` (``allow`` here).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import loopwarden as lw


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return process, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("redis-server did not start")


def _call(guard: lw.LoopGuard, session: str, i: int) -> float:
    started = time.perf_counter()
    decision = guard.before_tool_call(session, "exec", {"c": i})
    if decision.allowed:
        guard.after_tool_call(session, "exec", {"c": i}, result="ok")
    return time.perf_counter() - started


def _report(name: str, times: list[float]) -> None:
    first = ", ".join(f"{t:.2f}" for t in times[:4])
    rest = statistics.median(times[4:]) if len(times) > 4 else float("nan")
    print(f"{name}: first calls {first} s; median of calls 5-{len(times)}: {rest * 1000:.2f} ms")


def redis_sync(url: str, process: subprocess.Popen[bytes], calls: int) -> None:
    from loopwarden.stores.redis import RedisStore

    guard = lw.LoopGuard({"enabled": True}, store=RedisStore(url))
    _call(guard, "warm", 0)
    process.send_signal(signal.SIGSTOP)
    try:
        _report("RedisStore, server stopped", [_call(guard, "s", i) for i in range(calls)])
    finally:
        process.send_signal(signal.SIGCONT)


def redis_async(url: str, process: subprocess.Popen[bytes], tasks: int) -> None:
    from loopwarden.stores.redis import AsyncRedisStore

    async def main() -> float:
        store = AsyncRedisStore(url)
        guard = lw.LoopGuard({"enabled": True}, store=store)
        await guard.abefore_tool_call("warm", "exec", {})
        process.send_signal(signal.SIGSTOP)

        async def task(i: int) -> None:
            for n in range(5):
                await guard.abefore_tool_call(f"s{i % 20}", "exec", {"c": n})

        started = time.perf_counter()
        try:
            await asyncio.gather(*(task(i) for i in range(tasks)))
        finally:
            process.send_signal(signal.SIGCONT)
        elapsed = time.perf_counter() - started
        await store.aclose()
        return elapsed

    elapsed = asyncio.run(main())
    print(
        f"AsyncRedisStore, server stopped: {tasks} tasks x 5 calls on 20 sessions "
        f"in {elapsed:.2f} s"
    )


def sqlite_locked(folder: Path, calls: int) -> None:
    from loopwarden.stores.sqlite import SQLiteStore

    path = folder / "sessions.db"
    guard = lw.LoopGuard({"enabled": True}, store=SQLiteStore(path))
    _call(guard, "warm", 0)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        _report(
            "SQLiteStore, write lock held elsewhere", [_call(guard, "s", i) for i in range(calls)]
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="tool calls per sync outage")
    parser.add_argument("--tasks", type=int, default=200, help="async tasks during the outage")
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the outage's own log lines are not measured here
    print(f"loopwarden from {Path(lw.__file__).parent}; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        process, url = _start_redis(folder)
        try:
            redis_sync(url, process, args.calls)
            redis_async(url, process, args.tasks)
        finally:
            process.kill()
            process.wait()
        sqlite_locked(folder, min(args.calls, 6))


if __name__ == "__main__":
    main()

"""Benchmark: per-call latency of LoopGuard through each session store (memory, SQLite, Redis).

Run from the repository root:

    python bench/bench_stores.py                   # starts a private redis-server on loopback
    python bench/bench_stores.py --url redis://127.0.0.1:6379/0 --calls 5000

Each tool call is ``before_tool_call`` then ``after_tool_call`` (each one store update) on a
session whose history is full (historySize 30), with detection on and a mix of repeated and
fresh calls. It prints p50/p99/mean microseconds per guard call (one store update each), and
for Redis also with two guards taking turns per tool call on one session (each
``before_tool_call`` meets a stale cache and pays the conflict retry).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import loopwarden as lw
from loopwarden.store import MemoryStore, SessionStore

CONFIG = {"enabled": True, "historySize": 30}


def _calls(n: int) -> list[tuple[str, dict[str, Any], str]]:
    calls = []
    for i in range(n):
        if i % 4 == 0:
            calls.append(("exec", {"command": "npm test"}, "1 failing"))
        elif i % 4 == 1:
            calls.append(("process", {"action": "poll", "id": "p1"}, "running"))
        else:
            calls.append(("read", {"path": f"src/file_{i % 50}.py"}, f"content {i}"))
    return calls


def _measure(guards: list[lw.LoopGuard], calls: list[tuple[str, dict[str, Any], str]]) -> list[int]:
    samples: list[int] = []
    for i, (tool, params, result) in enumerate(calls):
        guard = guards[i % len(guards)]
        start = time.perf_counter_ns()
        decision = guard.before_tool_call("bench", tool, params, run_id="r")
        middle = time.perf_counter_ns()
        if decision.allowed:
            guard.after_tool_call("bench", tool, params, result=result, run_id="r")
            samples.append(time.perf_counter_ns() - middle)
        samples.append(middle - start)
    return samples


def _report(name: str, samples: list[int]) -> None:
    ordered = sorted(samples)
    p50 = ordered[len(ordered) // 2] / 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] / 1000
    mean = statistics.fmean(ordered) / 1000
    print(f"{name:38} p50 {p50:8.1f} us   p99 {p99:8.1f} us   mean {mean:8.1f} us")


def _run(name: str, stores: list[SessionStore], calls: int) -> None:
    guards = [lw.LoopGuard(CONFIG, store=store) for store in stores]
    _measure(guards, _calls(200))  # warm-up: fill the history, load scripts, open files
    _report(name, _measure(guards, _calls(calls)))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_redis(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: apt-get install redis-server, or pass --url")
    port = _free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def main() -> None:
    """Run the benchmark and print one line per store."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="tool calls per store")
    parser.add_argument("--url", help="an existing Redis (default: start a private one)")
    args = parser.parse_args()
    from loopwarden.stores.redis import RedisStore
    from loopwarden.stores.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        _run("memory", [MemoryStore()], args.calls)
        _run("sqlite (WAL, one file)", [SQLiteStore(Path(tmp) / "s.db")], args.calls)
        proc = None
        url = args.url
        if url is None:
            proc, url = _start_redis(Path(tmp))
        try:
            _run("redis, one worker", [RedisStore(url, prefix="bench1")], args.calls)
            two = [RedisStore(url, prefix="bench2"), RedisStore(url, prefix="bench2")]
            _run("redis, two workers alternating", list(two), args.calls)
        finally:
            if proc is not None:
                proc.kill()
                proc.wait()


if __name__ == "__main__":
    main()

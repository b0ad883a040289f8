"""Benchmark: per-call cost of one session that sees many runs, through SQLite and Redis.

Run from the repository root:

    python bench/bench_session_runs.py                     # 5,000 runs, SQLite only
    python bench/bench_session_runs.py --runs 5000 --redis  # also a private redis-server

The ``recommended`` profile, one session, a new run id for every failing call (the shape that
once grew the per-run maps without bound). At each checkpoint it prints the mean
milliseconds per guard call (``before_tool_call`` or ``after_tool_call``, one store update
each) over the last 200 runs, and the size of the session's snapshot in bytes.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import loopwarden as lw
from loopwarden.store import SessionStore, snapshot_session

WINDOW = 200  # runs measured before each checkpoint


def _checkpoints(runs: int) -> list[int]:
    return sorted({n for n in (1_000, 2_000, 5_000, 10_000, runs) if n <= runs})


def _run(name: str, store: SessionStore, runs: int) -> None:
    guard = lw.LoopGuard({"profile": "recommended"}, store=store)
    checkpoints = _checkpoints(runs)
    spent = 0
    for i in range(1, runs + 1):
        run, params = f"run-{i:06d}", {"i": i}
        start = time.perf_counter_ns()
        guard.before_tool_call("bench", "exec", params, run_id=run)
        guard.after_tool_call("bench", "exec", params, error="boom", run_id=run)
        if i > checkpoints[0] - WINDOW:
            spent += time.perf_counter_ns() - start
        if i == checkpoints[0]:
            session = store.peek("bench")
            size = 0 if session is None else len(json.dumps(snapshot_session(session)))
            per_call = spent / (2 * WINDOW) / 1e6
            print(f"{name:8} {i:>7} runs: {per_call:7.3f} ms/call, snapshot {size:>9,} B")
            checkpoints.pop(0)
            spent = 0
            if not checkpoints:
                return


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5_000)
    parser.add_argument("--redis", action="store_true", help="also through a private redis")
    args = parser.parse_args()
    from loopwarden.stores.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        _run("sqlite", SQLiteStore(Path(tmp) / "s.db"), args.runs)
        if args.redis:
            from bench_stores import _start_redis  # type: ignore[import-not-found]

            from loopwarden.stores.redis import RedisStore

            proc, url = _start_redis(Path(tmp))
            try:
                _run("redis", RedisStore(url, prefix="runs"), args.runs)
            finally:
                proc.terminate()
                proc.wait()


if __name__ == "__main__":
    main()

"""Benchmark: per-call cost of run records while the disk is full, with a pending backlog.

Run from the repository root:

    python bench/bench_records_disk_full.py                 # backlogs of 1,000 and 5,000 rows
    python bench/bench_records_disk_full.py --backlog 10000 --calls 300

A full disk is simulated two ways (``--mode``): ``pages`` sets SQLite's ``PRAGMA
max_page_count`` on the recorder's connection (a write needing a new page fails with
SQLITE_FULL); ``commit`` makes each COMMIT fail with SQLITE_FULL after every statement ran, as
a full file system does in WAL mode (the pages reach the WAL file at commit), leaving the
transaction open; ``rollback`` is the same with SQLite rolling the transaction back itself.

For each backlog size it queues that many rows, then times ``record_event`` calls (what
every loop event costs the guard) and counts the SQL statements they ran. Then it "frees
space", moves the recorder's clock past its back-off, and times the next call (one bounded
batch) and an explicit ``flush()`` (the rest).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from loopwarden.events import LoopEvent
from loopwarden.records import RunRecorder


def _event(i: int) -> LoopEvent:
    return LoopEvent(
        type="loop",
        level="warning",
        action="warn",
        detector="generic_repeat",
        count=i,
        tool_name="exec",
        session="bench",
        run_id=f"r{i % 50}",
        agent_id=None,
        message="WARNING: exec called with identical arguments " * 3,
    )


class _CommitFails:
    """The recorder's connection, with COMMIT failing while ``full`` is set."""

    def __init__(self, conn: sqlite3.Connection, auto_rollback: bool) -> None:
        self.conn = conn
        self.full = True
        self.auto_rollback = auto_rollback

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.full:
            if self.auto_rollback:
                self.conn.execute("ROLLBACK")
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def _set_full(conn: sqlite3.Connection, full: bool, proxy: _CommitFails | None = None) -> None:
    if proxy is not None:
        proxy.full = full
        return
    pages = conn.execute("PRAGMA page_count").fetchone()[0] if full else 1 << 30
    conn.execute(f"PRAGMA max_page_count={pages}")


def _run(backlog: int, calls: int, mode: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        skew = [0.0]  # added to the clock: jumps past the back-off once space is back
        recorder = RunRecorder(Path(tmp) / "runs.db", clock=lambda: time.monotonic() + skew[0])
        conn = recorder._conn
        assert conn is not None
        proxy = None if mode == "pages" else _CommitFails(conn, mode == "rollback")
        if proxy is not None:
            recorder._conn = proxy  # type: ignore[assignment]
        _set_full(conn, True, proxy)
        # Queue the backlog directly: building it through record_event would itself take the
        # quadratic time being measured.
        from loopwarden.records import _write_event

        recorder._pending.extend(_write_event(_event(i)) for i in range(backlog))
        statements = [0]
        conn.set_trace_callback(lambda _sql: statements.__setitem__(0, statements[0] + 1))
        samples: list[float] = []
        for i in range(calls):
            start = time.perf_counter()
            recorder.record_event(_event(backlog + i))
            samples.append((time.perf_counter() - start) * 1000)
        samples.sort()
        print(
            f"{mode:8} backlog {backlog:>6}: disk full, per call "
            f"p50 {statistics.median(samples):8.3f} ms"
            f"  p99 {samples[int(len(samples) * 0.99) - 1]:8.3f} ms  max {samples[-1]:8.3f} ms"
            f"  mean {statistics.fmean(samples):8.3f} ms  statements/call "
            f"{statements[0] / calls:9.1f}  pending {len(recorder._pending)}"
        )
        _set_full(conn, False, proxy)
        skew[0] = 3600.0
        start = time.perf_counter()
        recorder.record_event(_event(-1))
        first = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        drained = recorder.flush()
        flush = (time.perf_counter() - start) * 1000
        written = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        print(
            f"{'':24}space back: next call {first:8.3f} ms, flush() {flush:8.1f} ms "
            f"-> {drained}, rows in file {written}, still pending {len(recorder._pending)}"
        )
        recorder.close()


def main() -> None:
    """Parse the options and print one line pair per backlog size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, action="append", help="pending rows (repeatable)")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per backlog")
    parser.add_argument("--mode", choices=("pages", "commit", "rollback", "all"), default="all")
    args = parser.parse_args()
    modes = ("pages", "commit", "rollback") if args.mode == "all" else (args.mode,)
    for mode in modes:
        for backlog in args.backlog or [1_000, 5_000]:
            _run(backlog, args.calls, mode)


if __name__ == "__main__":
    main()

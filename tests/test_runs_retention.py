"""Run records do not grow for ever: retention in the hook's sweep, ``loopwarden runs prune``,
and ``runs show N`` by the row number ``runs list`` prints."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import loopwarden as lw
from loopwarden.records import RETENTION_DAYS, RunRecorder

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
DAY = 86400.0


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwarden", "runs", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _record(db: Path, session: str, run: str, calls: int = 4) -> None:
    guard = lw.LoopGuard(CONFIG, record_db=db)
    guard.start_run(session, run)
    for _ in range(calls):
        decision = guard.before_tool_call(session, "exec", {"c": 1}, run_id=run)
        if decision.allowed:
            guard.after_tool_call(session, "exec", {"c": 1}, result="same", run_id=run)
    guard.end_run(session, run)


def _age(db: Path, run: str, days: float) -> None:
    """Make a recorded run (and its events) ``days`` old."""
    with sqlite3.connect(db) as conn:
        when = time.time() - days * DAY
        conn.execute(
            "UPDATE runs SET first_seen = ?, last_seen = ?, started_at = ?, ended_at = ? "
            "WHERE run_key = ?",
            (when, when, when, when, run),
        )
        conn.execute(
            "UPDATE events SET ts = ? WHERE run IN (SELECT id FROM runs WHERE run_key = ?)",
            (when, run),
        )


def _counts(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as conn:
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    return int(runs), int(events)


def test_runs_prune_deletes_runs_and_events_older_than_the_limit(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    for run, days in (("old", 45), ("month", 20), ("new", 0)):
        _record(db, "s", run)
        _age(db, run, days)
    assert _counts(db)[0] == 3
    done = _cli("prune", "--db", str(db))  # the default: older than 30 days
    assert done.returncode == 0, done.stderr
    assert "1 run" in done.stdout and "30 days" in done.stdout
    kept = {
        r["run_id"] for r in json.loads(_cli("list", "--db", str(db), "--output", "json").stdout)
    }
    assert kept == {"month", "new"}
    with sqlite3.connect(db) as conn:  # no event lost its run, none of the old run's kept
        orphans = conn.execute(
            "SELECT count(*) FROM events WHERE run NOT IN (SELECT id FROM runs)"
        ).fetchone()[0]
    assert orphans == 0
    done = _cli("prune", "--db", str(db), "--older-than", "7d")
    assert done.returncode == 0 and "1 run" in done.stdout
    assert _counts(db)[0] == 1


def test_runs_prune_rejects_a_bad_duration(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _record(db, "s", "r")
    done = _cli("prune", "--db", str(db), "--older-than", "soon")
    assert done.returncode == 2 and "--older-than" in done.stderr and "30d" in done.stderr
    assert _counts(db)[0] == 1


def test_a_recorder_with_retention_forgets_old_runs_when_a_run_starts(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _record(db, "s", "ancient")
    _age(db, "ancient", RETENTION_DAYS + 1)
    _record(db, "s", "recent")
    assert _counts(db)[0] == 2  # the library's default recorder keeps everything
    with RunRecorder(db, retention=RETENTION_DAYS * DAY) as recorder:
        recorder.run_started("s", "today")
    with sqlite3.connect(db) as conn:
        left = {row[0] for row in conn.execute("SELECT run_key FROM runs")}
    assert left == {"recent", "today"}


def test_runs_show_takes_the_row_number_without_a_hash(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _record(db, "s", "turn-a")
    rows = json.loads(_cli("list", "--db", str(db), "--output", "json").stdout)
    shown = _cli("show", str(rows[0]["id"]), "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert "run turn-a" in shown.stdout
    # a run whose id is digits is found by its id first
    _record(db, "s", str(rows[0]["id"] + 100))
    shown = _cli("show", str(rows[0]["id"] + 100), "--db", str(db))
    assert shown.returncode == 0 and f"run {rows[0]['id'] + 100}" in shown.stdout

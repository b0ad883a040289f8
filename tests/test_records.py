"""SQLite run records: written by a guard, read back by ``loopwarden runs`` in another process;
concurrent writers; migrations; locked and corrupt files degrade without breaking the guard."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.cli.runs_cmd import parse_since
from loopwarden.records import (
    _MIGRATIONS,
    SCHEMA_VERSION,
    RecordsError,
    RunRecorder,
    default_db_path,
    list_runs,
    open_db,
)

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}
SECRET_ARG = "tok-8f2e-private-argument"


def _loop(guard: lw.LoopGuard, session: str, run: str | None, n: int) -> list[str]:
    actions = []
    params = {"command": "deploy", "token": SECRET_ARG}
    for _ in range(n):
        decision = guard.before_tool_call(session, "exec", params, run_id=run)
        if decision.allowed:
            guard.after_tool_call(session, "exec", params, result=f"out {SECRET_ARG}", run_id=run)
        actions.append(decision.action)
    return actions


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwarden", "runs", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


_WRITER = textwrap.dedent(
    """
    import sys
    import loopwarden as lw
    db, run = sys.argv[1], sys.argv[2]
    guard = lw.LoopGuard({config!r}, agent_id="builder", record_db=db)
    guard.start_run("sess-1", run)
    params = {{"command": "deploy", "token": {secret!r}}}
    for _ in range(5):
        d = guard.before_tool_call("sess-1", "exec", params, run_id=run)
        if d.allowed:
            guard.after_tool_call("sess-1", "exec", params, result="same", run_id=run)
    guard.end_run("sess-1", run, outcome="failed")
    """
).format(config=CONFIG, secret=SECRET_ARG)


def test_runs_show_explains_a_blocked_run_from_a_previous_process(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    subprocess.run([sys.executable, "-c", _WRITER, str(db), "run-42"], check=True, timeout=60)

    shown = _cli("show", "run-42", "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    run = json.loads(shown.stdout)
    assert (run["session"], run["run_id"], run["agent_id"]) == ("sess-1", "run-42", "builder")
    assert run["outcome"] == "failed" and run["started_at"] <= run["ended_at"]
    assert [(e["action"], e["detector"], e["count"]) for e in run["events"]] == [
        ("warn", "generic_repeat", 2),
        ("block", "generic_repeat", 3),
        ("block", "generic_repeat", 3),
    ]
    assert run["events"][1]["message"].startswith("CRITICAL: Called exec")
    assert run["events"][1]["args_hash"] == lw.hash_tool_call(
        "exec", {"command": "deploy", "token": SECRET_ARG}
    )
    assert (run["warnings"], run["blocks"], run["stops"]) == (1, 2, 0)

    text = _cli("show", "run-42", "--db", str(db))
    assert text.returncode == 0, text.stderr
    assert "outcome: failed" in text.stdout
    assert "block critical generic_repeat exec count=3" in text.stdout
    assert "CRITICAL: Called exec with identical arguments" in text.stdout

    listed = _cli("list", "--blocked", "--db", str(db), "--output", "json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["run-42"]
    # Privacy: the raw argument never reaches the file.
    assert SECRET_ARG.encode() not in db.read_bytes()
    for suffix in ("-wal", "-shm"):
        extra = Path(str(db) + suffix)
        assert not extra.exists() or SECRET_ARG.encode() not in extra.read_bytes()


def test_list_filters_blocked_and_since(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db)
    guard.start_run("a", "calm")
    guard.before_tool_call("a", "read", {"p": 1}, run_id="calm")
    guard.end_run("a", "calm")
    assert _loop(guard, "b", "looping", 4)[-1] == "block"
    guard.end_run("b", "looping")
    assert guard.recorder is not None
    guard.recorder.close()

    everything = json.loads(_cli("list", "--db", str(db), "--output", "json").stdout)
    assert [r["run_id"] for r in everything] == ["calm", "looping"]
    assert everything[0]["outcome"] == "completed" and everything[0]["blocks"] == 0
    blocked = json.loads(_cli("list", "--db", str(db), "--blocked", "--output", "json").stdout)
    assert [r["run_id"] for r in blocked] == ["looping"]
    future = _cli("list", "--db", str(db), "--since", "2999-01-01")
    assert future.returncode == 0 and "no runs recorded" in future.stdout
    recent = _cli("list", "--db", str(db), "--since", "10m")
    assert "calm" in recent.stdout and "looping" in recent.stdout


def test_runs_without_a_run_id_are_shown_by_row_number(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db)
    _loop(guard, "solo", None, 3)
    rows = json.loads(_cli("list", "--db", str(db), "--output", "json").stdout)
    assert len(rows) == 1 and rows[0]["run_id"] is None
    shown = _cli("show", f"#{rows[0]['id']}", "--db", str(db))
    assert shown.returncode == 0 and "(no run id)" in shown.stdout


def test_cli_errors_are_clear(tmp_path: Path) -> None:
    missing = _cli("list", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no run records at" in missing.stderr
    assert not (tmp_path / "none.db").exists()  # reading never creates a file
    db = tmp_path / "runs.db"
    RunRecorder(db).close()
    unknown = _cli("show", "nope", "--db", str(db))
    assert unknown.returncode == 2 and "no recorded run 'nope'" in unknown.stderr
    bad_since = _cli("list", "--db", str(db), "--since", "yesterday")
    assert bad_since.returncode == 2 and "expected a duration such as 30m" in bad_since.stderr
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite at all\n" * 100)
    broken = _cli("list", "--db", str(corrupt))
    assert broken.returncode == 2 and "not a usable SQLite database" in broken.stderr


def test_parse_since() -> None:
    assert parse_since("90s", now=1000.0) == 910.0
    assert parse_since("2h", now=10_000.0) == 2800.0
    assert parse_since("1970-01-02") == 86400.0
    assert parse_since("1970-01-01T01:00:00+01:00") == 0.0
    with pytest.raises(ValueError, match="--since 'soon'"):
        parse_since("soon")


def test_default_path_follows_xdg_state_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert default_db_path() == tmp_path / "state" / "loopwarden" / "runs.db"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/ignored")
    assert default_db_path() == Path.home() / ".local" / "state" / "loopwarden" / "runs.db"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_db_path() == Path.home() / ".local" / "state" / "loopwarden" / "runs.db"


def test_record_db_true_writes_to_the_default_location(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    code = "import loopwarden as lw; g = lw.LoopGuard(record_db=True); g.start_run('s', 'r1')"
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=60)
    assert (tmp_path / "loopwarden" / "runs.db").exists()
    listed = _cli("list", "--output", "json", env=env)
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["r1"]


_CONCURRENT = textwrap.dedent(
    """
    import sys, time
    import loopwarden as lw
    db, tag = sys.argv[1], sys.argv[2]
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2},
                         record_db=db)
    seen = []
    guard.subscribe(seen.append)
    for i in range(30):
        run = f"{tag}-{i}"
        guard.start_run("s", run)
        for _ in range(4):
            d = guard.before_tool_call("s", "exec", {"i": i, "tag": tag}, run_id=run)
            if d.allowed:
                guard.after_tool_call("s", "exec", {"i": i, "tag": tag}, result="x", run_id=run)
        guard.end_run("s", run)
    assert guard.recorder is not None
    for _ in range(100):  # a write that met a long lock under load is retried, not lost
        if guard.recorder.flush():
            break
        time.sleep(0.1)
    assert guard.recorder.ok
    print(len(seen))
    """
)


def test_four_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CONCURRENT, str(db), f"w{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(4)
    ]
    emitted = 0
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        emitted += int(out)
    conn = open_db(db)
    events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    runs = list_runs(conn, limit=1000)
    assert emitted == 4 * 30 * 3  # warn, block, block in every run
    assert events == emitted
    assert len(runs) == 120
    assert all(r.outcome == "completed" and r.blocks == 2 and r.warnings == 1 for r in runs)


def test_a_corrupt_file_is_reported_once_and_the_guard_keeps_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corrupt = tmp_path / "runs.db"
    corrupt.write_bytes(b"garbage" * 1000)
    guard = lw.LoopGuard(CONFIG, record_db=corrupt)
    assert _loop(guard, "s", "r", 5) == ["allow", "allow", "warn", "block", "block"]
    guard.end_run("s", "r")
    errors = [r.getMessage() for r in caplog.records if r.name == "loopwarden.records"]
    assert len(errors) == 1
    assert "not a usable SQLite database" in errors[0] and str(corrupt) in errors[0]
    assert "the guard keeps working" in errors[0]
    assert corrupt.read_bytes() == b"garbage" * 1000  # never overwritten


def test_a_locked_file_is_logged_and_the_rows_arrive_after_the_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    recorder = RunRecorder(db, timeout=0.1)
    guard = lw.LoopGuard(CONFIG)
    recorder.attach(guard)
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        guard.start_run("s", "locked-run")
        assert _loop(guard, "s", "locked-run", 4) == ["allow", "allow", "warn", "block"]
        assert not recorder.ok
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    messages = [r.getMessage() for r in caplog.records if r.name == "loopwarden.records"]
    assert len(messages) == 1 and "is locked by another process" in messages[0]
    guard.end_run("s", "locked-run")  # the next write flushes what the lock kept out
    assert recorder.ok
    conn = open_db(db)
    (run,) = list_runs(conn)
    assert (run.run_id, run.warnings, run.blocks, run.outcome) == ("locked-run", 1, 1, "completed")


def _write_v1_records(db: Path) -> None:
    """A records file of schema version 1 holding one completed run, 'r-old'."""
    conn = sqlite3.connect(db)
    conn.executescript(_MIGRATIONS[0])
    conn.execute(
        "INSERT INTO runs (session, run_key, first_seen, last_seen, outcome) "
        "VALUES ('old', 'r-old', 1.0, 2.0, 'completed')"
    )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()


def test_an_old_schema_is_migrated_keeping_its_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "loopwarden.records")
    db = tmp_path / "v1.db"
    _write_v1_records(db)
    migrated = open_db(db)
    assert migrated.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert migrated.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
    assert [r.run_id for r in list_runs(migrated)] == ["r-old"]
    assert any("migrated to version 2" in r.getMessage() for r in caplog.records)


def test_a_newer_schema_is_refused_clearly(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    open_db(db).close()  # loopwarden's tables, then a later version number
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 5}")
    conn.close()
    with pytest.raises(RecordsError, match="newer than this loopwarden understands"):
        open_db(db)


def test_events_hold_no_raw_arguments_or_results(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db)
    _loop(guard, "s", "r", 5)
    conn = open_db(db)
    dump = "\n".join(conn.iterdump())
    assert SECRET_ARG not in dump
    row: Any = conn.execute("SELECT * FROM events LIMIT 1").fetchone()
    assert row["args_hash"].startswith("exec:") and row["tool_name"] == "exec"


# ---------------------------------------------------------------------------------------------
# The SQLite session store: a restarted process keeps its counts

_RESTART = textwrap.dedent(
    """
    import json, sys
    import loopwarden as lw
    from loopwarden.stores.sqlite import SQLiteStore
    guard = lw.LoopGuard(json.loads(sys.argv[2]), store=SQLiteStore(sys.argv[1]))
    actions = []
    for _ in range(int(sys.argv[3])):
        d = guard.before_tool_call("s", "exec", {"c": 1}, run_id="r")
        if d.allowed:
            guard.after_tool_call("s", "exec", {"c": 1}, result="same", run_id="r")
        actions.append(d.action)
    print(json.dumps(actions))
    """
)


def test_sqlite_store_keeps_counts_across_a_process_restart(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 6}
    memory = lw.LoopGuard(config)
    want = _loop_plain(memory, 8)
    got: list[str] = []
    for n in (4, 4):  # two process lifetimes, 4 calls each
        out = subprocess.run(
            [sys.executable, "-c", _RESTART, str(db), json.dumps(config), str(n)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        got += json.loads(out)
    assert got == want
    assert got[-2:] == ["block", "block"]  # the block came after the restart


def _loop_plain(guard: lw.LoopGuard, n: int) -> list[str]:
    actions = []
    for _ in range(n):
        decision = guard.before_tool_call("s", "exec", {"c": 1}, run_id="r")
        if decision.allowed:
            guard.after_tool_call("s", "exec", {"c": 1}, result="same", run_id="r")
        actions.append(decision.action)
    return actions


def test_sqlite_store_sessions_expire_after_the_idle_ttl(tmp_path: Path) -> None:
    from loopwarden.stores.sqlite import SQLiteStore

    now = [1000.0]
    store = SQLiteStore(tmp_path / "s.db", session_ttl=60, clock=lambda: now[0])
    guard = lw.LoopGuard({"enabled": True}, store=store)
    guard.before_tool_call("s", "exec", {})
    now[0] += 59
    assert store.peek("s") is not None and len(store) == 1
    now[0] += 2
    assert store.peek("s") is None and len(store) == 0
    guard.before_tool_call("s", "exec", {})
    state = store.peek("s")
    assert state is not None and len(state.state.history) == 1  # a fresh session


def test_sqlite_store_on_a_corrupt_file_fails_clearly_and_the_guard_allows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from loopwarden.stores import StoreUnavailableError
    from loopwarden.stores.sqlite import SQLiteStore

    bad = tmp_path / "bad.db"
    bad.write_bytes(b"nope" * 500)
    store = SQLiteStore(bad, on_store_error="block")
    with pytest.raises(StoreUnavailableError, match="not a usable SQLite database") as caught:
        store.update("s", lambda session: None)
    assert caught.value.policy == "block"
    guard = lw.LoopGuard({"enabled": True}, store=SQLiteStore(bad))
    assert guard.before_tool_call("s", "exec", {}).action == "allow"
    assert "not a usable SQLite database" in caplog.text  # the guard logs the reason


def test_batched_recorder_writes_in_bulk_and_on_close(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    recorder = RunRecorder(db, batch=50)
    guards = [lw.LoopGuard(CONFIG) for _ in range(2)]
    for guard in guards:
        recorder.attach(guard)
    reader = open_db(db)
    for n in range(20):  # 20 runs x (start, warn, block, end) = 80 rows
        guard = guards[n % 2]
        guard.start_run("s", f"r{n}")
        _loop(guard, "s", f"r{n}", 4)
        guard.end_run("s", f"r{n}")
        if n == 5:  # 24 rows so far: still buffered
            assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    # The first 50 rows: 12 whole runs, then the start and warning of the 13th.
    assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == 13
    recorder.close()
    runs = list_runs(reader)
    assert len(runs) == 20
    assert all((r.warnings, r.blocks, r.outcome) == (1, 1, "completed") for r in runs)
    with pytest.raises(ValueError, match="batch must be at least 1"):
        RunRecorder(db, batch=0)


# ---------------------------------------------------------------------------------------------
# A full disk (issue 13, item 7): bounded work per call, the real error, recovery


def _event(i: int) -> lw.LoopEvent:
    return lw.LoopEvent(
        type="loop",
        level="warning",
        action="warn",
        detector="generic_repeat",
        count=i,
        tool_name="exec",
        session="s",
        run_id="full-disk",
        agent_id=None,
        message="m" * 200,
    )


def _disk_full(recorder: RunRecorder, full: bool = True) -> sqlite3.Connection:
    """SQLite's max_page_count on the recorder's connection: writes fail with SQLITE_FULL."""
    conn = recorder._conn
    assert conn is not None
    pages = conn.execute("PRAGMA page_count").fetchone()[0] if full else 1 << 30
    conn.execute(f"PRAGMA max_page_count={pages}")
    return conn


def _events_in(db: Path) -> int:
    with sqlite3.connect(db) as reader:
        return int(reader.execute("SELECT count(*) FROM events").fetchone()[0])


def test_a_full_disk_costs_bounded_work_per_call_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from loopwarden.records import _FLUSH_ROWS

    caplog.set_level(logging.INFO, "loopwarden.records")
    db = tmp_path / "runs.db"
    now = [1000.0]
    recorder = RunRecorder(db, clock=lambda: now[0])
    statements: list[str] = []
    _disk_full(recorder).set_trace_callback(statements.append)
    per_call = []
    for i in range(600):
        before = len(statements)
        recorder.record_event(_event(i))
        per_call.append(len(statements) - before)
    assert not recorder.ok
    written = _events_in(db)  # the few rows that fitted before the disk filled
    assert written < 600
    # The disk stays full and the clock stands still: one failed attempt, then calls only
    # queue their row (no statement at all) until the retry is due.
    assert sum(1 for n in per_call if n) <= written + 1
    assert sum(per_call[written + 1 :]) == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "disk" in errors[0] and "full" in errors[0], errors
    assert "cannot rollback" not in caplog.text  # the real error, not the rollback's

    _disk_full(recorder, full=False)  # space returns
    now[0] += 3600  # past the back-off: the next call writes one bounded batch
    recorder.record_event(_event(600))
    assert _events_in(db) == written + _FLUSH_ROWS
    assert not recorder.ok
    assert recorder.flush()  # an explicit flush writes the rest now
    assert _events_in(db) == 601 and recorder.ok
    recorder.close()
    assert "could not be written" not in caplog.text
    assert any("writing to" in r.getMessage() for r in caplog.records)


def test_the_backlog_is_written_at_close_once_space_returns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    recorder = RunRecorder(db, clock=lambda: 0.0)
    _disk_full(recorder)
    for i in range(300):
        recorder.record_event(_event(i))
    _disk_full(recorder, full=False)
    recorder.close()  # drains the whole backlog in bounded batches
    assert _events_in(db) == 300
    assert "could not be written" not in caplog.text and "cannot rollback" not in caplog.text


class _CommitFails:
    """A connection whose next COMMITs fail like a full disk (SQLite then keeps the
    transaction open: it must be rolled back, or every later BEGIN fails)."""

    def __init__(self, conn: sqlite3.Connection, times: int) -> None:
        self.conn = conn
        self.times = times

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT" and self.times > 0:
            self.times -= 1
            raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_a_failed_commit_is_rolled_back_and_retried_without_duplicates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    recorder = RunRecorder(db, clock=lambda: 0.0)
    real = recorder._conn
    assert real is not None
    recorder._conn = _CommitFails(real, times=1)  # type: ignore[assignment]
    for i in range(5):
        recorder.record_event(_event(i))
    assert not real.in_transaction  # rolled back, not left open
    assert recorder.flush()
    assert _events_in(db) == 5  # every row once
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "is full" in errors[0], errors
    recorder.close()


# ---------------------------------------------------------------------------------------------
# Reading never writes (issue 13, item 8)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_reading_an_unrelated_sqlite_file_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
    conn.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    before = _snapshot(tmp_path)
    for db in (other, empty):
        for args in (("list",), ("show", "r1")):
            result = _cli(*args, "--db", str(db))
            assert result.returncode == 2, result.stderr
            assert "is not a loopwarden run-records database" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr
    assert _snapshot(tmp_path) == before  # same files, same bytes: no tables, no WAL


def test_reading_run_records_changes_no_byte(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    subprocess.run([sys.executable, "-c", _WRITER, str(db), "run-7"], check=True, timeout=60)
    before = _snapshot(tmp_path)
    listed = _cli("list", "--db", str(db), "--output", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["run-7"]
    shown = _cli("show", "run-7", "--db", str(db))
    assert shown.returncode == 0 and "outcome: failed" in shown.stdout, shown.stderr
    _assert_unchanged(tmp_path, before)


def _assert_unchanged(directory: Path, before: dict[str, bytes]) -> None:
    """Same files, same bytes; SQLite may add the empty WAL a reader of a WAL file needs."""
    after = _snapshot(directory)
    added = set(after) - set(before)
    assert all(name.endswith(("-wal", "-shm")) for name in added), added
    assert all(after[name] == b"" for name in added if name.endswith("-wal"))
    assert {name: after[name] for name in before} == before


def test_an_older_schema_is_read_without_migrating(tmp_path: Path) -> None:
    db = tmp_path / "v1.db"
    _write_v1_records(db)
    before = _snapshot(tmp_path)
    listed = _cli("list", "--db", str(db), "--output", "json")
    assert listed.returncode == 0, listed.stderr
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["r-old"]
    assert _cli("show", "r-old", "--db", str(db)).returncode == 0
    assert _snapshot(tmp_path) == before  # still version 1: a writer migrates it, not a reader


def test_a_newer_schema_is_refused_by_the_reader_too(tmp_path: Path) -> None:
    db = tmp_path / "future.db"
    RunRecorder(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    before = _snapshot(tmp_path)
    result = _cli("list", "--db", str(db))
    assert result.returncode == 2 and "upgrade loopwarden" in result.stderr, result.stderr
    _assert_unchanged(tmp_path, before)


def test_sqlite_store_on_a_full_disk_reports_it_and_recovers(tmp_path: Path) -> None:
    from loopwarden.stores import StoreUnavailableError
    from loopwarden.stores.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "s.db", on_store_error="block")
    guard = lw.LoopGuard({"enabled": True}, store=store)
    assert guard.before_tool_call("s", "exec", {"c": 0}).action == "allow"
    conn = store._connection()
    conn.execute(f"PRAGMA max_page_count={conn.execute('PRAGMA page_count').fetchone()[0]}")
    with pytest.raises(StoreUnavailableError) as caught:
        store.update("k" * 100_000, lambda session: None)  # a row that needs new pages
    assert "is full" in str(caught.value) and "cannot rollback" not in str(caught.value)
    assert not conn.in_transaction
    conn.execute("PRAGMA max_page_count=1073741823")  # space returns
    assert guard.before_tool_call("s", "exec", {"c": 1}).action == "allow"
    assert store.peek("s") is not None


EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
OPENCLAW_RUN = "0192f3a1-7c2e-7b5d-9e44-5a1c3d2b9f00"  # the session id of the OpenClaw example


def _analyze_record(db: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", "analyze", str(EXAMPLES), "--record", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr


def test_analyze_record_names_each_run_by_its_own_id_with_call_numbers(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _analyze_record(db)
    runs = json.loads(_cli("list", "--db", str(db), "--output", "json").stdout)
    assert len(runs) == 25 and len({run["run_id"] for run in runs}) == 25
    assert "replay" not in {run["run_id"] for run in runs}
    shown = _cli("show", OPENCLAW_RUN, "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.count("\nrun ") + shown.stdout.startswith("run ") == 1  # that run only
    # The same calls the analyze report names: a warning at call 13, the stop at call 17.
    assert "call 13 warn" in shown.stdout and "call 17 stop" in shown.stdout
    (payload,) = [
        json.loads(_cli("show", OPENCLAW_RUN, "--db", str(db), "--output", "json").stdout)
    ]
    assert [event["call"] for event in payload["events"]] == [13, 17]


def test_reading_run_records_leaves_no_files_behind(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    _analyze_record(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]
    before = db.read_bytes()
    for args in (("list",), ("list", "--blocked"), ("show", OPENCLAW_RUN)):
        done = _cli(*args, "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"], args
    assert db.read_bytes() == before  # read, never written

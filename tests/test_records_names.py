"""Run records and the SQLite store take names of any Unicode string (issue 24, item 2).

A tool name, session or run id holding a lone surrogate (``"Bash\\udc00"``, as text read with
``surrogateescape`` holds) cannot be encoded as UTF-8. It used to raise ``UnicodeEncodeError``
in the recorder, stay first in the queue and fail every later event; through
``LoopGuard(record_db=...)`` the guard call itself raised.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopwarden as lw
from loopwarden.records import RunRecorder, list_runs, open_readonly, run_events
from loopwarden.stores.sqlite import SQLiteStore

CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}

# Every code point, lone surrogates and NUL included.
_ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=12)


def _loop(guard: lw.LoopGuard, session: str, tool: str, run: str | None, n: int = 4) -> None:
    for _ in range(n):
        decision = guard.before_tool_call(session, tool, {"q": 1}, run_id=run)
        if decision.allowed:
            guard.after_tool_call(session, tool, {"q": 1}, result="same", run_id=run)


def _tools_recorded(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [row[0] for row in conn.execute("SELECT tool_name FROM events ORDER BY id")]


def test_a_lone_surrogate_in_a_name_is_stored_escaped_and_later_events_still_arrive(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db)
    guard.start_run("s\udc01", "r\udc02")  # raised UnicodeEncodeError before
    _loop(guard, "s\udc01", "Bash\udc00", "r\udc02")
    guard.end_run("s\udc01", "r\udc02")
    _loop(guard, "plain", "exec", "r2")  # every later event failed before
    tools = _tools_recorded(db)
    assert "Bash\\udc00" in tools and "exec" in tools, tools
    conn = open_readonly(db)
    runs = {run.session: run for run in list_runs(conn)}
    assert runs["s\\udc01"].run_id == "r\\udc02" and runs["s\\udc01"].ended_at is not None
    failures = [r for r in caplog.records if r.name == "loopwarden.records"]
    assert not [r for r in failures if r.levelno >= logging.ERROR], failures


def test_a_row_no_database_can_hold_is_dropped_and_the_queue_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "runs.db"
    recorder = RunRecorder(db)
    bad = lw.LoopEvent(
        type="tool.loop",
        level="warning",
        action="warn",
        detector="generic_repeat",
        count=object(),  # type: ignore[arg-type]  # no SQLite type: cannot be bound
        tool_name="odd",
        session="s",
        run_id="r",
        agent_id=None,
        message="m",
    )
    recorder.record_event(bad)
    recorder.run_started("s", "r2")
    recorder.run_started("s", "r3")
    assert recorder.flush()
    with sqlite3.connect(db) as conn:
        keys = [row[0] for row in conn.execute("SELECT run_key FROM runs ORDER BY id")]
    assert "r2" in keys and "r3" in keys, keys
    dropped = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, caplog.records


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(session=_ANY_TEXT, run=_ANY_TEXT, tool=_ANY_TEXT)
def test_names_of_any_unicode_string_never_break_a_call_or_the_queue(
    tmp_path_factory: pytest.TempPathFactory, session: str, run: str, tool: str
) -> None:
    folder = tmp_path_factory.mktemp("names")
    db = folder / "runs.db"
    guard = lw.LoopGuard(CONFIG, record_db=db, store=SQLiteStore(folder / "sessions.db"))
    guard.start_run(session, run)
    _loop(guard, session, tool, run)
    guard.end_run(session, run)
    _loop(guard, "after", "exec", "r")
    assert guard.recorder is not None and guard.recorder.ok
    conn = open_readonly(db)
    summaries = list_runs(conn)
    assert {s.session for s in summaries} >= {"after"}
    ours = [s for s in summaries if s.session != "after" or session == "after"]
    events = [e for s in ours for e in run_events(conn, s.id)]
    # The loop was detected in the session store too (its key is the escaped session name).
    assert any(e.action == "block" for e in events), events
    expected = tool.encode("utf-8", "backslashreplace").decode("utf-8")
    assert any(e.tool_name == expected for e in events), (expected, events)

"""Bounded per-session state, and unknown tool names kept out of records (issue 13, items 2, 14).

Sizes are counted, never timed: a session's per-run maps and its snapshot stay the same size
whatever the number of runs it has seen.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.cli import main
from loopwarden.store import GuardSession, snapshot_session

# At most 64 runs' state beyond the runs that still have calls in the history.
KEPT_RUNS = 64
RECOMMENDED: dict[str, Any] = {"profile": "recommended"}
# Stops a run at its second call: one unknown-tool outcome, then a block that stops.
STOPS_FAST: dict[str, Any] = {
    "profile": "recommended",
    "unknownToolThreshold": 1,
    "stopAfterBlocks": 1,
}


def _session(guard: lw.LoopGuard, key: str = "s") -> GuardSession:
    session = guard.store.peek(key)
    assert session is not None
    return session


def _per_run_sizes(session: GuardSession) -> dict[str, int]:
    return {
        "stopped": len(session.stopped),
        "compaction": len(session.compaction),
        "block_counts": len(session.block_counts),
        "error_streaks": len(session.error_streaks),
        "outcome_streaks": len(session.outcome_streaks),
        "runs": len(session.runs),
    }


def _limit(guard: lw.LoopGuard) -> int:
    # The runs present in the history (at most historySize), plus the 64 most recent others.
    return KEPT_RUNS + guard.config.history_size


def _failing_call(guard: lw.LoopGuard, run: str, i: int) -> None:
    guard.before_tool_call("s", "exec", {"i": i}, run_id=run)
    guard.after_tool_call("s", "exec", {"i": i}, error="boom", run_id=run)


def _stop_run(guard: lw.LoopGuard, run: str) -> lw.Decision:
    guard.before_tool_call("s", "nope", {}, run_id=run)
    guard.after_tool_call("s", "nope", {}, error="Unknown tool: nope", run_id=run)
    return guard.before_tool_call("s", "nope", {}, run_id=run)


# ---------------------------------------------------------------------------------------------
# Item 2: per-run maps are trimmed


def test_error_streaks_stay_bounded_with_a_new_run_per_failing_call() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    for i in range(5_000):
        _failing_call(guard, f"run-{i}", i)
    sizes = _per_run_sizes(_session(guard))
    assert all(size <= _limit(guard) for size in sizes.values()), sizes


def test_compaction_windows_stay_bounded_without_end_run() -> None:
    guard = lw.LoopGuard({"enabled": True})
    for i in range(5_000):
        guard.on_compaction_retry("s", run_id=f"run-{i}")
    assert len(_session(guard).compaction) <= _limit(guard)


def test_stops_and_block_counts_stay_bounded() -> None:
    guard = lw.LoopGuard(STOPS_FAST)
    for i in range(2_000):
        assert _stop_run(guard, f"run-{i}").action == "stop"
    sizes = _per_run_sizes(_session(guard))
    assert all(size <= _limit(guard) for size in sizes.values()), sizes


def test_the_snapshot_does_not_grow_with_the_number_of_runs() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    sizes = []
    for i in range(5_000):
        _failing_call(guard, f"run-{i:05d}", i)
        guard.on_compaction_retry("s", run_id=f"run-{i:05d}")
        if i + 1 in (1_000, 5_000):
            sizes.append(len(json.dumps(snapshot_session(_session(guard)))))
    assert sizes[1] <= sizes[0] * 1.01, sizes


def test_a_stopped_run_stays_stopped_while_it_keeps_calling() -> None:
    guard = lw.LoopGuard(STOPS_FAST)
    assert _stop_run(guard, "A").action == "stop"
    for i in range(2_000):
        _stop_run(guard, f"other-{i}")
        if i % 20 == 0:
            decision = guard.before_tool_call("s", "read", {"i": i}, run_id="A")
            assert decision.action == "stop", i


def test_a_stopped_run_idle_while_64_others_stopped_is_forgotten() -> None:
    guard = lw.LoopGuard(STOPS_FAST)
    _stop_run(guard, "A")
    for i in range(KEPT_RUNS + 1):
        _stop_run(guard, f"other-{i}")
    assert "A" not in _session(guard).stopped
    assert guard.before_tool_call("s", "read", {}, run_id="A").action == "allow"


@pytest.mark.parametrize(
    ("same_outcome", "attempts", "detector"),
    [(False, 6, "repeated_error"), (True, 4, "same_outcome")],
)
def test_runs_still_in_the_history_keep_their_state(
    same_outcome: bool, attempts: int, detector: str
) -> None:
    # 150 runs interleaved, each failing the same way: every one reaches the repeated-error
    # (or same-outcome) verdict, exactly as with unbounded maps, because all of them are still
    # in the history.
    config = {**RECOMMENDED, "historySize": 1_000, "detectors": {"sameOutcome": same_outcome}}
    guard = lw.LoopGuard(config)
    runs = [f"run-{i}" for i in range(150)]
    for attempt in range(attempts):  # other arguments each time: only the error repeats
        for run in runs:
            guard.before_tool_call("s", "deploy", {"attempt": attempt}, run_id=run)
            guard.after_tool_call("s", "deploy", {"attempt": attempt}, error="boom", run_id=run)
    for run in runs:
        decision = guard.before_tool_call("s", "deploy", {"other": 1}, run_id=run)
        assert decision.verdict is not None and decision.verdict.detector == detector


def test_a_finished_compaction_window_is_dropped() -> None:
    guard = lw.LoopGuard({"enabled": True, "postCompactionGuard": {"windowSize": 2}})
    guard.on_compaction_retry("s", run_id="r")
    for i in range(2):
        guard.before_tool_call("s", "exec", {"i": i}, run_id="r")
        guard.after_tool_call("s", "exec", {"i": i}, result="ok", run_id="r")
    assert "r" not in _session(guard).compaction


# ---------------------------------------------------------------------------------------------
# Item 14: a name copied out of an error message stays out of events, logs and records

SECRET = "sk-secret123"
SECRET_MESSAGE = (
    f"CRITICAL: attempted unavailable tool {SECRET} 10 times. "
    "Stop retrying that missing tool and answer without it."
)


def _unknown_tool_loop(guard: lw.LoopGuard, tool: str, error: str, n: int) -> lw.Decision:
    for _ in range(n):
        guard.before_tool_call("s", tool, {"q": 1}, run_id="r")
        guard.after_tool_call("s", tool, {"q": 1}, error=error, run_id="r")
    return guard.before_tool_call("s", tool, {"q": 1}, run_id="r")


def _files_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.iterdir() if path.is_file())


@pytest.mark.parametrize("config", [{"enabled": True}, RECOMMENDED], ids=["openclaw", "rec"])
def test_a_secret_in_an_unknown_tool_error_reaches_no_record(
    config: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="loopwarden")
    guard = lw.LoopGuard(config, record_db=tmp_path / "runs.db")
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    threshold = guard.config.unknown_tool_threshold
    decision = _unknown_tool_loop(guard, "exec", f"Unknown tool: {SECRET}", threshold)
    assert decision.action == "block" and decision.message is not None
    if guard.config.profile == "openclaw":  # the model still reads OpenClaw's exact message
        assert decision.message == SECRET_MESSAGE
    assert SECRET in decision.message  # (the model saw the error text anyway)
    guard.before_tool_call("s", "exec", {"q": 1}, run_id="r")  # recommended: stops the run
    record = guard.end_run("s", "r")
    assert guard.recorder is not None
    guard.recorder.close()
    assert events and record is not None
    assert any("attempted unavailable tool" in event.message for event in events)
    assert SECRET not in json.dumps([event.to_dict() for event in events])
    assert SECRET not in json.dumps(record.to_dict())
    assert SECRET not in json.dumps([e.to_dict() for e in guard.run_record("s", "r")])
    assert SECRET not in caplog.text
    assert SECRET.encode() not in _files_bytes(tmp_path)


def test_an_unknown_name_that_is_the_called_tool_is_kept() -> None:
    guard = lw.LoopGuard({"enabled": True})
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    decision = _unknown_tool_loop(guard, "Weather", "Unknown tool: Weather", 10)
    assert decision.action == "block"
    assert events[0].message == decision.message
    assert "attempted unavailable tool weather 10 times" in events[0].message


def test_analyze_reports_never_carry_a_name_copied_from_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [
        {"trajectory": "r", "step": i, "tool": "exec", "args": {"command": "make"},
         "result": None, "error": f"Unknown tool: {SECRET}"}
        for i in range(25)
    ]  # fmt: skip
    path = tmp_path / "unknown.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    for output in ("json", "jsonl", "text", "html"):
        code = main(["analyze", str(path), "--output", output])
        captured = capsys.readouterr()
        assert code == 1, output
        assert "attempted unavailable tool" in captured.out or output == "text", output
        assert SECRET not in captured.out and SECRET not in captured.err, output


def test_a_stop_for_an_unknown_tool_records_no_copied_name(tmp_path: Path) -> None:
    guard = lw.LoopGuard(STOPS_FAST, record_db=tmp_path / "runs.db")
    decision = _unknown_tool_loop(guard, "exec", f"Unknown tool: {SECRET}", 1)
    assert decision.action == "stop" and decision.message is not None
    assert SECRET in decision.message  # the model's message is the detector's, unchanged
    record = guard.end_run("s", "r")
    assert guard.recorder is not None
    guard.recorder.close()
    assert record is not None and record.outcome == "stopped"
    assert record.stop_reason == (
        "CRITICAL: attempted unavailable tool (name withheld) 1 times. "
        "Stop retrying that missing tool and answer without it."
    )
    assert SECRET.encode() not in _files_bytes(tmp_path)


def test_a_session_restored_from_an_unbounded_snapshot_is_trimmed() -> None:
    from loopwarden.store import restore_session

    data = snapshot_session(GuardSession("s"))
    data["stopped"] = [[f"run-{i}", "stopped"] for i in range(1_000)]
    data["block_counts"] = [[f"run-{i}", 1] for i in range(1_000)]
    session = restore_session(data)
    assert len(session.stopped) == len(session.block_counts) == KEPT_RUNS
    assert "run-999" in session.stopped and "run-0" not in session.stopped

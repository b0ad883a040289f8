"""The post-compaction guard."""

from __future__ import annotations

import loopwarden as lw

SAME = ("exec", "exec:abc", "r1")


def test_aborts_when_the_first_window_outcomes_are_one_identical_triple() -> None:
    guard = lw.PostCompactionGuard(window_size=3)
    guard.arm()
    assert guard.observe(*SAME) is None
    assert guard.observe(*SAME) is None
    verdict = guard.observe(*SAME)
    assert verdict is not None and verdict.should_abort
    assert (verdict.detector, verdict.count, verdict.tool_name) == (
        "compaction_loop_persisted",
        3,
        "exec",
    )
    assert verdict.message == (
        "CRITICAL: tool exec repeated 3 times with identical arguments and identical results "
        "within 3 attempts after auto-compaction. The compaction did not break the loop. "
        "Aborting to prevent runaway resource use."
    )


def test_x_x_y_lets_the_run_continue_and_disarms() -> None:
    guard = lw.PostCompactionGuard(window_size=3)
    guard.arm()
    assert guard.observe(*SAME) is None
    assert guard.observe(*SAME) is None
    assert guard.observe("read", "read:f", "r2") is None
    assert not guard.armed
    assert guard.observe(*SAME) is None  # disarmed: later repeats are the detectors' business


def test_results_that_still_change_never_abort() -> None:
    guard = lw.PostCompactionGuard(window_size=2)
    guard.arm()
    assert guard.observe("exec", "exec:abc", "r1") is None
    assert guard.observe("exec", "exec:abc", "r2") is None


def test_not_armed_or_disabled_observes_nothing() -> None:
    idle = lw.PostCompactionGuard()
    assert [idle.observe(*SAME) for _ in range(5)] == [None] * 5
    off = lw.PostCompactionGuard(enabled=False, window_size=1)
    off.arm()
    assert off.observe(*SAME) is None


def test_rearming_starts_a_fresh_window() -> None:
    guard = lw.PostCompactionGuard(window_size=3)
    guard.arm()
    guard.observe(*SAME)
    guard.observe(*SAME)
    guard.arm()
    assert guard.snapshot()["window"] == [] and guard.remaining == 3
    assert guard.observe(*SAME) is None
    assert guard.observe(*SAME) is None
    assert guard.observe(*SAME) is not None


def test_snapshot_restores_the_same_guard() -> None:
    guard = lw.PostCompactionGuard(window_size=3)
    guard.arm()
    guard.observe(*SAME)
    copy = type(guard).restore(guard.snapshot())
    assert copy.snapshot() == guard.snapshot()
    copy.observe(*SAME)
    assert copy.observe(*SAME) is not None


def test_error_carries_the_verdict_fields() -> None:
    guard = lw.PostCompactionGuard(window_size=1)
    guard.arm()
    verdict = guard.observe(*SAME)
    assert verdict is not None
    error = lw.CompactionLoopPersistedError.from_verdict(verdict)
    assert (error.detector, error.count, error.tool_name) == (
        "compaction_loop_persisted",
        1,
        "exec",
    )
    assert str(error) == verdict.message and error.should_abort

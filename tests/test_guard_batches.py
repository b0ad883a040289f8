"""Calls that arrive together: batches, calls in flight, and the recovery chance (issue 14).

Threads race on one ``LoopGuard`` (``MemoryStore``) the way a runtime runs the tool calls of one
model turn concurrently. Thresholds are read from the resolved ``recommended`` profile, never
written down here, so the tests follow the profile when its numbers change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.core.config import resolve_config
from loopwarden.core.history import VETO_HASH
from loopwarden.core.patterns import consecutive_repeat
from loopwarden.core.tool_call import ToolCallRecord
from loopwarden.store import MAX_IDLE_RUNS, restore_session, snapshot_session
from loopwarden.stores.sqlite import SQLiteStore

RECOMMENDED = {"profile": "recommended"}
PROFILE = resolve_config(RECOMMENDED)
READ = ("read_file", {"path": "src/app.py"})
RESULT = "def main():\n    pass\n"


def sequential_actions(guard: lw.LoopGuard, calls: int, run: str = "r") -> list[str]:
    """``calls`` identical calls one after another (no batch), each outcome before the next."""
    actions = []
    for _ in range(calls):
        decision = guard.before_tool_call("s", *READ, run_id=run)
        actions.append(decision.action)
        if decision.allowed:
            guard.after_tool_call("s", *READ, result=RESULT, run_id=run)
    return actions


def racing_batch(
    guard: lw.LoopGuard, size: int, batch: str | None, run: str = "r"
) -> list[lw.Decision]:
    """``size`` threads decide an identical call at once; outcomes come after every decision.

    The barrier holds each allowed call "in flight" until all threads have decided: the most
    concurrent order a runtime can produce (every call of a turn decided before any result).
    """
    decided = threading.Barrier(size)
    decisions: list[lw.Decision] = []
    lock = threading.Lock()

    def one_call() -> None:
        decision = guard.before_tool_call("s", *READ, run_id=run, batch=batch)
        with lock:
            decisions.append(decision)
        decided.wait(timeout=30)
        if decision.allowed:
            guard.after_tool_call("s", *READ, result=RESULT, run_id=run, batch=batch)

    threads = [threading.Thread(target=one_call) for _ in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(decisions) == size
    return decisions


def allowed(decisions: list[lw.Decision]) -> int:
    return sum(d.allowed for d in decisions)


def executions_before_first_block(actions: list[str]) -> int:
    return actions.index("block") if "block" in actions else len(actions)


def test_the_recommended_profile_counts_pending_calls() -> None:
    assert PROFILE.count_pending_calls is True
    assert resolve_config({"enabled": True}).count_pending_calls is False
    assert resolve_config({"countPendingCalls": True}).count_pending_calls is True


def test_count_pending_calls_is_a_valid_config_key(tmp_path: Path) -> None:
    path = tmp_path / "loopwarden.json"
    path.write_text(
        '{"tools": {"loopDetection": {"enabled": true, "countPendingCalls": true}}}',
        encoding="utf-8",
    )
    assert lw.load_config(path).resolve(None).count_pending_calls is True
    path.write_text('{"tools": {"loopDetection": {"countPendingCalls": "yes"}}}', encoding="utf-8")
    with pytest.raises(lw.ConfigError, match="countPendingCalls"):
        lw.load_config(path)


@pytest.mark.parametrize("size", [3, 8, 40])
def test_threads_racing_in_one_batch_run_no_more_calls_than_one_at_a_time(size: int) -> None:
    sequential = sequential_actions(lw.LoopGuard(RECOMMENDED), size)
    expected_runs = executions_before_first_block(sequential)

    decisions = racing_batch(lw.LoopGuard(RECOMMENDED), size, batch="turn-1")

    assert allowed(decisions) == min(size, expected_runs)
    # The batch that got the run's first block never stops the run, whatever its size: with
    # countBlockedCalls the vetoes of 40 calls reach the circuit breaker, and still no stop.
    assert "stop" not in [d.action for d in decisions]
    if size > expected_runs + PROFILE.global_circuit_breaker_threshold:
        detectors = {d.verdict.detector for d in decisions if d.verdict is not None}
        assert "global_circuit_breaker" in detectors  # reached, and still only a block


def test_without_a_batch_racing_calls_keep_sequential_semantics() -> None:
    # No batch: nothing in flight is counted, exactly as before batches existed.
    size = executions_before_first_block(sequential_actions(lw.LoopGuard(RECOMMENDED), 40)) + 2
    decisions = racing_batch(lw.LoopGuard(RECOMMENDED), size, batch=None)
    assert allowed(decisions) == size


def test_the_next_batch_stops_the_run_after_the_first_batch_was_blocked() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    size = executions_before_first_block(sequential_actions(lw.LoopGuard(RECOMMENDED), 40)) + 3
    first = racing_batch(guard, size, batch="turn-1")
    assert "block" in [d.action for d in first] and "stop" not in [d.action for d in first]
    # Every later batch is blocked; the stop comes when stopAfterBlocks batches were blocked.
    actions_per_batch = [[d.action for d in first]]
    for turn in range(2, PROFILE.stop_after_blocks + 2):
        actions_per_batch.append([d.action for d in racing_batch(guard, 3, batch=f"turn-{turn}")])
        if "stop" in actions_per_batch[-1]:
            break
    blocked_batches = [i for i, acts in enumerate(actions_per_batch) if "block" in acts]
    stopped_batches = [i for i, acts in enumerate(actions_per_batch) if "stop" in acts]
    assert stopped_batches and stopped_batches[0] == PROFILE.stop_after_blocks - 1
    assert blocked_batches[0] == 0 < stopped_batches[0]
    record = guard.end_run("s", "r")
    assert record is not None and record.outcome == "stopped"


def test_sequential_order_with_batches_decides_like_no_batch() -> None:
    # One call per batch, each outcome before the next: the same decisions as without batches.
    size = 12
    plain = sequential_actions(lw.LoopGuard(RECOMMENDED), size)
    guard = lw.LoopGuard(RECOMMENDED)
    batched = []
    for turn in range(size):
        decision = guard.before_tool_call("s", *READ, run_id="r", batch=f"turn-{turn}")
        batched.append(decision.action)
        if decision.allowed:
            guard.after_tool_call("s", *READ, result=RESULT, run_id="r", batch=f"turn-{turn}")
    assert batched == plain


@pytest.mark.parametrize("per_turn", [2, 3, 4, 5])
def test_batches_of_any_size_run_as_many_calls_as_sequential_calls(per_turn: int) -> None:
    expected = executions_before_first_block(sequential_actions(lw.LoopGuard(RECOMMENDED), 40))
    guard = lw.LoopGuard(RECOMMENDED)
    runs, turn, seen_block, first_block_turn = 0, 0, False, -1
    while turn < 20:
        actions = [d.action for d in racing_batch(guard, per_turn, batch=f"t{turn}")]
        runs += sum(a in ("allow", "warn") for a in actions)
        if "stop" in actions:
            # The model read a block (or a warning) in an earlier turn before this stop.
            assert seen_block and turn > first_block_turn
            break
        if "block" in actions and not seen_block:
            seen_block, first_block_turn = True, turn
        turn += 1
    assert runs == expected


def test_openclaw_profile_is_unaffected_by_batches() -> None:
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 6}
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("process", {"action": "poll", "sessionId": "a"}, "running"),
        ("read", {"path": "x"}, "x"),
        ("write", {"path": "y"}, "ok"),
    ] * 8

    def replay(batch_of: Callable[[int], str | None]) -> list[str]:
        guard = lw.LoopGuard(config)
        actions = []
        for i, (tool, params, result) in enumerate(calls):
            batch = batch_of(i)
            decision = guard.before_tool_call("s", tool, params, run_id="r", batch=batch)
            actions.append(decision.action)
            if decision.allowed:
                guard.after_tool_call("s", tool, params, result=result, run_id="r", batch=batch)
        return actions

    assert replay(lambda i: None) == replay(lambda i: f"turn-{i // 3}")
    # Concurrent identical calls, openclaw profile: nothing in flight is counted.
    guard = lw.LoopGuard(config)
    assert allowed(racing_batch(guard, 10, batch="turn-1")) == 10


def test_a_runtime_that_never_reports_outcomes_does_not_inflate_counts() -> None:
    # Outcomes never come: calls of older batches stop counting as in flight once a new
    # batch starts, so each batch is judged by its own calls in flight only.
    guard = lw.LoopGuard(RECOMMENDED)
    without_batches = lw.LoopGuard(RECOMMENDED)
    per_turn = PROFILE.consecutive_critical_threshold  # a batch just below the block
    for turn in range(6):
        for _ in range(per_turn):
            decision = guard.before_tool_call("s", *READ, run_id="r", batch=f"t{turn}")
            plain = without_batches.before_tool_call("s", *READ, run_id="r")
            assert decision.allowed == plain.allowed, turn
    state = guard.store.peek("s")
    assert state is not None
    assert [(f.batch, sum(f.calls.values())) for f in state.in_flight.values()] == [
        ("t5", per_turn)
    ]


def test_outcomes_of_an_older_batch_leave_the_current_batch_alone() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    guard.before_tool_call("s", *READ, run_id="r", batch="t1")
    guard.before_tool_call("s", *READ, run_id="r", batch="t2")
    guard.after_tool_call("s", *READ, result=RESULT, run_id="r", batch="t1")  # late outcome
    state = guard.store.peek("s")
    assert state is not None and state.in_flight["r"].calls == {lw.hash_tool_call(*READ): 1}
    guard.after_tool_call("s", *READ, result=RESULT, run_id="r", batch="t2")
    assert state.in_flight["r"].calls == {}


def test_in_flight_state_is_bounded_per_run() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    runs = MAX_IDLE_RUNS * 3
    for run in range(runs):
        guard.before_tool_call("s", *READ, run_id=f"run-{run}", batch="t")
        guard.start_run("s", f"other-{run}")  # unrelated churn
    state = guard.store.peek("s")
    assert state is not None
    history_size = PROFILE.history_size
    assert len(state.in_flight) <= MAX_IDLE_RUNS + history_size
    assert len(state.in_flight) < runs


def test_batch_state_survives_a_snapshot_and_a_shared_sqlite_store(tmp_path: Path) -> None:
    size = executions_before_first_block(sequential_actions(lw.LoopGuard(RECOMMENDED), 40))
    path = tmp_path / "state.db"
    first = lw.LoopGuard(RECOMMENDED, store=SQLiteStore(path))
    # A batch half decided by one process (nothing reported yet)...
    for _ in range(size):
        assert first.before_tool_call("s", *READ, run_id="r", batch="t1").allowed
    # ...and continued by another: the calls in flight are in the stored state.
    second = lw.LoopGuard(RECOMMENDED, store=SQLiteStore(path))
    blocked = second.before_tool_call("s", *READ, run_id="r", batch="t1")
    assert blocked.action == "block"
    again = second.before_tool_call("s", *READ, run_id="r", batch="t1")
    assert again.action == "block"  # same batch as the run's first block: no stop
    state = second.store.peek("s")
    assert state is not None
    restored = restore_session(snapshot_session(state))
    assert restored.in_flight == state.in_flight
    assert restored.block_batches == state.block_batches == {"r": "t1"}
    for _ in range(size):  # the calls that ran report their (identical) outcomes
        second.after_tool_call("s", *READ, result=RESULT, run_id="r", batch="t1")
    assert second.before_tool_call("s", *READ, run_id="r", batch="t2").action == (
        "stop" if PROFILE.stop_after_blocks == 2 else "block"
    )


# -- the pure count ------------------------------------------------------------------------


def _records(*results: str | None) -> list[ToolCallRecord]:
    """Records of one signature, newest first, with these result hashes (None: no result)."""
    return [ToolCallRecord("t", "t:sig", result_hash=r) for r in results]


def test_calls_in_flight_count_as_identical_up_to_the_pending_number() -> None:
    tail = _records(None, None, None, "r1", "r1")
    assert consecutive_repeat(tail, "t:sig").identical == 2  # results only, as before
    assert consecutive_repeat(tail, "t:sig", pending=2).identical == 4
    assert consecutive_repeat(tail, "t:sig", pending=9).identical == 5
    assert consecutive_repeat(tail, "t:sig", pending=9).calls == 5


def test_calls_in_flight_do_not_reopen_a_broken_streak() -> None:
    tail = _records("r2", "r1", None, None)  # the streak of r2 ends at r1
    assert consecutive_repeat(tail, "t:sig", pending=2).identical == 1


def test_a_veto_recorded_before_any_result_repeats_the_streak() -> None:
    # Vetoes given while the identical calls were still in flight carry no result of their
    # own; the results that came later must not break the streak they extend.
    tail = _records(VETO_HASH, VETO_HASH, "r1", "r1", "r1")
    assert consecutive_repeat(tail, "t:sig").identical == 5


# Issue 25: a batch's decisions must not depend on the order its outcomes are reported in.
_TOOLS = {"A": ("get_weather", {"city": "Paris"}), "B": ("get_weather", {"city": "Rome"})}
# Each call its own result: a call's first outcome cannot be presumed while it is in flight, so
# with one result for both calls the same-outcome detector would see B's first outcome in one
# order and not in the other (docs/concurrency.md).
_WEATHER = {"Paris": "21C", "Rome": "17C"}


def _report(guard: lw.LoopGuard, tool: str, params: dict[str, Any], call: str, batch: str) -> None:
    """The call's outcome: each city its own weather."""
    result = _WEATHER[params["city"]]
    guard.after_tool_call(
        "s", tool, params, result=result, run_id="r", tool_call_id=call, batch=batch
    )


def _turns(order: str, turns: list[str]) -> tuple[int, list[str]]:
    """Run ``turns`` (each a string of calls, e.g. ``"AB"``) through a fresh recommended guard;
    ``order`` "each" reports each outcome before the next call of the turn, "all" reports them
    after every call of the turn was decided. Returns executions and the actions per turn."""
    guard = lw.LoopGuard(RECOMMENDED)
    ran, actions = 0, []
    for number, turn in enumerate(turns):
        batch, decided = f"turn-{number}", []
        for index, name in enumerate(turn):
            tool, params = _TOOLS[name]
            call_id = f"{number}-{index}"
            decision = guard.before_tool_call(
                "s", tool, params, run_id="r", tool_call_id=call_id, batch=batch
            )
            decided.append((tool, params, call_id, decision))
            if order == "each" and decision.allowed:
                ran += 1
                _report(guard, tool, params, call_id, batch)
        for tool, params, call_id, decision in decided if order == "all" else ():
            if decision.allowed:
                ran += 1
                _report(guard, tool, params, call_id, batch)
        actions.append("".join(d.action[0] for *_, d in decided))
        if "s" in actions[-1]:
            break
    return ran, actions


@pytest.mark.parametrize(
    "turns",
    [
        ["AB"] * 8,
        ["AAA", "AAA", "BA", "AAB", "AAA", "A", "A", "A"],
        ["AAA", "AAB", "AAB", "AAB", "AAA", "A", "A", "A"],
        ["AAB", "AAA", "AAB", "AAB", "AAA", "A", "A", "A"],
    ],
)
def test_a_batch_is_decided_the_same_whatever_order_its_outcomes_come_in(turns: list[str]) -> None:
    assert _turns("all", turns) == _turns("each", turns)

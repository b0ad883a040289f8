"""LoopGuard decisions, warning emission, events, run records, sessions."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import loopwarden as lw
from loopwarden.store import GuardSession

T = TypeVar("T")
CMD = {"command": "npm test"}
FAIL = {
    "content": [{"type": "text", "text": "1 failing"}],
    "details": {"status": "completed", "exitCode": 1},
}


def call(
    guard: lw.LoopGuard,
    session: str = "s",
    tool: str = "exec",
    params: Any = None,
    result: Any = FAIL,
    run_id: str | None = None,
    call_id: str | None = None,
) -> lw.Decision:
    """One live tool call: before, run (unless blocked), after. Returns the before-decision."""
    params = CMD if params is None else params
    decision = guard.before_tool_call(session, tool, params, run_id=run_id, tool_call_id=call_id)
    if decision.action in ("allow", "warn"):
        after = guard.after_tool_call(
            session, tool, params, result=result, run_id=run_id, tool_call_id=call_id
        )
        if after.action == "stop":
            return after
    return decision


def test_block_hands_back_the_blocked_result_and_does_not_record_the_call() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3})
    actions = [call(guard).action for _ in range(5)]
    assert actions == ["allow", "allow", "warn", "block", "block"]
    decision = guard.before_tool_call("s", "exec", CMD)
    assert decision.blocked_result == {
        "content": [{"type": "text", "text": decision.message}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": decision.message},
    }
    assert decision.verdict is not None and decision.verdict.detector == "generic_repeat"
    assert decision.message == (
        "CRITICAL: Called exec with identical arguments and identical outcomes 3 times. "
        "Session execution blocked to prevent runaway loops."
    )
    state = guard.store.peek("s")
    assert state is not None and len(state.state.history) == 3  # blocked calls never recorded


def test_feeding_back_the_blocked_result_records_nothing() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2})
    call(guard), call(guard)
    blocked = guard.before_tool_call("s", "exec", CMD)
    assert blocked.action == "block"
    guard.after_tool_call("s", "exec", CMD, result=blocked.blocked_result)
    guard.after_tool_call("s", "exec", CMD, error="anything", tool_call_id=None)
    state = guard.store.peek("s")
    assert state is not None
    # The veto result has no hash; the error (no pending record) appends one complete record.
    assert [r.result_hash is not None for r in state.state.history] == [True, True, True]


def test_outcome_of_a_blocked_call_id_is_never_recorded() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2})
    call(guard, call_id="a"), call(guard, call_id="b")
    assert guard.before_tool_call("s", "exec", CMD, tool_call_id="c").action == "block"
    guard.after_tool_call("s", "exec", CMD, error="timeout", tool_call_id="c")
    state = guard.store.peek("s")
    assert state is not None and [r.tool_call_id for r in state.state.history] == ["a", "b"]


def _warn_counts(threshold: int, calls: int) -> list[int]:
    guard = lw.LoopGuard(
        {
            "enabled": True,
            "warningThreshold": threshold,
            "criticalThreshold": 1000,
            "historySize": 100,
        }
    )
    counts = []
    for i in range(calls):
        # Results change every time: no-progress never builds, the repeat count R does.
        decision = call(guard, result=f"output {i}")
        if decision.action == "warn":
            assert decision.verdict is not None
            counts.append(decision.verdict.count)
    return counts


def test_warnings_are_emitted_once_per_threshold_multiple_with_threshold_3() -> None:
    assert _warn_counts(3, 11) == [3, 6, 9]


def test_warnings_are_emitted_at_10_and_20_with_the_default_threshold() -> None:
    assert _warn_counts(10, 25) == [10, 20]


def test_deduplicated_warnings_still_carry_the_verdict() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 50})
    decisions = [call(guard, result=f"r{i}") for i in range(4)]
    assert [d.action for d in decisions] == ["allow", "allow", "warn", "allow"]
    assert decisions[3].verdict is not None and decisions[3].verdict.count == 3
    assert decisions[3].message is None


def test_warning_keys_are_per_run() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 50})
    for run in ("r1", "r2"):
        actions = [call(guard, result=f"x{i}", run_id=run).action for i in range(3)]
        assert actions == ["allow", "allow", "warn"]


def test_surface_warnings_off_keeps_the_model_out_of_it() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1}, surface_warnings=False)
    call(guard, result="a")
    decision = call(guard, result="b")
    assert decision.action == "warn" and decision.message is None


def test_critical_verdicts_are_never_deduplicated() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2})
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    for _ in range(6):
        call(guard)
    assert [e.action for e in events] == ["warn", "block", "block", "block", "block"]


@pytest.mark.parametrize(
    ("enabled", "detects", "records"),
    [(True, True, True), (None, False, True), (False, False, False)],
)
def test_enabled_three_values_at_run_time(
    enabled: bool | None, detects: bool, records: bool
) -> None:
    raw = {"warningThreshold": 1, "criticalThreshold": 2}
    if enabled is not None:
        raw["enabled"] = enabled
    guard = lw.LoopGuard(raw)
    actions = {call(guard).action for _ in range(4)}
    assert ("block" in actions) is detects
    state = guard.store.peek("s")
    assert state is not None
    pending = [r for r in state.state.history if r.result_hash is None]
    assert pending == []  # every recorded call got its outcome attached
    # enabled false records no calls, but outcomes still append complete records (§1.3).
    assert len(state.state.history) == (2 if detects else 4)
    guard.before_tool_call("s", "exec", {"command": "other"})
    assert (len(state.state.history) == (3 if detects else 5)) is records


def _compaction_guard(enabled: bool | None = None) -> lw.LoopGuard:
    raw: dict[str, Any] = {"postCompactionGuard": {"windowSize": 3}}
    if enabled is not None:
        raw["enabled"] = enabled
    return lw.LoopGuard(raw)


def test_loop_persisting_after_compaction_stops_the_run_with_the_error() -> None:
    guard = _compaction_guard()  # enabled absent: the post-compaction guard is still on
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    call(guard, run_id="r")
    guard.on_compaction_retry("s", run_id="r")
    assert call(guard, run_id="r").action == "allow"
    assert call(guard, run_id="r").action == "allow"
    stop = call(guard, run_id="r")
    assert stop.action == "stop" and isinstance(stop.error, lw.CompactionLoopPersistedError)
    assert stop.error.count == 3 and stop.error.tool_name == "exec"
    assert stop.message == stop.error.message
    again = guard.before_tool_call("s", "read", {"path": "x"}, run_id="r")
    assert (again.action, again.message) == ("stop", stop.message)
    assert events[-1].type == "compaction.loop_persisted" and events[-1].action == "stop"
    assert guard.before_tool_call("s", "exec", CMD, run_id="other").action == "allow"
    record = guard.end_run("s", "r")
    assert record is not None and record.outcome == "stopped"
    assert record.stop_reason == stop.message


def test_x_x_y_after_compaction_continues() -> None:
    guard = _compaction_guard()
    guard.on_compaction_retry("s")
    assert call(guard).action == "allow"
    assert call(guard).action == "allow"
    assert call(guard, params={"command": "ls"}).action == "allow"
    assert call(guard).action == "allow"


def test_compaction_guard_off_when_enabled_is_false() -> None:
    guard = _compaction_guard(enabled=False)
    guard.on_compaction_retry("s")
    assert {call(guard).action for _ in range(5)} == {"allow"}


def test_compaction_guard_arms_only_on_a_compaction_retry() -> None:
    guard = _compaction_guard()
    assert {call(guard).action for _ in range(6)} == {"allow"}


def test_start_run_clears_a_previous_stop_of_the_same_run_id() -> None:
    guard = _compaction_guard()
    guard.on_compaction_retry("s", run_id="r")
    for _ in range(3):
        call(guard, run_id="r")
    assert guard.before_tool_call("s", "exec", CMD, run_id="r").action == "stop"
    guard.start_run("s", "r")
    assert guard.before_tool_call("s", "exec", CMD, run_id="r").action == "allow"
    assert guard.run_record("s", "r") == []


def test_events_carry_names_hashes_and_counts_never_raw_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = {"command": "curl -H 'Authorization: sk-SECRET-123'"}
    guard = lw.LoopGuard(
        {"enabled": True, "warningThreshold": 1, "criticalThreshold": 2}, agent_id="main"
    )
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    with caplog.at_level(logging.DEBUG, logger="loopwarden"):
        for _ in range(3):
            call(guard, params=secret, result="token sk-SECRET-123 rejected", run_id="r")
    assert [e.action for e in events] == ["warn", "block"]
    dumped = json.dumps([e.to_dict() for e in events]) + caplog.text
    assert "SECRET" not in dumped
    assert events[1].args_hash == lw.hash_tool_call("exec", secret)
    assert (events[1].session, events[1].run_id, events[1].agent_id) == ("s", "r", "main")
    assert [r.levelname for r in caplog.records] == ["WARNING", "ERROR"]
    assert all(r.name.startswith("loopwarden") for r in caplog.records)


def test_run_record_lists_the_runs_loop_events_in_order() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2})
    for _ in range(4):
        call(guard, run_id="r1")
    call(guard, run_id="r2")
    record = guard.run_record("s", "r1")
    assert [(e.action, e.detector, e.count) for e in record] == [
        ("warn", "generic_repeat", 1),
        ("block", "generic_repeat", 2),
        ("block", "generic_repeat", 2),
    ]
    assert guard.run_record("s", "r2") == [] and guard.run_record("nobody") == []


def test_unsubscribe_and_failing_subscribers_do_not_break_calls() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1})
    seen: list[lw.LoopEvent] = []

    def broken(event: lw.LoopEvent) -> None:
        raise RuntimeError("subscriber bug")

    guard.subscribe(broken)
    unsubscribe = guard.subscribe(seen.append)
    call(guard, result="a")
    assert call(guard, result="b").action == "warn"
    assert len(seen) == 1
    unsubscribe()
    call(guard, result="c"), call(guard, result="d")
    assert len(seen) == 1


class _BrokenStore:
    """A store whose every access fails, as a crashed backend would."""

    def update(self, key: str, fn: Callable[[GuardSession], T]) -> T:
        raise OSError("backend down")

    def peek(self, key: str) -> GuardSession | None:
        return None

    def __len__(self) -> int:
        return 0


def test_bookkeeping_failures_are_logged_and_never_break_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = lw.LoopGuard({"enabled": True}, store=_BrokenStore())
    with caplog.at_level(logging.ERROR, logger="loopwarden"):
        assert guard.before_tool_call("s", "exec", CMD).action == "allow"
        assert guard.after_tool_call("s", "exec", CMD, result="x").action == "allow"
        guard.on_compaction_retry("s")
    assert "backend down" in caplog.text


def test_idle_sessions_expire_after_the_ttl() -> None:
    now = [0.0]
    guard = lw.LoopGuard({"enabled": True}, session_ttl=60.0, clock=lambda: now[0])
    call(guard, session="old")
    now[0] = 30.0
    call(guard, session="young")
    now[0] = 80.0
    assert guard.store.peek("old") is None
    assert guard.store.peek("young") is not None
    assert len(guard.store) == 1


def test_least_recently_used_sessions_are_dropped_beyond_the_cap() -> None:
    guard = lw.LoopGuard({"enabled": True}, max_sessions=2)
    call(guard, session="a"), call(guard, session="b")
    call(guard, session="a")
    call(guard, session="c")
    assert guard.store.peek("b") is None
    assert guard.store.peek("a") is not None and guard.store.peek("c") is not None


def test_config_sources_whole_config_agent_file_and_resolved(tmp_path: Path) -> None:
    full = {
        "tools": {"loopDetection": {"enabled": True, "warningThreshold": 25}},
        "agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"historySize": 7}}}]},
    }
    assert lw.LoopGuard(full, agent_id="ops").config.history_size == 7
    assert lw.LoopGuard(full).config.history_size == 30
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(full))
    assert lw.LoopGuard(path, agent_id="ops").config.warning_threshold == 25
    resolved = lw.resolve_config({"historySize": 3})
    assert lw.LoopGuard(resolved).config is resolved
    path.write_text('{"tools": {"loopDetection": {"historySize": 0}}}')
    with pytest.raises(lw.ConfigError, match="historySize"):
        lw.LoopGuard(str(path))


def test_eight_threads_on_separate_sessions_each_block_at_the_same_call() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5})
    first_block: dict[int, int] = {}
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(12):
            if call(guard, session=f"s{n}").action == "block" and n not in first_block:
                first_block[n] = i

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert first_block == dict.fromkeys(range(8), 5)


def test_eight_threads_sharing_one_session_lose_no_record() -> None:
    guard = lw.LoopGuard({"enabled": True, "historySize": 10_000})
    barrier = threading.Barrier(8)

    def worker(n: int) -> None:
        barrier.wait()
        for i in range(100):
            call(guard, params={"command": f"t{n}-{i}"}, result=f"{n}-{i}", call_id=f"{n}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state = guard.store.peek("s")
    assert state is not None
    assert len(state.state.history) == 800
    assert all(r.result_hash is not None for r in state.state.history)


def test_usable_from_asyncio_tasks() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3})

    async def agent(name: str) -> list[str]:
        actions = []
        for _ in range(5):
            actions.append(call(guard, session=name).action)
            await asyncio.sleep(0)
        return actions

    async def main() -> list[list[str]]:
        return await asyncio.gather(*(agent(f"a{i}") for i in range(4)))

    expected = ["allow", "allow", "warn", "block", "block"]
    assert asyncio.run(main()) == [expected] * 4


def test_a_session_snapshot_restores_to_the_same_verdicts() -> None:
    from loopwarden.store import restore_session, snapshot_session

    config = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
    guard = lw.LoopGuard(config)
    for i in range(3):
        call(guard, run_id="r", call_id=f"c{i}")
    guard.on_compaction_retry("s", run_id="r")
    state = guard.store.peek("s")
    assert state is not None
    snapshot = json.loads(json.dumps(snapshot_session(state)))
    restored = restore_session(snapshot)
    assert snapshot_session(restored) == snapshot_session(state)

    twin = lw.LoopGuard(config)
    twin.store.update("s", lambda s: s.__dict__.update(restored.__dict__))
    assert [call(twin, run_id="r").action for _ in range(3)] == [
        call(guard, run_id="r").action for _ in range(3)
    ]


def test_a_run_record_keeps_its_first_256_events_and_counts_the_rest() -> None:
    guard = lw.LoopGuard({"enabled": True, "warningThreshold": 1, "criticalThreshold": 2})
    for _ in range(300):
        call(guard, run_id="r")
    record = guard.end_run("s", "r")
    assert record is not None
    assert len(record.events) == 256 and record.dropped_events == 300 - 1 - 256
    assert record.events[0].action == "warn" and record.events[-1].action == "block"

"""The guard's decision is the core's step: usable without a store, named where it always was,
and following the settings assigned to a guard after it was built."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import loopwarden as lw
from loopwarden import events, guard, store
from loopwarden.core import events as core_events
from loopwarden.core import session as core_session
from loopwarden.core import step as core_step
from loopwarden.core.config import resolve_config

CMD = {"command": "npm test"}
FAIL = {"content": [{"type": "text", "text": "1 failing"}], "details": {"exitCode": 1}}
CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}


def test_the_moved_names_are_the_same_objects_at_their_old_paths() -> None:
    assert events.LoopEvent is core_events.LoopEvent is lw.LoopEvent
    assert store.GuardSession is core_session.GuardSession
    assert store.RunRecord is core_session.RunRecord is lw.RunRecord
    assert store.InFlight is core_session.InFlight
    assert store.MAX_IDLE_RUNS == core_session.MAX_IDLE_RUNS
    assert guard.Decision is core_step.Decision is lw.Decision
    assert guard.record_message is core_step.record_message


def _step_actions(calls: int) -> tuple[list[str], list[str]]:
    """The actions and event kinds of ``calls`` identical failing calls, through the core's
    step alone: one GuardSession, no store, no guard."""
    judge = core_step.Judge(resolve_config(CONFIG))
    state = core_session.GuardSession("s")
    actions, kinds = [], []
    for i in range(calls):
        decision, emitted = core_step.before_step(judge, "exec", CMD, "r", f"c{i}", None, state)
        actions.append(decision.action)
        kinds += [e.action for e in emitted]
        if decision.allowed:
            outcome = (FAIL, None, None)
            core_step.after_step(judge, "exec", CMD, outcome, "r", f"c{i}", None, state)
    return actions, kinds


def test_the_step_alone_decides_as_the_guard_does() -> None:
    actions, kinds = _step_actions(5)
    through_guard = lw.LoopGuard(CONFIG)
    expected = []
    for i in range(5):
        decision = through_guard.before_tool_call(
            "s", "exec", CMD, run_id="r", tool_call_id=f"c{i}"
        )
        expected.append(decision.action)
        if decision.allowed:
            through_guard.after_tool_call(
                "s", "exec", CMD, result=FAIL, run_id="r", tool_call_id=f"c{i}"
            )
    assert actions == expected == ["allow", "allow", "warn", "block", "block"]
    assert kinds == ["warn", "block", "block"]
    assert [e.action for e in through_guard.run_record("s", "r")] == kinds


def test_the_step_itself_logs_nothing_the_guard_logs_each_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopwarden"):
        _step_actions(5)
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="loopwarden"):
        loop = lw.LoopGuard(CONFIG)
        for _ in range(5):
            if loop.before_tool_call("s", "exec", CMD).allowed:
                loop.after_tool_call("s", "exec", CMD, result=FAIL)
    lines = [r.getMessage() for r in caplog.records if r.name == "loopwarden.guard"]
    assert [line.split(":")[0] for line in lines] == ["loop warn", "loop block", "loop block"]


@pytest.mark.parametrize(
    ("setting", "value", "read"),
    [
        ("surface_warnings", False, lambda d, e: d.message is None),
        ("agent_id", "helper", lambda d, e: e[0].agent_id == "helper"),
    ],
)
def test_a_setting_assigned_after_construction_takes_effect_at_the_next_call(
    setting: str, value: Any, read: Any
) -> None:
    loop = lw.LoopGuard(CONFIG)
    seen: list[lw.LoopEvent] = []
    loop.subscribe(seen.append)
    setattr(loop, setting, value)
    assert getattr(loop, setting) == value
    decisions = []
    for _ in range(3):
        decisions.append(loop.before_tool_call("s", "exec", CMD))
        loop.after_tool_call("s", "exec", CMD, result=FAIL)
    assert decisions[-1].action == "warn"
    assert read(decisions[-1], seen)


def _sent(message_id: str) -> dict[str, Any]:
    """A send tool's result: the same message, delivered under a new id each time."""
    return {
        "content": [{"type": "text", "text": "sent"}],
        "details": {"ok": True, "messageId": message_id, "ts": len(message_id)},
    }


def _result_hashes(loop: lw.LoopGuard) -> list[str | None]:
    for i in range(2):
        loop.before_tool_call("s", "slack_post", {"text": "ping"})
        loop.after_tool_call("s", "slack_post", {"text": "ping"}, result=_sent(f"m{i}" * (i + 1)))
    state = loop.store.peek("s")  # type: ignore[union-attr]
    assert state is not None
    return [record.result_hash for record in state.state.history]


def test_send_tools_assigned_after_construction_are_read_as_send_tools() -> None:
    """A send tool's outcome drops its delivery ids: the same message sent twice hashes alike."""
    built = _result_hashes(lw.LoopGuard(CONFIG, send_tools={"slack_post"}))
    assigned = lw.LoopGuard(CONFIG)
    assigned.send_tools = {"slack_post"}
    assert assigned.send_tools == frozenset({"slack_post"})
    plain = _result_hashes(lw.LoopGuard(CONFIG))
    assert _result_hashes(assigned) == built
    assert built[0] == built[1]
    assert plain[0] != plain[1]

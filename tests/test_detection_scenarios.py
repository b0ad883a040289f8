"""Detection v4 on the development scenarios of scripts/detection_scenarios.py.

Each scenario is replayed call by call through a real ``LoopGuard()`` with no config (the
recommended profile), as a runtime drives it: the call is asked about, and when it runs its
recorded outcome is reported, failures marked as the transcript marks them. The goals:

- healthy bulk work (distinct calls, one constant acknowledgement): never blocked or stopped;
- stuck (distinct calls failing alike, each failure quoting the call's varied argument):
  blocked by the 5th call of the stretch, the run stopped by the 8th;
- surveys (distinct items, queued or not found): never blocked or stopped.

The first tests check that the scenarios are what they claim to be, independently of the guard.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.transcripts.model import MISSING, ToolCall

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import detection_scenarios as ds  # noqa: E402

SCENARIOS = ds.scenarios()


def _of(kind: str) -> list[ds.Scenario]:
    return [s for s in SCENARIOS if s.kind == kind]


def _outcome_text(call: ToolCall) -> str:
    """What a call returned, as one text (an error, a text, or JSON for anything else)."""
    value = call.error if call.result is MISSING else call.result
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return "\n".join(str(item.get("text", "")) for item in value["content"])
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


_NONZERO = re.compile(r"^<returncode>[1-9]\d*</returncode>")


def _marked_failed(call: ToolCall) -> bool:
    """Whether the transcript marks the call as failed: an error, MCP's isError, or
    mini-swe-agent's non-zero return code."""
    if call.error is not None:
        return True
    if isinstance(call.result, dict):
        return call.result.get("isError") is True
    return isinstance(call.result, str) and _NONZERO.match(call.result) is not None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _words(params: Any) -> set[str]:
    return {w for s in _strings(params) for w in re.findall(r"\w{3,}", s)}


def _shared_ends(texts: list[str]) -> int:
    """How many characters every text shares at its start and at its end."""
    start = 0
    while all(len(t) > start and t[start] == texts[0][start] for t in texts):
        start += 1
    end = 0
    while all(len(t) - start > end and t[-1 - end] == texts[0][-1 - end] for t in texts):
        end += 1
    return start + end


_WRAPPER = re.compile(r"^<returncode>\d+</returncode>\n<output>\n|\n</output>$")


# ---------------------------------------------------------------------------------------------
# The scenarios are what they claim to be


def test_the_scenarios_are_deterministic_and_many_shaped() -> None:
    again = ds.scenarios()
    assert [(s.name, s.calls) for s in again] == [(s.name, s.calls) for s in SCENARIOS]
    other = ds.scenarios(seed=38)
    assert [s.calls for s in other] != [s.calls for s in SCENARIOS]
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)
    for kind in (ds.BULK, ds.STUCK):
        found = _of(kind)
        assert len({s.shape for s in found}) >= 10 and len(found) >= 30
        assert len({c.tool for s in found for c in s.calls[s.start :]}) >= 15
    assert len(_of(ds.SURVEY)) >= 5


@pytest.mark.parametrize("scenario", _of(ds.BULK), ids=lambda s: s.name)
def test_bulk_work_is_distinct_calls_with_one_acknowledgement(scenario: ds.Scenario) -> None:
    calls = scenario.calls[scenario.start :]
    assert 10 <= len(calls) <= 40
    assert len({lw.hash_tool_call(c.tool, c.params) for c in calls}) == len(calls)
    assert len({c.tool for c in calls}) == 1
    assert not any(_marked_failed(c) for c in calls)
    # One acknowledgement: the same text but for a test run's timing.
    assert len({re.sub(r"\d", "#", _outcome_text(c)) for c in calls}) == 1


@pytest.mark.parametrize("scenario", _of(ds.STUCK), ids=lambda s: s.name)
def test_stuck_failures_quote_each_call_own_varied_argument(scenario: ds.Scenario) -> None:
    calls = scenario.calls[scenario.start :]
    assert len(calls) == ds.STUCK_CALLS and all(_marked_failed(c) for c in calls)
    assert len({lw.hash_tool_call(c.tool, c.params) for c in calls}) == len(calls)
    texts = [_WRAPPER.sub("", _outcome_text(c)) for c in calls]
    assert len(set(texts)) == len(texts)  # a plain comparison sees ten different failures
    # Each failure quotes a word of its own call's arguments that no other call has.
    words = [_words(c.params) for c in calls]
    for k, text in enumerate(texts):
        own = words[k].difference(*(w for j, w in enumerate(words) if j != k))
        assert any(w in text for w in own), (calls[k].params, text)
    # And they fail the same way: one text around what varies.
    assert _shared_ends(texts) >= 10, texts


@pytest.mark.parametrize("scenario", _of(ds.SURVEY), ids=lambda s: s.name)
def test_a_survey_is_distinct_items_queued_or_not_found(scenario: ds.Scenario) -> None:
    calls = scenario.calls[scenario.start :]
    assert len({lw.hash_tool_call(c.tool, c.params) for c in calls}) == len(calls)
    failed = [_marked_failed(c) for c in calls]
    assert any(failed) and not all(failed)
    assert "TTTT" not in "".join("T" if f else "F" for f in failed)  # at most 3 in a row


# ---------------------------------------------------------------------------------------------
# The guard meets the goals on them


def replay(calls: list[ToolCall]) -> list[str]:
    """Each call's action under ``LoopGuard()`` (no config) as a runtime drives it: asked
    before; when it runs, its outcome reported (failed when the transcript marks it so); a
    stop ends the run."""
    guard = lw.LoopGuard()
    actions: list[str] = []
    for call in calls:
        before = guard.before_tool_call("s", call.tool, call.params, run_id="r")
        actions.append(before.action)
        if before.action == "stop":
            break
        if before.action == "block":
            continue
        result = lw.UNDEFINED if call.result is MISSING else call.result
        error = call.error if call.result is MISSING else None
        failed = True if call.error is not None else None
        after = guard.after_tool_call(
            "s", call.tool, call.params, result=result, error=error, run_id="r", failed=failed
        )
        if after.action == "stop":
            actions[-1] = "stop"
            break
    return actions


def _position(actions: list[str], wanted: tuple[str, ...], start: int) -> int | None:
    """1-based position from the call at `start` of the first action in `wanted`."""
    for i, action in enumerate(actions):
        if action in wanted:
            return None if i < start else i - start + 1
    return None


def test_the_guard_with_no_config_is_the_recommended_profile() -> None:
    assert lw.LoopGuard().config == lw.resolve_config({"profile": "recommended"})


@pytest.mark.parametrize("scenario", _of(ds.BULK), ids=lambda s: s.name)
def test_healthy_bulk_work_is_never_blocked(scenario: ds.Scenario) -> None:
    actions = replay(scenario.calls)
    assert "block" not in actions and "stop" not in actions, actions


# An editor's old_str retried with another indentation is quoted with its leading spaces
# (`    x` against `x`): core/failures.py masks the value whole as well as stripped.
_STUCK = [pytest.param(s, id=s.name) for s in _of(ds.STUCK)]


@pytest.mark.parametrize("scenario", _STUCK)
def test_stuck_is_blocked_by_the_fifth_call_and_stopped_by_the_eighth(
    scenario: ds.Scenario,
) -> None:
    actions = replay(scenario.calls)
    block = _position(actions, ("block", "stop"), scenario.start)
    stop = _position(actions, ("stop",), scenario.start)
    assert block is not None and block <= 5, actions
    assert stop is not None and stop <= 8, actions


@pytest.mark.parametrize("scenario", _of(ds.SURVEY), ids=lambda s: s.name)
def test_a_survey_is_never_blocked(scenario: ds.Scenario) -> None:
    actions = replay(scenario.calls)
    assert "block" not in actions and "stop" not in actions, actions

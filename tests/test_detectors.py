"""Detection: every rule of the table, the measurements, the switches."""

from __future__ import annotations

from typing import Any

import pytest

import loopwarden as lw

SMALL = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 7,
    "unknownToolThreshold": 3,
}
ALL_OFF = {"genericRepeat": False, "knownPollNoProgress": False, "pingPong": False}
EXEC = ("exec", {"command": "make"})
READ_A = ("read", {"path": "a.py"})
READ_B = ("read", {"path": "b.py"})
POLL = ("process", {"action": "poll", "sessionId": "s1"})


def config(**changes: Any) -> dict[str, Any]:
    return {**SMALL, **changes}


def step(
    state: lw.SessionState, tool_params: tuple[str, Any], cfg: dict[str, Any], **outcome: Any
) -> None:
    """One call that runs: recorded, then its outcome (if any) attached."""
    lw.record_call(state, *tool_params, config=cfg)
    if outcome:
        lw.record_outcome(state, *tool_params, config=cfg, **outcome)


def repeat(
    tool_params: tuple[str, Any], times: int, cfg: dict[str, Any], **outcome: Any
) -> lw.SessionState:
    state = lw.SessionState()
    for _ in range(times):
        step(state, tool_params, cfg, **outcome)
    return state


def sig(tool_params: tuple[str, Any]) -> str:
    return lw.hash_tool_call(*tool_params)


def result_hash(tool_params: tuple[str, Any], **outcome: Any) -> str:
    value = lw.hash_tool_outcome(*tool_params, **outcome)[0]
    assert value is not None
    return value


# -- enabled: three values ----------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [None, False, "yes", 1])
def test_detection_runs_only_when_enabled_is_exactly_true(enabled: object) -> None:
    cfg = config(enabled=enabled)
    state = repeat(EXEC, 10, config(), result="same")
    assert lw.detect(state, *EXEC, cfg) == lw.Verdict()
    assert lw.detect(state, *EXEC, config()).stuck


def test_calls_are_recorded_when_enabled_is_absent() -> None:
    state = repeat(EXEC, 4, {k: v for k, v in SMALL.items() if k != "enabled"}, result="x")
    assert len(state.history) == 4
    assert lw.detect(state, *EXEC, config()).stuck  # switching it on later sees them


# -- rule 1: unknown tool -----------------------------------------------------------------------


def test_unknown_tool_repeat_blocks_at_the_threshold_whatever_the_switches() -> None:
    cfg = config(detectors=ALL_OFF)
    weather = ("weather", {"city": "Oslo"})
    state = repeat(weather, 2, cfg, error="Unknown tool: Weather")
    assert not lw.detect(state, *weather, cfg).stuck
    step(state, weather, cfg, error="Unknown tool: Weather")
    verdict = lw.detect(state, *weather, cfg)
    assert verdict == lw.Verdict(
        True,
        "critical",
        "unknown_tool_repeat",
        3,
        "CRITICAL: attempted unavailable tool weather 3 times. "
        "Stop retrying that missing tool and answer without it.",
        None,
        "unknown-tool:weather:weather",
    )


def test_unknown_tool_streak_counts_other_arguments_but_stops_at_another_name() -> None:
    cfg = config(unknownToolThreshold=2)
    state = lw.SessionState()
    step(state, ("weather", {"city": "Oslo"}), cfg, error="Unknown tool: weather")
    step(state, ("weather", {"city": "Rome"}), cfg, error="Unknown tool: forecast")
    assert not lw.detect(state, "weather", {"city": "Paris"}, cfg).stuck
    step(state, ("weather", {"city": "Rome"}), cfg, error="Tool forecast not found")
    verdict = lw.detect(state, "weather", {"city": "Paris"}, cfg)
    assert (verdict.detector, verdict.count) == ("unknown_tool_repeat", 2)
    assert "unavailable tool forecast 2 times" in str(verdict.message)


def test_a_pending_call_breaks_the_unknown_tool_streak_until_its_outcome_arrives() -> None:
    cfg = config(unknownToolThreshold=3, detectors=ALL_OFF)
    weather = ("weather", {})
    state = repeat(weather, 2, cfg, error="Unknown tool: weather")
    lw.record_call(state, *weather, config=cfg)
    assert not lw.detect(state, *weather, cfg).stuck  # the newest record has no name yet
    lw.record_outcome(state, *weather, config=cfg, error="Unknown tool: weather")
    assert lw.detect(state, *weather, cfg).count == 3


# -- rule 2: global circuit breaker -------------------------------------------------------------


def test_global_circuit_breaker_blocks_identical_outcomes_whatever_the_switches() -> None:
    cfg = config(detectors=ALL_OFF)
    state = repeat(EXEC, 7, cfg, result="same")
    verdict = lw.detect(state, *EXEC, cfg)
    latest = result_hash(EXEC, result="same")
    assert verdict == lw.Verdict(
        True,
        "critical",
        "global_circuit_breaker",
        7,
        "CRITICAL: exec has repeated identical no-progress outcomes 7 times. Session "
        "execution blocked by global circuit breaker to prevent runaway loops.",
        None,
        f"global:exec:{sig(EXEC)}:{latest}",
    )


def test_no_progress_streak_skips_pending_records_and_stops_at_a_different_result() -> None:
    # Thresholds clamp upward (critical > warning, breaker > critical): 1 / 2 / 3.
    cfg = config(
        detectors=ALL_OFF, warningThreshold=1, criticalThreshold=2, globalCircuitBreakerThreshold=3
    )
    state = repeat(EXEC, 3, cfg, result="old")
    step(state, EXEC, cfg, result="new")
    step(state, EXEC, cfg)  # pending: skipped, not a stop
    step(state, EXEC, cfg, result="new")
    assert not lw.detect(state, *EXEC, cfg).stuck  # N = 2: "new", "new", then "old" stops
    step(state, EXEC, cfg, result="new")
    assert lw.detect(state, *EXEC, cfg).count == 3


def test_an_outcome_for_an_old_pending_call_can_cut_the_streak() -> None:
    cfg = config(
        detectors=ALL_OFF, warningThreshold=1, criticalThreshold=2, globalCircuitBreakerThreshold=4
    )
    state = lw.SessionState()
    lw.record_call(state, *EXEC, tool_call_id="slow", config=cfg)
    for i in range(4):
        lw.record_call(state, *EXEC, tool_call_id=f"c{i}", config=cfg)
        lw.record_outcome(state, *EXEC, tool_call_id=f"c{i}", result="same", config=cfg)
    assert lw.detect(state, *EXEC, cfg).count == 4
    lw.record_outcome(state, *EXEC, tool_call_id="slow", result="different", config=cfg)
    assert lw.detect(state, *EXEC, cfg).count == 4  # the oldest record: behind the streak
    lw.record_call(state, *EXEC, tool_call_id="mid", config=cfg)
    lw.record_call(state, *EXEC, tool_call_id="last", config=cfg)
    lw.record_outcome(state, *EXEC, tool_call_id="last", result="same", config=cfg)
    lw.record_outcome(state, *EXEC, tool_call_id="mid", result="different", config=cfg)
    assert not lw.detect(state, *EXEC, cfg).stuck  # N = 1: only "last" is newer than "mid"


# -- rules 3 and 4: known polling ---------------------------------------------------------------


@pytest.mark.parametrize(
    "poll", [POLL, ("process", {"action": "log"}), ("command_status", {"id": 1})]
)
def test_known_poll_warns_then_blocks_on_identical_outcomes(poll: tuple[str, Any]) -> None:
    cfg = config()
    state = repeat(poll, 3, cfg, result="running")
    warning = lw.detect(state, *poll, cfg)
    latest = result_hash(poll, result="running")
    assert warning == lw.Verdict(
        True,
        "warning",
        "known_poll_no_progress",
        3,
        f"WARNING: You have called {poll[0]} 3 times with identical arguments and no progress. "
        "Stop polling and either (1) increase wait time between checks, or (2) report the task "
        "as failed if the process is stuck.",
        None,
        f"poll:{poll[0]}:{sig(poll)}:{latest}",
    )
    for _ in range(2):
        step(state, poll, cfg, result="running")
    critical = lw.detect(state, *poll, cfg)
    assert (critical.level, critical.count) == ("critical", 5)
    assert critical.message == (
        f"CRITICAL: Called {poll[0]} with identical arguments and no progress 5 times. This "
        "appears to be a stuck polling loop. Session execution blocked to prevent resource waste."
    )


def test_polling_with_moving_output_is_not_stuck() -> None:
    cfg = config()
    state = lw.SessionState()
    for i in range(6):
        step(state, POLL, cfg, result=f"line {i}")
    assert not lw.detect(state, *POLL, cfg).stuck


def test_a_poll_is_never_a_generic_repeat_even_with_its_detector_off() -> None:
    cfg = config(detectors={"knownPollNoProgress": False})
    state = repeat(POLL, 6, cfg, result="running")
    assert not lw.detect(state, *POLL, cfg).stuck


def test_process_with_another_action_is_not_a_poll() -> None:
    cfg = config()
    kill = ("process", {"action": "kill"})
    verdict = lw.detect(repeat(kill, 5, cfg, result="ok"), *kill, cfg)
    assert verdict.detector == "generic_repeat"


# -- rules 5 and 6: ping-pong -------------------------------------------------------------------


def alternate(times: int, cfg: dict[str, Any], results: tuple[Any, Any]) -> lw.SessionState:
    state = lw.SessionState()
    for i in range(times):
        if i % 2 == 0:
            step(state, READ_A, cfg, result=results[0])
        else:
            step(state, READ_B, cfg, result=results[1])
    return state


def test_ping_pong_warns_when_the_call_would_extend_the_alternation() -> None:
    cfg = config(warningThreshold=4, criticalThreshold=6, globalCircuitBreakerThreshold=99)
    state = alternate(3, cfg, ("a1", "b1"))  # A B A: the next call B makes 4
    verdict = lw.detect(state, *READ_B, cfg)
    pair = "|".join(sorted([sig(READ_A), sig(READ_B)]))
    assert verdict == lw.Verdict(
        True,
        "warning",
        "ping_pong",
        4,
        "WARNING: You are alternating between repeated tool-call patterns (4 consecutive "
        "calls). This looks like a ping-pong loop; stop retrying and report the task as failed.",
        "read",
        f"pingpong:{pair}",
    )
    assert not lw.detect(state, *READ_A, cfg).stuck  # A would not extend the tail


def test_ping_pong_blocks_only_with_no_progress_evidence() -> None:
    cfg = config(warningThreshold=3, criticalThreshold=5, globalCircuitBreakerThreshold=99)
    stuck = alternate(4, cfg, ("same a", "same b"))
    verdict = lw.detect(stuck, *READ_A, cfg)
    assert (verdict.level, verdict.count) == ("critical", 5)
    assert verdict.message == (
        "CRITICAL: You are alternating between repeated tool-call patterns (5 consecutive calls) "
        "with no progress. This appears to be a stuck ping-pong loop. Session execution blocked "
        "to prevent resource waste."
    )
    moving = lw.SessionState()
    for i in range(4):
        step(moving, READ_A if i % 2 == 0 else READ_B, cfg, result=f"content {i}")
    assert lw.detect(moving, *READ_A, cfg).level == "warning"


def test_a_pending_record_in_the_tail_removes_the_evidence_until_its_outcome() -> None:
    cfg = config(warningThreshold=3, criticalThreshold=5, globalCircuitBreakerThreshold=99)
    state = alternate(3, cfg, ("a", "b"))
    lw.record_call(state, *READ_B, config=cfg)  # B pending
    assert lw.detect(state, *READ_A, cfg).level == "warning"
    lw.record_outcome(state, *READ_B, config=cfg, result="b")
    assert lw.detect(state, *READ_A, cfg).level == "critical"


def test_eviction_shortens_the_ping_pong_tail() -> None:
    cfg = config(historySize=4, warningThreshold=5, criticalThreshold=9)
    state = alternate(6, cfg, ("a", "b"))  # only the newest 4 remain: tail 4, P 5
    assert lw.detect(state, *READ_A, cfg).count == 5
    assert lw.detect(state, *READ_A, config(historySize=4, warningThreshold=6)).stuck is False


def test_ping_pong_switch_off() -> None:
    cfg = config(detectors={"pingPong": False}, warningThreshold=3)
    assert not lw.detect(alternate(4, cfg, ("a", "b")), *READ_A, cfg).stuck


# -- rules 7 and 8: generic repeat --------------------------------------------------------------


def test_generic_repeat_warns_on_repeated_arguments_whatever_the_outcomes() -> None:
    cfg = config()
    state = lw.SessionState()
    for i in range(3):
        step(state, EXEC, cfg, result=f"different {i}")
    assert lw.detect(state, *EXEC, cfg) == lw.Verdict(
        True,
        "warning",
        "generic_repeat",
        3,
        "WARNING: You have called exec 3 times with identical arguments. If this is not making "
        "progress, stop retrying and report the task as failed.",
        None,
        f"generic:exec:{sig(EXEC)}",
    )


def test_generic_repeat_counts_pending_calls_too() -> None:
    cfg = config()
    assert lw.detect(repeat(EXEC, 3, cfg), *EXEC, cfg).count == 3


def test_generic_repeat_blocks_identical_outcomes_at_the_critical_threshold() -> None:
    cfg = config()
    verdict = lw.detect(repeat(EXEC, 5, cfg, result="same"), *EXEC, cfg)
    latest = result_hash(EXEC, result="same")
    assert verdict == lw.Verdict(
        True,
        "critical",
        "generic_repeat",
        5,
        "CRITICAL: Called exec with identical arguments and identical outcomes 5 times. "
        "Session execution blocked to prevent runaway loops.",
        None,
        f"generic:exec:{sig(EXEC)}:{latest}",
    )


def test_generic_repeat_switch_off_leaves_only_the_breaker() -> None:
    cfg = config(detectors={"genericRepeat": False})
    state = repeat(EXEC, 6, cfg, result="same")
    assert not lw.detect(state, *EXEC, cfg).stuck
    step(state, EXEC, cfg, result="same")
    assert lw.detect(state, *EXEC, cfg).detector == "global_circuit_breaker"


def test_other_arguments_are_another_signature() -> None:
    cfg = config()
    state = repeat(EXEC, 5, cfg, result="same")
    assert not lw.detect(state, "exec", {"command": "make test"}, cfg).stuck


# -- scoping and the rule order -----------------------------------------------------------------


def test_detection_sees_only_the_calls_of_its_own_run() -> None:
    cfg = config()
    state = lw.SessionState()
    for _ in range(5):
        lw.record_call(state, *EXEC, config=cfg, run_id="cron")
        lw.record_outcome(state, *EXEC, config=cfg, run_id="cron", result="same")
    assert lw.detect(state, *EXEC, cfg, run_id=" cron ").level == "critical"
    assert not lw.detect(state, *EXEC, cfg, run_id="heartbeat").stuck
    assert not lw.detect(state, *EXEC, cfg).stuck  # unscoped: records without a run only
    assert not lw.detect(state, *EXEC, cfg, run_id="  ").stuck  # blank = no run


def test_the_first_rule_that_holds_wins() -> None:
    cfg = config(
        warningThreshold=3,
        criticalThreshold=4,
        globalCircuitBreakerThreshold=5,
        unknownToolThreshold=5,
    )
    state = repeat(EXEC, 5, cfg, error="Unknown tool: exec")
    # U = 5 and N = 5 both hold: rule 1 comes first.
    assert lw.detect(state, *EXEC, cfg).detector == "unknown_tool_repeat"
    state = repeat(EXEC, 5, cfg, result="same")
    assert lw.detect(state, *EXEC, cfg).detector == "global_circuit_breaker"


def test_a_tool_declared_as_polling_is_judged_as_a_poll() -> None:
    cfg = config(toolPolicies={"read_output": {"poll": True}})
    read_output = ("read_output", {"id": 1})
    verdict = lw.detect(repeat(read_output, 3, cfg, result="still running"), *read_output, cfg)
    assert (verdict.detector, verdict.count) == ("known_poll_no_progress", 3)
    plain = lw.detect(
        repeat(read_output, 3, config(), result="still running"), *read_output, config()
    )
    assert plain.detector == "generic_repeat"

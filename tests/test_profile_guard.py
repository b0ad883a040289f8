"""The recommended profile through LoopGuard: every feature, and that it stays opt-in."""

from __future__ import annotations

from typing import Any

import loopwarden as lw

RECOMMENDED = {"profile": "recommended"}


def run_calls(guard: lw.LoopGuard, calls: list[tuple[str, Any, Any]], run: str = "r") -> list[str]:
    """Replay (tool, params, result) calls live; return each call's final action."""
    actions = []
    for tool, params, result in calls:
        before = guard.before_tool_call("s", tool, params, run_id=run)
        if before.action in ("block", "stop"):
            actions.append(before.action)
            continue
        after = guard.after_tool_call("s", tool, params, result=result, run_id=run)
        actions.append("stop" if after.action == "stop" else before.action)
    return actions


def bash(cmd: str, out: str) -> tuple[str, Any, Any]:
    return ("bash", {"command": cmd}, out)


def test_recommended_blocks_the_fifth_identical_call_then_stops_at_the_second_block() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    actions = run_calls(guard, [bash("cd fastjson/", "No such file or directory")] * 8)
    assert actions == ["allow", "allow", "allow", "warn", "block", "stop", "stop", "stop"]
    record = guard.end_run("s", "r")
    assert record is not None and record.outcome == "stopped"
    # The blocked 5th call was recorded as a veto (countBlockedCalls), so the streak is now 5.
    assert record.stop_reason is not None and "5 times in a row" in record.stop_reason
    assert [e.action for e in guard.run_record("s", "r")] == ["warn", "block", "stop"]


def test_stop_decisions_carry_a_catchable_error() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    run_calls(guard, [bash("ls x", "ls: x: not found")] * 5)
    decision = guard.before_tool_call("s", "bash", {"command": "ls x"}, run_id="r")
    assert decision.action == "stop" and isinstance(decision.error, lw.LoopStoppedError)
    assert decision.error.detector == "consecutive_repeat"
    assert decision.blocked_result is not None
    later = guard.before_tool_call("s", "read", {"path": "y"}, run_id="r")
    assert later.action == "stop" and later.message == decision.message


def test_volatile_line_numbers_do_not_hide_the_loop() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    calls = [
        bash("javac Main.java", f"/bin/bash: line {62275 + i}: javac: command not found")
        for i in range(6)
    ]
    assert run_calls(guard, calls)[4] == "block"
    plain = lw.LoopGuard({"enabled": True, "criticalThreshold": 4, "warningThreshold": 3})
    assert "block" not in run_calls(plain, calls)


def test_each_feature_has_its_own_key() -> None:
    only_norm = lw.LoopGuard(
        {"enabled": True, "normalizeVolatile": True, "warningThreshold": 2, "criticalThreshold": 3}
    )
    calls = [bash("date", f"Mon Nov 30 00:0{i}:10 UTC 2026") for i in range(5)]
    assert run_calls(only_norm, calls) == ["allow", "allow", "warn", "block", "block"]


def test_blocked_retries_count_toward_the_breaker() -> None:
    config = {
        "enabled": True,
        "warningThreshold": 2,
        "criticalThreshold": 3,
        "globalCircuitBreakerThreshold": 6,
        "countBlockedCalls": True,
    }
    guard = lw.LoopGuard(config)
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    run_calls(guard, [bash("make", "error 2")] * 8)
    detectors = [e.detector for e in events if e.action == "block"]
    assert detectors == ["generic_repeat"] * 3 + ["global_circuit_breaker"] * 2
    without = lw.LoopGuard({**config, "countBlockedCalls": False})
    without_events: list[lw.LoopEvent] = []
    without.subscribe(without_events.append)
    run_calls(without, [bash("make", "error 2")] * 8)
    assert {e.detector for e in without_events if e.action == "block"} == {"generic_repeat"}


def test_breaker_stops_the_run_when_stop_after_blocks_is_on() -> None:
    config = {
        "enabled": True,
        "warningThreshold": 2,
        "criticalThreshold": 3,
        "globalCircuitBreakerThreshold": 4,
        "countBlockedCalls": True,
        "stopAfterBlocks": 10,
    }
    guard = lw.LoopGuard(config)
    assert run_calls(guard, [bash("make", "error 2")] * 6) == [
        "allow",
        "allow",
        "warn",
        "block",
        "stop",
        "stop",
    ]
    decision = guard.before_tool_call("s", "bash", {"command": "other"}, run_id="r")
    assert decision.action == "stop"


def test_a_rephrased_doomed_call_is_stopped_whatever_the_arguments() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    calls = [
        (
            "run",
            {"cmd": f"javac {flag} A.java"},
            {"isError": True, "content": [{"type": "text", "text": "javac: command not found"}]},
        )
        for flag in "abcdefghi"
    ]
    actions = run_calls(guard, calls)
    n = guard.config.repeated_error_threshold  # failures in a row before the next is blocked
    assert actions[: n + 1] == ["allow"] * n + ["block"]


def test_successes_with_identical_output_are_not_errors() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    calls = [
        bash(f"sed -i 's/a{i}/b/' f.py", "<returncode>0</returncode>\n<output>\n</output>")
        for i in range(10)
    ]
    assert set(run_calls(guard, calls)) == {"allow"}


def test_a_three_call_cycle_is_blocked() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    cycle = [
        ("read", {"p": "c.yaml"}, "port: 80"),
        ("edit", {"p": "c.yaml"}, "Error: no match"),
        ("bash", {"command": "deploy"}, "port 80 in use"),
    ] * 4
    actions = run_calls(guard, cycle)
    # The call that makes `criticalThreshold` consecutive calls of the cycle is blocked.
    assert "block" in actions and actions.index("block") == guard.config.critical_threshold - 1


def test_paging_with_new_content_is_never_blocked() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    pages = [("scroll_down", {}, f"lines {100 * i}-{100 * i + 99}") for i in range(20)]
    actions = run_calls(guard, pages)
    assert "block" not in actions and "stop" not in actions
    assert actions.index("warn") == 3  # told once it has paged 3 times in a row


def test_tool_policies_poll_exempt_and_own_thresholds() -> None:
    poll = {"content": [{"type": "text", "text": "still running"}]}
    policies = {
        "read_output": {"poll": True},
        "heartbeat": {"exempt": True},
        "search": {"warningThreshold": 2, "criticalThreshold": 3},
    }
    guard = lw.LoopGuard({**RECOMMENDED, "toolPolicies": policies})
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    run_calls(guard, [("read_output", {"id": 1}, poll)] * 9, run="p")
    assert {e.detector for e in guard.run_record("s", "p")} == {"known_poll_no_progress"}
    assert set(run_calls(guard, [("heartbeat", {}, "ok")] * 12, run="h")) == {"allow"}
    actions = run_calls(guard, [("search", {"q": "x"}, f"hit {i}") for i in range(5)], run="q")
    assert actions[:3] == ["allow", "allow", "warn"]


def test_the_openclaw_profile_has_none_of_it() -> None:
    guard = lw.LoopGuard({"enabled": True})
    actions = run_calls(guard, [bash("cd fastjson/", "No such file or directory")] * 12)
    assert actions.count("block") == 0 and actions.count("stop") == 0
    assert actions[10] == "warn"  # OpenClaw warns when 10 identical calls are in the history

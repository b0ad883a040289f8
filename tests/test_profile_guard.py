"""The recommended profile through LoopGuard: every feature, and that it stays opt-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import loopwarden as lw

from _support import run_calls

RECOMMENDED = {"profile": "recommended"}


def bash(cmd: str, out: str) -> tuple[str, Any, Any]:
    return ("bash", {"command": cmd}, out)


def test_recommended_blocks_the_fourth_identical_call_then_stops_at_the_second_block() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    actions = run_calls(guard, [bash("cd fastjson/", "No such file or directory")] * 8)
    assert actions == ["allow", "allow", "warn", "block", "stop", "stop", "stop", "stop"]
    record = guard.end_run("s", "r")
    assert record is not None and record.outcome == "stopped"
    # The blocked 4th call was recorded as a veto (countBlockedCalls), so the streak is now 4.
    assert record.stop_reason is not None and "4 times in a row" in record.stop_reason
    assert [e.action for e in guard.run_record("s", "r")] == ["warn", "block", "stop"]


def test_a_config_assigned_later_takes_effect_whole() -> None:
    # What the guard derives from its config (the extra detectors, the volatile-value masking)
    # follows an assigned config: the proxy assigns one when a server lists its tools.
    guard = lw.LoopGuard({"enabled": True})
    guard.config = lw.resolve_config(RECOMMENDED)
    calls = [bash("make", f"failed at 12:01:0{second}") for second in range(4)]
    assert run_calls(guard, calls) == ["allow", "allow", "warn", "block"]
    guard.config = lw.resolve_config({"enabled": True})
    assert run_calls(guard, [bash("make", "failed")] * 4, run="r2") == ["allow"] * 4


def test_stop_decisions_carry_a_catchable_error() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    run_calls(guard, [bash("ls x", "ls: x: not found")] * 4)
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
    assert run_calls(guard, calls)[3] == "block"
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
    # The repeated-error detector alone (the same-outcome one, which blocks earlier, is off).
    guard = lw.LoopGuard({**RECOMMENDED, "detectors": {"sameOutcome": False}})
    assert guard.config.detectors.repeated_error and guard.config.detectors.cycle
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


def _swe_agent_edit(path: Path, line: int, replacement: list[str]) -> str:
    """SWE-agent's `edit line:line`: rewrite one line of a real file, then show the file as
    SWE-agent does (its line count, a 100-line window around the edit)."""
    lines = path.read_text().splitlines()
    lines[line - 1 : line] = replacement
    path.write_text("\n".join(lines) + "\n")
    first, last = max(0, line - 50), min(len(lines), max(line + 50, 50))
    window = [f"{n + 1}:{lines[n]}" for n in range(first, last)]
    below = max(0, len(lines) - line - 50)
    return "\n".join(
        [f"[File: {path} ({len(lines)} lines total)]", f"({first} more lines above)", *window]
        + ([f"({below} more lines below)"] if below else [])
        + ["File updated. Please review the changes and make sure they are correct."]
    )


def test_the_same_edit_reapplied_is_blocked_though_the_line_count_grows(tmp_path: Path) -> None:
    source = tmp_path / "Main.java"
    source.write_text("".join(f"    int field{n} = {n};\n" for n in range(107)))
    added = [f"    // added {n}" for n in range(13)]
    command = "edit 100:100\n    int field99 = 99;\n" + "\n".join(added) + "\nend_of_edit"
    guard = lw.LoopGuard(RECOMMENDED)
    results, actions = [], []
    for _ in range(20):
        before = guard.before_tool_call("s", "edit", {"command": command}, run_id="r")
        actions.append(before.action)
        if before.action in ("block", "stop"):
            continue
        result = _swe_agent_edit(source, 100, ["    int field99 = 99;", *added])
        results.append(result)
        guard.after_tool_call("s", "edit", {"command": command}, result=result, run_id="r")
    # Each result differs from the one before (the counts grow), so a plain hash sees progress;
    # the plain openclaw rules let every one of the 20 edits run.
    assert len(set(results)) == len(results)
    assert "(120 lines total)" in results[0] and "(133 lines total)" in results[1]
    # Until the 50 window lines below the edit are all copies (4 edits of 13 lines), the window
    # shows new text; from the 4th result on only numbers change, and after `critical` such
    # results in a row the next edit is blocked.
    critical = lw.resolve_config(RECOMMENDED).consecutive_critical_threshold
    assert actions.index("block") == len(results) == 3 + critical
    assert source.read_text().count("// added 0") == len(results)


def test_paging_and_a_moving_poll_stay_unblocked(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    guard = lw.LoopGuard(RECOMMENDED)
    actions = []
    for step in range(40):
        log.write_text(f"step {step * 50}/2000 loss {1 / (step + 1):.4f}\n")
        params = {"command": f"tail -n 1 {log}"}
        before = guard.before_tool_call("s", "bash", params, run_id="r")
        actions.append(before.action)
        guard.after_tool_call("s", "bash", params, result=log.read_text(), run_id="r")
    assert "block" not in actions and "stop" not in actions


def test_a_silent_no_op_gets_a_fourth_try_but_not_a_fifth() -> None:
    # The real corpus's resolved run: `sed -i 's/x/x/' f` (no output) four times in a row.
    silent = "<returncode>0</returncode>\n<output>\n</output>"
    sed = bash("sed -i 's/return mmsubsup/return mmsubsup/' mathml.py", silent)
    assert run_calls(lw.LoopGuard(RECOMMENDED), [sed] * 4) == ["allow"] * 3 + ["warn"]
    assert run_calls(lw.LoopGuard(RECOMMENDED), [sed] * 5)[4] == "block"
    # The same command failing the same way gives no such grace.
    failing = bash("sed -i 's/a/b/' gone.py", "<returncode>2</returncode>\n<output>\n</output>")
    assert run_calls(lw.LoopGuard(RECOMMENDED), [failing] * 4)[3] == "block"

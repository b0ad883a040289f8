"""The recommended profile's extra detectors, as pure functions over records."""

from __future__ import annotations

import loopwarden as lw
from loopwarden.core.config import ResolvedConfig
from loopwarden.core.detectors import NOT_STUCK, Verdict
from loopwarden.core.failures import is_failure
from loopwarden.core.patterns import (
    LAST_CHANCE_PREFIX,
    SILENT_RESULT,
    SILENT_RESULT_HASH,
    ErrorStreak,
    comparable_outcome,
    consecutive_repeat,
    cycle,
    detector_limits,
    is_edit_call,
    is_silent,
    mask_numbers,
    next_error_streak,
    with_extra_verdicts,
)
from loopwarden.core.tool_call import ToolCallRecord

CFG = lw.resolve_config({"profile": "recommended"})


def rec(sig: str, result: str | None = "r") -> ToolCallRecord:
    return ToolCallRecord(sig.split(":")[0], sig, result_hash=result)


def newest_first(*records: ToolCallRecord) -> list[ToolCallRecord]:
    return list(reversed(records))


def verdict_of(
    tail: list[ToolCallRecord],
    tool: str,
    signature: str,
    poll: bool,
    error_streak: ErrorStreak | None,
    cfg: ResolvedConfig,
) -> Verdict:
    """The extra detectors' strongest verdict for the next call, as the live path asks it:
    OpenClaw's detectors found nothing, no call in flight, no streak kept beyond ``tail``."""
    call = (tool, signature, poll)
    limits = detector_limits(cfg)
    return with_extra_verdicts(NOT_STUCK, tail, call, error_streak, limits, 0, None, None)


def test_consecutive_counts_calls_and_the_identical_result_streak() -> None:
    tail = newest_first(rec("a:1", "x"), rec("a:1", "y"), rec("a:1", "y"), rec("a:1", "y"))
    c = consecutive_repeat(tail, "a:1")
    assert (c.calls, c.identical, c.result_hash) == (4, 3, "y")


def test_anything_in_between_breaks_a_consecutive_run() -> None:
    tail = newest_first(rec("a:1"), rec("a:1"), rec("b:2"), rec("a:1"))
    assert consecutive_repeat(tail, "a:1").calls == 1


def test_pending_records_count_as_calls_but_not_as_results() -> None:
    tail = newest_first(rec("a:1", "x"), rec("a:1", None), rec("a:1", "x"))
    c = consecutive_repeat(tail, "a:1")
    assert (c.calls, c.identical) == (3, 2)


def test_three_identical_results_in_a_row_block_the_fourth_call() -> None:
    tail = newest_first(*(rec("bash:cd", "same") for _ in range(3)))
    verdict = verdict_of(tail, "bash", "bash:cd", False, None, CFG)
    assert (verdict.level, verdict.detector, verdict.count) == ("critical", "consecutive_repeat", 3)
    two = verdict_of(tail[:2], "bash", "bash:cd", False, None, CFG)
    assert (two.level, two.count) == ("warning", 2)  # the last chance before the block
    assert str(two.warning_key).startswith(LAST_CHANCE_PREFIX)


def test_a_call_that_says_nothing_gets_one_more_try() -> None:
    silent = newest_first(*(rec("bash:sed", SILENT_RESULT_HASH) for _ in range(3)))
    verdict = verdict_of(silent, "bash", "bash:sed", False, None, CFG)
    assert verdict.level == "warning"
    silent = [rec("bash:sed", SILENT_RESULT_HASH), *silent]
    verdict = verdict_of(silent, "bash", "bash:sed", False, None, CFG)
    assert (verdict.level, verdict.count) == ("critical", CFG.silent_threshold)


def test_the_silent_threshold_never_undercuts_the_critical_one() -> None:
    cfg = lw.resolve_config({"profile": "recommended", "consecutiveCriticalThreshold": 6})
    assert cfg.silent_threshold == 6
    cfg = lw.resolve_config({"enabled": True, "consecutiveSilentThreshold": 9})
    assert cfg.silent_threshold == 9 and cfg.to_camel()["consecutiveSilentThreshold"] == 9


def test_paging_with_new_content_only_warns_until_the_runaway_threshold() -> None:
    runaway = CFG.consecutive_any_result_threshold
    tail = newest_first(*(rec("scroll:down", f"page {i}") for i in range(runaway - 1)))
    verdict = verdict_of(tail, "scroll", "scroll:down", False, None, CFG)
    assert verdict.level == "warning"
    tail = newest_first(*(rec("scroll:down", f"page {i}") for i in range(runaway)))
    verdict = verdict_of(tail, "scroll", "scroll:down", False, None, CFG)
    assert (verdict.level, verdict.count) == ("critical", runaway)


def test_polling_tools_are_left_to_the_poll_detector() -> None:
    tail = newest_first(*(rec("process:poll", "same") for _ in range(6)))
    assert not verdict_of(tail, "process", "process:poll", True, None, CFG).stuck


def test_a_three_call_cycle_with_stable_results_is_found() -> None:
    calls = [rec("a:1", "ra"), rec("b:2", "rb"), rec("c:3", "rc")] * 3
    tail = newest_first(*calls)
    found = cycle(tail, "a:1", 2, 4)
    assert (found.period, found.count, found.no_progress) == (3, 10, True)
    verdict = verdict_of(tail, "a", "a:1", False, None, CFG)
    assert (verdict.detector, verdict.level, verdict.count) == ("cycle", "critical", 10)


def test_a_cycle_whose_results_move_only_warns() -> None:
    calls = [
        rec("a:1", f"ra{i}") if i % 3 == 0 else rec(f"{'bc'[i % 3 - 1]}:{i % 3 + 1}")
        for i in range(9)
    ]
    found = cycle(newest_first(*calls), "a:1", 2, 4)
    assert found.period == 3 and not found.no_progress
    verdict = verdict_of(newest_first(*calls), "a", "a:1", False, None, CFG)
    assert verdict.level == "warning"


def test_the_next_call_must_continue_the_cycle() -> None:
    calls = [rec("a:1"), rec("b:2"), rec("c:3")] * 3
    assert cycle(newest_first(*calls), "b:2", 2, 4).count == 0


def test_a_repeated_single_call_is_not_a_cycle() -> None:
    assert cycle(newest_first(*(rec("a:1") for _ in range(9))), "a:1", 2, 4).count == 0


def test_breaker_counts_no_progress_pairs_too() -> None:
    pairs = CFG.global_circuit_breaker_threshold // 2  # 2 * pairs + 1 calls >= the breaker
    calls = [rec("a:1", "ra"), rec("b:2", "rb")] * pairs
    verdict = verdict_of(newest_first(*calls), "a", "a:1", False, None, CFG)
    assert (verdict.detector, verdict.count) == ("global_circuit_breaker", 2 * pairs + 1)


def test_error_streak_follows_one_tool_and_one_failure() -> None:
    streak = None
    for _ in range(3):
        streak = next_error_streak(streak, "bash", "h1", True)
    assert streak == ErrorStreak("bash", "h1", 3)
    assert next_error_streak(streak, "bash", "h2", True) == ErrorStreak("bash", "h2", 1)
    assert next_error_streak(streak, "bash", "h1", False) is None
    assert next_error_streak(streak, "read", "h1", True) == ErrorStreak("read", "h1", 1)


def test_repeated_error_blocks_whatever_the_arguments() -> None:
    n = CFG.repeated_error_threshold
    assert not verdict_of([], "bash", "bash:x", False, ErrorStreak("bash", "h", n - 1), CFG).stuck
    streak = ErrorStreak("bash", "h", n)
    verdict = verdict_of([], "bash", "bash:new-args", False, streak, CFG)
    assert (verdict.detector, verdict.count) == ("repeated_error", n)
    assert not verdict_of([], "read", "read:x", False, streak, CFG).stuck


def test_failure_signals() -> None:
    assert is_failure("ok", "boom")
    assert is_failure("Error: flight not found", lw.UNDEFINED)
    assert is_failure("<returncode>127</returncode>\n<output>bash: javac: not found", None)
    assert not is_failure("<returncode>0</returncode>\n<output></output>", None)
    assert is_failure({"isError": True, "content": []}, None)
    assert is_failure({"details": {"status": "completed", "exitCode": 2}}, None)
    assert is_failure({"details": {"status": "failed"}}, None)
    assert not is_failure({"details": {"status": "completed", "exitCode": 0}}, None)
    assert not is_failure(["Error"], None)
    assert is_failure("/bin/bash: line 62275: javac: command not found", None)
    assert is_failure("ls: cannot access 'x': No such file or directory", None)
    assert is_failure("Traceback (most recent call last):\n  File ...", None)
    assert not is_failure("found 3 matches for 'error' in 2 files", None)


def test_extra_detectors_are_off_in_the_openclaw_profile() -> None:
    default = lw.resolve_config({"enabled": True})
    tail = newest_first(*(rec("bash:cd", "same") for _ in range(9)))
    assert not verdict_of(
        tail, "bash", "bash:cd", False, ErrorStreak("bash", "x", 9), default
    ).stuck


def test_silent_results_are_those_that_say_nothing() -> None:
    for nothing in (
        None,
        "",
        "  \n",
        "<returncode>0</returncode>\n<output>\n</output>",
        "Your command ran successfully and did not produce any output.",
        {"content": [{"type": "text", "text": ""}]},
        {"content": [], "details": {"status": "completed", "exitCode": 0, "aggregated": ""}},
    ):
        assert is_silent(nothing), nothing
    for something in (
        "0",
        "<returncode>1</returncode>\n<output>\n</output>",
        "<returncode>0</returncode>\n<output>\nok\n</output>",
        {"content": [{"type": "text", "text": ""}], "isError": True},
        {"content": [{"type": "image", "data": "..."}]},
        {"content": [], "details": {"exitCode": 2}},
        {"content": [], "structuredContent": {"rows": 0}},
        {"status": "ok"},
        [],
    ):
        assert not is_silent(something), something


def test_edit_calls_are_the_file_changing_ones() -> None:
    assert is_edit_call("edit", {"command": "edit 4:4\nx\nend_of_edit"})
    assert is_edit_call("str_replace_editor", {"command": "insert", "path": "a.py"})
    assert not is_edit_call("str_replace_editor", {"command": "view", "path": "a.py"})
    assert not is_edit_call("str_replace_editor", "insert")
    assert not is_edit_call("scroll_down", {})
    assert not is_edit_call("bash", {"command": "sed -i s/a/b/ f"})


def test_numbers_are_masked_only_in_an_edit_result() -> None:
    grown = {"content": [{"type": "text", "text": "[File: a.py (120 lines total)]\n107:x"}]}
    masked = comparable_outcome("edit", {"command": "edit 107:107"}, grown, False)
    assert masked == {"content": [{"type": "text", "text": "[File: a.py (# lines total)]\n#:x"}]}
    assert mask_numbers(["a1b22", 3, None]) == ["a#b#", 3, None]
    assert comparable_outcome("open", {"path": "a.py"}, grown, False) is grown
    assert comparable_outcome("bash", {}, "<returncode>0</returncode><output></output>", False) == (
        SILENT_RESULT
    )
    # A failure is never silent, whatever its text says.
    assert comparable_outcome("bash", {}, "", True) == ""
    assert comparable_outcome("bash", {}, "  ", True) == "  "

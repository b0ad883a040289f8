"""The same outcome from different calls (``detectors.sameOutcome``, issue 22).

Stuck agents rephrase: the prose pasted into a shell command, an editor command's wrong
arguments, a view of a file they do not change. Each call differs, the result does not. These
tests replay real-shaped runs through a real ``LoopGuard`` with the recommended profile: the
stuck shapes are blocked by the 5th call of the stretch, the healthy shapes never are.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.core.patterns import (
    SILENT_RESULT,
    comparable_outcome,
    forms_stretch,
    mask_counters,
    next_outcome_streak,
    outcome_excerpt,
)
from loopwarden.store import GuardSession, restore_session, snapshot_session

from _support import data_path

RECOMMENDED: dict[str, Any] = {"profile": "recommended"}
Call = tuple[str, Any, Any]


def replay(guard: lw.LoopGuard, calls: list[Call], run: str = "r") -> list[lw.Decision]:
    """Each call's decision as the runtime sees it: the before decision, or the stop after."""
    decisions = []
    for tool, params, result in calls:
        before = guard.before_tool_call("s", tool, params, run_id=run)
        if before.action in ("block", "stop"):
            decisions.append(before)
            continue
        after = guard.after_tool_call("s", tool, params, result=result, run_id=run)
        decisions.append(after if after.action == "stop" else before)
    return decisions


def actions(decisions: list[lw.Decision]) -> list[str]:
    return [d.action for d in decisions]


def first_block(decisions: list[lw.Decision]) -> int | None:
    """1-based position of the first call that did not run."""
    for i, d in enumerate(decisions, 1):
        if d.action in ("block", "stop"):
            return i
    return None


def detectors(decisions: list[lw.Decision]) -> set[str]:
    return {str(d.verdict.detector) for d in decisions if d.verdict is not None}


def bash(command: str, output: str) -> Call:
    return ("bash", {"command": command}, output)


def mini(returncode: int, output: str) -> str:
    """A mini-swe-agent observation, as the real runs show it."""
    return f"<returncode>{returncode}</returncode>\n<output>\n{output}</output>"


# ---------------------------------------------------------------------------------------------
# Real-shaped stuck runs

# The real observation of mini-swe-agent django__django-15037, call 13: prose pasted into a
# command leaves a quote open. Rephrasing the prose moves only bash's line counter.
PASTED_PROSE = [
    "I'll check why the foreign key points at the wrong field",
    "Let's look at the inspectdb output again, it doesn't show the to_field",
    "Now I'm going to print the relations dict so we can see what's there",
    "The model's field is still wrong; I'll dump the constraints",
    "Maybe the introspection doesn't return the referenced column, let's see",
    "We're still not seeing it. I'll print get_relations directly",
]


def _prose_call(k: int, prose: str) -> Call:
    lines = ["cd /testbed", *(["# step"] * k), f'python -c "print(1)" # {prose}']
    opened = len(lines)  # bash reports the line the quote opened on, then the one after
    output = (
        f"bash: -c: line {opened}: unexpected EOF while looking for matching `'\"\n"
        f"bash: -c: line {opened + 1}: syntax error: unexpected end of file\n"
    )
    return bash("\n".join(lines), mini(2, output))


def test_prose_pasted_into_a_shell_command_is_blocked_by_the_fifth_call() -> None:
    calls = [_prose_call(k, prose) for k, prose in enumerate(PASTED_PROSE * 3)]
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert actions(decisions)[:6] == ["allow", "allow", "allow", "warn", "block", "allow"]
    assert decisions[4].verdict is not None and decisions[4].verdict.detector == "same_outcome"
    # The call after the block runs (a chance to change); the same error again ends the run.
    assert actions(decisions)[6] == "stop"


def test_dash_counts_lines_its_own_way_and_is_masked_too() -> None:
    calls = [
        bash(
            f"echo {prose}",
            mini(2, f"/bin/sh: {k + 1}: Syntax error: Unterminated quoted string\n"),
        )
        for k, prose in enumerate(PASTED_PROSE)
    ]
    assert first_block(replay(lw.LoopGuard(RECOMMENDED), calls)) == 5


# SWE-agent's `edit` prints its usage when the range is not its first argument (its
# tools/defaults.sh); agents reword the replacement text again and again.
USAGE = "Usage: edit <start_line>:<end_line>\n"


def test_an_editor_usage_message_to_reworded_edits_is_blocked_by_the_fifth_call() -> None:
    bodies = [
        "    return a / b",
        "    return a/b  # fixed",
        "    return float(a) / b",
        "  return a/b",
    ]
    calls = [
        ("edit", {"command": f"edit tests/missing_colon.py {n}:{n}\n{body}\nend_of_edit"}, USAGE)
        for n in (4, 5)
        for body in bodies
    ]
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert first_block(decisions) == 5
    assert "Usage: edit <start_line>:<end_line>" in str(decisions[4].message)


def _swe_agent_sample() -> list[Any]:
    from loopwarden.transcripts import read_transcripts

    path = data_path("samples", "swe-agent-0x__swe-agent__test-repo-i1.traj")
    return next(iter(read_transcripts(path))).calls


def test_navigation_returning_the_same_file_window_is_warned_never_blocked() -> None:
    # The real window SWE-agent showed for `open tests/missing_colon.py` (a 10-line file: every
    # `goto` and `open` of it shows the whole file again).
    window = next(c.result for c in _swe_agent_sample() if c.tool == "open")
    assert window.startswith("[File: ") and "(10 lines total)" in window
    moves = [("goto", {"command": f"goto {n}"}, window) for n in (1, 4, 8, 10, 2, 6)]
    calls = [("open", {"command": "open tests/missing_colon.py 4"}, window), *moves]
    # Each view succeeded: the same success from distinct calls is never blocked, but a result
    # that says more than an acknowledgement gets one warning at the 4th call.
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert first_block(decisions) is None
    assert actions(decisions) == ["allow"] * 3 + ["warn"] + ["allow"] * 3
    assert "same result" in str(decisions[3].message)


def test_edits_that_change_nothing_are_warned_never_blocked() -> None:
    edit = next(c for c in _swe_agent_sample() if c.tool == "edit")
    fixed = "def division(a: float, b: float) -> float:"
    ranges = ["4:4", "4:4", "3:4", "4:5", "4:4", "4:4"]  # the line as it already reads
    texts = [fixed, fixed + " ", fixed, fixed, f"{fixed}\n", fixed]
    calls = [
        ("edit", {"command": f"edit {r}\n{t}\nend_of_edit"}, edit.result)
        for r, t in zip(ranges, texts, strict=True)
    ]
    # Every edit succeeded ("File updated."): a success, however often, never blocks.
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert first_block(decisions) is None and actions(decisions)[3] == "warn"


def _corpus_run(name: str, trajectory: str) -> list[Call]:
    path = data_path("eval", name)
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if trajectory in line[:200]]
    return [
        (row["tool"], row["args"], row["result"]) for row in rows if row["trajectory"] == trajectory
    ]


def test_the_real_pylint_run_is_blocked_at_the_fifth_identical_error() -> None:
    # mini-swe-agent pylint-dev__pylint-8898 (not resolved): calls 44-48 are five pylint
    # invocations with other options, each getting the one same error output.
    calls = _corpus_run(
        "minisweagent_gemini3pro_verified.jsonl.gz", "mini-gemini3pro/pylint-dev__pylint-8898"
    )
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert first_block(decisions) == 48  # the 5th of calls 44-48
    assert decisions[46].action == "warn" and "failed the same way" in str(decisions[46].message)
    assert len({json.dumps(c[1]) for c in calls[43:48]}) == 5


# ---------------------------------------------------------------------------------------------
# Healthy shapes: never blocked


def _healthy(calls: list[Call]) -> None:
    decisions = replay(lw.LoopGuard(RECOMMENDED), calls)
    assert first_block(decisions) is None, actions(decisions)
    assert "same_outcome" not in detectors(decisions)


def test_a_long_streak_of_silent_setup_commands_is_healthy() -> None:
    commands = [
        "mkdir -p repro/pkg",
        "cat > repro/pkg/__init__.py <<'EOF'\nfrom .core import run\nEOF",
        "cat > repro/pkg/core.py <<'EOF'\ndef run():\n    return 1\nEOF",
        "touch repro/pkg/py.typed",
        "sed -i 's/return 1/return 2/' repro/pkg/core.py",
        "mkdir -p repro/tests",
        "cat > repro/tests/test_core.py <<'EOF'\nfrom pkg import run\nEOF",
        "sed -i '1i import sys' repro/tests/test_core.py",
        "touch repro/tests/__init__.py",
        "chmod +x repro/pkg/core.py",
    ]
    _healthy([bash(c, mini(0, "")) for c in commands])


def test_searches_that_find_nothing_a_few_times_are_healthy() -> None:
    patterns = ["parse_command_line_option", "def __setattr__", "Foobar", "Whatever", "_CACHE"]
    _healthy([bash(f'grep -rn "{p}" django', mini(1, "")) for p in patterns])
    dates = range(10, 18)
    _healthy(
        [("search_direct_flight", {"origin": "ATL", "date": f"2024-05-{d}"}, []) for d in dates]
    )


def test_reads_and_paging_that_return_new_text_are_healthy() -> None:
    pages = [
        ("scroll_down", {}, f"[File: big.py (4000 lines total)]\n{100 * k}:line {100 * k}")
        for k in range(30)
    ]
    _healthy(pages)


def test_edit_acknowledgements_in_a_row_are_healthy() -> None:
    # Gemini CLI's `replace` and Codex's `apply_patch` say that an edit worked, not what the
    # file now holds: successive edits of one file read alike.
    replaces = [
        (
            "replace",
            {"file_path": "/repo/src/app.py", "old_string": f"v{k}", "new_string": f"w{k}"},
            "Successfully modified file: /repo/src/app.py (1 replacements).",
        )
        for k in range(8)
    ]
    _healthy(replaces)
    patches = [
        (
            "apply_patch",
            {"input": f"*** Begin Patch\n*** Update File: app.py\n@@\n-{k}\n+{k + 1}"},
            "Success. Updated the following files:\nM app.py",
        )
        for k in range(8)
    ]
    _healthy(patches)


def test_a_test_rerun_after_each_edit_is_healthy() -> None:
    failure = mini(1, "FAILED tests/test_app.py::test_parse - AssertionError: 3 != 4\n1 failed\n")
    calls: list[Call] = []
    for k in range(8):
        calls.append(bash(f"sed -i 's/x = {k}/x = {k + 1}/' src/app.py", mini(0, "")))
        calls.append(bash("python -m pytest tests/test_app.py -x -q", failure))
    _healthy(calls)


def test_numbers_still_tell_results_apart() -> None:
    values = ["300.0", "75.0", "300.0", "75.0", "12.5", "300.0", "75.0"]
    _healthy([("calculator", {"expression": f"{v} * 1"}, v) for v in values])
    # A failure keeps its numbers too; only position counters are masked.
    a = comparable_outcome("calc", {}, "Error: expected 300.0, got 75.0", True)
    b = comparable_outcome("calc", {}, "Error: expected 300.0, got 12.5", True)
    assert a != b


# ---------------------------------------------------------------------------------------------
# What "the same outcome" means, piece by piece


def test_position_counters_are_masked_and_nothing_else() -> None:
    text = "Expecting ',' delimiter: line 1 column 45 (char 44)\n/bin/sh: 3: Syntax error"
    assert mask_counters(text) == (
        "Expecting ',' delimiter: line 1 column <n> (char <n>)\n/bin/sh: <line>: Syntax error"
    )
    assert mask_counters("columns 4, 300.0 != 75.0") == "columns 4, 300.0 != 75.0"
    # Only failures are masked: a successful result keeps every number.
    assert comparable_outcome("t", {}, "column 5", False) == "column 5"
    assert comparable_outcome("t", {}, "column 5", True) == "column <n>"


@pytest.mark.parametrize(
    ("tool", "params", "result", "failed", "counts"),
    [
        ("bash", {}, SILENT_RESULT, False, False),
        ("bash", {}, mini(1, ""), True, False),  # grep: no match
        ("search", {}, [], False, False),
        ("t", {}, {"content": [{"type": "text", "text": "  "}]}, True, False),
        ("replace", {}, "Successfully modified file: /a.py (1 replacements).", False, False),
        ("Write", {}, "File created successfully at: /a.py", False, False),
        ("edit", {}, USAGE, True, True),  # a usage message is a failure (core/failures.py)
        ("replace", {}, "Error: old_string not found", True, True),
        ("bash", {}, mini(2, "bash: syntax error\n"), True, True),
        # A short success acknowledges, whatever the tool: never a stretch.
        ("calculator", {}, "300.0", False, False),
        ("get_user", {}, {"user_id": "u1"}, False, False),
        ("send_email", {}, "Email sent.", False, False),
        ("bash", {}, "line\n" * 10, False, True),  # a longer output says something
    ],
)
def test_which_outcomes_can_form_a_stretch(
    tool: str, params: Any, result: Any, failed: bool, counts: bool
) -> None:
    assert forms_stretch(tool, params, result, lw.UNDEFINED, failed) is counts


def test_plain_objects_are_compared_whole() -> None:
    # An outcome hash reads only content/details; two different JSON objects returned as
    # results (tau-bench's tools) must not make a stretch.
    guard = lw.LoopGuard(RECOMMENDED)
    calls = [
        ("get_reservation_details", {"id": f"R{k}"}, {"id": f"R{k}", "legs": k}) for k in range(8)
    ]
    decisions = replay(guard, calls)
    assert first_block(decisions) is None and "same_outcome" not in detectors(decisions)


def test_the_stretch_is_constant_work_per_outcome() -> None:
    streak = None
    outcome = ({}, "out", lw.UNDEFINED, True)
    for k in range(1_000):
        streak = next_outcome_streak(streak, ("bash", f"bash:{k % 7}"), "h", outcome, 4)
    assert streak is not None and streak.length == 1_000 and streak.varied and not streak.mute
    assert streak.tools == ("bash",) and streak.excerpt == "out"
    assert next_outcome_streak(streak, ("bash", "x"), None, outcome, 4) is None
    # An outcome that says nothing makes a mute stretch, found out at its 2nd outcome.
    silent = ({}, SILENT_RESULT, lw.UNDEFINED, False)
    streak = None
    for k in range(6):
        streak = next_outcome_streak(streak, ("bash", f"bash:{k}"), "s", silent, 4)
    assert streak is not None and streak.mute and streak.length == 6


def test_the_excerpt_is_one_short_line() -> None:
    long = mini(2, "E" * 500 + "\nsecond line\n")
    excerpt = outcome_excerpt(long, lw.UNDEFINED)
    assert len(excerpt) == 80 and excerpt.endswith("…") and "<returncode>" not in excerpt


# ---------------------------------------------------------------------------------------------
# The guard: messages, records, other tools, config


def test_the_message_names_the_outcome_and_records_withhold_it() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    calls = [_prose_call(k, prose) for k, prose in enumerate(PASTED_PROSE * 2)]
    decisions = replay(guard, calls)
    warn, block = decisions[3], decisions[4]
    for decision in (warn, block):
        assert "changing the arguments has not helped" in str(decision.message)
        assert "unexpected EOF while looking for matching" in str(decision.message)
    assert "bash: -c: <line>: unexpected EOF" in str(block.message)  # the counter masked
    assert [e.action for e in events][:2] == ["warn", "block"]
    for event in events:
        assert "unexpected EOF" not in event.message and event.message.endswith("(withheld)")
    record = guard.end_run("s", "r")
    assert record is not None and record.stop_reason is not None
    assert "unexpected EOF" not in record.stop_reason


def test_a_tool_the_stretch_has_not_used_runs() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    replay(guard, [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE[:4])])
    other = guard.before_tool_call("s", "open", {"path": "django/db/models/fields.py"}, run_id="r")
    assert other.action == "allow"
    again = guard.before_tool_call("s", "bash", {"command": "echo 'x"}, run_id="r")
    assert again.action == "block"


def test_another_outcome_after_the_block_starts_afresh() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    calls = [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE[:5])]
    calls += [bash("cat setup.cfg", mini(0, "[metadata]\nname = x\n"))]
    calls += [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE[:3])]
    assert actions(replay(guard, calls)) == ["allow"] * 3 + ["warn", "block"] + ["allow"] * 4


def test_the_openclaw_profile_never_runs_it() -> None:
    for config in ({}, {"enabled": True}, {"profile": "openclaw", "enabled": True}):
        guard = lw.LoopGuard(config)
        assert not guard.config.detectors.same_outcome
        calls = [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE * 3)]
        decisions = replay(guard, calls)
        assert "same_outcome" not in detectors(decisions) and first_block(decisions) is None


def test_the_keys_resolve_validate_and_print() -> None:
    resolved = lw.resolve_config(RECOMMENDED)
    assert resolved.detectors.same_outcome and resolved.same_outcome_threshold == 4
    camel = resolved.to_camel()
    assert camel["detectors"]["sameOutcome"] is True and camel["sameOutcomeThreshold"] == 4
    own = lw.resolve_config({**RECOMMENDED, "sameOutcomeThreshold": 6})
    assert own.same_outcome_threshold == 6
    assert lw.resolve_config({"sameOutcomeThreshold": 0}).same_outcome_threshold == 4
    lw.validate_config({"detectors": {"sameOutcome": True}, "sameOutcomeThreshold": 5})
    with pytest.raises(lw.ConfigError) as caught:
        lw.validate_config(
            {
                "tools": {
                    "loopDetection": {
                        "detectors": {"sameOutcome": "yes"},
                        "sameOutcomeThreshold": 0,
                    }
                }
            }
        )
    text = str(caught.value)
    assert "tools.loopDetection.detectors.sameOutcome: must be true or false" in text
    assert "tools.loopDetection.sameOutcomeThreshold: must be a positive integer" in text


def test_a_higher_threshold_blocks_later() -> None:
    guard = lw.LoopGuard({**RECOMMENDED, "sameOutcomeThreshold": 6})
    calls = [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE * 2)]
    assert first_block(replay(guard, calls)) == 7


def test_the_stretch_survives_a_store_round_trip() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    replay(guard, [_prose_call(k, p) for k, p in enumerate(PASTED_PROSE[:4])])
    session = guard.store.peek("s")
    assert isinstance(session, GuardSession) and session.outcome_streaks
    stored = json.dumps(snapshot_session(session))
    restored = restore_session(json.loads(stored))
    # Everything but the excerpt: a stored session holds no piece of a result.
    assert restored.outcome_streaks == {
        run: streak._replace(excerpt="") for run, streak in session.outcome_streaks.items()
    }
    (excerpt,) = {streak.excerpt for streak in session.outcome_streaks.values()}
    assert excerpt and excerpt not in stored


# ---------------------------------------------------------------------------------------------
# Byte-identical calls whose results all differ (OpenClaw #112447: 62 `exec date` calls)


def test_identical_date_calls_are_identical_results_once_the_clock_is_masked() -> None:
    # `date` differs only in its clock time, a volatile span: to the recommended profile the
    # results are identical, so the 4th call is blocked.
    calls = [
        ("exec", {"command": "date"}, f"Tue Dec  1 22:{k // 60:02d}:{k % 60:02d} UTC 2026")
        for k in range(62)
    ]
    assert first_block(replay(lw.LoopGuard(RECOMMENDED), calls)) == 4


def test_identical_calls_with_ever_new_results_are_blocked_at_the_51st() -> None:
    # Results that really differ every time (a counter that moves): 50 run, the 51st is
    # blocked, although the profile's history holds only the newest 30 calls.
    calls = [
        ("exec", {"command": "cat /proc/loadavg"}, f"0.{k:02d} 0.20 0.18 1/{k + 90}")
        for k in range(62)
    ]
    guard = lw.LoopGuard(RECOMMENDED)
    assert guard.config.history_size < 50 <= guard.config.consecutive_any_result_threshold
    decisions = replay(guard, calls)
    assert first_block(decisions) == 51
    assert decisions[50].verdict is not None
    assert decisions[50].verdict.detector == "consecutive_repeat"
    # One other call in between starts the count again.
    calls[30] = ("exec", {"command": "uptime"}, "up 3 days")
    assert first_block(replay(lw.LoopGuard(RECOMMENDED), calls)) is None


def test_the_call_count_survives_a_store_round_trip() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    replay(guard, [("exec", {"command": "date +%N"}, str(k)) for k in range(40)])
    session = guard.store.peek("s")
    assert isinstance(session, GuardSession) and session.call_streaks["r"].length == 40
    restored = restore_session(json.loads(json.dumps(snapshot_session(session))))
    assert restored.call_streaks == session.call_streaks

"""The outcome model (core/failures.py): which outcomes are failures, and when two failures
from different calls are the same failure."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.core.failures import (
    FAILURE,
    SILENT,
    SUCCESS,
    failure_key,
    is_acknowledgement,
    is_failure,
    mask_failure,
    outcome_kind,
    quoted_tokens,
    same_failure,
)

from _support import data_path

# -- which outcomes are failures ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("result", "error", "failed", "kind"),
    [
        # The runtime's own word wins over anything the result says.
        ("Error: looks bad", None, False, SUCCESS),
        ("all good", None, True, FAILURE),
        (lw.UNDEFINED, ValueError("boom"), None, FAILURE),
        ("fine", "Exit code 2\nls: cannot access 'x'", None, FAILURE),
        # A result's flags.
        (
            {"content": [{"type": "text", "text": "Error: x"}], "isError": False},
            None,
            None,
            SUCCESS,
        ),
        ({"content": [{"type": "text", "text": "done"}], "isError": True}, None, None, FAILURE),
        ({"details": {"status": "completed", "exitCode": 2}}, None, None, FAILURE),
        (
            {"details": {"status": "completed", "exitCode": 0, "aggregated": "x"}},
            None,
            None,
            SUCCESS,
        ),
        ({"ok": False, "reason": "quota"}, None, None, FAILURE),
        ({"success": True}, None, None, SUCCESS),
        ({"status": "error", "message": "no"}, None, None, FAILURE),
        ({"error": "Reservation not found"}, None, None, FAILURE),
        ({"status": "ok"}, None, None, SUCCESS),
        # An exit code in the text decides over the words around it.
        ("<returncode>0</returncode>\n<output>\nError: a log line\n</output>", None, None, SUCCESS),
        ("<returncode>1</returncode>\n<output>\nall fine\n</output>", None, None, FAILURE),
        ("Output: x\nExit Code: 1\nProcess Group PGID: 2542", None, None, FAILURE),
        ("Exit code: 0\nWall time: 0.2 seconds\nOutput:\nError: none", None, None, SUCCESS),
        # Failure text, where nothing structured exists.
        ("/bin/bash: line 3: javac: command not found", None, None, FAILURE),
        ("sed: can't read nofile3: No such file or directory", None, None, FAILURE),
        ("bash: -c: line 1: syntax error near unexpected token `('", None, None, FAILURE),
        ('  File "<string>", line 1\n    print(5\n         ^\nSyntaxError: x', None, None, FAILURE),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: 'data/a.csv'",
            None,
            None,
            FAILURE,
        ),
        (
            "No replacement was performed, old_str `x` did not appear verbatim in /a.py.",
            None,
            None,
            FAILURE,
        ),
        ("Usage: edit <start_line>:<end_line>", None, None, FAILURE),
        ("HTTP/1.1 401 Unauthorized\n{}", None, None, FAILURE),
        ("User 'bob' not found", None, None, FAILURE),
        # Successes, whatever their words.
        ("Email sent.", None, None, SUCCESS),
        ("1 passed in 0.01s", None, None, SUCCESS),
        ("3 passed, 0 failed", None, None, SUCCESS),
        ("204 No Content", None, None, SUCCESS),
        ("500 rows inserted", None, None, SUCCESS),
        ("No issues found.", None, None, SUCCESS),
        ("found 3 matches for 'error' in 2 files", None, None, SUCCESS),
        ("Successfully modified file: app.py (1 replacements).", None, None, SUCCESS),
        # Saying nothing.
        ("", None, None, SILENT),
        ("<returncode>1</returncode>\n<output>\n</output>", None, None, SILENT),
        ([], None, None, SILENT),
        (lw.UNDEFINED, None, None, SILENT),
    ],
)
def test_the_strongest_signal_decides(result: Any, error: Any, failed: Any, kind: str) -> None:
    assert outcome_kind(result, error, failed) == kind
    if kind != SILENT:
        assert is_failure(result, error, failed) is (kind == FAILURE)


def test_a_long_output_is_read_for_failure_only_at_its_ends() -> None:
    body = "x = 1\n" * 400
    assert not is_failure(body + "ValueError: in the middle\n" + body, None)
    assert is_failure(body + body + "ValueError: at the end\n", None)


def test_a_tools_failure_pattern_replaces_the_text_rules() -> None:
    import re

    pattern = re.compile(r"^NOPE\b")
    assert is_failure("NOPE: quota reached", None, None, pattern)
    assert not is_failure("Error: this tool says Error for everything", None, None, pattern)
    # A structured signal still wins over the pattern.
    assert is_failure(
        {"content": [{"type": "text", "text": "fine"}], "isError": True}, None, None, pattern
    )


def test_acknowledgements_are_short_whatever_the_tool() -> None:
    for ack in ("Email sent.", "OK", {"status": "ok"}, "true", "Row inserted.", "Label added."):
        assert is_acknowledgement(ack), ack
    assert not is_acknowledgement("line\n" * 10)
    assert not is_acknowledgement("x" * 301)


def test_mini_swe_agent_exit_codes_agree_with_the_corpus_labels() -> None:
    # Every call of the real corpus that has a label: its returncode says, and the model agrees.
    path = data_path("eval", "minisweagent_gemini3pro_verified.jsonl.gz")
    disagreements = total = 0
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            if n >= 3000:
                break
            row = json.loads(line)
            labelled = (row.get("error") or "").startswith("returncode=")
            total += 1
            disagreements += is_failure(row["result"], None) is not labelled
    assert total == 3000 and disagreements == 0


# -- the same failure across varied calls --------------------------------------------------------


def _key(text: str, params: Any) -> str:
    return failure_key(text, lw.UNDEFINED, params)


@pytest.mark.parametrize(
    ("make_params", "make_text"),
    [
        (
            lambda w: {"command": f"sed -n 1,10p {w}"},
            lambda w: f"sed: can't read {w}: No such file or directory",
        ),
        (
            lambda w: {"command": f'python3 -c "print({w}"'},
            lambda w: (
                f'  File "<string>", line 1\n    print({w}\n         ^\n'
                "SyntaxError: '(' was never closed"
            ),
        ),
        (
            lambda w: {"path": "/repo/app.py", "old_str": f"def {w}():\n    return 1"},
            lambda w: (
                f"No replacement was performed, old_str `def {w}():\n    return 1` did not "
                "appear verbatim in /repo/app.py."
            ),
        ),
        (
            lambda w: {"url": f"https://api.example.com/users/{w}"},
            lambda w: f'401 Unauthorized\n{{"error": "unauthorized", "path": "/users/{w}"}}',
        ),
        (
            lambda w: {"name": w},
            lambda w: f"FileNotFoundError: [Errno 2] No such file or directory: 'data/{w}.csv'",
        ),
    ],
)
def test_failures_that_quote_their_call_are_one_failure(make_params: Any, make_text: Any) -> None:
    words = ["alpha", "bravo", "charlie_2", "delta-echo", "4711"]
    keys = [_key(make_text(w), make_params(w)) for w in words]
    assert all(same_failure(keys[0], k) for k in keys[1:]), keys


def test_different_failures_stay_different() -> None:
    params = {"command": "python3 -m pytest tests/test_a.py"}
    one = _key("AssertionError: expected 'alpha' got 'beta'", params)
    two = _key("ImportError: cannot import name 'gamma'", params)
    assert not same_failure(one, two)
    # A success's key (an outcome hash) never matches a failure's.
    assert not same_failure("0" * 64, one)


def test_whole_words_only_are_masked() -> None:
    # The agent's "look" is not masked inside bash's "looking".
    masked = mask_failure("unexpected EOF while looking for matching", {"command": "look here"})
    assert masked == "unexpected EOF while looking for matching"
    assert mask_failure("cat: notes.md: No such file", {"command": "cat notes.md"}) == (
        "#: #: No such file"
    )


def test_the_tokens_are_bounded() -> None:
    huge = {"k": [" ".join(f"word{i}x{j}" for j in range(100)) for i in range(100)]}
    assert len(quoted_tokens(huge)) <= 128
    assert len(mask_failure("y" * 100_000, huge)) < 25_000


# -- through the guard: the recommended profile with no config -------------------------------------


def _run(calls: list[tuple[str, dict[str, Any], Any, Any]]) -> str:
    guard = lw.LoopGuard()
    out = ""
    for tool, params, result, error in calls:
        decision = guard.before_tool_call("s", tool, params, run_id="r")
        out += decision.action[0]
        if decision.action in ("allow", "warn"):
            after = guard.after_tool_call("s", tool, params, result=result, error=error, run_id="r")
            if after.action == "stop":
                out = out[:-1] + "s"
    return out


def test_thirty_emails_are_bulk_work() -> None:
    calls = [("send_email", {"to": f"user{i}@example.com"}, "Email sent.", None) for i in range(30)]
    assert _run(calls) == "a" * 30


def test_a_failure_quoting_each_new_argument_warns_blocks_then_stops() -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    words += ["foxtrot", "golf", "hotel", "india", "juliet"]
    calls = [
        (
            "bash",
            {"command": f"sed -n 1,10p {w}"},
            lw.UNDEFINED,
            f"Exit code 2\nsed: can't read {w}: No such file or directory",
        )
        for w in words
    ]
    assert _run(calls) == "aaawbassss"
    guard = lw.LoopGuard()
    for tool, params, _result, error in calls[:6]:
        if guard.before_tool_call("s", tool, params).allowed:
            guard.after_tool_call("s", tool, params, error=error)
    stop = guard.before_tool_call("s", "bash", calls[6][1])
    assert stop.action == "stop" and "so the run was stopped" in str(stop.message)
    assert "failed the same way" in str(stop.message)


def test_a_success_flagged_by_the_runtime_is_never_a_failure() -> None:
    # failed=False: an output that reads like a failure is still a success.
    guard = lw.LoopGuard()
    actions = ""
    for i in range(10):
        params = {"query": f"q{i}"}
        actions += guard.before_tool_call("s", "search", params).action[0]
        guard.after_tool_call("s", "search", params, result="Error: 0 hits", failed=False)
    assert actions == "a" * 10


def test_failure_pattern_from_the_config() -> None:
    config = {"profile": "recommended", "toolPolicies": {"lookup": {"failurePattern": "^MISS"}}}
    guard = lw.LoopGuard(config)
    actions = ""
    for i in range(6):
        params = {"id": f"item{i}"}
        decision = guard.before_tool_call("s", "lookup", params)
        actions += decision.action[0]
        if decision.allowed:
            guard.after_tool_call("s", "lookup", params, result=f"MISS item{i}\n" + "context\n" * 5)
    assert actions == "aaawba"
    with pytest.raises(lw.ConfigError) as caught:
        lw.validate_config({"toolPolicies": {"x": {"failurePattern": "(a"}}})
    assert "tools.loopDetection.toolPolicies.x.failurePattern" in str(caught.value)

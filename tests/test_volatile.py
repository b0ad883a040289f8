"""Volatile-output normalisation: new ids, times, line numbers hash the same."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.core.volatile import VolatileNormalizer, builtin_text, validate_patterns

N = VolatileNormalizer.build()


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "/bin/bash: line 62275: javac: command not found",
            "/bin/bash: line 62301: javac: command not found",
        ),
        (
            "request 3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c failed",
            "request 7a1c2e3f-1111-4abc-8def-123456789abc failed",
        ),
        (
            '<<<EXTERNAL_UNTRUSTED_CONTENT id="9f86d081884c7d659a2feaa0c55ad015">>> nope',
            '<<<EXTERNAL_UNTRUSTED_CONTENT id="a3c1e9f0b2d4c6e8f0a1b3c5d7e9f1a2">>> nope',
        ),
        ("2026-11-30T00:06:10.123Z ERROR db down", "2026-11-30T00:07:44.901Z ERROR db down"),
        (
            "npm error A complete log of this run can be found in: "
            "/root/.npm/_logs/2026-12-01T10_25_33_033Z-debug-0.log",
            "npm error A complete log of this run can be found in: "
            "/root/.npm/_logs/2026-12-01T10_26_02_517Z-debug-0.log",
        ),
        ("[12:01:33] retrying", "[12:01:34] retrying"),
        ("1 failed in 0.12s", "1 failed in 3.4s"),
        ("took 12ms", "took 250ms"),
        ("worker pid 1234 crashed", "worker pid 98765 crashed"),
        ("PID: 77 exited", "PID: 78 exited"),
        ("attempt 3 of 5 failed", "attempt 4 of 5 failed"),
    ],
)
def test_volatile_spans_normalise_to_the_same_text(a: str, b: str) -> None:
    assert a != b
    assert N.text(a) == N.text(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("3 tests failed", "2 tests failed"),
        ("FAILED test_parse", "FAILED test_format"),
        ("exit code 1", "exit code 2"),
        ("commit abc1234", "commit def5678"),  # short SHAs are content, not nonces
        ("total 123456789012345678", "total 123456789012345679"),  # long numbers are not hex ids
    ],
)
def test_meaningful_differences_survive(a: str, b: str) -> None:
    assert N.text(a) != N.text(b)


def test_structures_are_normalised_as_copies() -> None:
    result = {"content": [{"type": "text", "text": "took 5ms"}], "details": {"n": 5, "t": "9ms"}}
    out = N.normalize(result)
    assert out == {
        "content": [{"type": "text", "text": "took <duration>"}],
        "details": {"n": 5, "t": "<duration>"},
    }
    assert result["details"]["t"] == "9ms"


def test_cycles_do_not_break_normalisation() -> None:
    loop: list[object] = ["12ms"]
    loop.append(loop)
    out = N.normalize(loop)
    assert out[0] == "<duration>" and out[1] is loop


def test_user_patterns_extend_the_builtins() -> None:
    custom = VolatileNormalizer.build([r"job-\d+"])
    assert custom.text("job-17 stuck") == custom.text("job-18 stuck") == "<volatile> stuck"
    assert N.text("job-17 stuck") != N.text("job-18 stuck")


def test_pattern_validation_names_each_bad_entry() -> None:
    assert validate_patterns([r"ok\d+"]) == []
    assert validate_patterns("x") == ["must be a list of regular expressions, got str"]
    problems = validate_patterns(["(", 3])
    assert problems[0].startswith("[0]: invalid regular expression '('")
    assert problems[1] == "[1]: must be a string, got int"


# What RE2 cannot run: backreferences, conditionals, lookaround, possessive and atomic parts.
NOT_RE2 = [
    r"(\d+)-\1",
    r"(?P<q>['\"]).*(?P=q)",
    "(a)?(?(1)b|c)",
    r"foo(?=bar)",
    r"(?<!x)y",
    "a++b",
    "(?>a+)b",
]
# Shapes that make a backtracking engine take exponential or high-polynomial time: RE2 runs
# them in time linear in the text, so they are accepted. The first four are issue 24's.
HOSTILE = [
    "a*a*a*a*a*a*a*a*b",
    r"\d*\d*\d*\d*\d*\d*x",
    ".*.*.*.*.*.*=x",
    "(a{1,4}){1,4}" * 4 + "$",
    "(a+)+$",
    "(a|a)*$",
    "(.*)*x",
    r"(\w+\s?)*$",
    r"(x+x+)+y",
    r"(ab|a)*c",
    "(?:(?:a*)*)*",
]
REAL_WORLD = [
    r"job-\d+",
    r"req_[a-z0-9]{20}",
    r"\b(?:\d{1,3}\.){3}\d{1,3}\b",
    r"(?i)session=[\w-]+",
    r"/tmp/tmp\w+",
    r"sha256:[0-9a-f]{64}",
    r"(?:foo|bar)-\d+",
    r"\d+ bytes",
    r"port \d+",
    r"(?:[0-9a-f]{2}:){5}[0-9a-f]{2}",
    r"build #\d+ \((?:queued|running)\)",
    r"[A-Z]{3}-\d{4,6}",
    r"\.tmp[A-Za-z0-9_]{6,8}\b",
]


@pytest.mark.parametrize("pattern", NOT_RE2)
def test_patterns_re2_cannot_run_are_refused_with_the_reason(pattern: str) -> None:
    problems = validate_patterns([r"ok\d+", pattern])
    assert len(problems) == 1 and problems[0].startswith(f"[1]: {pattern!r} cannot run"), problems
    assert "RE2" in problems[0]


def test_an_invalid_pattern_says_so() -> None:
    (problem,) = validate_patterns(["a)"])
    assert problem.startswith("[0]: invalid regular expression 'a)'"), problem


@pytest.mark.parametrize("pattern", HOSTILE)
def test_patterns_that_stall_a_backtracking_engine_are_accepted(pattern: str) -> None:
    assert validate_patterns([pattern]) == []


@pytest.mark.parametrize("pattern", REAL_WORLD)
def test_real_world_patterns_are_accepted(pattern: str) -> None:
    assert validate_patterns([pattern]) == []


def test_hostile_patterns_finish_on_long_texts() -> None:
    # Issue 24: `a*a*a*a*a*a*a*a*b` passed the old check and made one after_tool_call on a
    # 50-character result take 323 s. A child process runs them, so that a stall fails the test
    # at the deadline instead of hanging the suite; the texts are 100 times the issue's.
    code = f"""
from loopwarden.core.volatile import VolatileNormalizer, validate_patterns
patterns = {HOSTILE!r}
assert validate_patterns(patterns) == [], validate_patterns(patterns)
n = VolatileNormalizer.build(patterns)
assert len(n.extra) == len(patterns)
for text in ("a" * 5000, "1" * 5000, "ab=" * 2000, "x" * 5000 + "=", "a" * 4000 + "!"):
    n.normalize({{"stdout": text}})
print("done")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "done", done.stderr


def test_lenient_resolution_drops_a_pattern_re2_cannot_run_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from loopwarden.core.config import resolve_config

    block = {"normalizeVolatile": True, "volatilePatterns": [r"(a)\1", r"job-\d+"]}
    with caplog.at_level("WARNING", logger="loopwarden"):
        for _ in range(3):
            assert resolve_config(block).volatile_patterns == (r"job-\d+",)
    dropped = [r.getMessage() for r in caplog.records if r"'(a)\\1'" in r.getMessage()]
    assert len(dropped) == 1 and "volatilePatterns" in dropped[0], caplog.records


def test_the_normalizer_never_runs_a_refused_pattern() -> None:
    custom = VolatileNormalizer.build([r"(a)\1", r"job-\d+"])
    assert len(custom.rules) == len(N.rules) + 1
    assert custom.text("job-7 " + "aa" * 40) == "<volatile> " + "aa" * 40


def test_a_lone_surrogate_in_a_result_is_kept_and_the_rest_normalised() -> None:
    custom = VolatileNormalizer.build([r"job-\d+"])
    assert custom.text("job-1 \udc80 job-2") == "<volatile> \udc80 <volatile>"
    (problem,) = validate_patterns(["job\udc80"])
    assert "lone surrogate" in problem


# Pieces of patterns both engines accept, and texts short enough for Python's re to match fast.
_PIECES = st.sampled_from(
    ["a", "b", "1", "=", "a*", "b+", r"\d*", r"\d+", ".*", ".", "(?:a|ab)", "(a+)+", "[ab]{1,3}",
     "a?", r"\bx", "(?:=|1)*", "^", "$", r"\s", "(?:A|b)"]
)  # fmt: skip


@given(st.lists(_PIECES, min_size=1, max_size=6), st.booleans(), st.text("ab1= x\t", max_size=12))
@settings(max_examples=300, deadline=None)
def test_re2_replaces_what_python_re_replaces(pieces: list[str], fold: bool, text: str) -> None:
    """On ASCII text without newlines, user patterns mean what they meant under Python's re."""
    pattern = ("(?i)" if fold else "") + "".join(pieces)
    assert validate_patterns([pattern]) == []
    custom = VolatileNormalizer.build([pattern])
    assert custom.text(text) == re.sub(pattern, "<volatile>", builtin_text(text))

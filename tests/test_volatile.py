"""Volatile-output normalisation: new ids, times, line numbers hash the same."""

from __future__ import annotations

import pytest

from loopwarden.core.volatile import VolatileNormalizer, validate_patterns

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


DANGEROUS = [
    "(a+)+$",
    "(a|a)*$",
    "(.*)*x",
    r"(\w+\s?)*$",
    r"(x+x+)+y",
    r"(ab|a)*c",
    r"(?:a.|ab)*c",
    r"(\d+)-\1",
    r"(?P<q>['\"]).*(?P=q)",
    "(a)?(?(1)b|c)",
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


@pytest.mark.parametrize("pattern", DANGEROUS)
def test_patterns_that_can_backtrack_exponentially_are_refused(pattern: str) -> None:
    problems = validate_patterns([r"ok\d+", pattern])
    assert len(problems) == 1 and problems[0].startswith(f"[1]: {pattern!r}"), problems


@pytest.mark.parametrize("pattern", REAL_WORLD)
def test_real_world_patterns_are_accepted(pattern: str) -> None:
    assert validate_patterns([pattern]) == []


def test_lenient_resolution_drops_a_dangerous_pattern_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from loopwarden.core.config import resolve_config

    block = {"normalizeVolatile": True, "volatilePatterns": ["(a|a)*$", r"job-\d+"]}
    with caplog.at_level("WARNING", logger="loopwarden"):
        for _ in range(3):
            assert resolve_config(block).volatile_patterns == (r"job-\d+",)
    dropped = [r.getMessage() for r in caplog.records if "(a|a)*$" in r.getMessage()]
    assert len(dropped) == 1 and "volatilePatterns" in dropped[0]


def test_the_normalizer_never_runs_a_dangerous_pattern() -> None:
    custom = VolatileNormalizer.build(["(.*)*x", r"job-\d+"])
    assert len(custom.rules) == len(N.rules) + 1
    assert custom.text("job-7 " + "a" * 40) == "<volatile> " + "a" * 40

"""Volatile-output normalisation (the ``recommended`` profile's ``normalizeVolatile``).

The same failure often comes back with a new timestamp, request id, pid or bash line number
(``/bin/bash: line 62275: javac: command not found``): identical to a person, different to a
hash. Before an outcome is hashed, spans that change on every call without meaning progress are
replaced by fixed placeholders, so repeats of one failure hash the same. Pure functions only.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loopwarden._lazylog import get_logger

# The stdlib's own regex parser (already loaded by `re`), to check user patterns' structure.
# Imported by name: the type stubs know neither re._parser (3.11+) nor what it returns.
_sre_parse: Any = importlib.import_module(
    "re._parser" if sys.version_info >= (3, 11) else "sre_parse"
)

_log = get_logger("loopwarden")

# Applied in this order, each over the whole text: the most specific shapes (UUIDs, full
# timestamps) go before the pieces they contain (hex runs, clock times). Placeholders hold no
# digits, so a later pattern never matches inside an earlier one's replacement.
BUILTIN_PATTERNS: tuple[tuple[str, str], ...] = (
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    (
        "timestamp",
        # Also with underscores for colons, as in file names (npm's
        # `_logs/2026-12-01T10_25_33_033Z-debug-0.log` in every failing `npm test`).
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}([:_])\d{2}(?:\1\d{2}(?:[.,_]\d+)?)?"
        r"(?:Z|[+-]\d{2}:?\d{2})?\b",
    ),
    ("hex", r"\b(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{16,}\b"),
    ("clock", r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"),
    (
        "duration",
        r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h|hrs|hours)\b",
    ),
    ("pid", r"\b(?i:pid)\b[\s:=#]*\d+"),
    ("attempt", r"\b(?i:attempt)\b\s*#?\d+"),
    ("line", r"\bline \d+\b"),
)

# Substrings (of the lower-cased text) a pattern cannot match without: a C-speed `in` check
# skips the regex, which costs 25-35 ns per character per pattern, on most texts.
_REQUIRED: dict[str, tuple[str, ...]] = {
    "uuid": ("-",),
    "timestamp": ("-",),
    "clock": (":",),
    "pid": ("pid",),
    "attempt": ("attempt",),
    "line": ("line ",),
}


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    replacement: str
    required: tuple[str, ...] = ()


@dataclass(frozen=True)
class VolatileNormalizer:
    """Compiled volatile patterns; ``normalize(value)`` returns a normalised copy."""

    rules: tuple[_Rule, ...]

    @classmethod
    def build(cls, extra_patterns: Iterable[str] = ()) -> VolatileNormalizer:
        """Compile the built-in patterns plus user ``volatilePatterns`` (regular expressions)."""
        rules = [
            _Rule(re.compile(rx), f"<{name}>", _REQUIRED.get(name, ()))
            for name, rx in BUILTIN_PATTERNS
        ]
        safe = safe_patterns(extra_patterns, "VolatileNormalizer.build")
        rules.extend(_Rule(re.compile(rx), "<volatile>") for rx in safe)
        return cls(tuple(rules))

    def text(self, value: str) -> str:
        """Replace every volatile span of a string with ``<kind>``."""
        lowered = value.lower()
        for rule in self.rules:
            if all(piece in lowered for piece in rule.required):
                value = rule.pattern.sub(rule.replacement, value)
        return value

    def normalize(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string normalised (other values untouched)."""
        return _walk(value, self, set(), 0)


_MAX_DEPTH = 200


def _walk(value: Any, normalizer: VolatileNormalizer, seen: set[int], depth: int) -> Any:
    # Cycles and absurd depth are left as they are: canonical hashing copes with both, and a
    # normaliser must never be the reason a tool call fails.
    if isinstance(value, str):
        return normalizer.text(value)
    if depth > _MAX_DEPTH or not isinstance(value, (Mapping, list, tuple)) or id(value) in seen:
        return value
    seen.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {k: _walk(v, normalizer, seen, depth + 1) for k, v in value.items()}
        return [_walk(v, normalizer, seen, depth + 1) for v in value]
    finally:
        seen.discard(id(value))


def validate_patterns(patterns: object) -> list[str]:
    """Problems with a ``volatilePatterns`` value: a list of valid regular expressions, each safe.

    Safe means it cannot backtrack exponentially (see :func:`pattern_problem`). Each problem
    starts with the pattern's index, ``[i]: ``.
    """
    if not isinstance(patterns, list):
        return [f"must be a list of regular expressions, got {type(patterns).__name__}"]
    problems = []
    for i, rx in enumerate(patterns):
        problem = pattern_problem(rx)
        if problem is not None:
            problems.append(f"[{i}]: {problem}")
    return problems


def pattern_problem(pattern: object) -> str | None:
    """Why a user pattern is refused (not a string, invalid, unsafe), or ``None`` if it is fine."""
    if not isinstance(pattern, str):
        return f"must be a string, got {type(pattern).__name__}"
    try:
        re.compile(pattern)
        unsafe = _unsafe_reason(_sre_parse.parse(pattern))
    except re.error as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    except RecursionError:  # compiles, but nests groups too deep to analyse: refuse it
        unsafe = "groups nested too deep to check"
    if unsafe is None:
        return None
    return (
        f"{pattern!r} is refused: {unsafe}, which lets matching take exponential time on "
        "some texts and stall a tool call; rewrite it so each part of a text can be matched "
        "one way only (see the volatilePatterns rules)"
    )


# What the safety check refuses. Python's regex engine backtracks: a pattern that can match one
# text in many ways (a quantifier over a group that can match different lengths, or over
# alternatives that can start alike) tries all of them before failing, 2^n for n characters:
# "(a+)+$" took 7.5 s on 25 characters, doubling per character. Backreferences are refused too:
# no engine matches them in linear time. A bounded quantifier over a group of nearly fixed
# length (an IPv4 address: (?:\d{1,3}\.){3}) can only try a handful of ways and is allowed.
_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
_BACKREFERENCES = frozenset({"GROUPREF", "GROUPREF_EXISTS", "GROUPREF_IGNORE"})
_SMALL_REPEAT = 4  # at most this many repetitions of a group whose length varies by this much


def _unsafe_reason(items: Any, under_repeat: bool = False) -> str | None:
    """Why a parsed pattern (``sre_parse`` items) can backtrack exponentially, or ``None``."""
    for op, arg in items:
        name = str(op)
        if name in _BACKREFERENCES:
            return "it uses a backreference"
        if name in _REPEATS:
            reason = _repeat_reason(arg, under_repeat)
        elif name == "BRANCH":
            reason = _branch_reason(arg[1], under_repeat)
        elif name == "SUBPATTERN":
            reason = _unsafe_reason(arg[3], under_repeat)
        elif name in ("ASSERT", "ASSERT_NOT"):
            reason = _unsafe_reason(arg[1], under_repeat)
        elif name == "ATOMIC_GROUP":
            reason = _unsafe_reason(arg, under_repeat)
        else:
            reason = None
        if reason is not None:
            return reason
    return None


def _repeat_reason(arg: Any, under_repeat: bool) -> str | None:
    _low, high, body = arg
    if high <= 1:  # `?`: one way more at most, not a loop
        return _unsafe_reason(body, under_repeat)
    shortest, longest = body.getwidth()
    bounded_small = high <= _SMALL_REPEAT and longest - shortest <= _SMALL_REPEAT
    if shortest != longest and not bounded_small:
        return "a quantifier repeats a part that can match different lengths (as in (a+)+)"
    return _unsafe_reason(body, True)


def _branch_reason(alternatives: list[Any], under_repeat: bool) -> str | None:
    if under_repeat and _may_overlap(alternatives):
        return "a quantifier repeats alternatives that can match the same text (as in (a|a)*)"
    for alternative in alternatives:
        reason = _unsafe_reason(alternative, under_repeat)
        if reason is not None:
            return reason
    return None


def _may_overlap(alternatives: list[Any]) -> bool:
    """False only when every alternative surely starts with a character no other one starts with."""
    seen: set[int] = set()
    for alternative in alternatives:
        first = _first_chars(alternative)
        if first is None or first & seen:
            return True
        seen |= first
    return False


def _first_chars(items: Any) -> set[int] | None:
    """The characters a match of ``items`` can start with (both cases), or ``None`` if unknown."""
    if not items:
        return None
    op, arg = items[0]
    name = str(op)
    if name == "SUBPATTERN":
        return _first_chars(arg[3])
    if name == "LITERAL":
        codes = {arg}
    elif name == "IN" and all(str(o) in ("LITERAL", "RANGE") for o, _ in arg):
        codes = set()
        for o, a in arg:
            if str(o) == "LITERAL":
                codes.add(a)
            elif a[1] - a[0] > 0xFF:
                return None
            else:
                codes.update(range(a[0], a[1] + 1))
    else:
        return None
    return {c for code in codes for c in _cases(code)}


def _cases(code: int) -> set[int]:
    # Conservative under (?i): a character overlaps its other case too.
    char = chr(code)
    return {ord(c) for c in (char, char.lower(), char.upper()) if len(c) == 1}


_reported: set[str] = set()


def safe_patterns(patterns: Iterable[object], where: str) -> tuple[str, ...]:
    """The patterns that pass :func:`pattern_problem`; each dropped one is logged once a process."""
    kept = []
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is None:
            kept.append(str(pattern))
        elif problem not in _reported:
            _reported.add(problem)
            _log.warning("%s: volatilePatterns entry dropped: %s", where, problem)
    return tuple(kept)

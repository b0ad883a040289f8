"""Volatile-output normalisation (the ``recommended`` profile's ``normalizeVolatile``).

The same failure often comes back with a new timestamp, request id, pid or bash line number
(``/bin/bash: line 62275: javac: command not found``): identical to a person, different to a
hash. Before an outcome is hashed, spans that change on every call without meaning progress are
replaced by fixed placeholders, so repeats of one failure hash the same. Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
        rules.extend(_Rule(re.compile(rx), "<volatile>") for rx in extra_patterns)
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
    """Problems with a ``volatilePatterns`` value (a list of valid regular expressions)."""
    if not isinstance(patterns, list):
        return [f"must be a list of regular expressions, got {type(patterns).__name__}"]
    problems = []
    for i, rx in enumerate(patterns):
        if not isinstance(rx, str):
            problems.append(f"[{i}]: must be a string, got {type(rx).__name__}")
            continue
        try:
            re.compile(rx)
        except re.error as exc:
            problems.append(f"[{i}]: invalid regular expression {rx!r}: {exc}")
    return problems

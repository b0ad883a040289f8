"""Volatile-output normalisation (the ``recommended`` profile's ``normalizeVolatile``).

The same failure often comes back with a new timestamp, request id, pid or bash line number
(``/bin/bash: line 62275: javac: command not found``): identical to a person, different to a
hash. Before an outcome is hashed, spans that change on every call without meaning progress are
replaced by fixed placeholders, so repeats of one failure hash the same. Pure functions only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loopwarden.core._lazylog import get_logger
from loopwarden.core.canonical import UNDEFINED

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

# The same patterns rewritten so that Python's regex engine can skip ahead in C. A pattern that
# starts with ``\\b`` makes it attempt a match at every position of the text (about 25 ns a
# character); one that starts with a literal or a character set lets it jump to the candidates.
# ``\\b`` before a first character c that is a word character equals ``c(?<!\\wc)`` right after
# it: the character before c is not a word character (or there is none). Each form matches the
# same spans as its pattern above, tried in the same order; tests/test_volatile_fast.py checks
# it against the patterns above on the corpora and on generated text.
_FAST_FORMS: dict[str, str] = {
    "uuid": r"[0-9a-fA-F](?<!\w[0-9a-fA-F])[0-9a-fA-F]{7}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
    r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    "timestamp": r"\d(?<!\w\d)\d{3}-\d{2}-\d{2}[T ]\d{2}([:_])\d{2}(?:\1\d{2}(?:[.,_]\d+)?)?"
    r"(?:Z|[+-]\d{2}:?\d{2})?\b",
    # The two lookaheads, asked at the first character, become "this character, or one later".
    "hex": r"[0-9a-fA-F](?<!\w[0-9a-fA-F])(?:(?<=[a-fA-F])|(?=[0-9a-fA-F]*[a-fA-F]))"
    r"(?:(?<=\d)|(?=[0-9a-fA-F]*\d))[0-9a-fA-F]{15,}\b",
    "clock": r"\d(?<!\w\d)\d?:\d{2}:\d{2}(?:[.,]\d+)?\b",
    "duration": r"\d(?<!\w\d)\d*(?:\.\d+)?\s?"
    r"(?:ns|us|µs|ms|s|sec|secs|seconds|m|min|mins|minutes|h|hrs|hours)\b",
    # (?i:p) and (?i:a) match only p, P and a, A (checked over every code point).
    "pid": r"[pP](?<!\w[pP])(?i:id)\b[\s:=#]*\d+",
    "attempt": r"[aA](?<!\w[aA])(?i:ttempt)\b\s*#?\d+",
    "line": r"line(?<!\wline) \d+\b",
}

# Gates: cheap searches that find something in every text the pattern matches (a necessary
# condition), each starting with a literal or an ASCII set so the engine scans in C. A text
# that fails a pattern's gate is left alone without running the pattern. Why each holds:
# - uuid, timestamp, clock: each gate is a piece of every match;
# - hex: a match is a whole word of 16 or more hex characters with an ASCII digit in it (a
#   non-ASCII digit would be a word character right after the hex run, leaving no word
#   boundary to end the match on), and that digit has 8 hex characters after it or 8 before;
# - duration: a match ends with a digit, at most one space, a unit's first letter.
# In ASCII text, the hex and duration gates read the text's bytes mapped to character classes
# (bytes.translate and ``in`` run in C, faster than a regex over every digit): a hex id is 16
# hex characters in a row; a duration ends with a digit, an optional space, a unit's first
# letter, and only where one can end is the pattern tried (``_durations_ascii``).
# (``\\s`` in ASCII text is str.isspace: the usual five, the space, and \\x1c-\\x1f.)
_UUID_GATE = re.compile(r"-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-")
_TIMESTAMP_GATE = re.compile(r"-\d\d-\d\d[T ]\d\d[:_]\d\d")
_CLOCK_GATE = re.compile(r":\d\d:\d\d")
_HEX_GATE = re.compile(r"[0-9](?:(?=[0-9a-fA-F]{8})|(?<=[0-9a-fA-F]{9}))")
_DURATION_GATE = re.compile(r"\d\s?[nuµmsh]")  # \d: every Unicode digit
_UNICODE_DIGIT = re.compile(r"\d")


def _byte_classes(members: dict[bytes, bytes], other: bytes = b".") -> bytes:
    """A bytes.translate table: each listed byte to its class letter, any other to ``other``."""
    table = bytearray(other * 256)
    for chars, letter in members.items():
        for char in chars:
            table[char] = letter[0]
    return bytes(table)


_HEX_CLASSES = _byte_classes({b"0123456789abcdefABCDEF": b"h"})
_HEX_RUN = b"h" * 16
# Digits, the decimal point, the spaces \s matches and the units' first letters; every byte
# stays in its place, so a position in the classes is the same position in the text.
_SPACES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
_NUMBER_CLASSES = _byte_classes(
    {b"0123456789": b"0", b".": b".", _SPACES: b" ", b"nmsuh": b"u"}, b"x"
)
_DIGIT, _POINT = ord("0"), ord(".")


def _ascii_gates(value: str) -> tuple[bool, bytes, list[int]]:
    """The hex gate of an ASCII text, its number classes and where a duration can end."""
    raw = value.encode("ascii")
    classes = raw.translate(_NUMBER_CLASSES)
    return _HEX_RUN in raw.translate(_HEX_CLASSES), classes, _duration_ends(classes)


# A digit, then (after a space at most) a unit's first letter, in the number classes. Two
# such spans never overlap (neither holds a digit after its first byte), so finditer finds
# every one, in order. One scan, for the literal ``0`` the engine looks for in C: three to
# four times faster than two ``bytes.find`` loops (a two-byte needle whose bytes are common).
_DURATION_END = re.compile(rb"0 ?u")


def _duration_ends(classes: bytes) -> list[int]:
    """Where a duration can end, in order: the position of each digit followed by (after a
    space at most) a unit's first letter."""
    return [match.start() for match in _DURATION_END.finditer(classes)]


def _durations_ascii(value: str, classes: bytes, ends: list[int]) -> str:
    """``_DURATION_ASCII.sub("<duration>", value)``, for an ASCII text and its number classes.

    The pattern is tried only where a match can start. A match is a number (digits and points),
    at most one space and a unit: it ends at a digit followed by a space or a unit's first
    letter (an *end*), the first end at or after its start, and it starts in the run of digits
    and points that leads to that end. So for each end in turn (past the last match), each
    digit of its run is tried, leftmost first, as re.sub would try them: no match can start
    anywhere else. The regex engine then never scans the text for digits (about 11 ns a
    character). ``match`` at a position reads the text before it, as ``sub`` does.
    """
    pieces: list[str] = []
    end = 0
    for last_digit in ends:  # past the last match: its unit holds no digit
        start = last_digit
        while start > end and classes[start - 1] in (_DIGIT, _POINT):
            start -= 1
        for position in range(start, last_digit + 1):
            if classes[position] != _DIGIT:
                continue
            match = _DURATION_ASCII.match(value, position)
            if match is not None:
                pieces.append(value[end:position])
                pieces.append(_DURATION.replacement)
                end = match.end()
                break
    if not pieces:
        return value
    pieces.append(value[end:])
    return "".join(pieces)


def _has_digit(value: str) -> bool:
    """Whether ``\\d`` matches somewhere in the text (one C-speed ``in`` per ASCII digit)."""
    if not value.isascii():
        return _UNICODE_DIGIT.search(value) is not None
    return (
        "0" in value
        or "1" in value
        or "2" in value
        or "3" in value
        or "4" in value
        or "5" in value
        or "6" in value
        or "7" in value
        or "8" in value
        or "9" in value
    )


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    replacement: str


def _fast_rule(name: str) -> _Rule:
    return _Rule(re.compile(_FAST_FORMS.get(name, dict(BUILTIN_PATTERNS)[name])), f"<{name}>")


_UUID, _TIMESTAMP, _HEX, _CLOCK, _DURATION, _PID, _ATTEMPT, _LINE = (
    _fast_rule(name) for name, _ in BUILTIN_PATTERNS
)
# In ASCII text \\d is [0-9]: a set the engine scans faster than the Unicode digit category.
_DURATION_ASCII = re.compile("[0-9]" + _FAST_FORMS["duration"][2:])
# Patterns that run only when the lower-cased text holds their keyword.
_KEYWORD_RULES = (("pid", _PID), ("attempt", _ATTEMPT), ("line ", _LINE))


def builtin_text(value: str) -> str:
    """``value`` with the built-in patterns applied, in order, each over the whole text.

    An exact str of ASCII text goes to the C scanner when the build has it (the same text, see
    :func:`builtin_text_python`); any other value, or a build without it, to the Python path.
    """
    if _scan is not None:
        out = _scan(value)
        if out is not None:
            return out
    return builtin_text_python(value)


def builtin_text_python(value: str) -> str:
    """:func:`builtin_text` in Python: the specification the C scanner is tested against.

    Gives what applying each of :data:`BUILTIN_PATTERNS` in turn gives, with two shortcuts: a
    pattern whose gate finds nothing is skipped, and the text's facts are learnt once. They stay
    true as patterns apply, because a placeholder holds no digit, hyphen or colon: replacing a
    span can only take those away. The keyword checks (``pid``, ``attempt``, ``line ``) read the
    original text lower-cased, as they always have.
    """
    original = value
    if type(value) is not str:  # a str subclass: its text, as re.sub returns it
        value = str.__str__(value)
    digit = _has_digit(value)
    dash = "-" in value
    if not digit and not dash:
        return value  # every pattern needs a digit, but uuid, which needs a hyphen
    if dash:
        if _UUID_GATE.search(value) is not None:
            value = _UUID.pattern.sub(_UUID.replacement, value)
        if digit and _TIMESTAMP_GATE.search(value) is not None:
            value = _TIMESTAMP.pattern.sub(_TIMESTAMP.replacement, value)
    if not digit:
        return value
    ascii_text = value.isascii()
    classes = b""  # an ASCII text's number classes
    ends: list[int] = []  # where in it a duration can end
    if ascii_text:
        hex_id, classes, ends = _ascii_gates(value)
        duration = bool(ends)
    else:
        hex_id = _HEX_GATE.search(value) is not None
        duration = True
    gated = value
    if hex_id:
        value = _HEX.pattern.sub(_HEX.replacement, value)
    if ":" in value and _CLOCK_GATE.search(value) is not None:
        value = _CLOCK.pattern.sub(_CLOCK.replacement, value)
    if ascii_text and duration:
        if value is not gated:  # a hex id or a clock time was replaced: positions moved
            classes = value.encode("ascii").translate(_NUMBER_CLASSES)
            ends = _duration_ends(classes)
        value = _durations_ascii(value, classes, ends)
    elif duration and _DURATION_GATE.search(value) is not None:
        value = _DURATION.pattern.sub(_DURATION.replacement, value)
    lowered = original.lower()
    for keyword, rule in _KEYWORD_RULES:
        if keyword in lowered:
            value = rule.pattern.sub(rule.replacement, value)
    return value


# The C scanner (``_volatile_scan.c``): built into a regular wheel with the mypyc-compiled
# modules (hatch_build.py), absent from an editable install or a pure wheel. For an exact str of
# ASCII text it gives what builtin_text_python gives, in one pass over the text per pattern that
# can match (the Python path runs about ten C-level scans and their set-up); None otherwise.
# Its ``walk`` is the walk of a structure (``_Walk`` with no user pattern) in C, calling back
# for the strings the scanner declines; NotImplemented for a structure holding other values.
_scan: Callable[[object], str | None] | None
_c_walk: Callable[[object, Callable[[str], str]], object] | None
try:
    from loopwarden.core._volatile_scan import scan as _c_scan
    from loopwarden.core._volatile_scan import walk as _walk_in_c
except ImportError:
    _scan = _c_walk = None
else:
    _scan, _c_walk = _c_scan, _walk_in_c


_re2_options: list[Any] = []  # RE2's options, made on first use (the module loads lazily)


def _compile_user(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (raises ``re2.error`` or ``UnicodeEncodeError``).

    ``re2`` is imported here, not at the top: a hook process whose config has no user pattern
    never pays for loading it. Errors are raised, not also printed to stderr by RE2's own log.
    """
    if not _re2_options:
        import re2

        options = re2.Options()
        options.log_errors = False
        _re2_options.append(options)
    import re2

    return re2.compile(pattern, options=_re2_options[0])


# A lone surrogate (U+D800-U+DFFF), which RE2's UTF-8 input cannot hold. A raw string: re reads
# the escapes, and the source holds no surrogate (which mypyc refuses in a literal).
_SURROGATE = re.compile(r"([\ud800-\udfff])")


@dataclass(frozen=True)
class _UserRule:
    """One user pattern, compiled by RE2; matches are replaced by ``<volatile>``."""

    regex: Any

    def apply(self, value: str) -> str:
        try:
            return self._replace(value)
        except UnicodeEncodeError:  # a lone surrogate (text read with surrogateescape)
            # RE2 reads UTF-8: run on the pieces between the surrogates, which stay as they are.
            pieces = _SURROGATE.split(value)
            return "".join(
                piece if i % 2 else self._replace(piece) for i, piece in enumerate(pieces)
            )

    def _replace(self, value: str) -> str:
        # Not regex.sub: google-re2 repeats an empty match found past where its search began
        # ("$" on "1" gives two), where Python's re.sub replaces it once.
        pieces: list[str] = []
        end = 0
        last = (-1, -1)
        for match in self.regex.finditer(value):
            span: tuple[int, int] = match.span()
            if span == last:
                continue
            last = span
            pieces.append(value[end : span[0]])
            pieces.append("<volatile>")
            end = span[1]
        if not pieces:
            return value
        pieces.append(value[end:])
        return "".join(pieces)


@dataclass(frozen=True)
class VolatileNormalizer:
    """Compiled volatile patterns; ``normalize(value)`` returns a normalised copy."""

    extra: tuple[_UserRule, ...] = ()  # the user's volatilePatterns, applied after the built-ins

    @property
    def rules(self) -> tuple[_Rule | _UserRule, ...]:
        """Every rule in the order it applies: the built-ins, then the user's patterns."""
        return (_UUID, _TIMESTAMP, _HEX, _CLOCK, _DURATION, _PID, _ATTEMPT, _LINE, *self.extra)

    @classmethod
    def build(cls, extra_patterns: Iterable[str] = ()) -> VolatileNormalizer:
        """Compile the built-in patterns plus user ``volatilePatterns`` (regular expressions)."""
        safe = safe_patterns(extra_patterns, "VolatileNormalizer.build")
        return cls(tuple(_UserRule(_compile_user(rx)) for rx in safe))

    def text(self, value: str) -> str:
        """Replace every volatile span of a string with ``<kind>``."""
        if type(value) is str:
            out = _scan(value) if _scan is not None else None
            value = out if out is not None else _builtin_cached(value)
        else:
            value = builtin_text(value)
        for rule in self.extra:
            value = rule.apply(value)
        return value

    def normalize(self, value: Any) -> Any:
        """A copy of a JSON-like value with every string normalised (other values untouched)."""
        kind = type(value)
        if kind is str or kind in _SCALARS:  # most errors are None: no walk to set up
            return self.text(value) if kind is str else value
        if isinstance(value, str):
            return self.text(value)
        if _c_walk is not None and not self.extra:
            out = _c_walk(value, _builtin_text_of)
            if out is not NotImplemented:
                return out
        return _Walk(self).copy(value, 0)


_MAX_DEPTH = 200


# Types a structure's leaves mostly are, returned as they are without the ABC check below
# (UNDEFINED: the error of every call that returned a result).
_SCALARS = frozenset({int, float, bool, type(None), type(UNDEFINED)})

# Short strings come back on nearly every call (``"text"``, ``"completed"``, a working
# directory): their normalised text is remembered across calls, which costs a dict lookup of a
# short key instead of the gates' set-up. Bounded: emptied when full. ``builtin_text`` is a pure
# function of an exact str's text, so a remembered result is the result.
_SHORT = 32
_SHORT_CACHE_SIZE = 4096
_short_cache: dict[str, str] = {}


def _builtin_cached(value: str) -> str:
    """``builtin_text_python(value)`` for an exact str, short ones remembered (the text the C
    scanner, when there, has declined: not ASCII)."""
    if len(value) > _SHORT:
        return builtin_text_python(value)
    out = _short_cache.get(value)
    if out is None:
        out = builtin_text_python(value)
        if len(_short_cache) >= _SHORT_CACHE_SIZE:
            _short_cache.clear()
        _short_cache[value] = out
    return out


def _builtin_text_of(value: str) -> str:
    """``VolatileNormalizer().text(value)`` for the strings the C walk does not scan itself: an
    exact str of non-ASCII text, or a str subclass."""
    return _builtin_cached(value) if type(value) is str else builtin_text(value)


class _Walk:
    """One normalisation of a structure.

    ``done`` remembers the last long string of each length and its result: an exec result
    carries its output twice (content text and details.aggregated). Keyed by length and
    compared with ``==`` (a memcmp) rather than hashed: hashing reads the whole text, a
    comparison of two strings of one length stops at their first difference.
    """

    def __init__(self, normalizer: VolatileNormalizer) -> None:
        # Written out (not a dataclass): a generated __init__ stays interpreted when compiled.
        self.normalizer = normalizer
        self.done: dict[int, tuple[str, str]] = {}
        self.seen: set[int] = set()

    def string(self, value: str) -> str:
        """An exact str's normalised text, once per distinct long text of the structure."""
        if len(value) <= _SHORT:
            return self.normalizer.text(value)
        size = len(value)
        last = self.done.get(size)
        if last is not None and last[0] == value:
            return last[1]
        out = self.normalizer.text(value)
        self.done[size] = (value, out)
        return out

    def copy(self, value: Any, depth: int) -> Any:
        # Exact types first: isinstance against the Mapping ABC costs more than the rest of a
        # leaf's visit. Subclasses take the general path below, as before.
        kind = type(value)
        if kind is str:
            return self.string(value)
        if kind in _SCALARS:
            return value
        if isinstance(value, str):  # a subclass: it may compare or hash in its own way
            return self.normalizer.text(value)
        # Cycles and absurd depth are left as they are: canonical hashing copes with both, and
        # a normaliser must never be the reason a tool call fails.
        if depth > _MAX_DEPTH:
            return value
        if kind is dict or kind is list or kind is tuple:
            mapping = kind is dict
        elif isinstance(value, Mapping):
            mapping = True
        elif isinstance(value, (list, tuple)):
            mapping = False
        else:
            return value
        key = id(value)
        if key in self.seen:
            return value
        self.seen.add(key)
        try:
            if kind is dict:
                return self._dict(value, depth + 1)
            if kind is list:
                return self._list(value, depth + 1)
            if mapping:
                return {k: self._item(v, depth + 1) for k, v in value.items()}
            return [self._item(v, depth + 1) for v in value]
        finally:
            self.seen.discard(key)

    def _item(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            return self.string(value)
        if kind in _SCALARS:
            return value
        return self.copy(value, depth)

    def _dict(self, value: dict[Any, Any], depth: int) -> dict[Any, Any]:
        # Typed: the compiled build iterates the dict natively and calls _item directly.
        out: dict[Any, Any] = {}
        for k, v in value.items():
            out[k] = self._item(v, depth)
        return out

    def _list(self, value: list[Any], depth: int) -> list[Any]:
        return [self._item(v, depth) for v in value]


def validate_patterns(patterns: object) -> list[str]:
    """Problems with a ``volatilePatterns`` value: a list of regular expressions RE2 can run.

    See :func:`pattern_problem`. Each problem starts with the pattern's index, ``[i]: ``.
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
    """Why a user pattern is refused (not a string, invalid, not runnable by RE2), or ``None``.

    User patterns run on RE2, whose matching time grows linearly with the text whatever the
    pattern: a hand-written check for patterns that make a backtracking engine (Python's
    ``re``) take exponential or high-polynomial time always misses some shape
    (``a*a*a*a*a*a*a*a*b`` took 323 s on 50 characters). RE2 has no backreferences, lookaround,
    conditional groups, atomic groups or possessive repeats: a pattern using them is refused.
    """
    if not isinstance(pattern, str):
        return f"must be a string, got {type(pattern).__name__}"
    try:
        _compile_user(pattern)
    except UnicodeEncodeError:
        return f"{pattern!r} is not valid Unicode text (it holds a lone surrogate)"
    except Exception as exc:  # re2.error; imported lazily, so named by its message only
        reason = _re2_reason(exc)
    else:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"invalid regular expression {pattern!r}: {exc}"
    except RecursionError:
        pass
    return (
        f"{pattern!r} cannot run on the linear-time regular-expression engine (RE2) that "
        f"volatilePatterns use: {reason}; rewrite it without backreferences, lookahead or "
        "lookbehind, conditional or atomic groups and possessive repeats (see the "
        "volatilePatterns rules)"
    )


def _re2_reason(exc: BaseException) -> str:
    reason = exc.args[0] if exc.args else exc
    return reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)


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

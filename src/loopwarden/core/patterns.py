"""loopwarden's extra detectors (the ``recommended`` profile): consecutive repeats, cycles,
repeated errors, and the circuit breaker across pair and cycle patterns.

Pure functions over the run's most recent records, newest first. Each scan is bounded by the
profile's thresholds (never by ``historySize``), so the extra work per call stays constant.
OpenClaw's own detectors (``detectors.py``) run first and are unchanged; these only add verdicts
where OpenClaw's rules say nothing or only warn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from loopwarden.core.canonical import UNDEFINED, _hash_keyed, digest_stable, stable_stringify
from loopwarden.core.config import ResolvedConfig
from loopwarden.core.detectors import NOT_STUCK, Level, Verdict
from loopwarden.core.failures import (
    FAILURE,
    FAILURE_KEY_PREFIX,
    SUCCESS,
    is_acknowledgement,
    is_mapping,
    outcome_kind,
    same_failure,
    text_of,
)
from loopwarden.core.history import VETO_HASH
from loopwarden.core.tool_call import ToolCallRecord


class DetectorLimits:
    """What the extra detectors read of a config, as native fields: a ``ResolvedConfig`` is a
    Python dataclass, each of its attributes a generic look-up, and the detectors read a dozen
    of them on every call the profile judges. Built once per config (:func:`detector_limits`).
    """

    def __init__(self, config: ResolvedConfig) -> None:
        switches = config.detectors
        self.config = config
        self.repeated_error: bool = switches.repeated_error
        self.same_outcome: bool = switches.same_outcome
        self.consecutive: bool = switches.consecutive_repeat
        self.cycle: bool = switches.cycle
        self.has_policies = bool(config.tool_policies)
        self.repeated_error_threshold: int = config.repeated_error_threshold
        self.same_outcome_threshold: int = config.same_outcome_threshold
        self.silent_threshold: int = config.silent_threshold
        self.consecutive_critical_threshold: int = config.consecutive_critical_threshold
        self.consecutive_any_result_threshold: int = config.consecutive_any_result_threshold
        self.consecutive_warning_threshold: int = config.consecutive_warning_threshold
        self.circuit_breaker_threshold: int = config.global_circuit_breaker_threshold
        self.critical_threshold: int = config.critical_threshold
        self.warning_threshold: int = config.warning_threshold
        self.max_cycle_period: int = config.max_cycle_period
        longest = max(
            config.consecutive_any_result_threshold,
            config.silent_threshold,
            config.global_circuit_breaker_threshold + config.max_cycle_period,
        )
        self.scan_limit: int = longest + 1
        # Enough records to tell whether the next call repeats or continues a cycle at all
        # (see ``reaches_back``); most calls do neither, and need no more than these.
        self.short_scan: int = max(config.max_cycle_period, 2) + 1
        # Whether a call that repeats nothing gets no consecutive verdict (every threshold at
        # least 1, as resolve_config makes them): then it is not measured at all.
        self.repeats_from_one: bool = (
            min(
                config.consecutive_critical_threshold,
                config.consecutive_any_result_threshold,
                config.consecutive_warning_threshold,
            )
            >= 1
        )


def detector_limits(config: ResolvedConfig) -> DetectorLimits:
    """The config's :class:`DetectorLimits` (asked on every call, nearly always of one config:
    the last one is kept)."""
    last = _last_limits[0]
    if last is not None and last.config is config:
        return last
    limits = DetectorLimits(config)
    _last_limits[0] = limits  # one object, replaced whole: thread-safe
    return limits


_last_limits: list[DetectorLimits | None] = [None]


def scan_limit(config: ResolvedConfig) -> int:
    """How many recent records the extra detectors may need to look at."""
    return detector_limits(config).scan_limit


def reaches_back(tail: Sequence[ToolCallRecord], signature: str) -> bool:
    """Whether the extra detectors may read past ``tail`` (the run's newest
    ``DetectorLimits.short_scan`` records, newest first) for the next call ``signature``.

    Only a call that repeats one of the newest calls can: a consecutive repeat (its newest
    record has that signature) or a cycle of period ``p`` (its ``p``-th newest has it, ``p``
    from 2 to ``maxCyclePeriod``). A repeat that does not reach back to the second newest
    record stops there; so does every cycle whose ``p``-th newest record is not the call.
    """
    return any(tail[i].args_hash == signature for i in range(1, len(tail) - 1))


# ---------------------------------------------------------------------------------------------
# Consecutive repeat: the same call again and again with nothing in between.


@dataclass(init=False)
class Consecutive:
    """How many of the newest records are this exact call, and how many of those in a row
    returned one identical (normalised) result."""

    calls: int = 0
    identical: int = 0
    result_hash: str | None = None  # the result the identical ones returned

    def __init__(self, calls: int = 0, identical: int = 0, result_hash: str | None = None) -> None:
        # Written out instead of generated (init=False, and so not frozen, which would refuse
        # these assignments): the compiled build runs this natively, where the generated
        # __init__ would be an interpreted frame, on every call the profile judges.
        self.calls = calls
        self.identical = identical
        self.result_hash = result_hash


def consecutive_repeat(
    tail: Sequence[ToolCallRecord], signature: str, pending: int = 0
) -> Consecutive:
    """Measure the unbroken run of ``signature`` at the newest end of the run's history.

    ``pending``: how many of the records without a result are calls of the current batch
    still in flight (``countPendingCalls``); up to that many such records count as identical
    repeats, presumed to return the streak's result, as they would have run one at a time.
    So does a veto recorded before the call had any result (``VETO_HASH``, only possible
    while identical calls were in flight): it repeats whatever they returned.
    """
    calls = identical = 0
    latest: str | None = None
    streak_open = True
    for record in tail:
        if record.args_hash != signature:
            break
        calls += 1
        presumed = record.result_hash == VETO_HASH or (record.result_hash is None and pending > 0)
        if streak_open and presumed:
            if record.result_hash is None:
                pending -= 1
            identical += 1
            continue
        if not streak_open or record.result_hash is None:
            continue
        if latest is None:
            latest = record.result_hash
        elif record.result_hash != latest:
            streak_open = False
            continue
        identical += 1
    return Consecutive(calls, identical, latest)


class CallStreak(NamedTuple):
    """The run's newest calls: ``length`` in a row with one signature, counted as they are
    recorded, so a streak longer than ``historySize`` keeps its count
    (``consecutiveAnyResultThreshold`` is above the history the profile keeps)."""

    signature: str
    length: int


def _call_streak(signature: str, length: int) -> CallStreak:
    # tuple.__new__ directly: a NamedTuple's own __new__ is a generated lambda, an interpreted
    # frame on every call even in the compiled build.
    return tuple.__new__(CallStreak, (signature, length))


def next_call_streak(streak: CallStreak | None, signature: str) -> CallStreak:
    """The streak after one more call record of the run (a call, or a blocked call's veto)."""
    if streak is None or streak.signature != signature:
        return _call_streak(signature, 1)
    return _call_streak(signature, streak.length + 1)


# ---------------------------------------------------------------------------------------------
# Cycles: A-B-C-A-B-C..., generalising ping-pong (period 2).


@dataclass(frozen=True, init=False)
class Cycle:
    """The longest repeating tail of period ``period`` that the next call would extend."""

    period: int = 0
    count: int = 0
    no_progress: bool = False
    signatures: tuple[str, ...] = ()

    def __init__(
        self,
        period: int = 0,
        count: int = 0,
        no_progress: bool = False,
        signatures: tuple[str, ...] = (),
    ) -> None:
        # Written out (init=False), as the generated one does it: native in the compiled
        # build, where the generated __init__ is an interpreted frame on every cycle found.
        object.__setattr__(self, "period", period)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "no_progress", no_progress)
        object.__setattr__(self, "signatures", signatures)


_NO_CYCLE = Cycle()


def _cycle_of_period(tail: Sequence[ToolCallRecord], signature: str, period: int) -> Cycle:
    # The next call must continue the cycle: most calls end here, before any list is built.
    if len(tail) < period + 1 or tail[period - 1].args_hash != signature:
        return _NO_CYCLE
    head = [r.args_hash for r in tail[:period]]
    # A genuine cycle: `period` distinct calls (so the period is minimal).
    if len(set(head)) != period:
        return _NO_CYCLE
    matched = 0
    while matched + period < len(tail) and (
        tail[matched].args_hash == tail[matched + period].args_hash
    ):
        matched += 1
    if matched == 0:
        return _NO_CYCLE
    length = matched + period
    stable = all(
        tail[i].result_hash is not None and tail[i].result_hash == tail[i + period].result_hash
        for i in range(matched)
    )
    return Cycle(period, length + 1, stable, tuple(sorted(set(head))))


def cycle(
    tail: Sequence[ToolCallRecord], signature: str, min_period: int, max_period: int
) -> Cycle:
    """The strongest cycle (most calls) of period ``min_period..max_period`` at the tail."""
    best = _NO_CYCLE
    for period in range(min_period, max_period + 1):
        found = _cycle_of_period(tail, signature, period)
        if found.count > best.count:
            best = found
    return best


# ---------------------------------------------------------------------------------------------
# Repeated error: one tool failing the same way, whatever the arguments.


@dataclass(frozen=True, init=False)
class ErrorStreak:
    """The run's newest outcomes: one tool failing with one (normalised) outcome, ``count``
    times in a row."""

    tool: str
    result_hash: str
    count: int

    def __init__(self, tool: str, result_hash: str, count: int) -> None:
        # Written out (init=False), as the generated one does it: native in the compiled
        # build, where the generated __init__ is an interpreted frame on every failure.
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "result_hash", result_hash)
        object.__setattr__(self, "count", count)


def next_error_streak(
    streak: ErrorStreak | None, tool: str, result_hash: str | None, failed: bool
) -> ErrorStreak | None:
    """The streak after one more recorded outcome of the run."""
    if not failed or result_hash is None:
        return None
    if streak is not None and streak.tool == tool and streak.result_hash == result_hash:
        return ErrorStreak(tool, result_hash, streak.count + 1)
    return ErrorStreak(tool, result_hash, 1)


# ---------------------------------------------------------------------------------------------
# Outcomes as the recommended profile compares them (with ``normalizeVolatile``): an output
# that says nothing is one value whatever its wrapper, and an edit's result is compared with
# its numbers masked.

SILENT_RESULT = ""
"""What a call that succeeded without output is recorded as (see ``comparable_outcome``)."""
SILENT_RESULT_HASH = digest_stable(SILENT_RESULT)
"""Its outcome hash: the consecutive detector gives such calls ``consecutiveSilentThreshold``."""


def silent_result_hash() -> str:
    """``SILENT_RESULT_HASH`` as this process's digests make it (keyed in a coding-CLI hook)."""
    return digest_stable(SILENT_RESULT) if _hash_keyed() else SILENT_RESULT_HASH


# mini-swe-agent's observation of a command with no output, and SWE-agent's.
_SILENT_TEXT = re.compile(
    r"\s*(?:<returncode>\s*0\s*</returncode>\s*<output>\s*</output>"
    r"|Your command ran successfully and did not produce any output\.?)?\s*"
)
# Tools whose every call changes a file: re-applying one with the same arguments is never
# progress, even when the file's line count in the result grows each time.
_EDIT_TOOLS = frozenset(
    {"edit", "insert", "append", "edit_file", "apply_patch", "Edit", "MultiEdit", "replace"}
)
# Editor tools with a `command` argument; only these of their commands change the file.
_EDITOR_TOOLS = frozenset(
    {"str_replace_editor", "str_replace_based_edit_tool", "file_editor", "text_editor"}
)
_EDITOR_WRITES = frozenset({"insert", "str_replace", "create", "append"})
_NUMBER = re.compile(r"\d+")
_MAX_DEPTH = 64


def is_edit_call(tool: str, params: Any) -> bool:
    """Whether a call edits a file: SWE-agent's ``edit``/``insert``/``append``, the coding
    CLIs' edit tools, or an editor tool (``str_replace_editor`` …) asked to write."""
    if tool in _EDIT_TOOLS:
        return True
    if tool not in _EDITOR_TOOLS or not is_mapping(params):
        return False
    return params.get("command") in _EDITOR_WRITES


def _silent_text(text: object) -> bool:
    return isinstance(text, str) and _SILENT_TEXT.fullmatch(text) is not None


def is_silent(result: Any) -> bool:
    """Whether a successful call's result says nothing: no text, or only a shell wrapper
    around no output (``<returncode>0</returncode><output></output>``, SWE-agent's "did not
    produce any output"), or MCP-style content whose text items are all empty."""
    if result is None or _silent_text(result):
        return True
    if not is_mapping(result):
        return False
    if result.get("isError") is True or result.get("structuredContent"):
        return False
    details = result.get("details")
    if is_mapping(details) and (
        details.get("exitCode") not in (None, 0) or details.get("aggregated")
    ):
        return False
    content = result.get("content")
    return isinstance(content, list) and all(
        is_mapping(item) and item.get("type") == "text" and _silent_text(item.get("text"))
        for item in content
    )


def mask_numbers(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with every run of digits in its strings replaced by ``#``."""
    if isinstance(value, str):
        return _NUMBER.sub("#", value)
    if depth >= _MAX_DEPTH:
        return value
    if is_mapping(value):
        return {key: mask_numbers(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_numbers(item, depth + 1) for item in value]
    return value


# Where in its input a failure happened: the shell's line counter (dash's ``/bin/sh: 3:``;
# bash's ``line 17`` is masked by the volatile patterns already) and a parser's ``column N``,
# ``char N`` (``Expecting ',' delimiter: line 1 column 45 (char 44)``). Pasting a different
# text into the same broken command moves them, and nothing else. Only these are masked in a
# failure: any other number (``expected 300.0, got 75.0``) still tells two failures apart.
# Each is a literal the engine finds in C, looked for only when the text holds it, and only in
# the first and last ``_COUNTER_SPAN`` characters, where a failure says what failed (a shell
# reports a syntax error before running anything; a traceback ends with its message): a long
# log is not scanned end to end on every failure.
_COUNTERS = (
    ("sh: ", re.compile(r"sh: (-c: |)\d+:"), r"sh: \1<line>:"),
    ("column ", re.compile(r"\bcolumn \d+\b"), "column <n>"),
    ("char ", re.compile(r"\(char \d+\)"), "(char <n>)"),
)
_COUNTER_SPAN = 1000


def _mask_span(text: str) -> str:
    for literal, pattern, placeholder in _COUNTERS:
        if literal in text:
            text = pattern.sub(placeholder, text)
    return text


def _mask_text(text: str) -> str:
    if len(text) <= 2 * _COUNTER_SPAN:
        return _mask_span(text)
    head, tail = text[:_COUNTER_SPAN], text[-_COUNTER_SPAN:]
    masked_head, masked_tail = _mask_span(head), _mask_span(tail)
    if masked_head is head and masked_tail is tail:
        return text
    return masked_head + text[_COUNTER_SPAN:-_COUNTER_SPAN] + masked_tail


def _has_counter(value: Any, depth: int = 0) -> bool:
    """Whether a string of ``value`` would be masked (most failures have nothing to mask:
    they are returned as they are, uncopied)."""
    if isinstance(value, str):
        return _mask_text(value) is not value
    if depth >= _MAX_DEPTH:
        return False
    if is_mapping(value):
        value = value.values()
    elif not isinstance(value, list):
        return False
    return any(_has_counter(item, depth + 1) for item in value)


def mask_counters(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with the position counters of its strings masked (``column 5`` →
    ``column <n>``, ``(char 4)`` → ``(char <n>)``, ``/bin/sh: 3:`` → ``/bin/sh: <line>:``);
    ``value`` itself when it has none."""
    if isinstance(value, str):
        return _mask_text(value)
    if depth == 0 and not _has_counter(value):
        return value
    if depth >= _MAX_DEPTH:
        return value
    if is_mapping(value):
        return {key: mask_counters(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_counters(item, depth + 1) for item in value]
    return value


def comparable_outcome(tool: str, params: Any, result: Any, failed: bool) -> Any:
    """The result to hash for a call whose outcome was volatile-normalised: a silent success
    becomes ``SILENT_RESULT``; an edit's result loses its numbers (the same text inserted
    again makes ``(107 lines total)`` read ``(120 lines total)``: to a person no progress); a
    failure loses its position counters (``bash: -c: line 17: unexpected EOF`` is the same
    error at line 3)."""
    if not failed and is_silent(result):
        return SILENT_RESULT
    if is_edit_call(tool, params):
        return mask_numbers(result)
    if failed:
        return mask_counters(result)
    return result


# ---------------------------------------------------------------------------------------------
# The same outcome from different calls: an agent that rephrases a doomed call (the prose it
# pasted into a shell command, an editor command's wrong arguments, a view of a file it does
# not change) gets one result back again and again, and an exact comparison of the calls never
# sees a repeat. The stretch is followed one recorded outcome at a time (O(1) per outcome).

_EXCERPT_CHARS = 80
_OUTPUT_TAGS = re.compile(r"<returncode>[^<]*</returncode>|</?(?:output|warning)>")


def forms_stretch(tool: str, params: Any, result: Any, error: Any, failed: bool) -> bool:
    """Whether an outcome can be part of a same-outcome stretch: it must say something.

    Left out: no output at all (a silent success, a search with no match, an empty list), and
    a success that only acknowledges (a line or two, whatever the tool: "Email sent.",
    "Successfully modified file: x.py (1 replacements)."): many distinct calls answered alike
    is bulk work. ``result``/``error`` as they are hashed; ``tool`` and ``params`` are not
    asked (no tool name decides it).
    """
    if error is not None and error is not UNDEFINED:
        return not (isinstance(error, str) and not error.strip())
    kind = outcome_kind(result, error, failed)
    return kind == FAILURE or (kind == SUCCESS and not is_acknowledgement(result))


def is_failure_stretch(streak: OutcomeStreak) -> bool:
    """Whether a stretch's outcome is a failure (its key is a ``failure_key``)."""
    return streak.result_hash.startswith(FAILURE_KEY_PREFIX)


# The keys an outcome hash reads from a result object; any other key (a plain JSON object
# returned as the result, ``structuredContent``) is lost to it, so a stretch hashes it whole.
_HASHED_KEYS = frozenset({"content", "details", "isError"})


def stretch_key(result: Any, result_hash: str) -> str:
    """What a stretch compares: the outcome hash, or the whole result's digest when the hash
    leaves parts of it out (two different objects must not look alike)."""
    kind = type(result)
    if kind is str or kind is list:  # most results: read whole by the hash already
        return result_hash
    if is_mapping(result) and not _HASHED_KEYS.issuperset(result.keys()):
        return digest_stable(result)
    return result_hash


def outcome_excerpt(result: Any, error: Any) -> str:
    """The first line that says something, shortened: how a message names an outcome."""
    value = error if error is not None and error is not UNDEFINED else result
    text = text_of(value)
    if text is None:
        text = value if isinstance(value, str) else stable_stringify(value)[: 4 * _EXCERPT_CHARS]
    for line in _OUTPUT_TAGS.sub("\n", text[: 16 * _EXCERPT_CHARS]).splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= _EXCERPT_CHARS else line[: _EXCERPT_CHARS - 1] + "…"
    return ""


class OutcomeStreak(NamedTuple):
    """The run's newest outcomes: ``length`` in a row, one (comparable) outcome.

    ``varied``: not all from the same call (the first call's signature is ``first_signature``).
    ``tools``: the tools of the stretch. ``excerpt``: the outcome shortened, kept once the
    stretch is long enough to be named in a message. ``blocked_at``: the length at which the
    stretch's latest block fell (the call after a block runs: the agent's chance to change).
    ``mute``: the outcome says nothing (``forms_stretch``): such a stretch never warns.
    """

    result_hash: str
    length: int
    first_signature: str
    varied: bool = False
    tools: tuple[str, ...] = ()
    excerpt: str = ""
    blocked_at: int = 0
    mute: bool = False


_MAX_STREAK_TOOLS = 8


def _outcome_streak(
    result_hash: str,
    length: int,
    first_signature: str,
    varied: bool,
    tools: tuple[str, ...],
    excerpt: str,
    blocked_at: int,
    mute: bool,
) -> OutcomeStreak:
    # Every field given, through tuple.__new__: OutcomeStreak(...) and _replace run generated
    # code (interpreted frames even in the compiled build) on every recorded outcome.
    fields = (result_hash, length, first_signature, varied, tools, excerpt, blocked_at, mute)
    return tuple.__new__(OutcomeStreak, fields)


def next_outcome_streak(
    streak: OutcomeStreak | None,
    call: tuple[str, str],
    key: str | None,
    outcome: tuple[Any, Any, Any, bool],
    threshold: int,
) -> OutcomeStreak | None:
    """The stretch after one more recorded outcome of the run.

    ``call``: (tool, signature). ``key``: what the stretch compares (``stretch_key``), or None
    when the outcome has no hash, which ends the stretch. ``outcome``: (params, result, error,
    failed), the result and error as hashed. Most outcomes differ from the one before, so the
    rest is asked only of a stretch that grows: whether it says something, once, at its 2nd
    outcome (at its 1st when ``threshold`` is 2 or less), and its excerpt, once, at
    ``threshold - 1`` (its first message).
    """
    tool, signature = call
    if key is None:
        return None
    if streak is None or not same_failure(streak.result_hash, key):
        if threshold > 2:
            return _outcome_streak(key, 1, signature, False, (tool,), "", 0, False)
        streak = _outcome_streak(key, 0, signature, False, (tool,), "", 0, False)
    length = streak.length + 1
    if length == (1 if threshold <= 2 else 2):
        params, result, error, failed = outcome
        if not forms_stretch(tool, params, result, error, failed):
            return _outcome_streak(key, length, streak.first_signature, False, (), "", 0, True)
    if streak.mute:
        return _outcome_streak(
            key,
            length,
            streak.first_signature,
            streak.varied,
            streak.tools,
            streak.excerpt,
            streak.blocked_at,
            True,
        )
    tools = streak.tools
    if tool not in tools and len(tools) < _MAX_STREAK_TOOLS:
        tools = (*tools, tool)
    excerpt = streak.excerpt
    if length == max(1, threshold - 1):
        excerpt = outcome_excerpt(*outcome[1:3])
    varied = streak.varied or signature != streak.first_signature
    return _outcome_streak(
        key, length, streak.first_signature, varied, tools, excerpt, streak.blocked_at, False
    )


def presumed_outcome_streak(
    streak: OutcomeStreak | None, presumed: Sequence[ToolCallRecord]
) -> OutcomeStreak | None:
    """The stretch as if the batch's calls in flight had returned their presumed outcomes.

    ``presumed``: those calls, oldest first, each carrying the outcome its call last had in the
    run (``core/in_flight.py``). One that presumes the stretch's outcome extends it; one that
    presumes another ends it here (the new stretch's outcome is not known well enough to
    judge), so a batch is never blocked on a stretch its own calls may have broken.
    """
    for record in presumed:
        if streak is None or streak.mute or record.result_hash != streak.result_hash:
            return None if streak is None or not streak.mute else streak
        if streak.length < 2:
            # Whether the outcome says anything is asked at the stretch's 2nd real outcome
            # (next_outcome_streak); a presumed one cannot tell, so it does not extend it.
            return streak
        tools = streak.tools
        if record.tool_name not in tools and len(tools) < _MAX_STREAK_TOOLS:
            tools = (*tools, record.tool_name)
        varied = streak.varied or record.args_hash != streak.first_signature
        streak = _outcome_streak(
            streak.result_hash,
            streak.length + 1,
            streak.first_signature,
            varied,
            tools,
            streak.excerpt,
            streak.blocked_at,
            False,
        )
    return streak


def blocked_streak(streak: OutcomeStreak) -> OutcomeStreak:
    """The stretch after its block: the next call runs unless the outcome comes back again."""
    return _outcome_streak(
        streak.result_hash,
        streak.length,
        streak.first_signature,
        streak.varied,
        streak.tools,
        streak.excerpt,
        streak.length,
        streak.mute,
    )


# ---------------------------------------------------------------------------------------------
# Verdicts


BLOCKED_CLAUSE = "so the call was blocked"
"""What the consecutive detector's critical messages say the guard did; when the guard ends
the run instead (``stopAfterBlocks``), :func:`as_stop_message` says that."""


def as_stop_message(message: str) -> str:
    """A critical verdict's message for a decision that ends the run rather than blocking."""
    return message.replace(BLOCKED_CLAUSE, "so the run was stopped")


LAST_CHANCE_PREFIX = "last-chance:"
"""Warning keys of the consecutive detector's one warning before its block."""


def _consecutive_verdict(
    tool: str, signature: str, c: Consecutive, cfg: DetectorLimits, read_only: bool = False
) -> Verdict:
    """``read_only`` (``toolPolicies``): no warning for repeats whose results change."""
    key = f"consecutive:{tool}:{signature}"
    # A call that returns nothing gives the agent nothing to notice the repeat by (the real
    # corpus's no-op `sed -i`, run four times before the agent recovers): one more try for it.
    critical = (
        cfg.silent_threshold
        if c.result_hash == silent_result_hash()
        else cfg.consecutive_critical_threshold
    )
    if c.identical >= critical:
        return Verdict(
            True,
            "critical",
            "consecutive_repeat",
            c.identical,
            f"CRITICAL: Called {tool} {c.identical} times in a row with identical arguments and "
            f"identical results. This is a loop, {BLOCKED_CLAUSE}. Change your approach, "
            "or report the task as failed.",
            None,
            key,
        )
    if c.calls >= cfg.consecutive_any_result_threshold:
        return Verdict(
            True,
            "critical",
            "consecutive_repeat",
            c.calls,
            f"CRITICAL: Called {tool} {c.calls} times in a row with identical arguments. "
            f"This is a runaway loop, {BLOCKED_CLAUSE}. Change your approach, or report "
            "the task as failed.",
            None,
            key,
        )
    if c.calls >= cfg.consecutive_warning_threshold and not read_only:
        return Verdict(
            True,
            "warning",
            "consecutive_repeat",
            c.calls,
            f"WARNING: You have called {tool} {c.calls} times in a row with identical arguments. "
            "If this is not making progress, change your approach or report the task as failed.",
            None,
            key,
        )
    if critical > 1 and c.identical == critical - 1:
        # The last chance: one more identical result and the next call is blocked. Its own key,
        # so it is given once per streak (LAST_CHANCE_PREFIX in the guard's de-duplication).
        return Verdict(
            True,
            "warning",
            "consecutive_repeat",
            c.identical,
            f"WARNING: You have called {tool} {c.identical} times in a row with identical "
            "arguments and identical results, and this call is the same again. If it returns "
            "the same result, the next identical call will be blocked: change your approach or "
            "report the task as failed.",
            None,
            LAST_CHANCE_PREFIX + key,
        )
    return NOT_STUCK


def _cycle_verdict(tool: str, found: Cycle, cfg: DetectorLimits) -> Verdict:
    key = "cycle:" + "|".join(found.signatures)
    if found.no_progress and found.count >= cfg.circuit_breaker_threshold:
        return Verdict(
            True,
            "critical",
            "global_circuit_breaker",
            found.count,
            f"CRITICAL: a cycle of {found.period} tool calls has repeated with identical "
            f"no-progress outcomes ({found.count} consecutive calls). Session execution blocked "
            "by global circuit breaker to prevent runaway loops.",
            tool,
            key,
        )
    if found.period < 3:
        return NOT_STUCK  # pairs below the breaker are OpenClaw's ping-pong detector's job
    level: Level
    if found.no_progress and found.count >= cfg.critical_threshold:
        level = "critical"
        text = (
            f"CRITICAL: You are repeating a cycle of {found.period} tool calls "
            f"({found.count} consecutive calls) with no progress. This appears to be a stuck "
            "loop. Session execution blocked to prevent resource waste."
        )
    elif found.count >= cfg.warning_threshold:
        level = "warning"
        text = (
            f"WARNING: You are repeating a cycle of {found.period} tool calls "
            f"({found.count} consecutive calls). If this is not making progress, stop and "
            "report the task as failed."
        )
    else:
        return NOT_STUCK
    return Verdict(True, level, "cycle", found.count, text, tool, key)


def _error_verdict(tool: str, streak: ErrorStreak | None, cfg: DetectorLimits) -> Verdict:
    if streak is None or streak.tool != tool or streak.count < cfg.repeated_error_threshold:
        return NOT_STUCK
    return Verdict(
        True,
        "critical",
        "repeated_error",
        streak.count,
        f"CRITICAL: {tool} failed with the same error {streak.count} times in a row, whatever "
        "the arguments. Stop retrying it; change your approach or report the task as failed.",
        None,
        f"error:{tool}:{streak.result_hash}",
    )


SAME_OUTCOME_NAMED = " The result that keeps coming back: "
"""What precedes the outcome's excerpt in a same-outcome message (records drop what follows)."""


def _same_outcome_verdict(
    tool: str, signature: str, streak: OutcomeStreak | None, cfg: DetectorLimits
) -> Verdict:
    threshold = cfg.same_outcome_threshold
    if streak is None or streak.length < threshold - 1 or streak.mute:
        return NOT_STUCK  # no stretch yet, or an outcome that says nothing
    if not (streak.varied or signature != streak.first_signature):
        return NOT_STUCK  # one call repeated exactly is the consecutive detector's
    if tool not in streak.tools and len(streak.tools) < _MAX_STREAK_TOOLS:
        return NOT_STUCK  # a tool the stretch has not used: a new approach, let it run
    n = streak.length
    named = f'{SAME_OUTCOME_NAMED}"{streak.excerpt}"' if streak.excerpt else ""
    key = f"same-outcome:{streak.first_signature}:{streak.result_hash}"
    if not is_failure_stretch(streak):
        # The same success from distinct calls never blocks: at most one warning, for a
        # result that says more than an acknowledgement (an unchanged file window).
        if n != threshold - 1 or streak.blocked_at:
            return NOT_STUCK
        return Verdict(
            True,
            "warning",
            "same_outcome",
            n,
            f"WARNING: The last {n} calls got the same result, though not all of them were the "
            "same call. If that result is not what you are after, changing the arguments has "
            "not helped: change your approach." + named,
            None,
            LAST_CHANCE_PREFIX + key,
        )
    if n >= threshold and n > streak.blocked_at:
        return Verdict(
            True,
            "critical",
            "same_outcome",
            n,
            f"CRITICAL: The last {n} calls failed the same way, though not all of them were "
            f"the same call: changing the arguments has not helped, {BLOCKED_CLAUSE}. Find out "
            "why it fails and do it another way, or report the task as failed." + named,
            None,
            key,
        )
    if n == threshold - 1 and streak.blocked_at == 0:
        return Verdict(
            True,
            "warning",
            "same_outcome",
            n,
            f"WARNING: The last {n} calls failed the same way, though not all of them were the "
            "same call: changing the arguments has not helped. If this call fails so again, the "
            "next one will be blocked: find out why it fails, or report the task as failed."
            + named,
            None,
            LAST_CHANCE_PREFIX + key,  # given once per stretch, like the last-chance warning
        )
    return NOT_STUCK


def _repeat_verdict(
    tail: Sequence[ToolCallRecord],
    tool: str,
    signature: str,
    lim: DetectorLimits,
    pending: int,
    call_streak: CallStreak | None,
) -> Verdict:
    streak_length = 0
    if call_streak is not None and call_streak.signature == signature:
        streak_length = call_streak.length
    if streak_length == 0 and lim.repeats_from_one and (not tail or tail[0].args_hash != signature):
        return NOT_STUCK  # not a repeat: no call counted, none identical (most calls)
    repeat = consecutive_repeat(tail, signature, pending)
    if streak_length > repeat.calls:
        # The history may hold fewer calls than the streak: its own count is the longer.
        repeat = Consecutive(streak_length, repeat.identical, repeat.result_hash)
    read_only = False
    if lim.has_policies:
        policy = lim.config.policy(tool)
        read_only = policy is not None and policy.read_only
    return _consecutive_verdict(tool, signature, repeat, lim, read_only)


def _cycles_verdict(
    tail: Sequence[ToolCallRecord], tool: str, signature: str, lim: DetectorLimits
) -> Verdict:
    # Period 2 is included for the breaker across patterns; below it, pairs stay ping-pong's.
    found = cycle(tail, signature, 2, lim.max_cycle_period)
    if found.count == 0:
        return NOT_STUCK  # no cycle the call continues (most calls)
    return _cycle_verdict(tool, found, lim)


def with_extra_verdicts(
    verdict: Verdict,
    tail: Sequence[ToolCallRecord],
    call: tuple[str, str, bool],
    error_streak: ErrorStreak | None,
    lim: DetectorLimits,
    pending: int,
    outcome_streak: OutcomeStreak | None,
    call_streak: CallStreak | None,
) -> Verdict:
    """The strongest of ``verdict`` and the enabled extra detectors' verdicts for the next call:
    the most severe, on a tie the first, asked in the order OpenClaw's detectors, repeated
    error, same outcome, consecutive repeat, cycle; none asked once a critical verdict is found
    (none can be stronger).

    ``verdict``: OpenClaw's detectors' own. ``call``: (tool, signature, poll); a poll is left
    to the poll detector (no same-outcome or consecutive verdict). ``pending``: identical calls
    of the current batch in flight (see ``consecutive_repeat``). ``outcome_streak``: the run's
    same-outcome stretch (``next_outcome_streak``). ``call_streak``: the run's newest calls with
    one signature (``next_call_streak``).
    """
    tool, signature, poll = call
    best = verdict if verdict.stuck else NOT_STUCK
    if best.level == "critical":
        return best
    if lim.repeated_error:
        found = _error_verdict(tool, error_streak, lim)
        if found.stuck:  # always critical
            return found
    if not poll:
        if lim.same_outcome:
            best = _stronger(best, _same_outcome_verdict(tool, signature, outcome_streak, lim))
            if best.level == "critical":
                return best
        if lim.consecutive:
            best = _stronger(
                best, _repeat_verdict(tail, tool, signature, lim, pending, call_streak)
            )
            if best.level == "critical":
                return best
    if lim.cycle:
        return _stronger(best, _cycles_verdict(tail, tool, signature, lim))
    return best


def _stronger(best: Verdict, found: Verdict) -> Verdict:
    """``found`` when it is stronger than ``best`` (the earlier of two equals wins)."""
    if found.stuck and (found.level == "critical" or not best.stuck):
        return found
    return best

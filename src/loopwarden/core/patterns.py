"""loopwarden's extra detectors (the ``recommended`` profile): consecutive repeats, cycles,
repeated errors, and the circuit breaker across pair and cycle patterns.

Pure functions over the run's most recent records, newest first. Each scan is bounded by the
profile's thresholds (never by ``historySize``), so the extra work per call stays constant.
OpenClaw's own detectors (``detectors.py``) run first and are unchanged; these only add verdicts
where OpenClaw's rules say nothing or only warn.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loopwarden.core.canonical import UNDEFINED, _hash_keyed, digest_stable
from loopwarden.core.config import ResolvedConfig
from loopwarden.core.detectors import Level, Verdict
from loopwarden.core.history import VETO_HASH
from loopwarden.core.tool_call import ToolCallRecord


def scan_limit(config: ResolvedConfig) -> int:
    """How many recent records the extra detectors may need to look at."""
    longest = max(
        config.consecutive_any_result_threshold,
        config.silent_threshold,
        config.global_circuit_breaker_threshold + config.max_cycle_period,
    )
    return longest + 1


# ---------------------------------------------------------------------------------------------
# Consecutive repeat: the same call again and again with nothing in between.


@dataclass(frozen=True)
class Consecutive:
    """How many of the newest records are this exact call, and how many of those in a row
    returned one identical (normalised) result."""

    calls: int = 0
    identical: int = 0
    result_hash: str | None = None  # the result the identical ones returned


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


# ---------------------------------------------------------------------------------------------
# Cycles: A-B-C-A-B-C..., generalising ping-pong (period 2).


@dataclass(frozen=True)
class Cycle:
    """The longest repeating tail of period ``period`` that the next call would extend."""

    period: int = 0
    count: int = 0
    no_progress: bool = False
    signatures: tuple[str, ...] = ()


def _cycle_of_period(tail: Sequence[ToolCallRecord], signature: str, period: int) -> Cycle:
    if len(tail) < period + 1:
        return Cycle()
    head = [r.args_hash for r in tail[:period]]
    # A genuine cycle: `period` distinct calls (so the period is minimal), continued by the next.
    if len(set(head)) != period or signature != head[period - 1]:
        return Cycle()
    matched = 0
    while matched + period < len(tail) and (
        tail[matched].args_hash == tail[matched + period].args_hash
    ):
        matched += 1
    if matched == 0:
        return Cycle()
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
    best = Cycle()
    for period in range(min_period, max_period + 1):
        found = _cycle_of_period(tail, signature, period)
        if found.count > best.count:
            best = found
    return best


# ---------------------------------------------------------------------------------------------
# Repeated error: one tool failing the same way, whatever the arguments.

_NONZERO_RETURNCODE = re.compile(r"^\s*<returncode>\s*-?[1-9]\d*\s*</returncode>")
# Shell and runtime failure lines, as SWE-agent style observations show them (no exit code).
_FAILURE_TEXT = re.compile(
    r"^(?:(?:error|fatal)\b|traceback \(most recent call last\))"
    r"|: command not found$|: no such file or directory$|: permission denied$",
    re.IGNORECASE | re.MULTILINE,
)


def is_failure(result: Any, error: Any) -> bool:
    """Whether an outcome is a failure: an error, or a result that says it failed.

    Results say so by ``isError``, an exec-style ``details.status`` of failed/error/timeout or a
    non-zero ``details.exitCode``, a mini-swe-agent observation with a non-zero
    ``<returncode>``, or a text with a line that reads as a failure (starts with ``Error``,
    ``fatal`` or a traceback, or ends with ``command not found``, ``No such file or directory``,
    ``Permission denied``).
    """
    if error is not None and error is not UNDEFINED:
        return True
    if isinstance(result, str):
        return bool(_NONZERO_RETURNCODE.match(result) or _FAILURE_TEXT.search(result))
    if not isinstance(result, Mapping):
        return False
    if result.get("isError") is True:
        return True
    details = result.get("details")
    if not isinstance(details, Mapping):
        return False
    exit_code = details.get("exitCode")
    nonzero = isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
    return details.get("status") in ("failed", "error", "timeout") or nonzero


@dataclass(frozen=True)
class ErrorStreak:
    """The run's newest outcomes: one tool failing with one (normalised) outcome, ``count``
    times in a row."""

    tool: str
    result_hash: str
    count: int


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
    if tool not in _EDITOR_TOOLS or not isinstance(params, Mapping):
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
    if not isinstance(result, Mapping):
        return False
    if result.get("isError") is True or result.get("structuredContent"):
        return False
    details = result.get("details")
    if isinstance(details, Mapping) and (
        details.get("exitCode") not in (None, 0) or details.get("aggregated")
    ):
        return False
    content = result.get("content")
    return isinstance(content, list) and all(
        isinstance(item, Mapping) and item.get("type") == "text" and _silent_text(item.get("text"))
        for item in content
    )


def mask_numbers(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` with every run of digits in its strings replaced by ``#``."""
    if isinstance(value, str):
        return _NUMBER.sub("#", value)
    if depth >= _MAX_DEPTH:
        return value
    if isinstance(value, Mapping):
        return {key: mask_numbers(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_numbers(item, depth + 1) for item in value]
    return value


def comparable_outcome(tool: str, params: Any, result: Any, failed: bool) -> Any:
    """The result to hash for a call whose outcome was volatile-normalised: a silent success
    becomes ``SILENT_RESULT``; an edit's result loses its numbers (the same text inserted
    again makes ``(107 lines total)`` read ``(120 lines total)``: to a person no progress)."""
    if not failed and is_silent(result):
        return SILENT_RESULT
    if is_edit_call(tool, params):
        return mask_numbers(result)
    return result


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


def _consecutive_verdict(tool: str, signature: str, c: Consecutive, cfg: ResolvedConfig) -> Verdict:
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
    if c.calls >= cfg.consecutive_warning_threshold:
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
    return Verdict()


def _cycle_verdict(tool: str, found: Cycle, cfg: ResolvedConfig) -> Verdict:
    key = "cycle:" + "|".join(found.signatures)
    if found.no_progress and found.count >= cfg.global_circuit_breaker_threshold:
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
        return Verdict()  # pairs below the breaker are OpenClaw's ping-pong detector's job
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
        return Verdict()
    return Verdict(True, level, "cycle", found.count, text, tool, key)


def _error_verdict(tool: str, streak: ErrorStreak | None, cfg: ResolvedConfig) -> Verdict:
    if streak is None or streak.tool != tool or streak.count < cfg.repeated_error_threshold:
        return Verdict()
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


def extra_verdicts(
    tail: Sequence[ToolCallRecord],
    tool: str,
    signature: str,
    poll: bool,
    error_streak: ErrorStreak | None,
    cfg: ResolvedConfig,
    pending: int = 0,
) -> list[Verdict]:
    """Every verdict of the enabled extra detectors for the next call (stuck ones only).

    ``pending``: identical calls of the current batch in flight (see ``consecutive_repeat``).
    """
    verdicts: list[Verdict] = []
    switches = cfg.detectors
    if switches.repeated_error:
        verdicts.append(_error_verdict(tool, error_streak, cfg))
    if switches.consecutive_repeat and not poll:
        verdicts.append(
            _consecutive_verdict(tool, signature, consecutive_repeat(tail, signature, pending), cfg)
        )
    if switches.cycle:
        # Period 2 is included for the breaker across patterns; below it, pairs stay ping-pong's.
        found = cycle(tail, signature, 2, cfg.max_cycle_period)
        verdicts.append(_cycle_verdict(tool, found, cfg))
    return [v for v in verdicts if v.stuck]


_SEVERITY = {"critical": 2, "warning": 1}


def strongest(verdicts: Sequence[Verdict]) -> Verdict:
    """The most severe verdict; on a tie the first one (OpenClaw's own detectors come first)."""
    best = Verdict()
    for verdict in verdicts:
        if verdict.stuck and _SEVERITY[str(verdict.level)] > _SEVERITY.get(str(best.level), 0):
            best = verdict
    return best

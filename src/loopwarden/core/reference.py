"""The plain engine, kept verbatim as the test oracle for the incremental engine.

This is the original list-and-linear-walk implementation of the history and of detection:
obviously correct, O(historySize) per call. ``tests/test_engine_differential.py`` drives it and the
incremental engine (``history`` / ``detectors`` in this package) with the same random
sequences and asserts identical verdicts, records and histories after every step.

Nothing in the package imports this module at run time. Only the data types (``ToolCallRecord``,
``Verdict``) are shared, so that both engines' results compare equal; the logic, including the
message texts, is an independent copy. Added since: ``record_veto``, the plain form of the veto
record (``countBlockedCalls``). Not covered: ``toolPolicies`` (poll and read-only declarations,
own thresholds: an extension outside OpenClaw's rule table, tested in tests/test_detectors.py,
tests/test_profile_guard.py and tests/test_tool_policies.py).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from loopwarden.core.canonical import UNDEFINED, hash_tool_call, js_trim
from loopwarden.core.config import ResolvedConfig, resolve_config
from loopwarden.core.detectors import Verdict
from loopwarden.core.outcome import hash_tool_outcome
from loopwarden.core.tool_call import ToolCallRecord

ConfigLike = Mapping[str, Any] | ResolvedConfig | None
Level = Literal["warning", "critical"]


@dataclass
class ReferenceState:
    """One session's history as a plain list, oldest record first (the plain engine's state)."""

    history: list[ToolCallRecord] = field(default_factory=list)


def normalize_run_id(run_id: object) -> str | None:
    """Trimmed run id; empty, blank or non-string ids mean "no run"."""
    if not isinstance(run_id, str):
        return None
    trimmed = js_trim(run_id)
    return trimmed or None


def _now_ms() -> float:
    return time.time() * 1000.0


def _append(state: ReferenceState, record: ToolCallRecord, config: ResolvedConfig) -> None:
    state.history.append(record)
    overflow = len(state.history) - config.history_size
    if overflow > 0:
        del state.history[:overflow]


def record_call(
    state: ReferenceState,
    tool: str,
    params: Any,
    tool_call_id: str | None = None,
    config: ConfigLike = None,
    run_id: str | None = None,
) -> None:
    """Append a call with no result yet, then trim to ``historySize``."""
    resolved = resolve_config(config)
    record = ToolCallRecord(
        tool_name=tool,
        args_hash=hash_tool_call(tool, params),
        tool_call_id=tool_call_id,
        run_id=normalize_run_id(run_id),
        timestamp=_now_ms(),
    )
    _append(state, record, resolved)


def _pending_match(
    state: ReferenceState, tool: str, args_hash: str, tool_call_id: str | None, run: str | None
) -> ToolCallRecord | None:
    for record in reversed(state.history):
        if (
            record.run_id == run
            and record.tool_name == tool
            and record.args_hash == args_hash
            and record.result_hash is None
            and (tool_call_id is None or record.tool_call_id == tool_call_id)
        ):
            return record
    return None


def record_outcome(
    state: ReferenceState,
    tool: str,
    params: Any,
    tool_call_id: str | None = None,
    result: Any = UNDEFINED,
    error: Any = UNDEFINED,
    config: ConfigLike = None,
    run_id: str | None = None,
    *,
    send_tools: Collection[str] = (),
) -> ToolCallRecord | None:
    """Attach an outcome to the newest matching pending record, or append a new one.

    Returns the stored record, or None when the outcome has no hash (nothing is stored).
    """
    resolved = resolve_config(config)
    result_hash, unknown = hash_tool_outcome(tool, params, result, error, send_tools=send_tools)
    if result_hash is None:
        return None
    args_hash = hash_tool_call(tool, params)
    run = normalize_run_id(run_id)
    record = _pending_match(state, tool, args_hash, tool_call_id, run)
    if record is None:
        record = ToolCallRecord(tool, args_hash, tool_call_id, run, timestamp=_now_ms())
        record.result_hash, record.unknown_tool_name = result_hash, unknown
        _append(state, record, resolved)
    else:
        record.result_hash, record.unknown_tool_name = result_hash, unknown
    return record


def record_veto(
    state: ReferenceState,
    tool: str,
    params: Any,
    tool_call_id: str | None = None,
    config: ConfigLike = None,
    run_id: str | None = None,
) -> ToolCallRecord:
    """A blocked call recorded as complete, repeating the signature's no-progress hash."""
    resolved = resolve_config(config)
    args_hash = hash_tool_call(tool, params)
    run = normalize_run_id(run_id)
    _, latest = no_progress_streak(run_history(state, run), tool, args_hash)
    record = ToolCallRecord(tool, args_hash, tool_call_id, run, timestamp=_now_ms())
    record.result_hash = latest or "veto:tool-loop"
    _append(state, record, resolved)
    return record


NOT_STUCK = Verdict()


@dataclass(frozen=True)
class PingPong:
    """The ping-pong measurement P of §5."""

    count: int = 0
    no_progress: bool = False
    paired_tool: str | None = None
    signatures: tuple[str, str] | None = None


def run_history(state: ReferenceState, run_id: object) -> list[ToolCallRecord]:
    """The records this run's detection sees (scoped by normalised run id)."""
    run = normalize_run_id(run_id)
    return [r for r in state.history if r.run_id == run]


def is_known_poll(tool: str, params: Any) -> bool:
    """Known polling calls: ``command_status``, or ``process`` with action poll/log."""
    if tool == "command_status":
        return True
    return (
        tool == "process"
        and isinstance(params, Mapping)
        and params.get("action") in ("poll", "log")
    )


def unknown_tool_streak(history: Sequence[ToolCallRecord], tool: str) -> tuple[int, str | None]:
    """U: newest-first run of this tool's records failing with one unknown tool name."""
    count, name = 0, None
    for record in reversed(history):
        if record.tool_name != tool or record.unknown_tool_name is None:
            break
        if name is None:
            name = record.unknown_tool_name
        elif record.unknown_tool_name != name:
            break
        count += 1
    return count, name


def no_progress_streak(
    history: Sequence[ToolCallRecord], tool: str, signature: str
) -> tuple[int, str | None]:
    """N: identical outcomes of this signature, newest first, skipping records with no result."""
    count, latest = 0, None
    for record in reversed(history):
        if record.tool_name != tool or record.args_hash != signature:
            continue
        if record.result_hash is None:
            continue
        if latest is None:
            latest = record.result_hash
        elif record.result_hash != latest:
            break
        count += 1
    return count, latest


def repeat_count(history: Sequence[ToolCallRecord], tool: str, signature: str) -> int:
    """R: how often this signature appears in the run's history, whatever its outcome."""
    return sum(1 for r in history if r.tool_name == tool and r.args_hash == signature)


def ping_pong(history: Sequence[ToolCallRecord], signature: str) -> PingPong:
    """P: the alternating tail ``last, other, last, …`` that the current call would extend."""
    if not history:
        return PingPong()
    last = history[-1]
    other = next(
        (r.args_hash for r in reversed(history[:-1]) if r.args_hash != last.args_hash), None
    )
    if other is None:
        return PingPong()
    tail: list[ToolCallRecord] = []
    for i, record in enumerate(reversed(history)):
        if record.args_hash != (last.args_hash if i % 2 == 0 else other):
            break
        tail.append(record)
    if len(tail) < 2 or signature != other:
        return PingPong()
    last_side = {r.result_hash for r in tail[0::2]}
    other_side = {r.result_hash for r in tail[1::2]}
    evidence = (
        all(r.result_hash is not None for r in tail)
        and len(last_side) == 1
        and len(other_side) == 1
    )
    return PingPong(
        count=len(tail) + 1,
        no_progress=evidence,
        paired_tool=last.tool_name,
        signatures=(last.args_hash, other),
    )


def _verdict(
    level: Level, detector: str, count: int, message: str, key: str, paired: str | None = None
) -> Verdict:
    return Verdict(True, level, detector, count, message, paired, key)


def _unknown_tool(tool: str, count: int, name: str | None) -> Verdict:
    shown = name or tool
    return _verdict(
        "critical",
        "unknown_tool_repeat",
        count,
        f"CRITICAL: attempted unavailable tool {shown} {count} times. "
        "Stop retrying that missing tool and answer without it.",
        f"unknown-tool:{tool}:{name or 'unknown'}",
    )


def _breaker(tool: str, count: int, signature: str, latest: str | None) -> Verdict:
    return _verdict(
        "critical",
        "global_circuit_breaker",
        count,
        f"CRITICAL: {tool} has repeated identical no-progress outcomes {count} times. "
        "Session execution blocked by global circuit breaker to prevent runaway loops.",
        f"global:{tool}:{signature}:{latest or 'none'}",
    )


def _poll(level: Level, tool: str, count: int, signature: str, latest: str | None) -> Verdict:
    if level == "critical":
        message = (
            f"CRITICAL: Called {tool} with identical arguments and no progress {count} times. "
            "This appears to be a stuck polling loop. "
            "Session execution blocked to prevent resource waste."
        )
    else:
        message = (
            f"WARNING: You have called {tool} {count} times with identical arguments and no "
            "progress. Stop polling and either (1) increase wait time between checks, or "
            "(2) report the task as failed if the process is stuck."
        )
    key = f"poll:{tool}:{signature}:{latest or 'none'}"
    return _verdict(level, "known_poll_no_progress", count, message, key)


def _ping_pong(level: Level, pp: PingPong) -> Verdict:
    if level == "critical":
        message = (
            "CRITICAL: You are alternating between repeated tool-call patterns "
            f"({pp.count} consecutive calls) with no progress. This appears to be a stuck "
            "ping-pong loop. Session execution blocked to prevent resource waste."
        )
    else:
        message = (
            "WARNING: You are alternating between repeated tool-call patterns "
            f"({pp.count} consecutive calls). This looks like a ping-pong loop; "
            "stop retrying and report the task as failed."
        )
    key = "pingpong:" + "|".join(sorted(pp.signatures or ()))
    return _verdict(level, "ping_pong", pp.count, message, key, pp.paired_tool)


def _generic_critical(tool: str, count: int, signature: str, latest: str | None) -> Verdict:
    return _verdict(
        "critical",
        "generic_repeat",
        count,
        f"CRITICAL: Called {tool} with identical arguments and identical outcomes {count} "
        "times. Session execution blocked to prevent runaway loops.",
        f"generic:{tool}:{signature}:{latest or 'none'}",
    )


def _generic_warning(tool: str, count: int, signature: str) -> Verdict:
    return _verdict(
        "warning",
        "generic_repeat",
        count,
        f"WARNING: You have called {tool} {count} times with identical arguments. "
        "If this is not making progress, stop retrying and report the task as failed.",
        f"generic:{tool}:{signature}",
    )


def evaluate(
    history: Sequence[ToolCallRecord], tool: str, params: Any, config: ResolvedConfig
) -> Verdict:
    """Apply the §5 rule table to a run's history (already scoped to the run)."""
    signature = hash_tool_call(tool, params)
    unknown_count, unknown_name = unknown_tool_streak(history, tool)
    if unknown_count >= config.unknown_tool_threshold:
        return _unknown_tool(tool, unknown_count, unknown_name)
    streak, latest = no_progress_streak(history, tool, signature)
    if streak >= config.global_circuit_breaker_threshold:
        return _breaker(tool, streak, signature, latest)
    poll = is_known_poll(tool, params)
    switches = config.detectors
    if poll and switches.known_poll_no_progress:
        if streak >= config.critical_threshold:
            return _poll("critical", tool, streak, signature, latest)
        if streak >= config.warning_threshold:
            return _poll("warning", tool, streak, signature, latest)
    if switches.ping_pong:
        pp = ping_pong(history, signature)
        if pp.count >= config.critical_threshold and pp.no_progress:
            return _ping_pong("critical", pp)
        if pp.count >= config.warning_threshold:
            return _ping_pong("warning", pp)
    if not poll and switches.generic_repeat:
        if streak >= config.critical_threshold:
            return _generic_critical(tool, streak, signature, latest)
        repeats = repeat_count(history, tool, signature)
        if repeats >= config.warning_threshold:
            return _generic_warning(tool, repeats, signature)
    return NOT_STUCK


def detect(
    state: ReferenceState,
    tool: str,
    params: Any,
    config: Mapping[str, Any] | ResolvedConfig | None,
    run_id: str | None = None,
) -> Verdict:
    """The verdict for the next call, made *before* it is recorded."""
    resolved = resolve_config(config)
    if not resolved.detection_enabled:
        return NOT_STUCK
    return evaluate(run_history(state, run_id), tool, params, resolved)

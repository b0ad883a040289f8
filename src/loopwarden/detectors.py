"""SPEC §5 — detection: the verdict about the *next* call, from the run's history.

Pure functions over a list of records. Each measurement of §5 (U, N, R, poll, P) is one small
function; ``detect`` applies the rule table, first match wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from loopwarden.canonical import hash_tool_call
from loopwarden.config import ResolvedConfig, resolve_config
from loopwarden.history import SessionState, ToolCallRecord, normalize_run_id

Level = Literal["warning", "critical"]


@dataclass(frozen=True)
class Verdict:
    """What detection says about the next call: not stuck, or stuck with a level and reason."""

    stuck: bool = False
    level: Level | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    paired_tool_name: str | None = None
    warning_key: str | None = None


NOT_STUCK = Verdict()


@dataclass(frozen=True)
class PingPong:
    """The ping-pong measurement P of §5."""

    count: int = 0
    no_progress: bool = False
    paired_tool: str | None = None
    signatures: tuple[str, str] | None = None


def run_history(state: SessionState, run_id: object) -> list[ToolCallRecord]:
    """The records this run's detection sees (SPEC §4: scoped by normalised run id)."""
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
    state: SessionState,
    tool: str,
    params: Any,
    config: Mapping[str, Any] | ResolvedConfig | None,
    run_id: str | None = None,
) -> Verdict:
    """The verdict for the next call, made *before* it is recorded (SPEC §5)."""
    resolved = resolve_config(config)
    if not resolved.detection_enabled:
        return NOT_STUCK
    return evaluate(run_history(state, run_id), tool, params, resolved)

"""detection: the verdict about the *next* call, from the run's history.

``detect`` reads the measurements of §5 (U, N, R, poll, P) from the run's incremental state
(``_engine``, kept current by ``record_call`` / ``record_outcome``), so it costs O(1)
whatever ``historySize`` is, and applies the rule table, first match wins. The definitions as
walks over the history are in ``loopwarden.core.reference`` (the test oracle).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal

from loopwarden.core._engine import _Run
from loopwarden.core._engine import signature as signature_of
from loopwarden.core.config import ResolvedConfig, resolve_config
from loopwarden.core.history import Limits, SessionState, _checked_signature, limits_of

Level = Literal["warning", "critical"]


@dataclass(frozen=True, init=False)
class Verdict:
    """What detection says about the next call: not stuck, or stuck with a level and reason."""

    stuck: bool = False
    level: Level | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    paired_tool_name: str | None = None
    warning_key: str | None = None

    def __init__(
        self,
        stuck: bool = False,
        level: Level | None = None,
        detector: str | None = None,
        count: int = 0,
        message: str | None = None,
        paired_tool_name: str | None = None,
        warning_key: str | None = None,
    ) -> None:
        # Written out (init=False), as the generated one does it: the compiled build runs it
        # as native code, where the generated __init__ is interpreted and ten times slower.
        object.__setattr__(self, "stuck", stuck)
        object.__setattr__(self, "level", level)
        object.__setattr__(self, "detector", detector)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "paired_tool_name", paired_tool_name)
        object.__setattr__(self, "warning_key", warning_key)

    def __reduce__(self) -> tuple[type[Verdict], tuple[object, ...]]:
        # Copy and pickle through the constructor: a frozen dataclass compiled by mypyc cannot
        # be rebuilt field by field (its __setattr__ refuses), the pure one does not care.
        return (Verdict, tuple(getattr(self, field.name) for field in fields(self)))


NOT_STUCK = Verdict()


def is_known_poll(tool: str, params: Any) -> bool:
    """Known polling calls: ``command_status``, or ``process`` with action poll/log."""
    if tool == "command_status":
        return True
    # A dict answered first: isinstance(x, Mapping) runs abc's __instancecheck__, an
    # interpreted frame even in the compiled build.
    return (
        tool == "process"
        and (type(params) is dict or isinstance(params, Mapping))
        and params.get("action") in ("poll", "log")
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


def _ping_pong(
    level: Level, count: int, paired_tool: str | None, signatures: tuple[str, str]
) -> Verdict:
    if level == "critical":
        message = (
            "CRITICAL: You are alternating between repeated tool-call patterns "
            f"({count} consecutive calls) with no progress. This appears to be a stuck "
            "ping-pong loop. Session execution blocked to prevent resource waste."
        )
    else:
        message = (
            "WARNING: You are alternating between repeated tool-call patterns "
            f"({count} consecutive calls). This looks like a ping-pong loop; "
            "stop retrying and report the task as failed."
        )
    key = "pingpong:" + "|".join(sorted(signatures))
    return _verdict(level, "ping_pong", count, message, key, paired_tool)


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


def _evaluate(run: _Run, tool: str, params: Any, signature: str, limits: Limits) -> Verdict:
    """Apply the §5 rule table to one run's incremental state (``limits``: the config's)."""
    last = run.last  # U: the trailing streak of the newest segment
    if last.t >= limits.unknown_tool and last.tool == tool:
        return _unknown_tool(tool, last.t, last.unk)
    sig = run.sigs.get(signature)
    if sig is None:  # a signature the run has not seen: only a ping-pong could hold
        if run.tail >= 2 and signature == run.b and limits.ping_pong:
            return _ping_pong_verdict(run, limits) or NOT_STUCK
        return NOT_STUCK
    streak, latest = sig.streak, sig.latest
    if streak >= limits.breaker:
        return _breaker(tool, streak, signature, latest)
    poll = (tool == "command_status" or tool == "process") and is_known_poll(tool, params)
    read_only = False
    if limits.policies:  # loopwarden extension: per-tool policies (toolPolicies)
        policy = limits.config.policy(tool)
        if policy is not None:
            poll = poll or policy.poll
            read_only = policy.read_only
    if poll and limits.known_poll:
        if streak >= limits.critical:
            return _poll("critical", tool, streak, signature, latest)
        if streak >= limits.warning:
            return _poll("warning", tool, streak, signature, latest)
    if run.tail >= 2 and signature == run.b and limits.ping_pong:
        verdict = _ping_pong_verdict(run, limits)
        if verdict is not None:
            return verdict
    if not poll and limits.generic_repeat:
        if streak >= limits.critical:
            return _generic_critical(tool, streak, signature, latest)
        # A read-only tool repeated while its result changes is polling, not looping: only
        # repeats without progress (N) count toward its warning; the block above is unchanged.
        repeats = streak if read_only else sig.count
        if repeats >= limits.warning:
            return _generic_warning(tool, repeats, signature)
    return NOT_STUCK


def _ping_pong_verdict(run: _Run, limits: Limits) -> Verdict | None:
    """Rules 5 and 6, when the call would extend the run's alternating tail (P = tail + 1)."""
    count = run.tail + 1
    if count < limits.warning:
        return None
    a, b = run.a, run.b
    assert a is not None and b is not None and run.newest is not None
    paired = run.newest.tool_name
    side_a, side_b = run.side_a, run.side_b
    # No-progress evidence: every tail record has a result, one hash per side.
    evidence = len(side_a) == 1 and len(side_b) == 1 and None not in side_a and None not in side_b
    if count >= limits.critical and evidence:
        return _ping_pong("critical", count, paired, (a, b))
    return _ping_pong("warning", count, paired, (a, b))


def detect(
    state: SessionState,
    tool: str,
    params: Any,
    config: Mapping[str, Any] | ResolvedConfig | None,
    run_id: object = None,
    *,
    signature: object = None,
) -> Verdict:
    """The verdict for the next call, made *before* it is recorded.

    ``signature``: ``hash_tool_call(tool, params)`` when the caller already has it (it is then
    not computed again); ``ValueError`` if it does not have that shape.
    """
    if signature is not None:
        signature = _checked_signature(tool, signature)
    if type(config) is not ResolvedConfig:
        config = resolve_config(config)
    limits = limits_of(state, config)
    if not limits.enabled:
        return NOT_STUCK
    run_key = state._key(run_id)
    run = state._runs.get(run_key)
    if run is None:  # no record of this run: every count is 0
        return NOT_STUCK
    if signature is None:
        signature = signature_of(state._memo, tool, params)
    return _evaluate(run, tool, params, signature, limits)

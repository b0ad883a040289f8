"""The guard's decision about one call, as one pure step over a session's state.

``before_step`` (a call about to run) and ``after_step`` (its outcome) take what a guard's
decisions depend on besides the session (:class:`Judge`: the config and what it implies, the
agent, the send tools, whether warnings reach the model), the call, and the session's
:class:`~loopwarden.core.session.GuardSession`, which they update in place; they return the
:class:`Decision` and the loop events to deliver. Detection, warning de-duplication, block
accounting, stops, calls in flight and the post-compaction guard all happen here. No lock, no
store, no I/O, no logging: ``LoopGuard`` runs a step inside one store update, then logs and
delivers the events. A store may run a step more than once (an optimistic retry): it touches
only the session it is given.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from loopwarden.core.canonical import UNDEFINED
from loopwarden.core.compaction import CompactionLoopPersistedError, CompactionVerdict
from loopwarden.core.config import ResolvedConfig
from loopwarden.core.detectors import NOT_STUCK, Verdict, detect, is_known_poll
from loopwarden.core.errors import LoopStoppedError
from loopwarden.core.events import Action, EventType, LoopEvent
from loopwarden.core.failures import compiled_pattern, failure_key, is_failure
from loopwarden.core.history import (
    call_signature,
    keep_run,
    normalize_run_id,
    recent_run_records,
    record_call,
    record_outcome,
    record_veto,
)
from loopwarden.core.in_flight import presume, withdraw
from loopwarden.core.patterns import (
    LAST_CHANCE_PREFIX,
    SAME_OUTCOME_NAMED,
    as_stop_message,
    blocked_streak,
    comparable_outcome,
    detector_limits,
    next_call_streak,
    next_error_streak,
    next_outcome_streak,
    presumed_outcome_streak,
    reaches_back,
    stretch_key,
    with_extra_verdicts,
)
from loopwarden.core.session import MAX_IDLE_RUNS, GuardSession, InFlight, RunKey
from loopwarden.core.tool_call import ToolCallRecord

if TYPE_CHECKING:  # imported by Judge when a profile normalises (its regexes cost start-up)
    from loopwarden.core.volatile import VolatileNormalizer

DecisionAction = Literal["allow", "warn", "block", "stop"]
_V = TypeVar("_V")


@dataclass(frozen=True, init=False)
class Decision:
    """What the runtime should do with a tool call.

    ``allow`` / ``warn``: run the tool (for ``warn``, append ``message`` to its result so the
    model sees it). ``block``: do not run it; hand ``blocked_result`` back as its (error) result.
    ``stop``: do not run it and end the run; ``error`` is the :class:`LoopStoppedError` to raise
    (a ``CompactionLoopPersistedError`` when a loop survived compaction), and ``blocked_result``
    is there when the stopping call itself needs a result for the model.
    """

    action: DecisionAction
    message: str | None = None
    verdict: Verdict | None = None
    blocked_result: dict[str, Any] | None = None
    error: LoopStoppedError | None = None

    def __init__(
        self,
        action: DecisionAction,
        message: str | None = None,
        verdict: Verdict | None = None,
        blocked_result: dict[str, Any] | None = None,
        error: LoopStoppedError | None = None,
    ) -> None:
        # Written out (init=False), as the generated one does it: native in the compiled build
        # (core/detectors.py, Verdict).
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "verdict", verdict)
        object.__setattr__(self, "blocked_result", blocked_result)
        object.__setattr__(self, "error", error)

    @property
    def allowed(self) -> bool:
        """True when the tool may run (allow or warn)."""
        return self.action in ("allow", "warn")


ALLOW = Decision("allow")


def blocked_result(message: str) -> dict[str, Any]:
    """The tool result handed back to the model instead of running a blocked call (§6.1)."""
    return {
        "content": [{"type": "text", "text": message}],
        "details": {"status": "blocked", "deniedReason": "tool-loop", "reason": message},
    }


_UNKNOWN_PREFIX = "CRITICAL: attempted unavailable tool "
_UNKNOWN_SUFFIX = " times. Stop retrying that missing tool and answer without it."
WITHHELD_NAME = "(name withheld)"


def _action_message(message: str, action: Action) -> str:
    """An event's message: a stop says the run was stopped, not that the call was blocked."""
    return as_stop_message(message) if action == "stop" else message


def record_message(verdict: Verdict | CompactionVerdict, tool: str) -> str:
    """A verdict's message as events, logs, run records and reports carry it.

    The unknown-tool message names the missing tool as the runtime's error text named it: text
    copied out of an error, not chosen by loopwarden (``"Unknown tool: sk-..."``). Records keep
    that name only when it is the called tool's own name (case aside), which they carry anyway
    as ``tool_name``; any other name reads ``(name withheld)``. Every other message is built
    from tool names and counts only and is returned as is, but the same-outcome message: the
    excerpt of the result it names for the model is withheld. The model is not concerned: the
    decision's message stays exactly the detector's.
    """
    message = str(verdict.message)
    if verdict.detector == "same_outcome":
        head, named, _excerpt = message.partition(SAME_OUTCOME_NAMED)
        return f"{head}{named}(withheld)" if named else head
    if verdict.detector != "unknown_tool_repeat":
        return message
    suffix = f" {verdict.count}{_UNKNOWN_SUFFIX}"
    if message.startswith(_UNKNOWN_PREFIX) and message.endswith(suffix):
        name = message[len(_UNKNOWN_PREFIX) : -len(suffix)]
        if name in (tool, tool.lower()):
            return message
    # A name from elsewhere, or a message of another shape: nothing copied goes out.
    return f"{_UNKNOWN_PREFIX}{WITHHELD_NAME}{suffix}"


def is_poll_call(tool: str, params: Any, config: ResolvedConfig) -> bool:
    """A known polling call (§5), or a tool the config declares as polling (``toolPolicies``)."""
    if is_known_poll(tool, params):
        return True
    policy = config.policy(tool) if config.tool_policies else None
    return policy is not None and policy.poll


def _has_extra_detectors(config: ResolvedConfig) -> bool:
    switches = config.detectors
    return (
        switches.consecutive_repeat
        or switches.cycle
        or switches.repeated_error
        or switches.same_outcome
    )


class Judge:
    """What a guard's decisions depend on besides the session: the config and what it implies.

    Built once per config (the normaliser of volatile values and whether the profile's extra
    detectors run are derived here, not per call) and handed to every step.
    """

    __slots__ = (
        "agent_id",
        "config",
        "counts_calls",
        "extra_detectors",
        "follows_errors",
        "follows_outcomes",
        "has_policies",
        "normalizer",
        "records_calls",
        "send_tools",
        "surface_warnings",
    )

    def __init__(
        self,
        config: ResolvedConfig,
        agent_id: str | None = None,
        send_tools: Collection[str] = (),
        surface_warnings: bool = True,
    ) -> None:
        self.config = config
        self.agent_id = agent_id
        self.send_tools: frozenset[str] = frozenset(send_tools)
        self.surface_warnings = surface_warnings
        self.normalizer: VolatileNormalizer | None = None
        if config.normalize_volatile:
            from loopwarden.core.volatile import VolatileNormalizer

            self.normalizer = VolatileNormalizer.build(config.volatile_patterns)
        # OpenClaw's own profile never runs loopwarden's extra detectors.
        self.extra_detectors = config.detection_enabled and _has_extra_detectors(config)
        # What the steps read of the config on every call, as native fields (a read of the
        # Python dataclass is a generic attribute look-up). A tool's own config
        # (ResolvedConfig.for_tool) changes thresholds only, so these hold for it too.
        self.has_policies = bool(config.tool_policies)
        self.records_calls = config.records_calls
        self.counts_calls = config.detectors.consecutive_repeat and config.records_calls
        self.follows_errors = config.detectors.repeated_error
        self.follows_outcomes = config.detectors.same_outcome


# -- the steps -------------------------------------------------------------------------------


def before_step(
    judge: Judge,
    tool: str,
    params: Any,
    run_id: str | None,
    tool_call_id: str | None,
    batch: str | None,
    session: GuardSession,
) -> tuple[Decision, list[LoopEvent]]:
    """Decide about a call before it runs: allow, warn, block, or stop (a stopped run)."""
    events: list[LoopEvent] = []
    return _before(judge, session, (tool, params, tool_call_id, batch), run_id, events), events


def after_step(
    judge: Judge,
    tool: str,
    params: Any,
    outcome: tuple[Any, Any, bool | None],
    run_id: str | None,
    tool_call_id: str | None,
    batch: str | None,
    session: GuardSession,
) -> tuple[Decision, list[LoopEvent]]:
    """Record a call's outcome (``outcome``: result, error, failed); ``stop`` when a loop
    survived compaction."""
    events: list[LoopEvent] = []
    call = (tool, params, tool_call_id, batch)
    return _after(judge, session, call, outcome, run_id, events), events


def _before(
    judge: Judge,
    session: GuardSession,
    call: tuple[str, Any, str | None, str | None],
    run_id: str | None,
    events: list[LoopEvent],
) -> Decision:
    """``call`` is (tool, params, tool_call_id, batch)."""
    tool, params, tool_call_id, batch = call
    run = normalize_run_id(run_id)
    stop_reason = session.stopped.get(run)
    if stop_reason is not None:
        _keep_run(session, session.stopped, run, stop_reason)  # still active: kept stopped
        error = LoopStoppedError(stop_reason, detector="run_stopped", count=0, tool_name=tool)
        return Decision("stop", stop_reason, None, blocked_result(stop_reason), error)
    # A tool's own thresholds, if a policy sets any (the check inline: most guards have none).
    config = judge.config.for_tool(tool) if judge.has_policies else judge.config
    if not judge.records_calls:  # enabled: false, nothing is detected nor recorded
        return ALLOW
    # Hashed once here (or found in the session's memo), then handed to every step below.
    state = session.state
    signature = call_signature(state, tool, params)
    in_flight = _in_flight(session, run, batch, config)
    if in_flight is None:
        verdict = _verdict(judge, session, tool, params, signature, config, run, 0)
    else:
        asked = (tool, params, signature)
        verdict = _presumed_verdict(judge, session, asked, config, run, in_flight)
    if verdict.stuck and verdict.level == "critical":
        vetoed = (tool, params, signature, tool_call_id)
        return _block(judge, session, vetoed, run, verdict, config, events, batch)
    record_call(state, tool, params, tool_call_id, config, run, signature=signature)
    if judge.counts_calls:
        _count_call(session, run, signature)
    if in_flight is not None:
        in_flight.add(signature)
        _keep_run(session, session.in_flight, run, in_flight)
    if not verdict.stuck:
        return ALLOW
    if not _should_emit(session, verdict, run, config):
        return Decision("allow", None, verdict)
    events.append(_event(judge, session, run, "warn", verdict, tool, signature, tool_call_id))
    return Decision("warn", verdict.message if judge.surface_warnings else None, verdict)


def _presumed_verdict(
    judge: Judge,
    session: GuardSession,
    call: tuple[str, Any, str],
    config: ResolvedConfig,
    run: str | None,
    in_flight: InFlight,
) -> Verdict:
    """The verdict, with the batch's other calls in flight presumed to return what the same
    call last returned in the run (see core/in_flight.py), so that a batch is decided the
    same whether the runtime reports each outcome before the next call or all of them after
    every call. ``call`` is (tool, params, signature).
    """
    tool, params, signature = call
    presumption = presume(session.state, run, in_flight.calls)
    if presumption is None:
        pending = in_flight.calls.get(signature, 0)
        return _verdict(judge, session, tool, params, signature, config, run, pending)
    # The detectors read the run's same-outcome stretch as the presumed outcomes would leave
    # it: a copy of the map in its place while they read, the session's own put back after.
    kept = session.outcome_streaks
    try:
        streaks = dict(kept)
        stretch = presumed_outcome_streak(streaks.pop(run, None), presumption.completed)
        if stretch is not None:
            streaks[run] = stretch
        session.outcome_streaks = streaks
        pending = presumption.left.get(signature, 0)
        return _verdict(judge, session, tool, params, signature, config, run, pending)
    finally:
        session.outcome_streaks = kept
        withdraw(presumption)


def _in_flight(
    session: GuardSession, run: str | None, batch: str | None, config: ResolvedConfig
) -> InFlight | None:
    """The run's calls in flight in ``batch`` (None when pending calls are not counted).

    A new batch replaces the older one's entries: the model issued it after reading the
    older batch's results, so those calls ended even if their outcomes never came.
    """
    if batch is None or not config.count_pending_calls:
        return None
    current = session.in_flight.get(run)
    if current is None or current.batch != batch:
        return InFlight(batch)  # kept once a call of it is allowed
    return current


def _verdict(
    judge: Judge,
    session: GuardSession,
    tool: str,
    params: Any,
    signature: str,
    config: ResolvedConfig,
    run: str | None,
    pending: int,
) -> Verdict:
    """OpenClaw's detectors, then (when a profile turns them on) loopwarden's extra ones.

    ``pending``: identical calls of the current batch still in flight.
    """
    if judge.has_policies and (policy := config.policy(tool)) and policy.exempt:
        return NOT_STUCK
    verdict = detect(session.state, tool, params, config, run, signature=signature)
    # A tool's own config (ResolvedConfig.for_tool) changes thresholds only, never the switches.
    if not judge.extra_detectors:
        return verdict
    if verdict.stuck and verdict.level == "critical":
        return verdict  # no extra verdict is stronger (see with_extra_verdicts)
    limits = detector_limits(config)
    # The run's newest few records tell whether the call repeats any recent one; only then
    # may the detectors read further back (reaches_back), up to their scan limit.
    tail = recent_run_records(session.state, run, limits.short_scan)
    if len(tail) == limits.short_scan and reaches_back(tail, signature):
        tail = recent_run_records(session.state, run, limits.scan_limit)
    return with_extra_verdicts(
        verdict,
        tail,
        (tool, signature, is_poll_call(tool, params, config)),
        session.error_streaks.get(run),
        limits,
        pending,
        session.outcome_streaks.get(run),
        session.call_streaks.get(run),
    )


def _block(
    judge: Judge,
    session: GuardSession,
    call: tuple[str, Any, str, str | None],
    run: str | None,
    verdict: Verdict,
    config: ResolvedConfig,
    events: list[LoopEvent],
    batch: str | None,
) -> Decision:
    """A critical verdict: block the call, or stop the run when the profile says so.

    ``call`` is (tool, params, signature, tool_call_id): the signature comes from the caller.
    """
    tool, params, signature, tool_call_id = call
    message = str(verdict.message)
    stopping = _stops(session, run, verdict, config, batch)
    if stopping:
        message = as_stop_message(message)
    if tool_call_id is not None:
        session.remember_blocked(tool_call_id)
    stretch = session.outcome_streaks.get(run)
    if verdict.detector == "same_outcome" and stretch is not None:
        _keep_run(session, session.outcome_streaks, run, blocked_streak(stretch))
    if config.count_blocked_calls:
        record_veto(session.state, tool, params, tool_call_id, config, run, signature=signature)
        if config.detectors.consecutive_repeat:
            _count_call(session, run, signature)
    action: Action = "stop" if stopping else "block"
    events.append(_event(judge, session, run, action, verdict, tool, signature, tool_call_id))
    if not stopping:
        return Decision("block", message, verdict, blocked_result(message))
    _keep_run(session, session.stopped, run, message)
    session.run(run, judge.agent_id).stop_reason = as_stop_message(record_message(verdict, tool))
    error = LoopStoppedError(
        message, detector=str(verdict.detector), count=verdict.count, tool_name=tool
    )
    return Decision("stop", message, verdict, blocked_result(message), error)


def _stops(
    session: GuardSession,
    run: str | None,
    verdict: Verdict,
    config: ResolvedConfig,
    batch: str | None,
) -> bool:
    """Count one more block of the run; whether it turns into a stop (``stopAfterBlocks``).

    With a batch, the blocks of one batch count as one, and no call of the batch of the
    run's first block stops the run (not even the circuit breaker, which that batch's own
    vetoes may reach): the model must read a block before its run is stopped.
    """
    count = session.block_counts.get(run, 0)
    same_batch = (
        batch is not None
        and config.stop_after_blocks > 0
        and session.block_batches.get(run) == batch
    )
    if not same_batch:
        count += 1
        _keep_run(session, session.block_counts, run, count)
        if batch is not None and config.stop_after_blocks > 0:
            _keep_run(session, session.block_batches, run, batch)
    if config.stop_after_blocks <= 0 or (same_batch and count == 1):
        return False
    return count >= config.stop_after_blocks or verdict.detector == "global_circuit_breaker"


def _should_emit(
    session: GuardSession, verdict: Verdict, run: str | None, config: ResolvedConfig
) -> bool:
    """§6.3: emit when count // warningThreshold exceeds the last bucket for the key."""
    key = f"{run}:{verdict.warning_key}" if run else str(verdict.warning_key)
    threshold = (
        config.consecutive_warning_threshold
        if verdict.detector == "consecutive_repeat"
        else config.warning_threshold
    )
    # The last-chance warning is given once per call and run, below any bucket of the threshold.
    last_chance = str(verdict.warning_key).startswith(LAST_CHANCE_PREFIX)
    bucket = 1 if last_chance else verdict.count // threshold
    if bucket <= session.warning_buckets.get(key, 0):
        return False
    session.remember_bucket(key, bucket)
    return True


def _after(
    judge: Judge,
    session: GuardSession,
    call: tuple[str, Any, str | None, str | None],
    outcome: tuple[Any, Any, bool | None],
    run_id: str | None,
    events: list[LoopEvent],
) -> Decision:
    """``call`` is (tool, params, tool_call_id, batch)."""
    tool, params, tool_call_id, batch = call
    if tool_call_id is not None and tool_call_id in session.blocked_ids:
        return ALLOW
    run = normalize_run_id(run_id)
    state = session.state
    signature = None
    in_flight = session.in_flight.get(run)
    if in_flight is not None and batch in (None, in_flight.batch):
        signature = call_signature(state, tool, params)
        in_flight.done(signature)
    result, error, said = outcome
    failed = False
    if judge.follows_errors or judge.follows_outcomes:
        failed = is_failure(result, error, said, _failure_pattern(judge, tool))
    normalizer = judge.normalizer
    if normalizer is not None:
        result, error = normalizer.normalize(result), _normalize_error(normalizer, error)
        if error is None:
            result = comparable_outcome(tool, params, result, failed)
    record = record_outcome(
        state,
        tool,
        params,
        tool_call_id,
        result,
        UNDEFINED if error is None else error,
        judge.config,
        run,
        send_tools=judge.send_tools,
        signature=signature,
    )
    if judge.follows_errors:
        streak = next_error_streak(
            session.error_streaks.get(run),
            tool,
            None if record is None else record.result_hash,
            failed,
        )
        if streak is None:
            session.error_streaks.pop(run, None)
        else:
            _keep_run(session, session.error_streaks, run, streak)
    if judge.follows_outcomes:
        _follow_stretch(judge, session, run, (tool, params), record, (result, error, failed))
    guard = session.compaction.get(run)
    if record is None or guard is None or run in session.stopped:
        return ALLOW
    verdict = guard.observe(record.tool_name, record.args_hash, record.result_hash)
    if guard.armed:
        _keep_run(session, session.compaction, run, guard)
    else:  # the window is over: a disarmed guard does nothing until arm() starts afresh
        del session.compaction[run]
    if verdict is None:
        return ALLOW
    error_obj = CompactionLoopPersistedError.from_verdict(verdict)
    events.append(
        _event(judge, session, run, "stop", verdict, tool, record.args_hash, tool_call_id)
    )
    _keep_run(session, session.stopped, run, verdict.message)
    session.run(run, judge.agent_id).stop_reason = verdict.message
    return Decision("stop", verdict.message, None, None, error_obj)


def _keep_run(session: GuardSession, per_run: dict[RunKey, _V], run: RunKey, value: _V) -> None:
    """``session.keep_run``, compiled (the method is an interpreted frame: the recommended
    profile keeps a streak on nearly every call)."""
    keep_run(session.state, per_run, run, value, MAX_IDLE_RUNS)


def _count_call(session: GuardSession, run: str | None, signature: str) -> None:
    streaks = session.call_streaks
    streak = streaks.get(run)
    if streak is None:
        _keep_run(session, streaks, run, next_call_streak(None, signature))
    else:  # updated in place: trimming drops idle runs, not a run calling
        streaks[run] = next_call_streak(streak, signature)


def _follow_stretch(
    judge: Judge,
    session: GuardSession,
    run: str | None,
    call: tuple[str, Any],
    record: ToolCallRecord | None,
    outcome: tuple[Any, Any, bool],
) -> None:
    """The run's same-outcome stretch after this outcome (``outcome`` as it was hashed)."""
    stretches = session.outcome_streaks
    hashed = None if record is None else record.result_hash
    if record is None or hashed is None:
        stretches.pop(run, None)
        return
    tool, params = call
    result, error, failed = outcome
    error = UNDEFINED if error is None else error
    key = failure_key(result, error, params) if failed else stretch_key(result, hashed)
    stretch = next_outcome_streak(
        stretches.get(run),
        (tool, record.args_hash),
        key,
        (params, result, error, failed),
        judge.config.same_outcome_threshold,
    )
    if stretch is None:
        return
    if run in stretches:  # updated in place: trimming drops idle runs, not a run calling
        stretches[run] = stretch
    else:
        _keep_run(session, stretches, run, stretch)


def _failure_pattern(judge: Judge, tool: str) -> Any:
    """The tool's compiled ``failurePattern`` (``toolPolicies``), or None."""
    if not judge.has_policies:
        return None
    policy = judge.config.policy(tool)
    if policy is None or policy.failure_pattern is None:
        return None
    return compiled_pattern(policy.failure_pattern)


def _normalize_error(normalizer: VolatileNormalizer, error: Any) -> Any:
    """Volatile normalisation of an error: its text, as the outcome hash would read it."""
    if isinstance(error, BaseException):
        return normalizer.text(str(error) or type(error).__name__)
    return normalizer.normalize(error)


def _event(
    judge: Judge,
    session: GuardSession,
    run: str | None,
    action: Action,
    verdict: Verdict | CompactionVerdict,
    tool: str,
    args_hash: str | None,
    call_id: str | None,
) -> LoopEvent:
    """The loop event of a warning, block or stop, added to the run's record."""
    kind: EventType
    if isinstance(verdict, CompactionVerdict):
        kind, level, paired = "compaction.loop_persisted", "critical", None
    else:
        kind, level, paired = "tool.loop", str(verdict.level), verdict.paired_tool_name
    event = LoopEvent(
        type=kind,
        level=level,
        action=action,
        detector=str(verdict.detector),
        count=verdict.count,
        tool_name=tool,
        session=session.key,
        run_id=run,
        agent_id=judge.agent_id,
        message=_action_message(record_message(verdict, tool), action),
        paired_tool_name=paired,
        args_hash=args_hash,
        timestamp=time.time(),
        tool_call_id=call_id,
    )
    session.run(run, judge.agent_id).add(event)
    return event

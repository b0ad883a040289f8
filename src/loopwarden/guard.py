"""``LoopGuard``: the facade an agent runtime calls around every tool call.

The guard is a thin shell: it takes one session's state from the store, asks the pure core
(``detect``, ``record_call``, ``record_outcome``, ``PostCompactionGuard``) what to do, turns the
answer into a :class:`Decision`, and delivers events after the session is released. Its own
bookkeeping errors are logged and swallowed: the guard never breaks a tool call.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from loopwarden.core._lazylog import get_logger
from loopwarden.core.canonical import UNDEFINED
from loopwarden.core.compaction import (
    CompactionLoopPersistedError,
    CompactionVerdict,
    PostCompactionGuard,
)
from loopwarden.core.config import (
    ZERO_CONFIG_PROFILE,
    ResolvedConfig,
    effective_config,
    is_full_config,
    load_config,
    resolve_config,
)
from loopwarden.core.detectors import NOT_STUCK, Verdict, detect, is_known_poll
from loopwarden.core.errors import LoopStoppedError
from loopwarden.core.history import (
    call_signature,
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
    extra_verdicts,
    is_failure,
    next_call_streak,
    next_error_streak,
    next_outcome_streak,
    presumed_outcome_streak,
    scan_limit,
    stretch_key,
    strongest,
)
from loopwarden.core.tool_call import ToolCallRecord
from loopwarden.core.volatile import VolatileNormalizer
from loopwarden.events import Action, EventType, LoopEvent
from loopwarden.store import (
    AsyncSessionStore,
    GuardSession,
    InFlight,
    MemoryStore,
    RunRecord,
    SessionStore,
)
from loopwarden.stores import StoreUnavailableError

if TYPE_CHECKING:
    from loopwarden.records import RunRecorder

logger = get_logger("loopwarden.guard")  # logging loads on first use: start-up time

_T = TypeVar("_T")
DecisionAction = Literal["allow", "warn", "block", "stop"]
ConfigSource = Mapping[str, Any] | ResolvedConfig | str | Path | None
# One atomic step over a session: what the caller gets back, and the events to deliver after.
Step = Callable[[GuardSession], tuple["Decision", list[LoopEvent]]]


@dataclass(frozen=True)
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


_UNAVAILABLE_TEXT = (
    "Tool call refused: loop-detection state is unavailable (on_store_error='block'). Retry later."
)
STORE_UNAVAILABLE = Decision(
    "block", _UNAVAILABLE_TEXT, None, blocked_result(_UNAVAILABLE_TEXT), None
)


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


def _resolve_source(config: ConfigSource, agent_id: str | None) -> ResolvedConfig:
    if config is None:
        return resolve_config({"profile": ZERO_CONFIG_PROFILE})
    if isinstance(config, ResolvedConfig):
        return config
    if isinstance(config, (str, Path)):
        return load_config(config).resolve(agent_id)
    if is_full_config(config):
        return resolve_config(effective_config(config, agent_id))
    return resolve_config(config)


class LoopGuard:
    """Loop detection around every tool call of an agent runtime.

    ``config`` is None (the default: the ``recommended`` profile, which ends loops), a
    ``tools.loopDetection`` block, read exactly as OpenClaw reads it (``{"enabled": True}`` is
    OpenClaw's own detection; ``{"profile": "recommended"}`` picks loopwarden's), a whole
    OpenClaw config (a dict with a ``tools`` or ``agents`` key; ``agent_id`` picks the agent),
    a config file path, or a
    :class:`ResolvedConfig`. A file is validated strictly and raises :class:`ConfigError`.
    ``record_db`` writes loop events and run starts/ends to a SQLite file (``True``: the
    default location; see :mod:`loopwarden.records`).

    Every method that reads or writes the store has an async twin named with an ``a`` prefix
    (``abefore_tool_call``, ``aafter_tool_call``, ``aon_compaction_retry``, ``astart_run``,
    ``aend_run``, ``arun_record``) for code running on an event loop: the decisions are the
    same (one shared step over the session), only the store transaction differs. ``store``
    may be sync (:class:`SessionStore`), async (:class:`AsyncSessionStore`, for example
    ``AsyncRedisStore``) or both (:class:`MemoryStore`, ``SQLiteStore``). The async methods
    on a sync-only store (``RedisStore``, your own) run its update in a worker thread; the
    sync methods on an async-only store raise ``TypeError``.
    """

    def __init__(
        self,
        config: ConfigSource = None,
        *,
        agent_id: str | None = None,
        send_tools: Collection[str] = (),
        surface_warnings: bool = True,
        session_ttl: float | None = 3600.0,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        store: SessionStore | AsyncSessionStore | None = None,
        record_db: str | Path | bool | None = None,
    ) -> None:
        self.config = _resolve_source(config, agent_id)  # the setter derives what it implies
        self.agent_id = agent_id
        self.send_tools = frozenset(send_tools)
        self.surface_warnings = surface_warnings
        # `is None`, not `or`: an empty store is falsy (it has __len__).
        self.store: SessionStore | AsyncSessionStore = (
            store
            if store is not None
            else MemoryStore(session_ttl=session_ttl, max_sessions=max_sessions, clock=clock)
        )
        self._subscribers: list[Callable[[LoopEvent], None]] = []
        self._subscribers_lock = threading.Lock()
        # Set by RunRecorder.attach; told about run starts and ends (events come by subscribe).
        self.recorder: RunRecorder | None = None
        if record_db is not None and record_db is not False:
            from loopwarden.records import RunRecorder  # stdlib sqlite3 only when asked

            RunRecorder(None if record_db is True else record_db).attach(self)

    # -- events ----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[LoopEvent], None]) -> Callable[[], None]:
        """Call ``callback(event)`` for every emitted event; returns an unsubscribe function."""
        with self._subscribers_lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._subscribers_lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)

        return unsubscribe

    def _deliver(self, events: list[LoopEvent]) -> None:
        with self._subscribers_lock:
            subscribers = list(self._subscribers)
        for event in events:
            for callback in subscribers:
                _call_subscriber(callback, event)

    async def _adeliver(self, events: list[LoopEvent]) -> None:
        """``_deliver`` on an event loop: the run-records writer (SQLite) in a worker thread.

        Other subscribers run on the loop, as they would in the sync path's thread.
        """
        if not events:
            return
        recorder = self.recorder
        if recorder is None:
            self._deliver(events)
            return
        import asyncio  # already loaded on an event loop; not paid by a sync hook process

        with self._subscribers_lock:
            subscribers = list(self._subscribers)
        writer = recorder.record_event
        inline = [s for s in subscribers if s != writer]
        for event in events:
            for callback in inline:
                _call_subscriber(callback, event)
            if len(inline) < len(subscribers):
                await asyncio.to_thread(_call_subscriber, writer, event)

    def _event(
        self,
        session: GuardSession,
        run: str | None,
        action: Action,
        *,
        verdict: Verdict | CompactionVerdict,
        tool: str,
        args_hash: str | None,
        call_id: str | None = None,
    ) -> LoopEvent:
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
            agent_id=self.agent_id,
            message=_action_message(record_message(verdict, tool), action),
            paired_tool_name=paired,
            args_hash=args_hash,
            timestamp=time.time(),
            tool_call_id=call_id,
        )
        session.run(run, self.agent_id).add(event)
        log = logger.warning if action == "warn" else logger.error
        log(
            "loop %s: %s (%s, count %d) session=%s run=%s",
            action,
            tool,
            event.detector,
            event.count,
            session.key,
            run,
        )
        return event

    # -- the per-call protocol -------------------------------------------------------------

    def _sync_update(self) -> Callable[[str, Callable[[GuardSession], _T]], _T]:
        """The store's sync update; ``TypeError`` (a caller's bug, raised) if it has none."""
        if not hasattr(self.store, "update"):
            raise TypeError(
                f"{self.store!r} is async-only: call the guard's async methods "
                "(abefore_tool_call, aafter_tool_call, ...) or give LoopGuard a sync store"
            )
        store: SessionStore = self.store  # type: ignore[assignment]  # it has update()
        return store.update

    async def _aupdate(self, session: str, fn: Callable[[GuardSession], _T]) -> _T:
        """One atomic update through an async store, or a sync one in a worker thread."""
        aupdate = getattr(self.store, "aupdate", None)
        if aupdate is not None:
            result: _T = await aupdate(session, fn)
            return result
        import asyncio

        # A sync-only store may block (a network round trip): keep it off the event loop.
        return await asyncio.to_thread(self._sync_update(), session, fn)

    def _transact(self, session: str, fn: Callable[[GuardSession], _T], what: str) -> _T | None:
        """One atomic update of a session; a failure is logged and never reaches the caller."""
        update = self._sync_update()
        try:
            return update(session, fn)
        except Exception as exc:
            _log_failure(exc, what)
            return None

    async def _atransact(
        self, session: str, fn: Callable[[GuardSession], _T], what: str
    ) -> _T | None:
        """``_transact`` through the async store path."""
        try:
            return await self._aupdate(session, fn)
        except Exception as exc:
            _log_failure(exc, what)
            return None

    def _decide(self, session: str, step: Step, what: str, *, may_block: bool = False) -> Decision:
        update = self._sync_update()
        try:
            decision, events = update(session, step)
        except Exception as exc:
            return _failed(exc, what, may_block)
        if events:  # most calls have none: no lock taken, no subscriber list copied
            self._deliver(events)  # outside the session update: subscribers may call the guard
            _to_telemetry(events)
        return decision

    async def _adecide(
        self, session: str, step: Step, what: str, *, may_block: bool = False
    ) -> Decision:
        try:
            decision, events = await self._aupdate(session, step)
        except Exception as exc:
            return _failed(exc, what, may_block)
        await self._adeliver(events)
        _to_telemetry(events)  # on the loop, in the caller's context: its span is current
        return decision

    def before_tool_call(
        self,
        session: str,
        tool: str,
        params: Any,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        batch: str | None = None,
    ) -> Decision:
        """Decide about a call before it runs: allow, warn, block, or stop (stopped run).

        ``batch`` names the set of calls the model issued in one turn (for example the id of
        the model message that carries them), when the runtime knows it. Calls of one batch
        may run concurrently: with ``countPendingCalls`` an identical call still in flight
        counts as a repeat, and blocks within one batch count as one toward
        ``stopAfterBlocks`` (see docs/concurrency.md). None: calls are taken one at a time.
        """
        step = self._before_step(tool, params, run_id, tool_call_id, batch)
        return self._decide(session, step, f"before {tool}", may_block=True)

    async def abefore_tool_call(
        self,
        session: str,
        tool: str,
        params: Any,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        batch: str | None = None,
    ) -> Decision:
        """:meth:`before_tool_call` for an event loop: the same decision, awaited from the store."""
        step = self._before_step(tool, params, run_id, tool_call_id, batch)
        return await self._adecide(session, step, f"before {tool}", may_block=True)

    def _before_step(
        self,
        tool: str,
        params: Any,
        run_id: str | None,
        tool_call_id: str | None,
        batch: str | None,
    ) -> Step:
        def step(state: GuardSession) -> tuple[Decision, list[LoopEvent]]:
            events: list[LoopEvent] = []
            call = (tool, params, tool_call_id, batch)
            return self._before(state, call, run_id, events), events

        return step

    def _before(
        self,
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
            session.keep_run(session.stopped, run, stop_reason)  # still active: kept stopped
            error = LoopStoppedError(stop_reason, detector="run_stopped", count=0, tool_name=tool)
            return Decision("stop", stop_reason, None, blocked_result(stop_reason), error)
        # A tool's own thresholds, if a policy sets any (the check inline: most guards have none).
        config = self._config.for_tool(tool) if self._config.tool_policies else self._config
        if config.enabled is False:  # nothing is detected nor recorded: no signature needed
            return ALLOW
        # Hashed once here (or found in the session's memo), then handed to every step below.
        signature = call_signature(session.state, tool, params)
        in_flight = self._in_flight(session, run, batch, config)
        if in_flight is None:
            verdict = self._verdict(session, tool, params, signature, config, run)
        else:
            asked = (tool, params, signature)
            verdict = self._presumed_verdict(session, asked, config, run, in_flight)
        if verdict.stuck and verdict.level == "critical":
            vetoed = (tool, params, signature, tool_call_id)
            return self._block(session, vetoed, run, verdict, config, events, batch)
        record_call(session.state, tool, params, tool_call_id, config, run, signature=signature)
        if config.detectors.consecutive_repeat and config.records_calls:
            self._count_call(session, run, signature)
        if in_flight is not None:
            in_flight.add(signature)
            session.keep_run(session.in_flight, run, in_flight)
        if not verdict.stuck:
            return ALLOW
        if not self._should_emit(session, verdict, run, config):
            return Decision("allow", None, verdict)
        events.append(
            self._event(
                session,
                run,
                "warn",
                verdict=verdict,
                tool=tool,
                args_hash=signature,
                call_id=tool_call_id,
            )
        )
        return Decision("warn", verdict.message if self.surface_warnings else None, verdict)

    def _presumed_verdict(
        self,
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
            return self._verdict(session, tool, params, signature, config, run, pending)
        try:
            streaks = dict(session.outcome_streaks)
            stretch = presumed_outcome_streak(streaks.pop(run, None), presumption.completed)
            if stretch is not None:
                streaks[run] = stretch
            view = dataclasses.replace(session, outcome_streaks=streaks)
            pending = presumption.left.get(signature, 0)
            return self._verdict(view, tool, params, signature, config, run, pending)
        finally:
            withdraw(presumption)

    @staticmethod
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

    @property
    def config(self) -> ResolvedConfig:
        """The resolved config every decision uses; assigning one takes effect at the next call."""
        return self._config

    @config.setter
    def config(self, config: ResolvedConfig) -> None:
        # Derived once per config, not per call: the normaliser of volatile values and whether
        # the profile's extra detectors run (OpenClaw's own profile: never).
        self._config = config
        self._normalizer = (
            VolatileNormalizer.build(config.volatile_patterns)
            if config.normalize_volatile
            else None
        )
        self._extra_detectors = config.detection_enabled and _has_extra_detectors(config)

    def _verdict(
        self,
        session: GuardSession,
        tool: str,
        params: Any,
        signature: str,
        config: ResolvedConfig,
        run: str | None,
        pending: int = 0,
    ) -> Verdict:
        """OpenClaw's detectors, then (when a profile turns them on) loopwarden's extra ones.

        ``pending``: identical calls of the current batch still in flight.
        """
        if config.tool_policies and (policy := config.policy(tool)) and policy.exempt:
            return NOT_STUCK
        verdict = detect(session.state, tool, params, config, run, signature=signature)
        # A tool's own config (ResolvedConfig.for_tool) changes thresholds only, never the switches.
        if not self._extra_detectors:
            return verdict
        tail = recent_run_records(session.state, run, scan_limit(config))
        poll = is_poll_call(tool, params, config)
        streak = session.error_streaks.get(run)
        extra = extra_verdicts(
            tail,
            tool,
            signature,
            poll,
            streak,
            config,
            pending,
            outcome_streak=session.outcome_streaks.get(run),
            call_streak=session.call_streaks.get(run),
        )
        return strongest([verdict, *extra])

    def _block(
        self,
        session: GuardSession,
        call: tuple[str, Any, str, str | None],
        run: str | None,
        verdict: Verdict,
        config: ResolvedConfig,
        events: list[LoopEvent],
        batch: str | None = None,
    ) -> Decision:
        """A critical verdict: block the call, or stop the run when the profile says so.

        ``call`` is (tool, params, signature, tool_call_id): the signature comes from the caller.
        """
        tool, params, signature, tool_call_id = call
        message = str(verdict.message)
        stopping = self._stops(session, run, verdict, config, batch)
        if stopping:
            message = as_stop_message(message)
        if tool_call_id is not None:
            session.remember_blocked(tool_call_id)
        stretch = session.outcome_streaks.get(run)
        if verdict.detector == "same_outcome" and stretch is not None:
            session.keep_run(session.outcome_streaks, run, blocked_streak(stretch))
        if config.count_blocked_calls:
            record_veto(session.state, tool, params, tool_call_id, config, run, signature=signature)
            if config.detectors.consecutive_repeat:
                self._count_call(session, run, signature)
        action: Action = "stop" if stopping else "block"
        events.append(
            self._event(
                session,
                run,
                action,
                verdict=verdict,
                tool=tool,
                args_hash=signature,
                call_id=tool_call_id,
            )
        )
        if not stopping:
            return Decision("block", message, verdict, blocked_result(message))
        session.keep_run(session.stopped, run, message)
        session.run(run, self.agent_id).stop_reason = as_stop_message(record_message(verdict, tool))
        error = LoopStoppedError(
            message, detector=str(verdict.detector), count=verdict.count, tool_name=tool
        )
        return Decision("stop", message, verdict, blocked_result(message), error)

    @staticmethod
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
            session.keep_run(session.block_counts, run, count)
            if batch is not None and config.stop_after_blocks > 0:
                session.keep_run(session.block_batches, run, batch)
        if config.stop_after_blocks <= 0 or (same_batch and count == 1):
            return False
        return count >= config.stop_after_blocks or verdict.detector == "global_circuit_breaker"

    def _should_emit(
        self, session: GuardSession, verdict: Verdict, run: str | None, config: ResolvedConfig
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

    def after_tool_call(
        self,
        session: str,
        tool: str,
        params: Any,
        *,
        result: Any = UNDEFINED,
        error: Any = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        failed: bool | None = None,
        batch: str | None = None,
    ) -> Decision:
        """Record a call's outcome; returns ``stop`` when a loop survived compaction (§7).

        ``failed`` says whether the call failed when the runtime knows (a tool message with an
        error status, an exit code): only the repeated-error detector reads it; when it is None
        the outcome itself is read for signs of failure. ``batch``: the one the call was
        decided in, when known (an outcome of an older batch then leaves the current one's
        count of calls in flight alone).
        """
        step = self._after_step(tool, params, (result, error, failed), run_id, tool_call_id, batch)
        return self._decide(session, step, f"after {tool}")

    async def aafter_tool_call(
        self,
        session: str,
        tool: str,
        params: Any,
        *,
        result: Any = UNDEFINED,
        error: Any = None,
        run_id: str | None = None,
        tool_call_id: str | None = None,
        failed: bool | None = None,
        batch: str | None = None,
    ) -> Decision:
        """:meth:`after_tool_call` for an event loop."""
        step = self._after_step(tool, params, (result, error, failed), run_id, tool_call_id, batch)
        return await self._adecide(session, step, f"after {tool}")

    def _after_step(
        self,
        tool: str,
        params: Any,
        outcome: tuple[Any, Any, bool | None],
        run_id: str | None,
        tool_call_id: str | None,
        batch: str | None,
    ) -> Step:
        def step(state: GuardSession) -> tuple[Decision, list[LoopEvent]]:
            events: list[LoopEvent] = []
            call = (tool, params, tool_call_id, batch)
            return self._after(state, call, outcome, run_id, events), events

        return step

    def _after(
        self,
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
        config = self._config
        signature = None
        in_flight = session.in_flight.get(run)
        if in_flight is not None and batch in (None, in_flight.batch):
            signature = call_signature(session.state, tool, params)
            in_flight.done(signature)
        result, error, failed = outcome
        switches = config.detectors
        if failed is None:
            failed = (switches.repeated_error or switches.same_outcome) and is_failure(
                result, error
            )
        if self._normalizer is not None:
            result, error = self._normalizer.normalize(result), self._normalize_error(error)
            if error is None:
                result = comparable_outcome(tool, params, result, failed is True)
        record = record_outcome(
            session.state,
            tool,
            params,
            tool_call_id,
            result,
            UNDEFINED if error is None else error,
            config,
            run,
            send_tools=self.send_tools,
            signature=signature,
        )
        if config.detectors.repeated_error:
            streak = next_error_streak(
                session.error_streaks.get(run),
                tool,
                None if record is None else record.result_hash,
                failed,
            )
            if streak is None:
                session.error_streaks.pop(run, None)
            else:
                session.keep_run(session.error_streaks, run, streak)
        if switches.same_outcome:
            self._follow_stretch(session, run, (tool, params), record, (result, error, failed))
        guard = session.compaction.get(run)
        if record is None or guard is None or run in session.stopped:
            return ALLOW
        verdict = guard.observe(record.tool_name, record.args_hash, record.result_hash)
        if guard.armed:
            session.keep_run(session.compaction, run, guard)
        else:  # the window is over: a disarmed guard does nothing until arm() starts afresh
            del session.compaction[run]
        if verdict is None:
            return ALLOW
        error_obj = CompactionLoopPersistedError.from_verdict(verdict)
        events.append(
            self._event(
                session,
                run,
                "stop",
                verdict=verdict,
                tool=tool,
                args_hash=record.args_hash,
                call_id=tool_call_id,
            )
        )
        session.keep_run(session.stopped, run, verdict.message)
        session.run(run, self.agent_id).stop_reason = verdict.message
        return Decision("stop", verdict.message, None, None, error_obj)

    @staticmethod
    def _count_call(session: GuardSession, run: str | None, signature: str) -> None:
        streaks = session.call_streaks
        streak = streaks.get(run)
        if streak is None:
            session.keep_run(streaks, run, next_call_streak(None, signature))
        else:  # updated in place: trimming drops idle runs, not a run calling
            streaks[run] = next_call_streak(streak, signature)

    def _follow_stretch(
        self,
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
        stretch = next_outcome_streak(
            stretches.get(run),
            (tool, record.args_hash),
            stretch_key(result, hashed),
            (params, result, UNDEFINED if error is None else error, failed),
            self._config.same_outcome_threshold,
        )
        if stretch is None:
            return
        if run in stretches:  # updated in place: trimming drops idle runs, not a run calling
            stretches[run] = stretch
        else:
            session.keep_run(stretches, run, stretch)

    def _normalize_error(self, error: Any) -> Any:
        """Volatile normalisation of an error: its text, as the outcome hash would read it."""
        assert self._normalizer is not None
        if isinstance(error, BaseException):
            return self._normalizer.text(str(error) or type(error).__name__)
        return self._normalizer.normalize(error)

    # -- runs and compaction ---------------------------------------------------------------

    def on_compaction_retry(self, session: str, *, run_id: str | None = None) -> None:
        """Arm the post-compaction guard of the run (call at each successful compaction retry)."""
        if self._config.compaction_guard_enabled:
            self._transact(session, self._arm_step(run_id), "arming the post-compaction guard")

    async def aon_compaction_retry(self, session: str, *, run_id: str | None = None) -> None:
        """:meth:`on_compaction_retry` for an event loop."""
        if self._config.compaction_guard_enabled:
            await self._atransact(
                session, self._arm_step(run_id), "arming the post-compaction guard"
            )

    def _arm_step(self, run_id: str | None) -> Callable[[GuardSession], None]:
        run = normalize_run_id(run_id)

        def arm(state: GuardSession) -> None:
            guard = state.compaction.get(run)
            if guard is None:
                guard = PostCompactionGuard(True, self._config.post_compaction_window)
            state.keep_run(state.compaction, run, guard)
            guard.arm()

        return arm

    def start_run(self, session: str, run_id: str | None = None) -> None:
        """Mark the start of a run: a fresh run record, no stop, no compaction window."""
        self._transact(session, self._start_step(run_id), "starting a run")
        if self.recorder is not None:
            self.recorder.run_started(session, normalize_run_id(run_id), self.agent_id)

    async def astart_run(self, session: str, run_id: str | None = None) -> None:
        """:meth:`start_run` for an event loop (the run-records write goes to a worker thread)."""
        await self._atransact(session, self._start_step(run_id), "starting a run")
        if self.recorder is not None:
            import asyncio

            run = normalize_run_id(run_id)
            await asyncio.to_thread(self.recorder.run_started, session, run, self.agent_id)

    def _start_step(self, run_id: str | None) -> Callable[[GuardSession], None]:
        run = normalize_run_id(run_id)

        def start(state: GuardSession) -> None:
            state.forget_run(run)
            state.run(run, self.agent_id).started_at = time.time()

        return start

    def end_run(
        self, session: str, run_id: str | None = None, *, outcome: str = "completed"
    ) -> RunRecord | None:
        """Mark the end of a run and return its record (``stopped`` if the guard stopped it)."""
        ended = self._transact(session, self._end_step(run_id, outcome), "ending a run")
        if ended is not None and self.recorder is not None:
            self.recorder.run_ended(ended)
        return ended

    async def aend_run(
        self, session: str, run_id: str | None = None, *, outcome: str = "completed"
    ) -> RunRecord | None:
        """:meth:`end_run` for an event loop (the run-records write goes to a worker thread)."""
        ended = await self._atransact(session, self._end_step(run_id, outcome), "ending a run")
        if ended is not None and self.recorder is not None:
            import asyncio

            await asyncio.to_thread(self.recorder.run_ended, ended)
        return ended

    def _end_step(self, run_id: str | None, outcome: str) -> Callable[[GuardSession], RunRecord]:
        run = normalize_run_id(run_id)

        def end(state: GuardSession) -> RunRecord:
            record = state.run(run, self.agent_id)
            record.ended_at = time.time()
            record.outcome = "stopped" if run in state.stopped else outcome
            state.compaction.pop(run, None)
            return record

        return end

    def run_record(self, session: str, run_id: str | None = None) -> list[LoopEvent]:
        """The loop events of one run, in order (empty when the run had none)."""
        peek = getattr(self.store, "peek", None)
        if peek is None:
            raise TypeError(f"{self.store!r} is async-only: use arun_record")
        return _events_of(peek(session), run_id)

    async def arun_record(self, session: str, run_id: str | None = None) -> list[LoopEvent]:
        """:meth:`run_record` for an event loop."""
        apeek = getattr(self.store, "apeek", None)
        if apeek is not None:
            return _events_of(await apeek(session), run_id)
        import asyncio

        return await asyncio.to_thread(self.run_record, session, run_id)


def _events_of(state: GuardSession | None, run_id: str | None) -> list[LoopEvent]:
    if state is None:
        return []
    record = state.runs.get(normalize_run_id(run_id))
    return list(record.events) if record else []


def _to_telemetry(events: list[LoopEvent]) -> None:
    """Loop events to OpenTelemetry, when the application has imported it (else free).

    Only a look at ``sys.modules``: a process that never imported OpenTelemetry cannot have
    configured it, and loopwarden does not import it for them (a hook's start-up stays short).
    """
    modules = sys.modules
    if events and (
        "opentelemetry.trace" in modules
        or "opentelemetry._logs" in modules
        or "loopwarden.otel" in modules  # a hook or the proxy asked to export (the environment)
    ):
        from loopwarden import otel

        otel.emit(events)


def _call_subscriber(callback: Callable[[LoopEvent], None], event: LoopEvent) -> None:
    try:
        callback(event)
    except Exception:
        logger.exception("loop event subscriber %r failed", callback)


def _log_failure(exc: Exception, what: str) -> None:
    """Log a failed store update: the tool call goes on without loop accounting."""
    if isinstance(exc, StoreUnavailableError):
        log = logger.debug if exc.reported else logger.error  # an outage is logged once
        log("loop state unavailable (%s): %s", what, exc.message)
    else:
        logger.error("loop accounting failed (%s); the tool call proceeds", what, exc_info=exc)


def _failed(exc: Exception, what: str, may_block: bool) -> Decision:
    """The decision when the store failed: allow, or refuse under ``on_store_error='block'``."""
    _log_failure(exc, what)
    if may_block and isinstance(exc, StoreUnavailableError) and exc.policy == "block":
        return STORE_UNAVAILABLE
    return ALLOW


def _has_extra_detectors(config: ResolvedConfig) -> bool:
    switches = config.detectors
    return (
        switches.consecutive_repeat
        or switches.cycle
        or switches.repeated_error
        or switches.same_outcome
    )


def is_poll_call(tool: str, params: Any, config: ResolvedConfig) -> bool:
    """A known polling call (§5), or a tool the config declares as polling (``toolPolicies``)."""
    if is_known_poll(tool, params):
        return True
    policy = config.policy(tool) if config.tool_policies else None
    return policy is not None and policy.poll

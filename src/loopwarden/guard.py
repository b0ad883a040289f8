"""SPEC §6 — ``LoopGuard``: the facade an agent runtime calls around every tool call.

The guard is a thin shell: it takes one session's state from the store, asks the pure core
(``detect``, ``record_call``, ``record_outcome``, ``PostCompactionGuard``) what to do, turns the
answer into a :class:`Decision`, and delivers events after the session is released. Its own
bookkeeping errors are logged and swallowed: the guard never breaks a tool call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from loopwarden.canonical import UNDEFINED, hash_tool_call
from loopwarden.compaction import (
    CompactionLoopPersistedError,
    CompactionVerdict,
    PostCompactionGuard,
)
from loopwarden.config import (
    ResolvedConfig,
    effective_config,
    is_full_config,
    load_config,
    resolve_config,
)
from loopwarden.detectors import Verdict, detect
from loopwarden.events import Action, EventType, LoopEvent
from loopwarden.history import normalize_run_id, record_call, record_outcome
from loopwarden.store import GuardSession, MemoryStore, RunRecord, SessionStore

if TYPE_CHECKING:
    from loopwarden.records import RunRecorder

logger = logging.getLogger("loopwarden.guard")

_T = TypeVar("_T")
DecisionAction = Literal["allow", "warn", "block", "stop"]
ConfigSource = Mapping[str, Any] | ResolvedConfig | str | Path | None


@dataclass(frozen=True)
class Decision:
    """What the runtime should do with a tool call (SPEC §9)."""

    action: DecisionAction
    message: str | None = None
    verdict: Verdict | None = None
    blocked_result: dict[str, Any] | None = None
    error: CompactionLoopPersistedError | None = None

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


def _resolve_source(config: ConfigSource, agent_id: str | None) -> ResolvedConfig:
    if isinstance(config, ResolvedConfig):
        return config
    if isinstance(config, (str, Path)):
        return load_config(config).resolve(agent_id)
    if config is not None and is_full_config(config):
        return resolve_config(effective_config(config, agent_id))
    return resolve_config(config)


class LoopGuard:
    """Loop detection around every tool call of an agent runtime (SPEC §6).

    ``config`` is a ``tools.loopDetection`` block, a whole OpenClaw config (a dict with a
    ``tools`` or ``agents`` key; ``agent_id`` picks the agent), a config file path, or a
    :class:`ResolvedConfig`. A file is validated strictly and raises :class:`ConfigError`.
    ``record_db`` writes loop events and run starts/ends to a SQLite file (``True``: the
    default location; see :mod:`loopwarden.records`).
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
        store: SessionStore | None = None,
        record_db: str | Path | bool | None = None,
    ) -> None:
        self.config = _resolve_source(config, agent_id)
        self.agent_id = agent_id
        self.send_tools = frozenset(send_tools)
        self.surface_warnings = surface_warnings
        # `is None`, not `or`: an empty store is falsy (it has __len__).
        self.store: SessionStore = (
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
                try:
                    callback(event)
                except Exception:
                    logger.exception("loop event subscriber %r failed", callback)

    def _event(
        self,
        session: GuardSession,
        run: str | None,
        action: Action,
        *,
        verdict: Verdict | CompactionVerdict,
        tool: str,
        args_hash: str | None,
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
            message=str(verdict.message),
            paired_tool_name=paired,
            args_hash=args_hash,
            timestamp=time.time(),
        )
        session.run(run, self.agent_id).events.append(event)
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

    def _transact(self, session: str, fn: Callable[[GuardSession], _T], what: str) -> _T | None:
        """One atomic update of a session; a failure is logged and never reaches the caller."""
        try:
            return self.store.update(session, fn)
        except Exception:
            logger.exception("loop accounting failed (%s); the tool call proceeds", what)
            return None

    def _decide(
        self,
        session: str,
        step: Callable[[GuardSession], tuple[Decision, list[LoopEvent]]],
        what: str,
    ) -> Decision:
        outcome = self._transact(session, step, what)
        if outcome is None:
            return ALLOW
        decision, events = outcome
        self._deliver(events)  # outside the session update: subscribers may call the guard
        return decision

    def before_tool_call(
        self,
        session: str,
        tool: str,
        params: Any,
        *,
        run_id: str | None = None,
        tool_call_id: str | None = None,
    ) -> Decision:
        """Decide about a call before it runs: allow, warn, block, or stop (stopped run)."""

        def step(state: GuardSession) -> tuple[Decision, list[LoopEvent]]:
            events: list[LoopEvent] = []
            return self._before(state, tool, params, run_id, tool_call_id, events), events

        return self._decide(session, step, f"before {tool}")

    def _before(
        self,
        session: GuardSession,
        tool: str,
        params: Any,
        run_id: str | None,
        tool_call_id: str | None,
        events: list[LoopEvent],
    ) -> Decision:
        run = normalize_run_id(run_id)
        stop_reason = session.stopped.get(run)
        if stop_reason is not None:
            return Decision("stop", stop_reason)
        config = self.config
        verdict = detect(session.state, tool, params, config, run)
        if verdict.stuck and verdict.level == "critical":
            message = str(verdict.message)
            if tool_call_id is not None:
                session.remember_blocked(tool_call_id)
            events.append(
                self._event(
                    session,
                    run,
                    "block",
                    verdict=verdict,
                    tool=tool,
                    args_hash=hash_tool_call(tool, params),
                )
            )
            return Decision("block", message, verdict, blocked_result(message))
        if config.records_calls:
            record_call(session.state, tool, params, tool_call_id, config, run)
        if not verdict.stuck:
            return ALLOW
        if not self._should_emit(session, verdict, run):
            return Decision("allow", None, verdict)
        signature = hash_tool_call(tool, params)
        events.append(
            self._event(session, run, "warn", verdict=verdict, tool=tool, args_hash=signature)
        )
        return Decision("warn", verdict.message if self.surface_warnings else None, verdict)

    def _should_emit(self, session: GuardSession, verdict: Verdict, run: str | None) -> bool:
        """§6.3: emit when count // warningThreshold exceeds the last bucket for the key."""
        key = f"{run}:{verdict.warning_key}" if run else str(verdict.warning_key)
        bucket = verdict.count // self.config.warning_threshold
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
    ) -> Decision:
        """Record a call's outcome; returns ``stop`` when a loop survived compaction (§7)."""

        def step(state: GuardSession) -> tuple[Decision, list[LoopEvent]]:
            events: list[LoopEvent] = []
            decision = self._after(state, tool, params, result, error, run_id, tool_call_id, events)
            return decision, events

        return self._decide(session, step, f"after {tool}")

    def _after(
        self,
        session: GuardSession,
        tool: str,
        params: Any,
        result: Any,
        error: Any,
        run_id: str | None,
        tool_call_id: str | None,
        events: list[LoopEvent],
    ) -> Decision:
        if tool_call_id is not None and tool_call_id in session.blocked_ids:
            return ALLOW
        run = normalize_run_id(run_id)
        record = record_outcome(
            session.state,
            tool,
            params,
            tool_call_id,
            result,
            UNDEFINED if error is None else error,
            self.config,
            run,
            send_tools=self.send_tools,
        )
        guard = session.compaction.get(run)
        if record is None or guard is None or run in session.stopped:
            return ALLOW
        verdict = guard.observe(record.tool_name, record.args_hash, record.result_hash)
        if verdict is None:
            return ALLOW
        error_obj = CompactionLoopPersistedError.from_verdict(verdict)
        events.append(
            self._event(
                session, run, "stop", verdict=verdict, tool=tool, args_hash=record.args_hash
            )
        )
        session.stopped[run] = verdict.message
        session.run(run, self.agent_id).stop_reason = verdict.message
        return Decision("stop", verdict.message, None, None, error_obj)

    # -- runs and compaction ---------------------------------------------------------------

    def on_compaction_retry(self, session: str, *, run_id: str | None = None) -> None:
        """Arm the post-compaction guard of the run (call at each successful compaction retry)."""
        if not self.config.compaction_guard_enabled:
            return
        run = normalize_run_id(run_id)

        def arm(state: GuardSession) -> None:
            guard = state.compaction.get(run)
            if guard is None:
                guard = PostCompactionGuard(True, self.config.post_compaction_window)
                state.compaction[run] = guard
            guard.arm()

        self._transact(session, arm, "arming the post-compaction guard")

    def start_run(self, session: str, run_id: str | None = None) -> None:
        """Mark the start of a run: a fresh run record, no stop, no compaction window."""
        run = normalize_run_id(run_id)

        def start(state: GuardSession) -> None:
            state.runs.pop(run, None)
            state.stopped.pop(run, None)
            state.compaction.pop(run, None)
            state.run(run, self.agent_id).started_at = time.time()

        self._transact(session, start, "starting a run")
        if self.recorder is not None:
            self.recorder.run_started(session, run, self.agent_id)

    def end_run(
        self, session: str, run_id: str | None = None, *, outcome: str = "completed"
    ) -> RunRecord | None:
        """Mark the end of a run and return its record (``stopped`` if the guard stopped it)."""
        run = normalize_run_id(run_id)

        def end(state: GuardSession) -> RunRecord:
            record = state.run(run, self.agent_id)
            record.ended_at = time.time()
            record.outcome = "stopped" if run in state.stopped else outcome
            state.compaction.pop(run, None)
            return record

        ended = self._transact(session, end, "ending a run")
        if ended is not None and self.recorder is not None:
            self.recorder.run_ended(ended)
        return ended

    def run_record(self, session: str, run_id: str | None = None) -> list[LoopEvent]:
        """The loop events of one run, in order (empty when the run had none)."""
        state = self.store.peek(session)
        if state is None:
            return []
        record = state.runs.get(normalize_run_id(run_id))
        return list(record.events) if record else []

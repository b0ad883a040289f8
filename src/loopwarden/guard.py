"""``LoopGuard``: the facade an agent runtime calls around every tool call.

The guard is a thin shell: it binds the core's step (:mod:`loopwarden.core.step`: detection,
the decision, warning de-duplication, block and stop accounting, the post-compaction guard) to
the call, runs it in one atomic update of the session in its store, then logs the step's events
and delivers them to subscribers after the session is released. Its own bookkeeping errors are
logged and swallowed: the guard never breaks a tool call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from loopwarden._per_call import (
    STORE_UNAVAILABLE,
    GuardCalls,
    Step,
    call_subscriber,
    failed,
    log_events,
    log_failure,
    sync_update,
    to_telemetry,
)
from loopwarden.core.canonical import UNDEFINED
from loopwarden.core.compaction import PostCompactionGuard
from loopwarden.core.config import (
    ZERO_CONFIG_PROFILE,
    ResolvedConfig,
    effective_config,
    is_full_config,
    load_config,
    resolve_config,
)
from loopwarden.core.events import LoopEvent
from loopwarden.core.history import normalize_run_id
from loopwarden.core.session import GuardSession, RunRecord
from loopwarden.core.step import (
    ALLOW,
    WITHHELD_NAME,
    Decision,
    DecisionAction,
    Judge,
    after_step,
    before_step,
    blocked_result,
    is_poll_call,
    record_message,
)
from loopwarden.store import AsyncSessionStore, MemoryStore, SessionStore

if TYPE_CHECKING:
    from loopwarden.records import RunRecorder

# The decision types and helpers live in the core (core/step.py); named here too, where the
# adapters, hooks and applications have always imported them.
__all__ = [
    "ALLOW",
    "STORE_UNAVAILABLE",
    "WITHHELD_NAME",
    "ConfigSource",
    "Decision",
    "DecisionAction",
    "LoopGuard",
    "blocked_result",
    "is_poll_call",
    "record_message",
]

_T = TypeVar("_T")
ConfigSource = Mapping[str, Any] | ResolvedConfig | str | Path | None


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


class LoopGuard(GuardCalls):
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

    store: SessionStore | AsyncSessionStore

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
        # What every decision depends on besides the session (see the properties below).
        self._judge = Judge(
            _resolve_source(config, agent_id), agent_id, send_tools, surface_warnings
        )
        # `is None`, not `or`: an empty store is falsy (it has __len__).
        self.store = (
            store
            if store is not None
            else MemoryStore(session_ttl=session_ttl, max_sessions=max_sessions, clock=clock)
        )
        self._subscribers = []
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
                call_subscriber(callback, event)
            if len(inline) < len(subscribers):
                await asyncio.to_thread(call_subscriber, writer, event)

    # -- the per-call protocol -------------------------------------------------------------
    # The sync per-call methods, before_tool_call and after_tool_call, are GuardCalls' (see
    # loopwarden/_per_call.py: compiled with the engine); their async twins are here.

    async def _aupdate(self, session: str, fn: Callable[[GuardSession], _T]) -> _T:
        """One atomic update through an async store, or a sync one in a worker thread."""
        aupdate = getattr(self.store, "aupdate", None)
        if aupdate is not None:
            result: _T = await aupdate(session, fn)
            return result
        import asyncio

        # A sync-only store may block (a network round trip): keep it off the event loop.
        return await asyncio.to_thread(sync_update(self.store), session, fn)

    def _transact(self, session: str, fn: Callable[[GuardSession], _T], what: str) -> _T | None:
        """One atomic update of a session; a failure is logged and never reaches the caller."""
        update = sync_update(self.store)
        try:
            return update(session, fn)
        except Exception as exc:
            log_failure(exc, what)
            return None

    async def _atransact(
        self, session: str, fn: Callable[[GuardSession], _T], what: str
    ) -> _T | None:
        """``_transact`` through the async store path."""
        try:
            return await self._aupdate(session, fn)
        except Exception as exc:
            log_failure(exc, what)
            return None

    async def _adecide(
        self, session: str, step: Step, what: tuple[str, str], may_block: bool
    ) -> Decision:
        try:
            decision, events = await self._aupdate(session, step)
        except Exception as exc:
            return failed(exc, what, may_block)
        log_events(events)
        await self._adeliver(events)
        to_telemetry(events)  # on the loop, in the caller's context: its span is current
        return decision

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
        # The core's step bound to this call (a partial: no closure, no frame of its own).
        step = partial(before_step, self._judge, tool, params, run_id, tool_call_id, batch)
        return await self._adecide(session, step, ("before", tool), True)

    @property
    def config(self) -> ResolvedConfig:
        """The resolved config every decision uses; assigning one takes effect at the next call."""
        return self._judge.config

    @config.setter
    def config(self, config: ResolvedConfig) -> None:
        judge = self._judge
        self._judge = Judge(config, judge.agent_id, judge.send_tools, judge.surface_warnings)

    @property
    def agent_id(self) -> str | None:
        """The agent whose config the guard runs (None: the defaults); events carry it."""
        return self._judge.agent_id

    @agent_id.setter
    def agent_id(self, agent_id: str | None) -> None:
        judge = self._judge
        self._judge = Judge(judge.config, agent_id, judge.send_tools, judge.surface_warnings)

    @property
    def send_tools(self) -> frozenset[str]:
        """Tools whose calls send a message (their outcome is the message's delivery)."""
        return self._judge.send_tools

    @send_tools.setter
    def send_tools(self, send_tools: Collection[str]) -> None:
        judge = self._judge
        self._judge = Judge(judge.config, judge.agent_id, send_tools, judge.surface_warnings)

    @property
    def surface_warnings(self) -> bool:
        """Whether a warning's message is handed to the model (``Decision.message``)."""
        return self._judge.surface_warnings

    @surface_warnings.setter
    def surface_warnings(self, surface_warnings: bool) -> None:
        judge = self._judge
        self._judge = Judge(judge.config, judge.agent_id, judge.send_tools, surface_warnings)

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
        outcome = (result, error, failed)
        step = partial(after_step, self._judge, tool, params, outcome, run_id, tool_call_id, batch)
        return await self._adecide(session, step, ("after", tool), False)

    # -- runs and compaction ---------------------------------------------------------------

    def on_compaction_retry(self, session: str, *, run_id: str | None = None) -> None:
        """Arm the post-compaction guard of the run (call at each successful compaction retry)."""
        if self._judge.config.compaction_guard_enabled:
            self._transact(session, self._arm_step(run_id), "arming the post-compaction guard")

    async def aon_compaction_retry(self, session: str, *, run_id: str | None = None) -> None:
        """:meth:`on_compaction_retry` for an event loop."""
        if self._judge.config.compaction_guard_enabled:
            await self._atransact(
                session, self._arm_step(run_id), "arming the post-compaction guard"
            )

    def _arm_step(self, run_id: str | None) -> Callable[[GuardSession], None]:
        run = normalize_run_id(run_id)

        def arm(state: GuardSession) -> None:
            guard = state.compaction.get(run)
            if guard is None:
                guard = PostCompactionGuard(True, self._judge.config.post_compaction_window)
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

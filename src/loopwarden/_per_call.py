"""The part of the shell every tool call runs: ``LoopGuard``'s two per-call methods and
``MemoryStore``'s update, as native bases of those two classes.

``LoopGuard`` (guard.py) and ``MemoryStore`` (store.py) stay plain Python classes (their
instances take any attribute, Python code can subclass them and override any method); what
they inherit from here is the path of one call: bind the core's step to the call, check out
the session, run the step under the session's lock, log and deliver its events. This module
is compiled with the engine (hatch_build.py), so that path runs no interpreted frame between
the caller and the engine; in the pure-Python build it is ordinary Python, the same code.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

from loopwarden._mypyc import mypyc_attr
from loopwarden.core._lazylog import get_logger
from loopwarden.core.canonical import UNDEFINED
from loopwarden.core.events import LoopEvent
from loopwarden.core.session import GuardSession
from loopwarden.core.step import ALLOW, Decision, Judge, after_step, before_step, blocked_result
from loopwarden.stores import StoreUnavailableError

# The guard's log, whichever module writes a line of it.
logger = get_logger("loopwarden.guard")

_T = TypeVar("_T")
# One atomic step over a session: what the caller gets back, and the events to deliver after.
Step = Callable[[GuardSession], tuple[Decision, list[LoopEvent]]]

_UNAVAILABLE_TEXT = (
    "Tool call refused: loop-detection state is unavailable (on_store_error='block'). Retry later."
)
STORE_UNAVAILABLE = Decision(
    "block", _UNAVAILABLE_TEXT, None, blocked_result(_UNAVAILABLE_TEXT), None
)


# -- LoopGuard --------------------------------------------------------------------------------


@mypyc_attr(allow_interpreted_subclasses=True)
class GuardCalls:
    """``LoopGuard``'s per-call methods and the state they read (set by ``LoopGuard``)."""

    _judge: Judge
    # A SessionStore, an AsyncSessionStore or both (their protocols live in store.py, which
    # imports this module; LoopGuard narrows the type).
    store: Any
    _subscribers: list[Callable[[LoopEvent], None]]
    _subscribers_lock: threading.Lock

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
        step = CallStep(self._judge, tool, params, None, run_id, tool_call_id, batch)
        return decide(self, session, step, ("before", tool), True)

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
        error status, an exit code): ``True`` a failure, ``False`` a success that no failure
        text in the result overrides; when it is None the outcome itself is read for signs of
        failure (``core/failures.py``). The recommended profile's same-outcome and
        repeated-error detectors read it: the same failure across varied calls is a loop, the
        same success is not. ``batch``: the one the call was
        decided in, when known (an outcome of an older batch then leaves the current one's
        count of calls in flight alone).
        """
        outcome = (result, error, failed)
        step = CallStep(self._judge, tool, params, outcome, run_id, tool_call_id, batch)
        return decide(self, session, step, ("after", tool), False)

    def _deliver(self, events: list[LoopEvent]) -> None:
        with self._subscribers_lock:
            subscribers = list(self._subscribers)
        for event in events:
            for callback in subscribers:
                call_subscriber(callback, event)


class CallStep:
    """The core's step bound to one call: ``before_step``, or ``after_step`` when it carries
    the call's outcome. What ``partial(before_step, ...)`` would be, as a class: compiled, it is
    built and called natively (no partial's argument copy, no parsing of the step's arguments:
    about 1k instructions of each store update, docs/performance.md). A store may call it more
    than once.
    """

    __slots__ = ("batch", "judge", "outcome", "params", "run_id", "tool", "tool_call_id")

    def __init__(
        self,
        judge: Judge,
        tool: str,
        params: Any,
        outcome: tuple[Any, Any, bool | None] | None,
        run_id: str | None,
        tool_call_id: str | None,
        batch: str | None,
    ) -> None:
        self.judge = judge
        self.tool = tool
        self.params = params
        self.outcome = outcome  # None before the call runs
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.batch = batch

    def __call__(self, session: GuardSession) -> tuple[Decision, list[LoopEvent]]:
        outcome = self.outcome
        if outcome is None:
            return before_step(
                self.judge,
                self.tool,
                self.params,
                self.run_id,
                self.tool_call_id,
                self.batch,
                session,
            )
        return after_step(
            self.judge,
            self.tool,
            self.params,
            outcome,
            self.run_id,
            self.tool_call_id,
            self.batch,
            session,
        )


def sync_update(store: object) -> Callable[[str, Callable[[GuardSession], _T]], _T]:
    """The store's sync update; ``TypeError`` (a caller's bug, raised) if it has none."""
    update: Callable[[str, Callable[[GuardSession], _T]], _T] | None = getattr(
        store, "update", None
    )
    if update is None:
        raise TypeError(
            f"{store!r} is async-only: call the guard's async methods "
            "(abefore_tool_call, aafter_tool_call, ...) or give LoopGuard a sync store"
        )
    return update


def decide(
    guard: GuardCalls, session: str, step: Step, what: tuple[str, str], may_block: bool
) -> Decision:
    """Run a call's step in one store update, then log and deliver its events.

    ``what`` (the method, the tool) names the call in the log when the update fails: the
    text is built only then.
    """
    update = getattr(guard.store, "update", None)
    if update is None:
        update = sync_update(guard.store)  # raises the TypeError that says what to do
    try:
        # Typed: the compiled build unpacks a tuple natively instead of iterating over it.
        done: tuple[Decision, list[LoopEvent]] = update(session, step)
    except Exception as exc:
        return failed(exc, what, may_block)
    decision, events = done
    if events:  # most calls have none: no lock taken, no subscriber list copied
        log_events(events)
        guard._deliver(events)  # outside the session update: subscribers may call the guard
        to_telemetry(events)
    return decision


def to_telemetry(events: list[LoopEvent]) -> None:
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


def call_subscriber(callback: Callable[[LoopEvent], None], event: LoopEvent) -> None:
    try:
        callback(event)
    except Exception:
        logger.exception("loop event subscriber %r failed", callback)


def log_failure(exc: Exception, what: str) -> None:
    """Log a failed store update: the tool call goes on without loop accounting."""
    if isinstance(exc, StoreUnavailableError):
        log = logger.debug if exc.reported else logger.error  # an outage is logged once
        log("loop state unavailable (%s): %s", what, exc.message)
    else:
        logger.error("loop accounting failed (%s); the tool call proceeds", what, exc_info=exc)


def failed(exc: Exception, what: tuple[str, str], may_block: bool) -> Decision:
    """The decision when the store failed: allow, or refuse under ``on_store_error='block'``."""
    log_failure(exc, " ".join(what))
    if may_block and isinstance(exc, StoreUnavailableError) and exc.policy == "block":
        return STORE_UNAVAILABLE
    return ALLOW


def log_events(events: list[LoopEvent]) -> None:
    """One log line per event (names, hashes and counts only), after the session's update."""
    for event in events:
        log = logger.warning if event.action == "warn" else logger.error
        log(
            "loop %s: %s (%s, count %d) session=%s run=%s",
            event.action,
            event.tool_name,
            event.detector,
            event.count,
            event.session,
            event.run_id,
        )


# -- MemoryStore ------------------------------------------------------------------------------


class Entry:
    """A session of a :class:`MemoryStore`, its lock, and when it was last used."""

    __slots__ = ("lock", "session", "used")

    def __init__(self, session: GuardSession, used: float) -> None:
        self.session = session
        self.lock = threading.RLock()
        self.used = used


@mypyc_attr(allow_interpreted_subclasses=True)
class MemorySessions:
    """``MemoryStore``'s sessions and its sync path (``update``, ``peek``)."""

    def __init__(
        self,
        *,
        session_ttl: float | None = 3600.0,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        if session_ttl is not None and session_ttl <= 0:
            raise ValueError(f"session_ttl must be positive seconds or None, got {session_ttl}")
        self._ttl = session_ttl
        self._max = max_sessions
        self._clock = clock
        self._lock = threading.Lock()
        # key -> its entry; insertion order is least-recently-used first.
        self._entries: OrderedDict[str, Entry] = OrderedDict()

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session under its own lock (other sessions run in parallel)."""
        # acquire/release, not `with`: the same locking, without looking up and calling
        # __enter__ and __exit__ (a call's share of this path is measured in instructions).
        store_lock = self._lock
        store_lock.acquire()
        try:
            entry = checkout(self, key)
        finally:
            store_lock.release()
        lock = entry.lock
        lock.acquire()
        try:
            return fn(entry.session)
        finally:
            lock.release()

    def peek(self, key: str) -> GuardSession | None:
        """The session if present and not expired."""
        with self._lock:
            return peek(self, key)


# Functions, not methods: Python subclasses may override MemoryStore's methods, so a compiled
# call of a method goes through a look-up on the instance; these are called directly.


def evict(store: MemorySessions, now: float) -> None:
    """Drop expired sessions, then the least recently used past the cap (lock held)."""
    entries = store._entries
    ttl = store._ttl
    if ttl is not None:
        while entries:
            key, entry = next(iter(entries.items()))
            if now - entry.used <= ttl:
                break
            del entries[key]
    while len(entries) > store._max:
        entries.popitem(last=False)


def checkout(store: MemorySessions, key: str) -> Entry:
    """The session's entry, marked as just used (call with the store's lock held)."""
    now = store._clock()
    entries = store._entries
    entry = entries.get(key)
    if entry is None:
        entry = entries[key] = Entry(GuardSession(key), now)
        evict(store, now)
        return entry
    # The same session again (the common case): moved to the newest end in place, and only
    # an expired oldest session makes eviction walk (a store of one session has none older).
    entry.used = now
    entries.move_to_end(key)
    ttl = store._ttl
    if ttl is not None and len(entries) > 1 and now - next(iter(entries.values())).used > ttl:
        evict(store, now)
    return entry


def peek(store: MemorySessions, key: str) -> GuardSession | None:
    """The session if present and not expired (call with the store's lock held)."""
    entry = store._entries.get(key)
    if entry is None:
        return None
    if store._ttl is not None and store._clock() - entry.used > store._ttl:
        return None
    return entry.session

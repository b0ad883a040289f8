"""where the guard keeps its per-session state, behind a small swappable interface.

A store applies one function to one session's :class:`GuardSession` as an atomic "update this
session" step (``store.update(key, fn)``). A store may call ``fn`` more than once (an optimistic
shared store retries on a conflict), so ``fn`` must only touch the state it is given. The
default :class:`MemoryStore` keeps sessions in process memory, bounded by an idle TTL and an
LRU cap. Durable and shared stores (SQLite, Redis) implement the same protocol.

:class:`AsyncSessionStore` is the same step for code on an event loop (``await
store.aupdate(key, fn)``): ``fn`` stays a plain function that never awaits, so the decision code
is shared and only the transaction around it differs. :class:`MemoryStore` is both.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, TypeVar

from loopwarden._per_call import MemorySessions, checkout, evict, peek
from loopwarden.core.compaction import PostCompactionGuard
from loopwarden.core.events import LoopEvent
from loopwarden.core.history import SessionState
from loopwarden.core.patterns import CallStreak, ErrorStreak, OutcomeStreak
from loopwarden.core.session import (
    MAX_BLOCKED_IDS,
    MAX_IDLE_RUNS,
    MAX_IN_FLIGHT_SIGNATURES,
    MAX_RUN_EVENTS,
    MAX_RUN_RECORDS,
    MAX_WARNING_KEYS,
    GuardSession,
    InFlight,
    RunKey,
    RunRecord,
)
from loopwarden.core.tool_call import ToolCallRecord

# The session's bookkeeping lives in the core (the guard's step reads and writes it); named here
# too, where stores and their users have always found it.
__all__ = [
    "MAX_BLOCKED_IDS",
    "MAX_IDLE_RUNS",
    "MAX_IN_FLIGHT_SIGNATURES",
    "MAX_RUN_EVENTS",
    "MAX_RUN_RECORDS",
    "MAX_WARNING_KEYS",
    "AsyncSessionStore",
    "GuardSession",
    "InFlight",
    "MemoryStore",
    "RunKey",
    "RunRecord",
    "SessionStore",
    "record_from_dict",
    "record_to_dict",
    "restore_session",
    "session_state_from_records",
    "snapshot_session",
]

_T = TypeVar("_T")


class SessionStore(Protocol):
    """The interface every store implements."""

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session's state atomically (creating it on first use)."""
        ...

    def peek(self, key: str) -> GuardSession | None:
        """The session's state if the store has it (read-only use), else None."""
        ...

    def __len__(self) -> int:
        """How many sessions the store currently keeps."""
        ...


class AsyncSessionStore(Protocol):
    """The interface of a store for code on an event loop (``LoopGuard``'s ``a*`` methods).

    ``fn`` is the same plain function a sync store runs; the store may await I/O around it
    (and run it again after a conflict), never inside it.
    """

    def aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> Awaitable[_T]:
        """Apply ``fn`` to the session's state atomically (creating it on first use)."""
        ...

    def apeek(self, key: str) -> Awaitable[GuardSession | None]:
        """The session's state if the store has it (read-only use), else None."""
        ...


async def _acquire(lock: threading.Lock | threading.RLock) -> None:
    """Take ``lock`` without blocking the event loop.

    Another thread may hold it (a sync guard on a worker thread sharing the store) for the
    few microseconds of one update: the loop keeps running other tasks meanwhile, trying
    again after each pass, then after a short sleep that grows to a millisecond.
    """
    import asyncio  # loaded already on an event loop; kept out of sync start-up

    delay = 0.0
    while not lock.acquire(blocking=False):
        await asyncio.sleep(delay)
        delay = min(0.001, delay * 2 or 0.00005)


class MemoryStore(MemorySessions):
    """In-process sessions: thread-safe, idle sessions expire, the LRU cap drops the oldest.

    Sync (``update``) and async (``aupdate``) at once. On an event loop no thread is used:
    ``fn`` never awaits, so tasks of one loop cannot interleave inside an update, and the
    locks that keep threads apart are taken without blocking the loop (see ``aupdate``).
    ``session_ttl`` (seconds, None: never) and ``max_sessions`` bound what it keeps; the sync
    path (``update``, ``peek``) is ``MemorySessions``' (compiled with the engine).
    """

    async def aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """``update`` on an event loop, with no thread and no blocking wait.

        The locks are the ones ``update`` takes (threads may share the store), acquired
        without blocking; both are held only for dict operations and ``fn`` itself.
        """
        await _acquire(self._lock)
        try:
            entry = checkout(self, key)
        finally:
            self._lock.release()
        lock = entry.lock
        await _acquire(lock)
        try:
            return fn(entry.session)
        finally:
            lock.release()

    async def apeek(self, key: str) -> GuardSession | None:
        """``peek`` on an event loop."""
        await _acquire(self._lock)
        try:
            return peek(self, key)
        finally:
            self._lock.release()

    def __len__(self) -> int:
        with self._lock:
            evict(self, self._clock())
            return len(self._entries)


# ---------------------------------------------------------------------------------------------
# Plain-data snapshots, for stores that keep sessions outside this process.
# Hashes, names and counts only: a snapshot never holds raw arguments or results.

_RECORD_FIELDS = (
    "tool_name",
    "args_hash",
    "tool_call_id",
    "run_id",
    "result_hash",
    "unknown_tool_name",
    "timestamp",
)


def record_to_dict(record: ToolCallRecord) -> dict[str, Any]:
    """A history record as a JSON-ready dict."""
    return {name: getattr(record, name) for name in _RECORD_FIELDS}


def record_from_dict(data: dict[str, Any]) -> ToolCallRecord:
    """Rebuild a history record from :func:`record_to_dict` output."""
    return ToolCallRecord(
        tool_name=data["tool_name"],
        args_hash=data["args_hash"],
        tool_call_id=data.get("tool_call_id"),
        run_id=data.get("run_id"),
        result_hash=data.get("result_hash"),
        unknown_tool_name=data.get("unknown_tool_name"),
        timestamp=float(data.get("timestamp") or 0.0),
    )


def _event_from_dict(data: dict[str, Any]) -> LoopEvent:
    return LoopEvent(**data)


def snapshot_session(session: GuardSession) -> dict[str, Any]:
    """The whole session as JSON-ready plain data (run keys ``None`` become ``""``)."""
    return {
        "version": 1,
        "key": session.key,
        "history": [record_to_dict(r) for r in session.state.history],
        "warning_buckets": list(session.warning_buckets.items()),
        "compaction": [[run or "", g.snapshot()] for run, g in session.compaction.items()],
        "stopped": [[run or "", reason] for run, reason in session.stopped.items()],
        "runs": [record.to_dict() for record in session.runs.values()],
        "blocked_ids": list(session.blocked_ids),
        "block_counts": [[run or "", n] for run, n in session.block_counts.items()],
        "error_streaks": [
            [run or "", s.tool, s.result_hash, s.count] for run, s in session.error_streaks.items()
        ],
        "outcome_streaks": [
            [run or "", *_outcome_streak_row(s)] for run, s in session.outcome_streaks.items()
        ],
        "call_streaks": [[run or "", *s] for run, s in session.call_streaks.items()],
        "in_flight": [
            [run or "", f.batch, list(f.calls.items())] for run, f in session.in_flight.items()
        ],
        "block_batches": [[run or "", batch] for run, batch in session.block_batches.items()],
    }


def _outcome_streak_row(streak: OutcomeStreak) -> list[Any]:
    # The excerpt (the outcome's first line, for the model's message) is a piece of a result:
    # stored state keeps hashes and counts only, so a restored stretch is named without it.
    return [
        streak.result_hash,
        streak.length,
        streak.first_signature,
        streak.varied,
        list(streak.tools),
        "",
        streak.blocked_at,
        streak.mute,
    ]


def _outcome_streak_of(row: list[Any]) -> OutcomeStreak:
    result_hash, count, first, varied, tools, excerpt, blocked_at, mute = row
    return OutcomeStreak(
        str(result_hash),
        int(count),
        str(first),
        bool(varied),
        tuple(str(t) for t in tools),
        str(excerpt),
        int(blocked_at),
        bool(mute),
    )


def restore_session(data: dict[str, Any]) -> GuardSession:
    """Rebuild a session from :func:`snapshot_session` output."""
    session = GuardSession(data["key"])
    session.state = session_state_from_records(record_from_dict(r) for r in data["history"])
    session.warning_buckets = OrderedDict((k, int(v)) for k, v in data["warning_buckets"])
    session.compaction = {
        run or None: PostCompactionGuard.restore(snap) for run, snap in data["compaction"]
    }
    session.stopped = {run or None: reason for run, reason in data["stopped"]}
    for run in data["runs"]:
        events = [_event_from_dict(e) for e in run.pop("events")]
        record = RunRecord(**run, events=events)
        session.runs[record.run_id] = record
    session.blocked_ids = OrderedDict.fromkeys(data["blocked_ids"])
    session.block_counts = {run or None: int(n) for run, n in data.get("block_counts", [])}
    session.error_streaks = {
        run or None: ErrorStreak(tool, result_hash, int(count))
        for run, tool, result_hash, count in data.get("error_streaks", [])
    }
    session.outcome_streaks = {
        run or None: _outcome_streak_of(row) for run, *row in data.get("outcome_streaks", [])
    }
    session.call_streaks = {
        run or None: CallStreak(str(signature), int(length))
        for run, signature, length in data.get("call_streaks", [])
    }
    # Absent from snapshots written before batches existed: nothing in flight, no batch blocked.
    session.in_flight = {
        run or None: InFlight(batch, {sig: int(n) for sig, n in calls})
        for run, batch, calls in data.get("in_flight", [])
    }
    session.block_batches = {run or None: batch for run, batch in data.get("block_batches", [])}
    session.trim_runs()
    return session


def session_state_from_records(records: Iterable[ToolCallRecord]) -> SessionState:
    """A session state holding exactly these records, oldest first."""
    return SessionState(history=list(records))

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
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from loopwarden.core.compaction import PostCompactionGuard
from loopwarden.core.history import SessionState, has_run_records
from loopwarden.core.patterns import CallStreak, ErrorStreak, OutcomeStreak
from loopwarden.core.tool_call import ToolCallRecord
from loopwarden.events import LoopEvent

MAX_WARNING_KEYS = 256
MAX_RUN_RECORDS = 64
MAX_BLOCKED_IDS = 256
MAX_RUN_EVENTS = 256
# Per-run state (stop, compaction window, block count, error streak) is kept for every run that
# still has calls in the history, plus the 64 most recently active others: a session's state is
# bounded by historySize whatever the number of runs it sees.
MAX_IDLE_RUNS = 64
# Distinct signatures in flight kept per run (a batch of more distinct calls forgets the oldest).
MAX_IN_FLIGHT_SIGNATURES = 256

RunKey = str | None
_T = TypeVar("_T")
_V = TypeVar("_V")


@dataclass
class RunRecord:
    """What happened in one run: its loop events in order, and how it ended."""

    session: str
    run_id: str | None
    agent_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    stop_reason: str | None = None
    events: list[LoopEvent] = field(default_factory=list)
    # A run blocked thousands of times keeps its first events and counts the rest.
    dropped_events: int = 0

    def add(self, event: LoopEvent) -> None:
        """Append an event, keeping at most 256 per run (later ones are only counted)."""
        if len(self.events) < MAX_RUN_EVENTS:
            self.events.append(event)
        else:
            self.dropped_events += 1

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the record."""
        return {
            "session": self.session,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "outcome": self.outcome,
            "stop_reason": self.stop_reason,
            "events": [e.to_dict() for e in self.events],
            "dropped_events": self.dropped_events,
        }


@dataclass
class InFlight:
    """The run's current batch and, per call signature, how many of its calls were allowed
    and have not reported their outcome yet (``countPendingCalls``)."""

    batch: str
    calls: dict[str, int] = field(default_factory=dict)

    def add(self, signature: str) -> None:
        """One more call of ``signature`` in flight (bounded: the oldest signature goes)."""
        self.calls[signature] = self.calls.get(signature, 0) + 1
        while len(self.calls) > MAX_IN_FLIGHT_SIGNATURES:
            del self.calls[next(iter(self.calls))]

    def done(self, signature: str) -> None:
        """One call of ``signature`` reported its outcome."""
        left = self.calls.get(signature, 0) - 1
        if left > 0:
            self.calls[signature] = left
        else:
            self.calls.pop(signature, None)


@dataclass
class GuardSession:
    """Everything the guard keeps for one session: history plus the §6/§7 bookkeeping."""

    key: str
    state: SessionState = field(default_factory=SessionState)
    # §6.3: last emitted bucket (count // warningThreshold) per warning key, oldest first.
    warning_buckets: OrderedDict[str, int] = field(default_factory=OrderedDict)
    # The per-run maps below (all but ``runs``) are bounded by ``keep_run``: oldest use first.
    # §7: armed post-compaction windows (a window is dropped once it is over).
    compaction: dict[RunKey, PostCompactionGuard] = field(default_factory=dict)
    # First abort wins for a run: later calls in a stopped run get the same stop reason.
    stopped: dict[RunKey, str] = field(default_factory=dict)
    runs: OrderedDict[RunKey, RunRecord] = field(default_factory=OrderedDict)
    # Recommended-profile bookkeeping per run: blocks so far, and the repeated-error streak.
    block_counts: dict[RunKey, int] = field(default_factory=dict)
    error_streaks: dict[RunKey, ErrorStreak] = field(default_factory=dict)
    # The run's newest stretch of one outcome (the same-outcome detector).
    outcome_streaks: dict[RunKey, OutcomeStreak] = field(default_factory=dict)
    # The run's newest calls with one signature, however many (the consecutive detector).
    call_streaks: dict[RunKey, CallStreak] = field(default_factory=dict)
    # Batches (calls the model issued in one turn): the calls in flight of the run's current
    # batch, and the batch of the run's latest block (blocks of one batch count as one).
    in_flight: dict[RunKey, InFlight] = field(default_factory=dict)
    block_batches: dict[RunKey, str] = field(default_factory=dict)
    # Tool-call ids the guard blocked: their outcome must never be recorded.
    blocked_ids: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def remember_bucket(self, key: str, bucket: int) -> None:
        """Store the emitted bucket for a warning key, keeping at most 256 keys."""
        self.warning_buckets[key] = bucket
        self.warning_buckets.move_to_end(key)
        while len(self.warning_buckets) > MAX_WARNING_KEYS:
            self.warning_buckets.popitem(last=False)

    def remember_blocked(self, tool_call_id: str) -> None:
        """Remember a blocked call's id (bounded)."""
        self.blocked_ids[tool_call_id] = None
        while len(self.blocked_ids) > MAX_BLOCKED_IDS:
            self.blocked_ids.popitem(last=False)

    def run(self, run_id: RunKey, agent_id: str | None = None) -> RunRecord:
        """The run record for ``run_id``, created on first use (at most 64 kept per session).

        Dropping the oldest record drops only the record (a report, already delivered as
        events): the run's stop and counters follow their own bound (:meth:`keep_run`).
        """
        record = self.runs.get(run_id)
        if record is None:
            record = RunRecord(self.key, run_id, agent_id)
            self.runs[run_id] = record
            while len(self.runs) > MAX_RUN_RECORDS:
                self.runs.popitem(last=False)
        return record

    def keep_run(self, per_run: dict[RunKey, _V], run_id: RunKey, value: _V) -> None:
        """Set ``per_run[run_id]`` as its newest entry, then trim ``per_run`` (see below).

        Each per-run map keeps its entries in order of last use. Past ``MAX_IDLE_RUNS`` entries
        the oldest are dropped, except runs that still have calls in the history (at most
        historySize of them), whose state detection may still read. Re-keeping a run (a stopped
        run calling again) makes it the newest: a run stays stopped while it keeps calling.
        """
        if per_run and next(reversed(per_run)) == run_id:
            per_run[run_id] = value  # already the newest: nothing moves, nothing to trim
            return
        per_run.pop(run_id, None)  # re-inserted last: dicts keep insertion order
        per_run[run_id] = value
        self._trim(per_run, run_id)

    def _trim(self, per_run: dict[RunKey, Any], newest: RunKey = None) -> None:
        """Drop the oldest entries past ``MAX_IDLE_RUNS``, keeping runs still in the history."""
        excess = len(per_run) - MAX_IDLE_RUNS
        if excess <= 0:
            return
        doomed: list[RunKey] = []
        for run in per_run:  # oldest first; the walk skips at most historySize live runs
            if len(doomed) == excess:
                break
            if run != newest and not has_run_records(self.state, run):
                doomed.append(run)
        for run in doomed:
            del per_run[run]

    def trim_runs(self) -> None:
        """Bound every per-run map (a session restored from an older, unbounded snapshot)."""
        for per_run in self._per_run_maps():
            self._trim(per_run)

    def _per_run_maps(self) -> tuple[dict[RunKey, Any], ...]:
        return (
            self.stopped,
            self.compaction,
            self.block_counts,
            self.error_streaks,
            self.outcome_streaks,
            self.call_streaks,
            self.in_flight,
            self.block_batches,
        )

    def forget_run(self, run_id: RunKey) -> None:
        """Drop everything kept about one run (its record, stop, windows and counters)."""
        self.runs.pop(run_id, None)
        for per_run in self._per_run_maps():
            per_run.pop(run_id, None)


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


class MemoryStore:
    """In-process sessions: thread-safe, idle sessions expire, the LRU cap drops the oldest.

    Sync (``update``) and async (``aupdate``) at once. On an event loop no thread is used:
    ``fn`` never awaits, so tasks of one loop cannot interleave inside an update, and the
    locks that keep threads apart are taken without blocking the loop (see ``aupdate``).
    """

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
        # key -> (session, its lock, last use); insertion order is least-recently-used first.
        self._entries: OrderedDict[str, tuple[GuardSession, threading.RLock, float]] = OrderedDict()

    def _evict(self, now: float) -> None:
        if self._ttl is not None:
            while self._entries:
                key, (_, _, used) = next(iter(self._entries.items()))
                if now - used <= self._ttl:
                    break
                del self._entries[key]
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def _checkout(self, key: str) -> tuple[GuardSession, threading.RLock]:
        """The session and its lock, marked as just used (call with ``self._lock`` held)."""
        now = self._clock()
        entry = self._entries.pop(key, None)
        if entry is None:
            entry = (GuardSession(key), threading.RLock(), now)
        self._entries[key] = (entry[0], entry[1], now)
        self._evict(now)
        return entry[0], entry[1]

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session under its own lock (other sessions run in parallel)."""
        with self._lock:
            state, lock = self._checkout(key)
        with lock:
            return fn(state)

    async def aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """``update`` on an event loop, with no thread and no blocking wait.

        The locks are the ones ``update`` takes (threads may share the store), acquired
        without blocking; both are held only for dict operations and ``fn`` itself.
        """
        await _acquire(self._lock)
        try:
            state, lock = self._checkout(key)
        finally:
            self._lock.release()
        await _acquire(lock)
        try:
            return fn(state)
        finally:
            lock.release()

    def peek(self, key: str) -> GuardSession | None:
        """The session if present and not expired."""
        with self._lock:
            return self._peek(key)

    async def apeek(self, key: str) -> GuardSession | None:
        """``peek`` on an event loop."""
        await _acquire(self._lock)
        try:
            return self._peek(key)
        finally:
            self._lock.release()

    def _peek(self, key: str) -> GuardSession | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self._ttl is not None and self._clock() - entry[2] > self._ttl:
            return None
        return entry[0]

    def __len__(self) -> int:
        with self._lock:
            self._evict(self._clock())
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

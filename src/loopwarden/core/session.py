"""What the guard keeps for one session: history plus the warning, stop, block and batch
bookkeeping of its runs (:class:`GuardSession`), and the record of each run (:class:`RunRecord`).

Plain data with bounded maps; a store holds one :class:`GuardSession` per session key and hands
it to the guard's step (:mod:`loopwarden.core.step`) inside one atomic update.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loopwarden.core.compaction import PostCompactionGuard
from loopwarden.core.events import LoopEvent
from loopwarden.core.history import SessionState, keep_run, trim_runs_map
from loopwarden.core.patterns import CallStreak, ErrorStreak, OutcomeStreak

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
        keep_run(self.state, per_run, run_id, value, MAX_IDLE_RUNS)

    def trim_runs(self) -> None:
        """Bound every per-run map (a session restored from an older, unbounded snapshot)."""
        for per_run in self._per_run_maps():
            trim_runs_map(self.state, per_run, None, MAX_IDLE_RUNS)

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

"""a session's tool-call history: records, call and outcome recording, trimming.

``SessionState`` keeps the records in a deque (oldest first) and, per run, the incremental state
of ``loopwarden.core._engine``, so that recording and detection cost O(1) per call whatever
``historySize`` is. The plain list-walking engine this replaces lives on, unchanged, in
``loopwarden.core.reference`` as the test oracle.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from loopwarden.core._engine import VETO_HASH as _VETO_HASH
from loopwarden.core._engine import Memo, RunKey, _Run, signature_key
from loopwarden.core._engine import signature as signature_of
from loopwarden.core.canonical import UNDEFINED, js_trim
from loopwarden.core.config import ResolvedConfig, resolve_config
from loopwarden.core.outcome import hash_tool_outcome
from loopwarden.core.tool_call import ToolCallRecord

ConfigLike = Mapping[str, Any] | ResolvedConfig | None


class SessionState:
    """One session's history, oldest record first, shared by all of the session's runs.

    ``history`` is a new list on every read (a snapshot, O(historySize)); assigning a list of
    records to it, or passing one to the constructor, replaces the history (e.g. when a store
    restores a session). Recording and detection never copy it.
    """

    __slots__ = ("_limits", "_memo", "_raw_run", "_records", "_run_key", "_runs")

    def __init__(self, history: Iterable[ToolCallRecord] = ()) -> None:
        self._records: deque[ToolCallRecord] = deque()
        self._runs: dict[RunKey, _Run] = {}
        # The last run id seen and its normalised form: detect, record_call and record_outcome
        # of one call get the same run id object, and a str's normalisation never changes.
        self._raw_run: object = None
        self._run_key: RunKey = None
        self._memo = Memo()  # the last signature computed (see _engine.signature)
        self._limits: Limits | None = None  # the last config's fields (see limits_of)
        self._load(history)

    @property
    def history(self) -> list[ToolCallRecord]:
        """The records, oldest first (a snapshot)."""
        return list(self._records)

    @history.setter
    def history(self, records: Iterable[ToolCallRecord]) -> None:
        fresh = SessionState(records)  # all or nothing: a bad record leaves this state as it was
        self._records, self._runs = fresh._records, fresh._runs

    def newest_first(self) -> Iterator[ToolCallRecord]:
        """The records newest first, without copying (stop early to stay O(what you read)).

        Do not record anything while iterating: the session's deque refuses changes mid-walk.
        """
        return reversed(self._records)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionState):
            return NotImplemented
        return self._records == other._records

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"SessionState(history={list(self._records)!r})"

    def __reduce__(self) -> tuple[type[SessionState], tuple[list[ToolCallRecord]]]:
        # Pickle and copy the records only; the counters are rebuilt from them.
        return (SessionState, (list(self._records),))

    def __copy__(self) -> SessionState:
        # Records are filled in place by record_outcome: a copy sharing them would see outcomes
        # its counters never heard of. So even a shallow copy gets its own records.
        return SessionState([replace(record) for record in self._records])

    def _load(self, records: Iterable[object]) -> None:
        for position, item in enumerate(records):
            record = _check_record(item, position)
            run = self._run(record.run_id)
            key = signature_key(record.tool_name, record.args_hash)
            if record.result_hash is None:
                run.add_pending(record, key)
            else:
                run.add_done(record, key, record.result_hash)
            self._records.append(record)

    def _key(self, run_id: object) -> RunKey:
        """``normalize_run_id``, remembering the last answer."""
        if run_id is self._raw_run:
            return self._run_key
        key = normalize_run_id(run_id)
        self._raw_run, self._run_key = run_id, key
        return key

    def _run(self, run_id: RunKey) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
        return run

    def _append(self, record: ToolCallRecord, history_size: int) -> None:
        """Append a record its run has taken in, then trim: the oldest go, whatever their run."""
        records, runs = self._records, self._runs
        records.append(record)
        while len(records) > history_size:
            record = records.popleft()
            run = runs[record.run_id]
            if run.n == 1:  # its last record: the run's state goes with it
                del runs[record.run_id]
            else:
                run.evict(record)


class Limits:
    """The fields of one ``ResolvedConfig`` that recording and detection read on every call.

    ``ResolvedConfig`` is a plain (uncompiled) frozen dataclass: each field read is a generic
    attribute lookup, a dozen per call. This copy is a native object, built again whenever
    the session is handed another config object. It holds the config it copies, so that
    object stays alive and the identity check in :func:`limits_of` cannot meet a new object
    at a recycled address; and a frozen config's fields, all ints, bools and tuples, never
    change after it is built.
    """

    __slots__ = (
        "breaker",
        "config",
        "critical",
        "enabled",
        "generic_repeat",
        "history_size",
        "known_poll",
        "ping_pong",
        "policies",
        "unknown_tool",
        "warning",
    )

    def __init__(self, config: ResolvedConfig) -> None:
        self.config = config
        self.enabled = config.enabled is True  # detection_enabled (§1.3)
        self.history_size = config.history_size
        self.warning = config.warning_threshold
        self.critical = config.critical_threshold
        self.unknown_tool = config.unknown_tool_threshold
        self.breaker = config.global_circuit_breaker_threshold
        self.policies = bool(config.tool_policies)
        switches = config.detectors
        self.generic_repeat = switches.generic_repeat
        self.known_poll = switches.known_poll_no_progress
        self.ping_pong = switches.ping_pong


def limits_of(state: SessionState, config: ResolvedConfig) -> Limits:
    """``config``'s :class:`Limits`, the session's copy when it was built from this config."""
    limits = state._limits
    if limits is None or limits.config is not config:
        limits = state._limits = Limits(config)
    return limits


def _check_record(record: object, position: int) -> ToolCallRecord:
    """Refuse a loaded record the engine could not follow, saying which and why."""
    where = f"SessionState history[{position}]"
    if not isinstance(record, ToolCallRecord):
        raise TypeError(f"{where}: expected a ToolCallRecord, got {type(record).__name__}")
    required: tuple[tuple[str, object], ...] = (
        ("tool_name", record.tool_name),
        ("args_hash", record.args_hash),
    )
    for name, value in required:
        if not isinstance(value, str):
            raise TypeError(f"{where}.{name}: expected a string, got {type(value).__name__}")
    optional: tuple[tuple[str, object], ...] = (
        ("run_id", record.run_id),
        ("result_hash", record.result_hash),
    )
    for name, value in optional:
        if value is not None and not isinstance(value, str):
            raise TypeError(
                f"{where}.{name}: expected a string or None, got {type(value).__name__}"
            )
    if record.result_hash is None and record.unknown_tool_name is not None:
        raise ValueError(
            f"{where}: unknown_tool_name is set but result_hash is None; record_outcome only "
            "stores an unknown tool name together with its result hash"
        )
    return record


def normalize_run_id(run_id: object) -> str | None:
    """Trimmed run id; empty, blank or non-string ids mean "no run"."""
    if not isinstance(run_id, str):
        return None
    trimmed = js_trim(run_id)
    return trimmed or None


def recent_run_records(state: SessionState, run_id: RunKey, limit: int) -> list[ToolCallRecord]:
    """The run's newest ``limit`` records (at least one), newest first.

    What the recommended profile's extra detectors read. No snapshot copy of the whole
    history, and the walk stops once all of the run's records (the engine counts them) have
    been seen: O(limit) while the run's records are the newest ones.
    """
    run = state._runs.get(run_id)
    out: list[ToolCallRecord] = []
    if run is None:
        return out
    wanted = min(max(limit, 1), run.n)  # like the snapshot walk, a limit below 1 gives one
    for record in reversed(state._records):
        if record.run_id == run_id:
            out.append(record)
            if len(out) == wanted:
                break
    return out


def has_run_records(state: SessionState, run_id: RunKey) -> bool:
    """Whether the run still has records in the history (O(1): the engine keeps a count)."""
    return run_id in state._runs


_V = TypeVar("_V")


def keep_run(
    state: SessionState, per_run: dict[RunKey, _V], run_id: RunKey, value: _V, limit: int
) -> None:
    """Set ``per_run[run_id]`` as its newest entry, then trim ``per_run`` to ``limit`` entries.

    A guard session's per-run maps (stops, streaks, counters) keep their entries in order of
    last use; see :func:`trim_runs_map`. Here, not in the session's class, so that the step
    keeps a run without an interpreted frame in the compiled build.
    """
    if per_run and next(reversed(per_run)) == run_id:
        per_run[run_id] = value  # already the newest: nothing moves, nothing to trim
        return
    per_run.pop(run_id, None)  # re-inserted last: dicts keep insertion order
    per_run[run_id] = value
    trim_runs_map(state, per_run, run_id, limit)


def trim_runs_map(
    state: SessionState, per_run: dict[RunKey, Any], newest: RunKey, limit: int
) -> None:
    """Drop the oldest entries past ``limit``, but ``newest`` and runs still in the history
    (at most historySize of them), whose state detection may still read."""
    excess = len(per_run) - limit
    if excess <= 0:
        return
    doomed: list[RunKey] = []
    for run in per_run:  # oldest first; the walk skips at most historySize live runs
        if len(doomed) == excess:
            break
        if run != newest and not has_run_records(state, run):
            doomed.append(run)
    for run in doomed:
        del per_run[run]


_time = time.time  # a module global, so tests can give both engines one fake clock


def call_signature(state: SessionState, tool: str, params: Any) -> str:
    """``hash_tool_call(tool, params)`` through the session's memo (``_engine.signature``)."""
    return signature_of(state._memo, tool, params)


def _checked_signature(tool: str, signature: object) -> str:
    """A caller's ``signature=`` argument, refused unless it has ``hash_tool_call``'s shape.

    The engine files state under the signature alone because that shape, "{tool}:{64 hex}",
    names the tool; a signature of another shape could meet another tool's.
    """
    if type(signature) is not str or signature_key(tool, signature) is not signature:
        raise ValueError(
            f"signature={signature!r} is not a signature of tool {tool!r}: pass "
            f"hash_tool_call({tool!r}, params) (shape '{tool}:<64 hex digits>'), or None"
        )
    return signature


def _checked_call_id(tool_call_id: object) -> str | None:
    """A tool-call id: a string or None, the same refusal in the interpreted and compiled builds."""
    if tool_call_id is None or isinstance(tool_call_id, str):
        return tool_call_id
    raise TypeError(
        f"tool_call_id must be a string or None, got {type(tool_call_id).__name__}: pass the "
        "id your runtime gave the call as a str (or None when it has none)"
    )


def record_call(
    state: SessionState,
    tool: str,
    params: Any,
    tool_call_id: object = None,
    config: ConfigLike = None,
    run_id: object = None,
    *,
    signature: object = None,
) -> None:
    """Append a call with no result yet, then trim to ``historySize``.

    ``signature``: ``hash_tool_call(tool, params)`` when the caller already has it (it is then
    not computed again); ``ValueError`` if it does not have that shape.
    """
    call_id = _checked_call_id(tool_call_id)
    if signature is not None:
        signature = _checked_signature(tool, signature)
    if type(config) is not ResolvedConfig:
        config = resolve_config(config)
    if signature is None:
        signature = signature_of(state._memo, tool, params)
    run_key = state._key(run_id)
    record = ToolCallRecord(tool, signature, call_id, run_key, None, None, _time() * 1000.0)
    run = state._runs.get(run_key) or state._run(run_key)
    run.add_pending(record, signature)
    state._append(record, limits_of(state, config).history_size)


def record_outcome(
    state: SessionState,
    tool: str,
    params: Any,
    tool_call_id: object = None,
    result: Any = UNDEFINED,
    error: Any = UNDEFINED,
    config: ConfigLike = None,
    run_id: object = None,
    *,
    send_tools: Collection[str] = (),
    signature: object = None,
) -> ToolCallRecord | None:
    """Attach an outcome to the newest matching pending record, or append a new one.

    Returns the stored record, or None when the outcome has no hash (nothing is stored).
    ``signature``: as for :func:`record_call`.
    """
    call_id = _checked_call_id(tool_call_id)
    if signature is not None:
        signature = _checked_signature(tool, signature)
    if type(config) is not ResolvedConfig:
        config = resolve_config(config)
    result_hash, unknown = hash_tool_outcome(tool, params, result, error, send_tools=send_tools)
    if result_hash is None:
        return None
    if signature is None:
        signature = signature_of(state._memo, tool, params)
    run_key = state._key(run_id)
    run = state._runs.get(run_key)
    seg = None if run is None else run.match(signature, call_id)
    if seg is not None:
        record = seg.pending
        assert record is not None and run is not None
        record.result_hash, record.unknown_tool_name = result_hash, unknown
        run.learn(seg, record)
        run.complete(seg, result_hash, unknown)
        return record
    record = ToolCallRecord(
        tool, signature, call_id, run_key, result_hash, unknown, _time() * 1000.0
    )
    if run is None:
        run = state._run(run_key)
    run.add_done(record, signature, result_hash)
    state._append(record, limits_of(state, config).history_size)
    return record


VETO_HASH = _VETO_HASH
"""Result hash of a veto record whose signature has no result yet in its run."""


def record_veto(
    state: SessionState,
    tool: str,
    params: Any,
    tool_call_id: object = None,
    config: ConfigLike = None,
    run_id: object = None,
    *,
    signature: object = None,
) -> ToolCallRecord:
    """Record a call the guard blocked, so that retrying it counts (``countBlockedCalls``).

    The veto record is complete: it repeats the signature's current no-progress hash in the run
    (the latest hash of N), so it counts as a repetition (R) and extends the no-progress streak
    (N) toward the circuit breaker; with no result yet it carries ``VETO_HASH``. Being complete,
    no later outcome attaches to it. Appended and trimmed like any record.
    ``signature``: as for :func:`record_call`.
    """
    call_id = _checked_call_id(tool_call_id)
    if signature is not None:
        signature = _checked_signature(tool, signature)
    history_size = resolve_config(config).history_size
    if signature is None:
        signature = signature_of(state._memo, tool, params)
    run_key = state._key(run_id)
    run = state._runs.get(run_key) or state._run(run_key)
    sig = run.sigs.get(signature)
    result_hash = VETO_HASH if sig is None or sig.latest is None else sig.latest
    record = ToolCallRecord(tool, signature, call_id, run_key, result_hash, None, _time() * 1000.0)
    run.add_done(record, signature, result_hash)
    state._append(record, history_size)
    return record

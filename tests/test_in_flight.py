"""Presumed outcomes of calls in flight (core/in_flight.py) against a plain walk of the history.

``presume`` completes the run's calls in flight in the session's own engine state, from the
outcome each pending record keeps as presumable (O(calls in flight)), and ``withdraw`` takes it
back. The oracle is the plain definition: walk the whole history, presume for each of the
newest in-flight records of a signature the latest real outcome of that signature before it in
the run, and measure the copy. The engine state machine of test_engine_differential.py runs
its random operations; a rule presumes random calls in flight at any point, compares every
measurement under the presumption with the oracle's, and withdraws: the machine's invariants
then check that the engine state is exactly as before (against the reference engine).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import rule

import loopwarden as lw
from loopwarden.core import reference
from loopwarden.core.history import VETO_HASH, recent_run_records
from loopwarden.core.in_flight import Presumption, presume, withdraw
from loopwarden.core.tool_call import ToolCallRecord
from test_engine_differential import (
    SIGNATURES,
    EngineMachine,
    calls,
    fast_measures,
    outcomes,
    plain_measures,
    runs,
)


def presumed_history(
    records: list[ToolCallRecord], run: str | None, calls: dict[str, int]
) -> tuple[list[ToolCallRecord], dict[str, int], list[ToolCallRecord]] | None:
    """The oracle: the history with the presumptions applied, the calls left, the presumed."""
    latest: dict[str, tuple[str, str | None]] = {}
    waiting: dict[str, list[tuple[int, tuple[str, str | None] | None]]] = {}
    for index, record in enumerate(records):
        if record.run_id != run or record.args_hash not in calls:
            continue
        if record.result_hash is None:
            waiting.setdefault(record.args_hash, []).append((index, latest.get(record.args_hash)))
        elif record.result_hash != VETO_HASH:
            latest[record.args_hash] = (record.result_hash, record.unknown_tool_name)
    presumed = {
        index: outcome
        for signature, pending in waiting.items()
        for index, outcome in pending[-calls[signature] :]
        if outcome is not None
    }
    if not presumed:
        return None
    view, left, completed = list(records), dict(calls), []
    for index in sorted(presumed):
        hashed, unknown = presumed[index]
        view[index] = replace(records[index], result_hash=hashed, unknown_tool_name=unknown)
        completed.append(view[index])
        left[records[index].args_hash] -= 1
    return view, {s: n for s, n in left.items() if n > 0}, completed


def engine_state(state: lw.SessionState) -> list[Any]:
    """Every field of the engine's per-run state, objects named by identity: what a withdrawn
    presumption must leave exactly as it found it."""
    out: list[Any] = [[_row(r) for r in state.history]]
    for key, run in state._runs.items():
        segments = []
        seg = run.first
        while seg is not None:
            links = (seg.prev, seg.pending, seg.k_prev, seg.k_next, seg.i_prev, seg.i_next)
            fields = (seg.n, seg.t, seg.tool, seg.unk, id(seg.before), seg.before_kseq)
            segments.append([id(seg), *map(id, links), *fields])
            seg = seg.next
        sigs = [
            [k, s.count, s.total, s.done, s.streak, s.latest, s.last_done, id(s.p_new), *real]
            for k, s in run.sigs.items()
            for real in [(id(s.real), s.real_kseq)]
        ]
        fields = [run.n, run.top, run.tail, run.a, run.b, dict(run.side_a), dict(run.side_b)]
        ids = {k: id(v) for k, v in run.by_id.items()}
        out.append([key, segments, sigs, fields, ids, id(run.newest), id(run.last)])
    return out


def _row(record: ToolCallRecord) -> tuple[Any, ...]:
    return (record.args_hash, record.result_hash, record.unknown_tool_name, record.tool_call_id)


class PresumeMachine(EngineMachine):
    """The engine machine, plus presumptions of calls in flight at random moments."""

    @rule(
        call=calls,
        run=runs,
        outcome=outcomes,
        times=st.integers(1, 4),
        done=st.lists(st.integers(0, 3), unique=True),
        later=outcomes,
        more=st.integers(0, 2),
        between=st.one_of(st.none(), calls),
    )
    def in_flight(
        self,
        call: tuple[str, Any],
        run: Any,
        outcome: dict[str, Any],
        times: int,
        done: list[int],
        later: dict[str, Any],
        more: int,
        between: tuple[str, Any] | None,
    ) -> None:
        """A call with an outcome, the same call ``times`` times in flight (ids f0, f1...),
        the outcome ``later`` for some of those (by id, in any order), then ``more`` calls.
        A call ``between`` the first and the others makes a ping-pong tail."""
        self._call(*call, None, run)
        self._outcome(*call, None, run, outcome)
        if between is not None:
            self._call(*between, None, run)
            self._outcome(*between, None, run, outcome)
        for i in range(times):
            self._call(*call, f"f{i}", run)
        for i in done:
            if i < times:
                self._outcome(*call, f"f{i}", run, later)
        for _ in range(more):
            self._call(*call, None, run)

    @rule(
        picks=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 4)), min_size=1),
        other=st.tuples(st.integers(0, len(SIGNATURES) - 1), st.integers(1, 3)),
    )
    def presume_in_flight(self, picks: list[tuple[int, int]], other: tuple[int, int]) -> None:
        """Calls in flight named after pending records of one run (plus a random signature)."""
        pending = [r for r in self.plain.history if r.result_hash is None]
        if not pending:
            return
        run_key = pending[picks[0][0] % len(pending)].run_id
        pending = [r for r in pending if r.run_id == run_key]
        flying = {pending[i % len(pending)].args_hash: n for i, n in picks}
        flying.setdefault(SIGNATURES[other[0]][1], other[1])
        want = presumed_history(self.plain.history, run_key, flying)
        before = engine_state(self.fast)
        presumption = presume(self.fast, run_key, flying)
        if want is None:
            assert presumption is None
            return
        assert presumption is not None
        try:
            self._compare(presumption, want, run_key)
        finally:
            withdraw(presumption)
        assert engine_state(self.fast) == before, "withdraw left the engine changed"

    def _compare(self, presumption: Presumption, want: Any, run_key: str | None) -> None:
        """Every measurement under the presumption equals the oracle's on its copy."""
        view, left, completed = want
        assert presumption.left == left
        assert [_row(r) for r in presumption.completed] == [_row(r) for r in completed]
        assert self.fast.history == view
        plain = [r for r in view if r.run_id == run_key]
        engine = self.fast._runs[run_key]
        for tool, signature in SIGNATURES:
            assert fast_measures(engine, tool, signature) == plain_measures(
                plain, tool, signature
            ), tool
        for limit in (1, 3, 50):
            got = recent_run_records(self.fast, run_key, limit)
            assert [_row(r) for r in got] == [_row(r) for r in plain[::-1][:limit]]
        for tool, params in [("exec", {"command": "ls"}), ("read", {"path": "a.py"})]:
            got_verdict = lw.detect(self.fast, tool, params, self.config, run_key)
            state = reference.ReferenceState()
            state.history = view
            assert got_verdict == reference.detect(state, tool, params, self.config, run_key)


PresumeMachine.TestCase.settings = EngineMachine.TestCase.settings
TestPresumedOutcomes = PresumeMachine.TestCase


def test_a_presumption_inside_a_ping_pong_tail_is_withdrawn_exactly() -> None:
    """A B A(in flight): the presumed outcome joins a tail side that already holds it."""
    state, config = lw.SessionState(), {"enabled": True}
    read_a, read_b = ("read", {"path": "a.py"}), ("read", {"path": "b.py"})
    for call in (read_a, read_b):
        lw.record_call(state, *call, None, config, "r")
        lw.record_outcome(state, *call, None, result="same", config=config, run_id="r")
    lw.record_call(state, *read_a, "f0", config, "r")
    before = engine_state(state)
    signature = lw.hash_tool_call(*read_a)
    presumption = presume(state, "r", {signature: 1})
    assert presumption is not None and presumption.left == {}
    engine = state._runs["r"]
    assert (engine.tail, None in engine.side_a) == (3, False)  # the tail's A side: one hash
    withdraw(presumption)
    assert engine_state(state) == before

"""The incremental engine against the plain reference engine, step by step (issue 3).

A hypothesis state machine drives ``loopwarden`` (incremental) and ``loopwarden.core.reference``
(plain list walks) with the same random sequences: calls, outcomes (in order, out of order, for
older pending records, with and without tool-call ids), detections, run switches (blank, padded,
non-string run ids), config changes, loops, ping-pong bursts and pickling round trips, under
random configs with small thresholds and tiny or large history sizes. After every step the two
must agree exactly: verdicts, returned records, and the whole ``.history``.
"""

from __future__ import annotations

import pickle
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import loopwarden as lw
from loopwarden.core import history, reference

TOOLS_PARAMS: list[tuple[str, Any]] = [
    ("exec", {"command": "ls"}),
    ("exec", {"command": "make test"}),
    ("read", {"path": "a.py"}),
    ("read", {"path": "b.py"}),
    ("process", {"action": "poll", "sessionId": "s1"}),
    ("process", {"action": "log", "sessionId": "s1"}),
    ("command_status", {"id": 7}),
    ("search", {"q": "loop"}),
    ("update_plan", {"plan": [{"step": "x", "status": "pending"}]}),
]
RUNS: list[Any] = [None, "r1", " r1 ", "r2", "", "   ", 5]
CALL_IDS: list[str | None] = [None, "c1", "c2", "c3"]
OUTCOMES: list[dict[str, Any]] = [
    {"result": "ok"},
    {"result": "same"},
    {"result": None},
    {"result": {"content": [{"type": "text", "text": "out"}], "details": {}}},
    {"result": {"content": [{"type": "text", "text": "other"}], "details": {"n": 1}}},
    {"error": "Unknown tool: weather"},
    {"error": "Tool exec not found"},
    {"error": Exception("unknown tool: Maps")},
    {"error": "boom"},
    {},  # no result at all: nothing stored
    {"result": {"details": {"status": "blocked", "deniedReason": "tool-loop"}}},  # veto: none
]

configs = st.fixed_dictionaries(
    {
        "enabled": st.sampled_from([True, True, True, None, False]),
        "historySize": st.one_of(st.integers(1, 6), st.integers(7, 40), st.just(10_000)),
        "warningThreshold": st.integers(1, 5),
        "criticalThreshold": st.integers(1, 7),
        "unknownToolThreshold": st.integers(1, 5),
        "globalCircuitBreakerThreshold": st.integers(1, 9),
        "detectors": st.fixed_dictionaries(
            {
                "genericRepeat": st.booleans(),
                "knownPollNoProgress": st.booleans(),
                "pingPong": st.booleans(),
            }
        ),
    }
)
calls = st.sampled_from(TOOLS_PARAMS)
runs = st.sampled_from(RUNS)
call_ids = st.sampled_from(CALL_IDS)
outcomes = st.sampled_from(OUTCOMES)


class EngineMachine(RuleBasedStateMachine):
    """Both engines, one session each, fed the same operations."""

    def __init__(self) -> None:
        super().__init__()
        self.fast = lw.SessionState()
        self.plain = reference.ReferenceState()
        self.config: dict[str, Any] = {}
        # Both engines stamp new records with the same fake clock, so records compare whole.
        self.clock = 0.0
        self._patches = [
            mock.patch.object(history, "_time", lambda: self.clock),
            mock.patch.object(reference, "_now_ms", lambda: self.clock * 1000.0),
        ]
        for patch in self._patches:
            patch.start()

    def teardown(self) -> None:
        for patch in self._patches:
            patch.stop()

    @initialize(config=configs)
    def choose_config(self, config: dict[str, Any]) -> None:
        self.config = config

    # -- operations --------------------------------------------------------------------------

    def _call(self, tool: str, params: Any, call_id: str | None, run: Any) -> None:
        self.clock += 1
        lw.record_call(self.fast, tool, params, call_id, self.config, run)
        reference.record_call(self.plain, tool, params, call_id, self.config, run)

    def _outcome(
        self, tool: str, params: Any, call_id: str | None, run: Any, outcome: dict[str, Any]
    ) -> None:
        self.clock += 1
        got = lw.record_outcome(
            self.fast, tool, params, call_id, config=self.config, run_id=run, **outcome
        )
        want = reference.record_outcome(
            self.plain, tool, params, call_id, config=self.config, run_id=run, **outcome
        )
        assert got == want

    def _detect(self, tool: str, params: Any, run: Any) -> None:
        got = lw.detect(self.fast, tool, params, self.config, run)
        want = reference.detect(self.plain, tool, params, self.config, run)
        assert got == want

    @rule(call=calls, call_id=call_ids, run=runs)
    def call(self, call: tuple[str, Any], call_id: str | None, run: Any) -> None:
        self._call(*call, call_id, run)

    @rule(call=calls, call_id=call_ids, run=runs, outcome=outcomes)
    def outcome(
        self, call: tuple[str, Any], call_id: str | None, run: Any, outcome: dict[str, Any]
    ) -> None:
        self._outcome(*call, call_id, run, outcome)

    @rule(pick=st.integers(0, 10_000), by_id=st.booleans(), outcome=outcomes)
    def outcome_for_pending(self, pick: int, by_id: bool, outcome: dict[str, Any]) -> None:
        """An outcome aimed at some pending record, often an old one (parallel calls)."""
        pending = [r for r in self.plain.history if r.result_hash is None]
        if not pending:
            return
        target = pending[pick % len(pending)]
        tool, params = next(c for c in TOOLS_PARAMS if lw.hash_tool_call(*c) == target.args_hash)
        call_id = target.tool_call_id if by_id else None
        self._outcome(tool, params, call_id, target.run_id, outcome)

    @rule(
        pending=calls,
        others=st.lists(calls, min_size=1, max_size=4),
        error=st.sampled_from(["Unknown tool: weather", "Tool weather not found", "boom"]),
        run=runs,
    )
    def unknown_tools(
        self, pending: tuple[str, Any], others: list[tuple[str, Any]], error: str, run: Any
    ) -> None:
        """Different tools failing with one unknown name, then an older pending call too."""
        self._call(*pending, None, run)
        for tool, params in others:
            self._outcome(tool, params, None, run, {"error": error})
        self._outcome(*pending, None, run, {"error": error})

    @rule(call=calls, call_id=call_ids, run=runs)
    def veto(self, call: tuple[str, Any], call_id: str | None, run: Any) -> None:
        """A blocked call recorded as a veto record (countBlockedCalls)."""
        self.clock += 1
        got = history.record_veto(self.fast, *call, call_id, self.config, run)
        want = reference.record_veto(self.plain, *call, call_id, self.config, run)
        assert got == want

    @rule(call=calls, run=runs)
    def detect(self, call: tuple[str, Any], run: Any) -> None:
        self._detect(*call, run)

    @rule(call=calls, run=runs, times=st.integers(1, 8), outcome=outcomes)
    def loop(self, call: tuple[str, Any], run: Any, times: int, outcome: dict[str, Any]) -> None:
        """The same call and outcome again and again, detecting before each."""
        for _ in range(times):
            self._detect(*call, run)
            self._call(*call, None, run)
            self._outcome(*call, None, run, outcome)

    @rule(
        first=calls,
        second=calls,
        run=runs,
        times=st.integers(1, 8),
        outcomes=st.tuples(outcomes, outcomes),
    )
    def ping_pong(
        self,
        first: tuple[str, Any],
        second: tuple[str, Any],
        run: Any,
        times: int,
        outcomes: tuple[dict[str, Any], dict[str, Any]],
    ) -> None:
        """Alternate two calls, detecting before each."""
        for i in range(times):
            call, outcome = (first, outcomes[0]) if i % 2 == 0 else (second, outcomes[1])
            self._detect(*call, run)
            self._call(*call, None, run)
            self._outcome(*call, None, run, outcome)

    @rule(
        batch=st.lists(
            st.tuples(st.sampled_from(TOOLS_PARAMS[:2]), call_ids, st.sampled_from(OUTCOMES[:2])),
            min_size=2,
            max_size=6,
        ),
        order=st.randoms(use_true_random=False),
        by_id=st.booleans(),
        run=runs,
    )
    def parallel(
        self,
        batch: list[tuple[tuple[str, Any], str | None, dict[str, Any]]],
        order: Any,
        by_id: bool,
        run: Any,
    ) -> None:
        """Calls of one or two signatures in flight, outcomes arriving in a random order."""
        for (tool, params), call_id, _ in batch:
            self._call(tool, params, call_id, run)
        order.shuffle(batch)
        for (tool, params), call_id, outcome in batch:
            self._outcome(tool, params, call_id if by_id else None, run, outcome)
            self._detect(tool, params, run)

    @rule(config=configs)
    def change_config(self, config: dict[str, Any]) -> None:
        """A different config from now on (a smaller historySize trims at the next append)."""
        self.config = config

    @rule()
    def round_trip(self) -> None:
        """Pickle and restore the session: the counters are rebuilt from the records."""
        self.fast = pickle.loads(pickle.dumps(self.fast))

    @invariant()
    def same_history(self) -> None:
        assert self.fast.history == self.plain.history
        assert len(self.fast.history) == len(self.plain.history)

    @invariant()
    def same_measurements(self) -> None:
        """U, N, R and P agree for every signature in every run, whatever the thresholds."""
        runs_present = {r.run_id for r in self.plain.history}
        assert set(self.fast._runs) == runs_present  # no state kept for vanished runs
        for run_id in runs_present:
            plain = reference.run_history(self.plain, run_id)
            run = self.fast._runs[run_id]
            assert run.n == len(plain)
            assert {s.key for s in run.sigs.values()} == {r.args_hash for r in plain}
            for tool, signature in SIGNATURES:
                assert fast_measures(run, tool, signature) == plain_measures(
                    plain, tool, signature
                ), (run_id, tool)


SIGNATURES = [(tool, lw.hash_tool_call(tool, params)) for tool, params in TOOLS_PARAMS]


def fast_measures(run: Any, tool: str, signature: str) -> tuple[Any, ...]:
    """The §5 measurements read from the incremental engine's per-run state."""
    last = run.last
    unknown = (last.t, last.unk) if last.t and last.tool == tool else (0, None)
    sig = run.sigs.get(signature)
    streak = (sig.streak, sig.latest, sig.count) if sig else (0, None, 0)
    if run.tail >= 2 and signature == run.b:
        sides = (run.side_a, run.side_b)
        evidence = all(len(side) == 1 and None not in side for side in sides)
        pp = (run.tail + 1, evidence, run.newest.tool_name, (run.a, run.b))
    else:
        pp = (0, False, None, None)
    return unknown, streak, pp


def plain_measures(plain: list[Any], tool: str, signature: str) -> tuple[Any, ...]:
    """The same measurements by the reference engine's walks."""
    unknown = reference.unknown_tool_streak(plain, tool)
    streak = (
        *reference.no_progress_streak(plain, tool, signature),
        reference.repeat_count(plain, tool, signature),
    )
    pp = reference.ping_pong(plain, signature)
    return unknown, streak, (pp.count, pp.no_progress, pp.paired_tool, pp.signatures)


EngineMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEngineDifferential = EngineMachine.TestCase

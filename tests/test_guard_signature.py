"""LoopGuard's per-call path: params hashed at most once per guard call, the outcome once.

The counting wraps the real hash functions (every loopwarden module's reference to them), so the
guard and the engine run unchanged; the engine functions' ``signature=`` argument must give
exactly what they compute on their own; and the recommended profile's tail, read without a
snapshot of the history, must be the records the snapshot walk finds.
"""

from __future__ import annotations

import functools
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from loopwarden.core import _engine
from loopwarden.core.canonical import UNDEFINED, hash_tool_call
from loopwarden.core.detectors import detect
from loopwarden.core.history import (
    SessionState,
    recent_run_records,
    record_call,
    record_outcome,
    record_veto,
)
from loopwarden.core.outcome import hash_tool_outcome
from loopwarden.guard import Decision, LoopGuard

from _support import COMPILED

Counts = dict[str, int]


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counts]:
    """Count every call of hash_tool_call / hash_tool_outcome made from loopwarden's modules."""
    if COMPILED:
        pytest.skip("mypyc-compiled modules call the hash functions directly: spies see nothing")
    seen: Counts = {"params": 0, "outcome": 0}

    def counting(kind: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def spy(*args: Any, **kwargs: Any) -> Any:
            seen[kind] += 1
            return real(*args, **kwargs)

        return spy

    spies = {
        hash_tool_call: counting("params", hash_tool_call),
        hash_tool_outcome: counting("outcome", hash_tool_outcome),
    }
    for name, module in list(sys.modules.items()):
        if not name.startswith("loopwarden"):
            continue
        for attribute, value in list(vars(module).items()):
            if callable(value) and value in spies:
                monkeypatch.setattr(module, attribute, spies[value])
    # Flat params are hashed by the engine's memo itself, without hash_tool_call's walk.
    monkeypatch.setattr(_engine, "_digest_plain", counting("params", _engine._digest_plain))
    yield seen


NESTED = {"query": {"terms": ["a", "b"], "page": 1}}  # nested: the signature memo never applies


def _measured(counts: Counts, action: Callable[[], Decision]) -> tuple[Decision, Counts]:
    counts["params"] = counts["outcome"] = 0
    decision = action()
    return decision, dict(counts)


def _loop(
    counts: Counts, guard: LoopGuard, params: Any, calls: int
) -> list[tuple[Decision, Counts, Counts | None]]:
    """``calls`` identical calls with identical results; the hash counts of each guard call.

    As a runtime does, the tool runs (and ``after_tool_call`` is called) only when allowed.
    """
    out: list[tuple[Decision, Counts, Counts | None]] = []
    for i in range(calls):
        call_id = f"c{i}"
        before = functools.partial(
            guard.before_tool_call, "s", "search", params, tool_call_id=call_id
        )
        after = functools.partial(
            guard.after_tool_call, "s", "search", params, result={"hits": []}, tool_call_id=call_id
        )
        decision, n_before = _measured(counts, before)
        n_after = None
        if decision.allowed:
            outcome, n_after = _measured(counts, after)
            assert outcome.action == "allow"
        out.append((decision, n_before, n_after))
    return out


@pytest.mark.parametrize(
    "config",
    [
        {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5},
        {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5, "countBlockedCalls": True},
        {"profile": "recommended"},
        {"profile": "recommended", "normalizeVolatile": False},
    ],
)
def test_every_action_hashes_params_once_and_outcome_once(
    counts: Counts, config: dict[str, Any]
) -> None:
    steps = _loop(counts, LoopGuard(config), NESTED, 14)
    actions = {decision.action for decision, _, _ in steps}
    assert {"allow", "warn"} <= actions and actions & {"block", "stop"}  # every path was taken
    for decision, before, after in steps:
        if decision.action == "stop" and decision.verdict is None:  # stopped run: nothing to do
            assert before == {"params": 0, "outcome": 0}
        else:
            assert before == {"params": 1, "outcome": 0}, decision.action
        assert after is None or after == {"params": 1, "outcome": 1}


def test_flat_params_are_hashed_once_for_the_whole_call(counts: Counts) -> None:
    """before and after of one call: the after finds the signature in the session's memo."""
    steps = _loop(counts, LoopGuard({"enabled": True}), {"q": "weather", "n": 3}, 4)
    hashed = [before["params"] + after["params"] for _, before, after in steps if after]
    assert len(hashed) == 4
    # The first call hashes once; the later ones find the same objects in the memo.
    assert hashed == [1, 0, 0, 0]
    assert all(after is not None and after["outcome"] == 1 for _, _, after in steps)


def test_disabled_guard_hashes_nothing_before_the_call(counts: Counts) -> None:
    guard = LoopGuard({"enabled": False})
    counts["params"] = 0
    assert guard.before_tool_call("s", "search", NESTED).action == "allow"
    assert counts["params"] == 0


# -- signature= on the engine functions --------------------------------------------------------


def _random_calls(seed: int) -> list[tuple[str, Any, str, Any]]:
    rng = random.Random(seed)
    calls = []
    for i in range(300):
        tool = rng.choice(["read", "exec", "process"])
        params = {"path": f"f{rng.randrange(3)}", "opts": [rng.randrange(2)]}
        calls.append((tool, params, f"id{i}", {"out": rng.randrange(2)}))
    return calls


@pytest.mark.parametrize("seed", range(5))
def test_given_signature_gives_what_the_functions_compute(seed: int) -> None:
    config = {"enabled": True, "historySize": 40, "warningThreshold": 3, "criticalThreshold": 6}
    plain, given = SessionState(), SessionState()
    rng = random.Random(seed)
    for tool, params, call_id, result in _random_calls(seed):
        run = rng.choice(["r1", "r2", None])
        sig = hash_tool_call(tool, params)
        verdict = detect(plain, tool, params, config, run)
        assert detect(given, tool, params, config, run, signature=sig) == verdict
        if verdict.stuck and verdict.level == "critical":
            a = record_veto(plain, tool, params, call_id, config, run)
            b = record_veto(given, tool, params, call_id, config, run, signature=sig)
            assert (a.args_hash, a.result_hash) == (b.args_hash, b.result_hash)
            continue
        record_call(plain, tool, params, call_id, config, run)
        record_call(given, tool, params, call_id, config, run, signature=sig)
        a_out = record_outcome(plain, tool, params, call_id, result, UNDEFINED, config, run)
        b_out = record_outcome(
            given, tool, params, call_id, result, UNDEFINED, config, run, signature=sig
        )
        assert a_out is not None and b_out is not None
        assert (a_out.args_hash, a_out.result_hash) == (b_out.args_hash, b_out.result_hash)
    strip = [(r.tool_name, r.args_hash, r.run_id, r.result_hash) for r in plain.history]
    assert strip == [(r.tool_name, r.args_hash, r.run_id, r.result_hash) for r in given.history]


@pytest.mark.parametrize(
    "bad",
    [
        "read:" + "0" * 63,  # too short
        "exec:" + "0" * 64,  # another tool's signature
        "read" + "0" * 65,  # no separator
        b"read:" + b"0" * 64,  # not a string
    ],
)
def test_a_signature_of_another_shape_is_refused_before_any_change(bad: Any) -> None:
    state = SessionState()
    record_call(state, "read", {"path": "a"}, "c0", {"enabled": True}, "r")
    before = state.history
    attempts: list[Callable[[], object]] = [
        lambda: detect(state, "read", {"path": "a"}, {"enabled": True}, "r", signature=bad),
        lambda: record_call(state, "read", {"path": "a"}, "c1", None, "r", signature=bad),
        lambda: record_veto(state, "read", {"path": "a"}, "c1", None, "r", signature=bad),
        lambda: record_outcome(state, "read", {"path": "a"}, "c0", "x", signature=bad),
    ]
    for attempt in attempts:
        with pytest.raises(ValueError, match=r"is not a signature of tool 'read'.*hash_tool_call"):
            attempt()
    assert state.history == before


# -- the recommended profile's tail, read without copying the history --------------------------


@pytest.mark.parametrize("seed", range(5))
def test_recent_run_records_match_the_snapshot_walk(seed: int) -> None:
    """Same records as a plain walk over the full snapshot, any interleaving."""
    rng = random.Random(seed)
    state = SessionState()
    config = {"enabled": True, "historySize": rng.choice([1, 7, 60])}
    runs = ["a", "b", " a ", "", None, "c"]  # " a " and "" normalise to "a" and None
    for i in range(400):
        run = rng.choice(runs)
        record_call(state, "read", {"i": rng.randrange(5)}, f"c{i}", config, run)
        if rng.random() < 0.7:
            record_outcome(state, "read", {"i": 0}, None, "x", UNDEFINED, config, run)
        snapshot = state.history
        for key in ("a", "b", "c", None, "absent"):
            for limit in (0, 1, 3, 51):
                expected = [r for r in reversed(snapshot) if r.run_id == key][: max(limit, 1)]
                got = recent_run_records(state, key, limit)
                assert [id(r) for r in got] == [id(r) for r in expected], (i, key, limit)


@pytest.mark.parametrize(
    "params",
    [
        {"q": "plain", "n": 3, "ok": True, "none": None},
        {"x": 1.5, "y": 2.0, "z": 1e-7},  # floats: only the canonical walk writes them
        {"\U0001f600": 1, "a": 2},  # an astral key: code-point order is not UTF-16 order
        {"lone": "\ud800x"},  # a lone surrogate: the encoder refuses it
        {"big": 2**80},  # beyond the encoder's ints
        {"é": "ü", "b": "\u2028"},
    ],
)
def test_memo_signature_of_flat_params_is_hash_tool_call(params: dict[str, Any]) -> None:
    memo = _engine.Memo()
    assert _engine.signature(memo, "search", params) == hash_tool_call("search", params)
    assert _engine.signature(memo, "search", params) == hash_tool_call("search", params)

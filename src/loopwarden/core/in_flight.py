"""Calls in flight: deciding a batch as if its calls had run one after another.

When a runtime runs the calls of one model turn at the same time, the guard decides each call
before the others of the turn have results, or after some of them have: that depends only on
the order the runtime reports them in. To decide the same either way, a call of the current
batch that is in flight is presumed to return what the same call (same signature) last returned
in the run, which is what a repeated call usually returns and what one after another would have
shown. :func:`presume` completes those calls' records in the session's own history with their
presumed outcomes, through the engine's own completion, so that detection reads exactly what
the outcomes would give; :func:`withdraw` takes every change back before anything is recorded.
The real outcomes are recorded when they come.

Cost: the engine keeps, on each pending record, the outcome it would be presumed to return
(``_Segment.before``), so presuming costs O(calls in flight) whatever ``historySize`` is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from loopwarden.core._engine import _Run, _Segment, _Undo, presumable
from loopwarden.core.history import SessionState
from loopwarden.core.tool_call import ToolCallRecord


@dataclass
class Presumption:
    """Calls in flight completed by their presumed outcomes, until :func:`withdraw`.

    ``left``: per signature, how many calls in flight have no presumption (no earlier outcome
    of that call in the run); ``completed``: the presumed records, oldest first (for the
    detectors that follow outcomes as they come rather than the history), valid until
    :func:`withdraw`.
    """

    run: _Run
    undo: list[_Undo]
    left: dict[str, int]
    completed: list[ToolCallRecord]


def presume(state: SessionState, run: str | None, calls: Mapping[str, int]) -> Presumption | None:
    """Complete the run's calls in flight with their presumed outcomes; undo with :func:`withdraw`.

    ``calls`` maps a signature to how many of its calls are in flight in the current batch
    (the newest records of that signature without an outcome). None when nothing can be
    presumed (nothing was changed). Detection may read ``state`` until :func:`withdraw`; nothing
    may be recorded in it meanwhile.
    """
    engine = state._runs.get(run) if calls else None
    if engine is None:
        return None
    targets: list[_Segment] = []
    left = dict(calls)
    for signature, count in calls.items():
        sig = engine.sigs.get(signature)
        seg = None if sig is None else sig.p_new
        while seg is not None and count > 0:
            count -= 1
            assert sig is not None
            if presumable(sig, seg) is not None:
                targets.append(seg)
                left[signature] -= 1
            seg = seg.k_prev
    if not targets:
        return None
    targets.sort(key=_position)
    undo = []
    try:
        for seg in targets:
            before = seg.before
            assert before is not None and before.result_hash is not None
            undo.append(engine.presume(seg, before.result_hash, before.unknown_tool_name))
    except BaseException:
        _take_back(engine, undo)
        raise
    completed = [seg.pending for seg in targets if seg.pending is not None]
    return Presumption(engine, undo, {s: n for s, n in left.items() if n > 0}, completed)


def withdraw(presumption: Presumption) -> None:
    """Put the history back as it was before :func:`presume`."""
    _take_back(presumption.run, presumption.undo)


def _take_back(engine: _Run, undo: list[_Undo]) -> None:
    for step in reversed(undo):
        engine.withdraw(step)


def _position(seg: _Segment) -> int:
    return seg.rseq

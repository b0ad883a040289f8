"""Calls in flight: deciding a batch as if its calls had run one after another.

When a runtime runs the calls of one model turn at the same time, the guard decides each call
before the others of the turn have results, or after some of them have: that depends only on
the order the runtime reports them in. To decide the same either way, a call of the current
batch that is in flight is presumed to return what the same call (same signature) last returned
in the run, which is what a repeated call usually returns and what one after another would have
shown. :func:`presumed_view` builds the history the detectors then read: a copy in which those
calls carry their presumed outcomes. The session's own history is never changed; the real
outcomes are recorded when they come. Building the view costs O(historySize), paid only for a
call decided while calls of its batch are in flight with a presumable outcome.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from loopwarden.core.history import VETO_HASH, SessionState
from loopwarden.core.tool_call import ToolCallRecord

Outcome = tuple[str, str | None]  # (result_hash, unknown_tool_name)


def presumed_view(
    state: SessionState, run: str | None, calls: Mapping[str, int]
) -> tuple[SessionState, dict[str, int], list[ToolCallRecord]] | None:
    """The history with the run's calls in flight completed by their presumed outcomes.

    ``calls`` maps a signature to how many of its calls are in flight in the current batch
    (the newest records of that signature without an outcome). Returns the view, per
    signature how many calls in flight are left without a presumption (no earlier outcome of
    that call in the run), and the presumed records oldest first (for the detectors that
    follow outcomes as they come rather than the history); or None when nothing can be
    presumed (read ``state`` itself).
    """
    if not calls:
        return None
    records = state.history
    presumed = _presumptions(records, run, calls)
    if not presumed:
        return None
    left = dict(calls)
    completed = []
    for index in sorted(presumed):
        record, outcome = records[index], presumed[index]
        records[index] = replace(record, result_hash=outcome[0], unknown_tool_name=outcome[1])
        completed.append(records[index])
        left[record.args_hash] -= 1
    # The other records are shared with the session: the view is only read, never recorded in.
    return SessionState(records), {sig: n for sig, n in left.items() if n > 0}, completed


def _presumptions(
    records: list[ToolCallRecord], run: str | None, calls: Mapping[str, int]
) -> dict[int, Outcome]:
    """Position in ``records`` → presumed outcome, for the newest in-flight calls of the run."""
    latest: dict[str, Outcome] = {}  # per signature, its latest real outcome so far
    waiting: dict[str, list[tuple[int, Outcome | None]]] = {}
    for index, record in enumerate(records):
        if record.run_id != run or record.args_hash not in calls:
            continue
        if record.result_hash is None:
            waiting.setdefault(record.args_hash, []).append((index, latest.get(record.args_hash)))
        elif record.result_hash != VETO_HASH:
            latest[record.args_hash] = (record.result_hash, record.unknown_tool_name)
    presumed: dict[int, Outcome] = {}
    for signature, pending in waiting.items():
        for index, outcome in pending[-calls[signature] :]:
            if outcome is not None:
                presumed[index] = outcome
    return presumed

"""Replay one trajectory through a real :class:`loopwarden.LoopGuard`, exactly as it would run live.

Each trajectory is one session and one run. Every recorded call goes through
``before_tool_call``; a call the guard blocks is not executed, so its recorded outcome is never
fed back, but later calls are still replayed (and counted as "after first block"). A compaction
marker arms the post-compaction guard (``on_compaction_retry``). Once the guard stops the run,
the run is over: the remaining calls are not replayed, only counted.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from loopwarden import UNDEFINED, Decision, LoopGuard
from loopwarden._per_call import failed as guard_failed
from loopwarden.analyze.spend import RunSpend, run_spend
from loopwarden.core.events import LoopEvent
from loopwarden.core.patterns import as_stop_message
from loopwarden.core.step import ALLOW, Judge, after_step, before_step, record_message
from loopwarden.store import GuardSession
from loopwarden.transcripts import MISSING, Compaction, ToolCall, Trajectory

if TYPE_CHECKING:
    import logging

    from loopwarden.records import RunRecorder

# Per-call timeline codes, in rising severity: what the HTML timeline colours.
OK, WARNED, WARNING_QUIET, BLOCKED, STOPPED, NOT_RUN = "o", "w", "v", "b", "s", "x"
_SEVERITY = {OK: 0, NOT_RUN: 1, WARNING_QUIET: 2, WARNED: 3, BLOCKED: 4, STOPPED: 5}


@dataclass(frozen=True, slots=True)
class Mark:
    """What the guard said about one call: a loop event, or a de-duplicated warning verdict."""

    index: int
    tool: str
    level: str
    action: str  # "warn" | "block" | "stop" | "allow" (a warning verdict not re-emitted)
    detector: str
    count: int
    message: str

    def where(self) -> dict[str, Any]:
        """Where and what, for the JSON report: ``index`` counts from 0, ``call`` from 1 (as the
        text and HTML reports say "call 13")."""
        return {
            "index": self.index,
            "call": self.index + 1,
            "tool": self.tool,
            "detector": self.detector,
            "count": self.count,
        }

    def to_event(self) -> dict[str, Any]:
        """The JSON ``events[]`` entry (no message, per the report contract)."""
        return {**self.where(), "level": self.level, "action": self.action}


@dataclass(slots=True)
class TrajectoryReport:
    """What the guard would have done on one trajectory (tool names and counts only)."""

    id: str
    source: str
    format: str
    tools: list[str] = field(default_factory=list)  # tool name of each call, in order
    timeline: list[str] = field(default_factory=list)  # one code per call (OK, WARNED...)
    marks: list[Mark] = field(default_factory=list)
    compactions: int = 0
    # Where each compaction fell: the number of calls before it (the HTML strip marks it).
    compaction_at: list[int] = field(default_factory=list)
    # The arguments of the first warned, blocked and stopped call, shortened and with secret-
    # looking values masked, by call index: only the HTML report shows them (a local page of
    # the user's own transcripts, so that the reader sees what repeated); never the JSON.
    previews: dict[int, str] = field(default_factory=dict)
    orphan_results: int = 0
    # The indices of the calls that would not have run under the guard: the blocked ones, the
    # one a stop refused, and every call recorded after the run was stopped. Unlike
    # calls_after_first_block_or_stop, calls the agent made after a block and the guard let
    # through are not among them: they ran.
    saved: list[int] = field(default_factory=list)
    # The cost, where the transcript records it (None: it does not): the tokens of the model
    # responses that made the calls, and the time from the first call to the last; and of
    # those, what came after the guard would have stopped the run (what a stop saves).
    succeeded: bool | None = None  # the run reached its goal (where the transcript says)
    tokens: int | None = None
    tokens_saved: int | None = None
    seconds: float | None = None
    seconds_saved: float | None = None
    # Tokens and money, and those after the first block or stop (analyze/spend.py).
    spend: RunSpend | None = None

    @property
    def calls(self) -> int:
        """Number of tool calls in the transcript."""
        return len(self.tools)

    @property
    def events(self) -> list[Mark]:
        """The emitted loop events: warn, block and stop."""
        return [mark for mark in self.marks if mark.action != "allow"]

    @property
    def warnings(self) -> int:
        """Warnings the guard emitted (de-duplicated repeats are not counted)."""
        return sum(1 for mark in self.marks if mark.action == "warn")

    @property
    def blocks(self) -> int:
        """Calls the guard would have refused to run."""
        return sum(1 for mark in self.marks if mark.action == "block")

    @property
    def stopped(self) -> bool:
        """True when the post-compaction guard would have ended the run."""
        return any(mark.action == "stop" for mark in self.marks)

    @property
    def first_warning(self) -> Mark | None:
        """The first emitted warning."""
        return next((mark for mark in self.marks if mark.action == "warn"), None)

    @property
    def calls_saved(self) -> int:
        """How many calls would not have run (see ``saved``)."""
        return len(self.saved)

    @property
    def first_block_or_stop(self) -> Mark | None:
        """The first intervention that cut the run short: a blocked call or a run stop."""
        return next((mark for mark in self.marks if mark.action in ("block", "stop")), None)

    @property
    def first_blocked_call(self) -> Mark | None:
        """The first call the guard refused to run (a block, not a stop)."""
        return next((mark for mark in self.marks if mark.action == "block"), None)

    @property
    def stop(self) -> Mark | None:
        """Where the guard ended the run, if it did."""
        return next((mark for mark in self.marks if mark.action == "stop"), None)

    @property
    def calls_after_first_block_or_stop(self) -> int:
        """Calls recorded after the first block or stop: at most what the guard would save."""
        first = self.first_block_or_stop
        return 0 if first is None else self.calls - first.index - 1

    def to_json(self) -> dict[str, Any]:
        """The trajectory object of the ``--output json`` contract (docs/analyze-json.md)."""
        if self.marks:
            warning = self.first_warning
            first = self.first_block_or_stop
            events = [mark.to_event() for mark in self.marks if mark.action != "allow"]
            loops = (self.warnings, self.blocks, self.stopped)
        else:  # most runs: nothing to look for among the marks
            warning = first = None
            events = []
            loops = (0, 0, False)
        return {
            "id": self.id,
            "source": self.source,
            "format": self.format,
            "succeeded": self.succeeded,
            "calls": len(self.tools),
            "warnings": loops[0],
            "blocks": loops[1],
            "stopped": loops[2],
            "first_warning": None if warning is None else warning.where(),
            "first_block": None if first is None else _with_message(self.first_blocked_call),
            "stop": None if first is None else _with_message(self.stop),
            "calls_after_first_block_or_stop": 0 if first is None else self.calls - first.index - 1,
            "calls_saved": len(self.saved),
            "cost": {
                "tokens": self.tokens,
                "tokens_saved": self.tokens_saved,
                "seconds": self.seconds,
                "seconds_saved": self.seconds_saved,
            },
            "events": events,
            "spend": None if self.spend is None else self.spend.to_json(),
        }


def worst_first(reports: list[TrajectoryReport]) -> list[TrajectoryReport]:
    """The reports as every report lists them: stopped runs, then blocked, then warned, then
    the rest; within each, the most calls saved first; otherwise in input order (stable)."""
    return sorted(reports, key=_severity)


def _severity(report: TrajectoryReport) -> tuple[int, int]:
    if report.stopped:
        rank = 0
    elif report.blocks:
        rank = 1
    else:
        rank = 2 if report.events else 3
    return rank, -report.calls_saved


def _with_message(mark: Mark | None) -> dict[str, Any] | None:
    return None if mark is None else {**mark.where(), "message": mark.message}


_T = TypeVar("_T")


class ReplayStore:
    """The guard's sessions during a replay: each trajectory's, until it has been replayed.

    A replay runs on one thread and a session never outlives its trajectory, so the memory
    store's locks, expiry and least-recently-used order would be work for nothing (a tenth of
    the replay's time): an update is a dict lookup and the step itself, and the
    :class:`Replayer` drops each session once its trajectory is done, so memory does not grow
    with the number of trajectories.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, GuardSession] = {}

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Apply ``fn`` to the session (created on first use), as every store does."""
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = GuardSession(key)
        return fn(session)

    def peek(self, key: str) -> GuardSession | None:
        """The session, if it is being replayed."""
        return self._sessions.get(key)

    def __len__(self) -> int:
        return len(self._sessions)

    def clear(self) -> None:
        """Forget every session."""
        self._sessions.clear()

    def drop(self, key: str) -> None:
        """Forget a session whose trajectory has been replayed."""
        self._sessions.pop(key, None)


class Replayer:
    """Replays trajectories through one guard, each in its own session and run.

    With a ``recorder``, each run is written to the run records under the trajectory's own id
    (what ``loopwarden runs show ID`` looks up), each loop event with its call number.

    When the guard keeps its sessions in a :class:`ReplayStore` (as the analyzer's do), each
    call runs the core's step (:mod:`loopwarden.core.step`) directly on the trajectory's
    session: what ``LoopGuard.before_tool_call`` and ``after_tool_call`` run inside their store
    update, with the guard's own judge, so the same decisions and events (and a step that
    fails goes to the guard's failure handling, which logs it and allows the call). The
    guard's shell around the step (the store's update, the event log lines, which a replay
    silences anyway, and the delivery to subscribers, here the recorder only) is a quarter of
    a replayed call's cost.
    Runs start and end, and compactions arm, through the guard itself (once per trajectory).
    Any other store is replayed through the guard's methods.
    """

    def __init__(self, guard: LoopGuard, recorder: RunRecorder | None = None) -> None:
        self.guard = guard
        self._sessions = 0
        self._call = 0  # the number of the call being replayed, counting from 1
        self._recorder = recorder
        store = guard.store
        self._store = store if isinstance(store, ReplayStore) else None
        if recorder is not None:
            guard.recorder = recorder  # the run starts and ends
            guard.subscribe(self._record)

    def new_source(self) -> None:
        """Count the sessions from 1 again: the next trajectories come from another file (and
        a session left by a replay that failed part-way is forgotten)."""
        self._sessions = 0
        if self._store is not None:
            self._store.clear()

    def _record(self, event: LoopEvent) -> None:
        if self._recorder is not None:
            self._recorder.record_event(replace(event, call=self._call))

    def replay(self, trajectory: Trajectory) -> TrajectoryReport:
        """Replay one trajectory and report what the guard did."""
        self._sessions += 1
        # One session per trajectory, so that none inherits another's history: named after
        # the file and the trajectory's place in it; the run is named by the trajectory's id.
        session = f"{trajectory.source}#{self._sessions}"
        run_id = trajectory.id
        report = TrajectoryReport(
            id=trajectory.id,
            source=trajectory.source,
            format=trajectory.format,
            orphan_results=trajectory.orphan_results,
            succeeded=trajectory.succeeded,
        )
        self.guard.start_run(session, run_id)
        # The session start_run created, for the core's step (None: through the guard).
        state = None if self._store is None else self._store.peek(session)
        # The guard's judge as it stands for this trajectory (its settings' one object).
        where = (state, session, run_id, self.guard._judge)
        stopped = False
        cost = _Cost()
        for item in trajectory.items:
            if isinstance(item, Compaction):
                if not stopped:
                    report.compactions += 1
                    report.compaction_at.append(len(report.tools))
                    self.guard.on_compaction_retry(session, run_id=run_id)
                continue
            report.tools.append(item.tool)
            if item.tokens is not None or item.at is not None:  # else nothing to add
                cost.add(item, stopped and not item.refused)
            if stopped:
                report.timeline.append(NOT_RUN)
                if not item.refused:  # refused by the live hook: it did not run anyway
                    report.saved.append(len(report.tools) - 1)
                continue
            report.timeline.append(OK)
            stopped = self._replay_call(where, item, report)
            if stopped:
                cost.stopped_at = item.at
        self.guard.end_run(session, run_id)
        if self._store is not None:
            self._store.drop(session)  # never used again: one session per trajectory
        cost.fill(report)
        first = report.first_block_or_stop
        report.spend = run_spend(trajectory, None if first is None else first.index)
        return report

    def _replay_call(self, where: _Where, call: ToolCall, report: TrajectoryReport) -> bool:
        """Replay one call; True when the guard stopped the run after it."""
        index = len(report.tools) - 1
        self._call = index + 1
        before = self._before(where, call)
        if before is not ALLOW:  # a plain allow (most calls) is neither marked nor previewed
            _note(report, index, call.tool, before)
            _preview(report, index, call, before.action)
        if before.action in ("block", "stop") and not call.refused:
            report.saved.append(index)  # this call would not have run (and it did)
        if before.action == "stop":
            return True  # the guard ended the run instead of running this call
        if before.action == "block" or not call.has_outcome:
            return False
        after = self._after(where, call)
        if after is not ALLOW:
            _note(report, index, call.tool, after)
            _preview(report, index, call, after.action)
        return after.action == "stop"

    def _before(self, where: _Where, call: ToolCall) -> Decision:
        """The decision before the call runs: the step on the session, else the guard's."""
        state, session, run_id, judge = where
        if state is None:
            return self.guard.before_tool_call(
                session, call.tool, call.params, run_id=run_id, tool_call_id=call.tool_call_id
            )
        try:
            decision, events = before_step(
                judge, call.tool, call.params, run_id, call.tool_call_id, None, state
            )
        except Exception as exc:  # as LoopGuard does: logged, and the call allowed
            return guard_failed(exc, ("before", call.tool), True)
        for event in events:
            self._record(event)
        return decision

    def _after(self, where: _Where, call: ToolCall) -> Decision:
        """The decision once the call's recorded outcome is in."""
        state, session, run_id, judge = where
        if call.result is MISSING:
            result, error = UNDEFINED, call.error
        else:
            result, error = call.result, None
        # A recorded error marks the call as failed (next to a result too); otherwise what the
        # transcript's own signal says (an exit code, an error flag), None when it says nothing.
        failed = call.failure
        if state is None:
            return self.guard.after_tool_call(
                session, call.tool, call.params, result=result, error=error, run_id=run_id,
                tool_call_id=call.tool_call_id, failed=failed,
            )  # fmt: skip
        outcome = (result, error, failed)
        try:
            decision, events = after_step(
                judge, call.tool, call.params, outcome, run_id, call.tool_call_id, None, state
            )
        except Exception as exc:  # as LoopGuard does
            return guard_failed(exc, ("after", call.tool), False)
        for event in events:
            self._record(event)
        return decision


# Where a trajectory's calls go: the session to run the core's step on (None: through the
# guard's methods), the session's key, the run and the guard's judge.
_Where = tuple[GuardSession | None, str, str, Judge]


@dataclass(slots=True)
class _Cost:
    """Tokens and times of a trajectory's calls, as the transcript records them."""

    tokens: int | None = None
    tokens_saved: int | None = None
    first_at: float | None = None
    last_at: float | None = None
    stopped_at: float | None = None

    def add(self, call: ToolCall, after_stop: bool) -> None:
        if call.tokens is not None:
            self.tokens = (self.tokens or 0) + call.tokens
            if after_stop:
                self.tokens_saved = (self.tokens_saved or 0) + call.tokens
        if call.at is not None:
            self.first_at = call.at if self.first_at is None else self.first_at
            self.last_at = call.at

    def fill(self, report: TrajectoryReport) -> None:
        report.tokens = self.tokens
        if self.tokens is not None and self.stopped_at is not None:
            report.tokens_saved = self.tokens_saved or 0
        if self.first_at is not None and self.last_at is not None:
            report.seconds = max(0.0, self.last_at - self.first_at)
            if self.stopped_at is not None:
                report.seconds_saved = max(0.0, self.last_at - self.stopped_at)


def _note(report: TrajectoryReport, index: int, tool: str, decision: Decision) -> None:
    """Record a non-trivial decision as a mark and raise the call's timeline code."""
    action = decision.action
    verdict = decision.verdict
    if action == "stop" and decision.error is not None:
        # A stop ends the run: after a compaction loop (no verdict), or instead of a block
        # when the config stops after repeated blocks (the call itself did not run).
        error = decision.error
        mark = Mark(
            index,
            tool,
            "critical",
            "stop",
            str(error.detector),
            int(error.count),
            # A report is a record: an unknown tool name copied from an error is withheld.
            as_stop_message(record_message(verdict, tool))
            if verdict is not None
            else str(decision.message or ""),
        )
        code = STOPPED
    elif verdict is not None and verdict.stuck and action in ("warn", "block", "allow"):
        code = {"warn": WARNED, "block": BLOCKED, "allow": WARNING_QUIET}[action]
        mark = Mark(
            index,
            tool,
            str(verdict.level),
            action,
            str(verdict.detector),
            int(verdict.count),
            record_message(verdict, tool),
        )
    else:
        return
    report.marks.append(mark)
    if _SEVERITY[code] > _SEVERITY[report.timeline[index]]:
        report.timeline[index] = code


PREVIEW_CHARS = 80
# Compiled on first use (re's cache): only the HTML report's previews need it.
_SECRET_KEY = r"pass|secret|token|api.?key|auth|credential|cookie|private"


def _preview(report: TrajectoryReport, index: int, call: ToolCall, action: str) -> None:
    """Keep the arguments of the run's first warned, blocked and stopped call."""
    if action not in ("warn", "block", "stop") or index in report.previews:
        return
    if any(mark.action == action and mark.index < index for mark in report.marks):
        return  # not the first of its kind
    report.previews[index] = args_preview(call.params)


def args_preview(params: Any, limit: int = PREVIEW_CHARS) -> str:
    """A call's arguments in one line of at most ``limit`` characters: compact JSON, values
    under secret-looking keys (password, token, api_key...) masked, the rest cut with "…"."""
    text = json.dumps(_masked(params), ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _masked(value: Any, depth: int = 0) -> Any:
    if depth > 20:
        return "…"
    if isinstance(value, dict):
        return {
            str(key): "•••" if re.search(_SECRET_KEY, str(key), re.I) else _masked(item, depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_masked(item, depth + 1) for item in value[:20]]
    return value


@contextmanager
def quiet_guard_logs() -> Iterator[None]:
    """Silence the guard's per-event log lines while replaying (the report says it all).

    Without this, Python's last-resort handler would print every warning and block of a big
    archive to stderr, and formatting them would dominate the replay time.
    """
    if "logging" not in sys.modules:
        # Nothing can have configured logging: a loopwarden logger first used during the
        # replay loads it with a NullHandler on "loopwarden" (core/_lazylog.py), so nothing
        # is printed either, and a replay that logs nothing (most) never loads it.
        yield
        return
    loggers = _guard_loggers()
    saved = [lg.disabled for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        yield
    finally:
        for lg, was in zip(loggers, saved, strict=True):
            lg.disabled = was


_LOGGERS: tuple[tuple[int, int], list[logging.Logger]] = ((-1, -1), [])


def _guard_loggers() -> list[logging.Logger]:
    """loopwarden's loggers, and those of its modules (some log through a lazy logger created
    on its first message: the module names cover those not created yet).

    Listed again only when a logger or a module was added since the last time: the analyzer
    enters :func:`quiet_guard_logs` once per file, and the scan costs more than a small file.
    """
    global _LOGGERS
    import logging

    known = logging.root.manager.loggerDict
    key = (len(known), len(sys.modules))
    if key != _LOGGERS[0]:
        found = {name for name in [*known, *sys.modules] if name.startswith("loopwarden.")}
        loggers = [logging.getLogger(name) for name in ["loopwarden", *sorted(found)]]
        # Creating the loggers adds them to loggerDict: the key is taken after it.
        _LOGGERS = ((len(known), len(sys.modules)), loggers)
    return _LOGGERS[1]

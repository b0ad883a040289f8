"""The hook process: one event in, one answer out, state in SQLite between processes.

Every event is handled inside one SQLite write transaction that covers the guard's session row
and the hook's own row for the CLI session (its current run, the answers it already gave), so
hook processes the CLI starts at the same time (parallel tool calls, or the same hook
configured twice) are serialised by the file's lock: a call is never lost or counted twice.
Run records (``loopwarden runs``) are written to the same file after that transaction commits.

Anything that goes wrong in loopwarden itself fails open: the CLI gets the answer that lets the
tool call proceed, and one line on stderr says what happened.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from loopwarden.core.canonical import hash_tool_call
from loopwarden.core.config import ResolvedConfig
from loopwarden.events import LoopEvent
from loopwarden.guard import Decision, LoopGuard
from loopwarden.hooks._codex_exit import command_failed
from loopwarden.hooks._protocol import (
    SILENT,
    Answer,
    HookEvent,
    context,
    deny,
    end_run,
    warns_before,
)
from loopwarden.records import PathLike, default_db_path
from loopwarden.store import RunRecord
from loopwarden.stores.sqlite import SQLiteStore

SESSION_TTL = 7 * 24 * 3600.0
"""Seconds a CLI session's state is kept unused: a session resumed a week later starts fresh."""

_MAX_ANSWERS = 64  # answers remembered per CLI session, for duplicate hook processes
_MAX_WARNINGS = 64
BATCH_GAP = 5.0
"""Seconds after a batch's latest call within which a call still joins it (see ``_batch``)."""


@dataclass
class HookSession:
    """What the hook keeps per CLI session next to the guard's state (hashes and ids only)."""

    run: str | None = None  # the current run (turn), when the CLI gives no turn id
    turns: int = 0
    ended: bool = False  # the current run's end was recorded
    subagent_runs: list[str] = field(default_factory=list)  # started in the current turn
    # "<event>:<tool call id>:<signature>:<run>" → the answer already given (a duplicate
    # process gets the same; a CLI that numbers its calls per turn reuses ids for other calls).
    answers: dict[str, str] = field(default_factory=dict)
    # Gemini CLI: warnings waiting for the call's AfterTool, by call signature.
    warnings: dict[str, str] = field(default_factory=dict)
    # The batch of calls in flight together (see _batch): its number, the time of its latest
    # call, and the calls let through whose outcome has not come yet, as [call key, batch].
    batch: int = 0
    batch_at: float = 0.0
    flight: list[list[str]] = field(default_factory=list)

    @classmethod
    def from_json(cls, text: str | None) -> HookSession:
        data = json.loads(text) if text else {}
        return cls(
            run=data.get("run"),
            turns=int(data.get("turns", 0)),
            ended=bool(data.get("ended", False)),
            subagent_runs=list(data.get("subagent_runs", [])),
            answers=dict(data.get("answers", {})),
            warnings=dict(data.get("warnings", {})),
            batch=int(data.get("batch", 0)),
            batch_at=float(data.get("batch_at", 0.0)),
            flight=[[str(k), str(b)] for k, b in data.get("flight", [])],
        )

    def to_json(self) -> str:
        body = {
            "run": self.run,
            "turns": self.turns,
            "ended": self.ended,
            "subagent_runs": self.subagent_runs[-_MAX_ANSWERS:],
            "answers": _newest(self.answers, _MAX_ANSWERS),
            "warnings": _newest(self.warnings, _MAX_WARNINGS),
            "batch": self.batch,
            "batch_at": self.batch_at,
            "flight": self.flight[-_MAX_ANSWERS:],
        }
        return json.dumps(body, separators=(",", ":"))


def _newest(entries: dict[str, str], limit: int) -> dict[str, str]:
    return dict(list(entries.items())[-limit:])


@dataclass
class _Outcome:
    """What one event produced: the answer, and what the run records must be told."""

    answer: Answer = SILENT
    started: list[str | None] = field(default_factory=list)
    ended: list[RunRecord] = field(default_factory=list)


class HookRunner:
    """Handles hook events of one CLI against the state file (one instance per process)."""

    def __init__(
        self,
        agent: str,
        config: ResolvedConfig,
        db: PathLike | None = None,
        store: SQLiteStore | None = None,
    ) -> None:
        """``store``: an open store of ``db`` to use (the resident server keeps one per file)."""
        self.agent = agent
        self.path = Path(db) if db is not None else default_db_path()
        self.store = store or state_store(self.path)
        self.guard = LoopGuard(config, store=self.store, agent_id=agent)
        self._events: list[LoopEvent] = []
        self.guard.subscribe(self._events.append)

    def handle(self, event: HookEvent) -> Answer:
        """Apply one event atomically, then write the run records; returns the CLI's answer."""
        key = f"{self.agent}:{event.session_id}"
        event = self._with_exit_status(event)  # a file read: before the state's lock is taken
        with self.store.transaction() as conn:
            session = _load(conn, key)
            outcome = self._apply(key, session, event)
            _save(conn, key, session)
            if outcome.started:  # at each new turn, forget sessions unused for a week
                _sweep(conn)
                self.store.sweep()
        self._record(key, outcome)
        return outcome.answer

    def _with_exit_status(self, event: HookEvent) -> HookEvent:
        """Codex: whether a shell command failed, from its rollout (its payload does not say)."""
        if not (self.agent == "codex" and event.kind == "after" and event.failed is None):
            return event
        if event.tool != "Bash" or not event.transcript or not event.tool_call_id:
            return event
        failed = command_failed(event.transcript, event.tool_call_id, event.run_id)
        return event if failed is None else replace(event, failed=failed)

    # -- one event -------------------------------------------------------------------------

    def _apply(self, key: str, session: HookSession, event: HookEvent) -> _Outcome:
        outcome = _Outcome()
        if event.kind == "prompt":
            self._start_turn(key, session, event.run_id or f"turn-{session.turns + 1}", outcome)
            return outcome
        if event.run_id is not None and event.run_id != session.run:
            self._start_turn(key, session, event.run_id, outcome)  # we missed its prompt
        run = session.run
        if event.subagent is not None:  # a subagent's calls are a run of their own
            run = f"{run or 'session'}/agent-{event.subagent}"
            if run not in session.subagent_runs:
                session.subagent_runs.append(run)
                self._start(key, run, outcome)
        if event.kind == "compaction":
            self.guard.on_compaction_retry(key, run_id=run)
        elif event.kind in ("before", "after"):
            outcome.answer = self._call(key, session, event, run)
        elif event.subagent is not None:  # the subagent finished
            outcome.ended.extend(_some(self.guard.end_run(key, run)))
        elif not session.ended:  # the turn or the session ended
            outcome.ended.extend(_some(self.guard.end_run(key, run)))
            session.ended = True
        return outcome

    def _start_turn(self, key: str, session: HookSession, run: str, outcome: _Outcome) -> None:
        if session.run is not None and not session.ended:
            outcome.ended.extend(_some(self.guard.end_run(key, session.run)))
        session.run, session.turns, session.ended = run, session.turns + 1, False
        session.warnings.clear()
        session.subagent_runs.clear()
        session.flight.clear()
        self._start(key, run, outcome)

    def _start(self, key: str, run: str, outcome: _Outcome) -> None:
        self.guard.start_run(key, run)
        outcome.started.append(run)

    def _call(self, key: str, session: HookSession, event: HookEvent, run: str | None) -> Answer:
        signature = hash_tool_call(event.tool, event.params)
        seen = (
            f"{event.name}:{event.tool_call_id}:{signature}:{run}" if event.tool_call_id else None
        )
        if seen is not None and seen in session.answers:
            # A duplicate hook process (loopwarden installed twice): the call is not counted
            # again, and a refusal is repeated, but a warning is not shown twice.
            return Answer(session.answers[seen])
        call = event.tool_call_id or signature
        if event.kind == "before":
            batch = _batch(session)
            answer, allowed = self._before(key, session, event, run, (signature, batch))
            if allowed:  # in flight until its outcome comes
                session.flight.append([call, batch])
        else:
            answer = self._after(key, session, event, run, (signature, _landed(session, call)))
        if seen is not None:
            session.answers[seen] = answer.stdout if answer.repeat else ""
        return answer

    def _before(
        self,
        key: str,
        session: HookSession,
        event: HookEvent,
        run: str | None,
        call: tuple[str, str],
    ) -> tuple[Answer, bool]:
        """The answer before a call runs, and whether the call was let through."""
        signature, batch = call
        decision = self.guard.before_tool_call(
            key, event.tool, event.params, run_id=run, tool_call_id=event.tool_call_id, batch=batch
        )
        message = decision.message or ""
        if decision.action == "block":
            return deny(self.agent, event, message), False
        if decision.action == "stop":
            return deny(self.agent, event, message, stop=True), False
        if decision.action == "warn" and message:
            if warns_before(self.agent):
                return context(event, message), True
            session.warnings[signature] = message
        return SILENT, True

    def _after(
        self,
        key: str,
        session: HookSession,
        event: HookEvent,
        run: str | None,
        call: tuple[str, str | None],
    ) -> Answer:
        signature, batch = call
        decision: Decision = self.guard.after_tool_call(
            key,
            event.tool,
            event.params,
            result=event.result,
            error=event.error,
            failed=event.failed,
            run_id=run,
            tool_call_id=event.tool_call_id,
            batch=batch,
        )
        if decision.action == "stop" and decision.message:
            return end_run(self.agent, event, decision.message)
        if session.warnings:
            warning = session.warnings.pop(signature, None)
            if warning:
                return context(event, warning)
        return SILENT

    # -- run records, after the commit -----------------------------------------------------

    def _record(self, key: str, outcome: _Outcome) -> None:
        if not (self._events or outcome.started or outcome.ended):
            return
        # only when there is something to write
        from loopwarden.records import RETENTION_DAYS, RunRecorder

        with RunRecorder(self.path, batch=1_000, retention=RETENTION_DAYS * 86400.0) as recorder:
            for run in outcome.started:
                recorder.run_started(key, run, self.agent)
            for event in self._events:
                recorder.record_event(event)
            for record in outcome.ended:
                recorder.run_ended(record)
        self._events.clear()


def state_store(path: Path) -> SQLiteStore:
    """The session store of a hook state file."""
    return SQLiteStore(path, session_ttl=SESSION_TTL, timeout=2.0)


def _batch(session: HookSession) -> str:
    """The batch of a call about to run: the calls a CLI sends together are judged together.

    The CLIs send the hook every call of one model response before any of them has finished
    (parallel calls), and send no id for the response. A call joins the current batch while
    calls of that batch are in flight (let through, outcome not come yet) and the batch's
    latest call is less than :data:`BATCH_GAP` seconds old; otherwise it starts a new one, as
    the model's next response does after reading the results. So identical calls sent together
    count as repeats (``countPendingCalls``), their blocks as one, and a refused call retried
    alone is a new batch: nothing of the refused one is in flight.
    """
    now = time.time()
    current = f"b{session.batch}"
    if not (now - session.batch_at < BATCH_GAP and any(b == current for _, b in session.flight)):
        session.batch += 1
        session.flight.clear()  # calls whose outcome never came (a new batch ends the old one)
        current = f"b{session.batch}"
    session.batch_at = now
    return current


def _landed(session: HookSession, call: str) -> str | None:
    """The batch of the call whose outcome arrived (None if unknown); it is no longer in flight."""
    for i, (key, batch) in enumerate(session.flight):
        if key == call:
            del session.flight[i]
            return batch
    return None


def _some(record: RunRecord | None) -> list[RunRecord]:
    return [] if record is None else [record]


def _load(conn: sqlite3.Connection, key: str) -> HookSession:
    oldest = time.time() - SESSION_TTL
    row = conn.execute(
        "SELECT data FROM hook_sessions WHERE key = ? AND updated_at >= ?", (key, oldest)
    ).fetchone()
    return HookSession.from_json(None if row is None else row[0])


def _save(conn: sqlite3.Connection, key: str, session: HookSession) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO hook_sessions (key, data, updated_at) VALUES (?, ?, ?) "
        "ON CONFLICT (key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
        (key, session.to_json(), now),
    )


def _sweep(conn: sqlite3.Connection) -> None:
    """Forget CLI sessions unused for longer than :data:`SESSION_TTL` (at each new turn)."""
    conn.execute("DELETE FROM hook_sessions WHERE updated_at < ?", (time.time() - SESSION_TTL,))

"""Durable run records in SQLite: every loop event and each run's start and end, across processes.

"Why was this run blocked?" must have an answer after the process is gone. A
:class:`RunRecorder` attached to a guard writes each loop event (names, hashes, counts and the
model-visible message; never raw arguments or results) and each run's start and end with its
outcome to a SQLite file in WAL mode, so several processes can write one file at once.

Records are best effort: a locked, corrupt, full or unwritable database is logged once with a
clear reason and the guard keeps working. Rows a failure kept out wait in memory (at most
10,000; the oldest are dropped beyond that, and counted) and are retried: after a lock on the
next write, after any other failure (a full disk) after a back-off of 1 s doubling up to 60 s,
so a call never pays for the whole backlog. A call writes at most 200 waiting rows; ``flush()``
and ``close()`` write them all.

One call attaches a recorder to a guard::

    from loopwarden.records import RunRecorder
    RunRecorder(path).attach(guard)          # path None: the default location

The default file is ``$XDG_STATE_HOME/loopwarden/runs.db`` (``~/.local/state/loopwarden/runs.db``).
``loopwarden runs list`` / ``loopwarden runs show`` read it.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from loopwarden.core._lazylog import get_logger
from loopwarden.events import LoopEvent

if TYPE_CHECKING:
    from loopwarden.store import RunRecord

logger = get_logger("loopwarden.records")  # logging loads on first use: start-up time


class _Recorded(Protocol):
    """What a recorder needs of a guard (``LoopGuard``, which imports this module: named by
    shape instead of by import, so the two modules do not import each other)."""

    recorder: RunRecorder | None

    def subscribe(self, callback: Callable[[LoopEvent], None]) -> Callable[[], None]: ...


PathLike = str | os.PathLike[str]

# Each entry migrates the schema from version i to i + 1 (PRAGMA user_version). Never edit a
# released entry: append a new one, so every older file upgrades along the same path.
_MIGRATIONS: tuple[str, ...] = (
    # 0 -> 1: runs and their loop events.
    """
    CREATE TABLE runs (
        id          INTEGER PRIMARY KEY,
        session     TEXT NOT NULL,
        run_key     TEXT NOT NULL,          -- the run id, '' for calls outside any run
        agent_id    TEXT,
        started_at  REAL,
        ended_at    REAL,
        outcome     TEXT,
        stop_reason TEXT,
        first_seen  REAL NOT NULL,
        last_seen   REAL NOT NULL
    );
    CREATE INDEX runs_by_key ON runs (session, run_key, id);
    CREATE INDEX runs_by_run_key ON runs (run_key);
    CREATE INDEX runs_by_last_seen ON runs (last_seen);
    CREATE TABLE events (
        id               INTEGER PRIMARY KEY,
        run              INTEGER NOT NULL REFERENCES runs (id),
        ts               REAL NOT NULL,
        type             TEXT NOT NULL,
        level            TEXT NOT NULL,
        action           TEXT NOT NULL,
        detector         TEXT NOT NULL,
        count            INTEGER NOT NULL,
        tool_name        TEXT NOT NULL,
        agent_id         TEXT,
        message          TEXT NOT NULL,
        paired_tool_name TEXT,
        args_hash        TEXT
    );
    CREATE INDEX events_by_run ON events (run, id);
    """,
    # 1 -> 2: persisted guard sessions (loopwarden.stores.sqlite), plain snapshot JSON.
    """
    CREATE TABLE sessions (
        key        TEXT PRIMARY KEY,
        data       TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX sessions_by_updated ON sessions (updated_at);
    """,
    # 2 -> 3: what the coding-CLI hooks keep per CLI session between hook processes (the
    # current run, answers already given), plain JSON; see loopwarden.hooks.
    """
    CREATE TABLE hook_sessions (
        key        TEXT PRIMARY KEY,
        data       TEXT NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX hook_sessions_by_updated ON hook_sessions (updated_at);
    """,
    # 3 -> 4: the call number of an event in its run, where the runtime knows it (a replay).
    """
    ALTER TABLE events ADD COLUMN call INTEGER;
    """,
)
SCHEMA_VERSION = len(_MIGRATIONS)
_MAX_PENDING = 10_000  # rows kept in memory while the database cannot be written
_FLUSH_ROWS = 200  # waiting rows one call writes at most: a backlog drains over several calls
_RETRY_FIRST = 1.0  # seconds before retrying after a failure that waiting may cure (full disk)
_RETRY_MAX = 60.0

# What the reading commands need (the tables of schema version 1, unchanged since).
_READ_COLUMNS = {
    "runs": {"id", "session", "run_key", "agent_id", "started_at", "ended_at", "outcome",
             "stop_reason", "first_seen", "last_seen"},
    "events": {"id", "run", "ts", "type", "level", "action", "detector", "count", "tool_name",
               "agent_id", "message", "paired_tool_name", "args_hash"},
}  # fmt: skip


class RecordsError(Exception):
    """The run-records database cannot be used; the message says why and what to do.

    ``permanent`` is True when retrying cannot help (a corrupt or too-new file); ``locked``
    when another process holds the lock (retrying at once is right: the wait is bounded by the
    busy timeout).
    """

    def __init__(self, message: str, *, permanent: bool = False, locked: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent
        self.locked = locked


def default_db_path() -> Path:
    """``$XDG_STATE_HOME/loopwarden/runs.db``, or ``~/.local/state/loopwarden/runs.db``."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    # The XDG spec says a relative value is invalid and must be ignored.
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "loopwarden" / "runs.db"


def describe_error(path: Path, exc: sqlite3.Error) -> RecordsError:
    """A clear error for a sqlite3 failure on ``path``."""
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return RecordsError(
            f"{path} is not a usable SQLite database ({text}); move the file away or choose "
            "another path, and loopwarden will start a fresh one",
            permanent=True,
        )
    if "locked" in text or "busy" in text:
        return RecordsError(
            f"{path} is locked by another process ({text}); records resume when the lock "
            "is released",
            locked=True,
        )
    if "is full" in text or ("disk I/O error" in text and _disk_full(path)):
        return RecordsError(f"the disk holding {path} is full ({text}); free space on it")
    if "unable to open" in text or "readonly" in text:
        return RecordsError(
            f"cannot write {path} ({text}); check the directory exists and is writable"
        )
    return RecordsError(f"{path}: {type(exc).__name__}: {text}")


_NEARLY_FULL = 1 << 20  # bytes free below which a disk I/O error is taken for a full disk


def _disk_full(path: Path) -> bool:
    """Whether the file system holding ``path`` is (nearly) full.

    SQLite reports a full disk as "database or disk is full" when a page write fails, but as
    "disk I/O error" when it cannot grow its WAL index (``-shm``) or journal: the free space
    tells the two apart.
    """
    import shutil  # on failure only: not paid by every hook process

    try:
        return shutil.disk_usage(path.parent).free < _NEARLY_FULL
    except OSError:
        return False


def open_db(path: PathLike | None = None, *, timeout: float = 2.0) -> sqlite3.Connection:
    """Open (creating if needed) a records database, in WAL mode, migrated to the current schema.

    Raises :class:`RecordsError` with a clear reason for a corrupt, locked, unwritable or
    too-new file. ``timeout`` is how long a write waits for another process's lock.
    """
    db = Path(path) if path is not None else default_db_path()
    if db.is_symlink():
        # Followed, a link would make loopwarden create its target or turn whatever file it
        # names (an empty one, say) into a records database.
        raise RecordsError(
            f"{db} is a symbolic link (to {os.readlink(db)}); loopwarden does not write its "
            "databases through links: give the real file's path instead",
            permanent=True,
        )
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecordsError(f"cannot create the directory of {db}: {exc}") from None
    conn: sqlite3.Connection | None = None
    try:
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) so a writer never
        # upgrades a read lock into a deadlock with another process.
        conn = sqlite3.connect(db, timeout=timeout, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:  # before WAL mode: such a file is left as it was
            raise _newer_or_foreign(conn, db, version)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        _migrate(conn, db)
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        raise describe_error(db, exc) from None
    except RecordsError:
        if conn is not None:
            conn.close()
        raise
    return conn


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version == SCHEMA_VERSION:
        return
    if version > SCHEMA_VERSION:
        raise _newer_or_foreign(conn, path, version)
    conn.execute("BEGIN IMMEDIATE")  # one process migrates; the others wait, then re-check
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for step in range(version, SCHEMA_VERSION):
            for statement in _MIGRATIONS[step].split(";"):
                if statement.strip():
                    conn.execute(statement)
            logger.info("run records %s: schema migrated to version %d", path, step + 1)
        conn.execute(f"PRAGMA user_version={max(version, SCHEMA_VERSION)}")
        conn.execute("COMMIT")
    except BaseException:
        _rollback_quietly(conn)
        raise


def open_readonly(path: PathLike | None = None, *, timeout: float = 5.0) -> sqlite3.Connection:
    """Open an existing records database for reading only (``loopwarden runs``).

    Never creates, migrates or changes the file (SQLite's read-only mode; for a file in WAL
    mode SQLite may add its usual ``-wal``/``-shm`` companions to read it safely while a writer
    is active). An older schema is read as it is (every version has the runs and events
    tables); the next writer upgrades it. Raises :class:`RecordsError` for a missing file, a
    file that is not SQLite, an SQLite file that is not a loopwarden records database, or a
    newer schema.
    """
    db = Path(path) if path is not None else default_db_path()
    if not db.is_file():
        raise RecordsError(
            f"no run records at {db}: record runs with LoopGuard(record_db=...) or --record, "
            "or point --db at another file"
        )
    if _header_user_version(db) == 0 and not _has_wal(db):
        # Checked on the raw header first, so SQLite never opens (or adds files next to) an
        # unrelated database. A live writer's first commits may still sit in the WAL file.
        raise _not_records(db, "runs")
    if not db.with_name(db.name + "-wal").exists():
        # No connection has the file open (the first one creates the -wal, the last removes
        # it). A read-only connection could not remove the -wal and -shm it adds, and they
        # would stay behind after every `runs list`: read through a connection that may clean
        # up after itself, and never writes (query_only). A file we cannot write falls back
        # to the read-only mode below.
        with suppress(sqlite3.Error, RecordsError):
            return _open_checked(db, "mode=rw", timeout, query_only=True)
    try:
        return _open_checked(db, "mode=ro", timeout)
    except sqlite3.Error as exc:
        if _has_wal(db) or ("readonly" not in str(exc) and "unable to open" not in str(exc)):
            raise describe_error(db, exc) from None
    # A WAL-mode file without its -shm, in a directory this user cannot write: SQLite cannot
    # create the -shm it reads through. No -wal means no writer has anything uncheckpointed,
    # so the file can be read as immutable.
    try:
        return _open_checked(db, "mode=ro&immutable=1", timeout)
    except sqlite3.Error as exc:
        raise describe_error(db, exc) from None


def _open_checked(
    db: Path, query: str, timeout: float, *, query_only: bool = False
) -> sqlite3.Connection:
    uri = f"{db.resolve().as_uri()}?{query}"
    conn = sqlite3.connect(uri, uri=True, timeout=timeout, check_same_thread=False)
    try:
        if query_only:
            conn.execute("PRAGMA query_only=1")
        conn.row_factory = sqlite3.Row
        _check_readable(conn, db)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_readable(conn: sqlite3.Connection, path: Path) -> None:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise _newer_or_foreign(conn, path, version)
    missing = _missing_table(conn)
    if version < 1 or missing is not None:
        raise _not_records(path, missing or "runs")


def _missing_table(conn: sqlite3.Connection) -> str | None:
    """The first table of loopwarden's records schema the file lacks (or lacks columns of)."""
    for table, needed in _READ_COLUMNS.items():
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if not needed <= columns:
            return table
    return None


def _newer_or_foreign(conn: sqlite3.Connection, path: Path, version: int) -> RecordsError:
    """A file whose user_version is past ours: a newer loopwarden's, or another program's
    database (user_version is any application's to set); loopwarden's tables tell which."""
    missing = _missing_table(conn)
    if missing is not None:
        return _not_records(path, missing)
    return RecordsError(
        f"{path} has records schema version {version}, newer than this loopwarden "
        f"understands ({SCHEMA_VERSION}); upgrade loopwarden to read it",
        permanent=True,
    )


def _not_records(path: Path, table: str) -> RecordsError:
    return RecordsError(
        f"{path} is not a loopwarden run-records database (it has no {table!r} table of "
        "loopwarden's schema); nothing was changed. Point --db at the runs.db that loopwarden "
        f"writes (default {default_db_path()})",
        permanent=True,
    )


def _has_wal(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def _header_user_version(path: Path) -> int | None:
    """PRAGMA user_version read from the file header; 0 for an empty file, None if not SQLite."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError:
        return None  # SQLite reports the reason
    if not header:
        return 0  # SQLite treats an empty file as an empty database
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    return int.from_bytes(header[60:64], "big")


# ---------------------------------------------------------------------------------------------
# Writing


# A pending write: a function that applies one row change inside an open transaction.
_Write = Callable[[sqlite3.Connection], None]


def storable(text: str | None) -> str | None:
    """``text`` as SQLite can store it: any string, a lone surrogate written as ``\\udcNN``.

    Names come from agents, tools and MCP servers: a tool name read with ``surrogateescape``
    (``"Bash\\udc00"``) cannot be encoded as UTF-8, which SQLite's text is. Such a string is
    stored with each unencodable character escaped (so it then reads as the name spelt with
    that escape); every other string is stored as it is. ``None`` stays ``None``.
    """
    if text is None:
        return None
    if type(text) is not str:
        text = str(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _text(text: str) -> str:
    return storable(text) or ""


def _run_row(conn: sqlite3.Connection, session: str, run_key: str, now: float) -> int:
    """The latest row of (session, run), created on first sight."""
    row = conn.execute(
        "SELECT id FROM runs WHERE session = ? AND run_key = ? ORDER BY id DESC LIMIT 1",
        (session, run_key),
    ).fetchone()
    if row is not None:
        return int(row[0])
    cur = conn.execute(
        "INSERT INTO runs (session, run_key, first_seen, last_seen) VALUES (?, ?, ?, ?)",
        (session, run_key, now, now),
    )
    return int(cur.lastrowid or 0)


def _write_event(event: LoopEvent) -> _Write:
    def write(conn: sqlite3.Connection) -> None:
        ts = event.timestamp or time.time()
        run = _run_row(conn, _text(event.session), _text(event.run_id or ""), ts)
        conn.execute(
            "UPDATE runs SET last_seen = max(last_seen, ?), agent_id = coalesce(agent_id, ?) "
            "WHERE id = ?",
            (ts, storable(event.agent_id), run),
        )
        conn.execute(
            "INSERT INTO events (run, ts, type, level, action, detector, count, tool_name, "
            "agent_id, message, paired_tool_name, args_hash, call) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run,
                ts,
                *(_text(v) for v in (event.type, event.level, event.action, event.detector)),
                event.count,
                *(storable(v) for v in (event.tool_name, event.agent_id, event.message)),
                *(storable(v) for v in (event.paired_tool_name, event.args_hash)),
                event.call,
            ),
        )

    return write


RETENTION_DAYS = 30
"""Days the coding-CLI hooks keep a run's records after it was last active (``runs prune``
deletes older runs on demand, with any limit)."""


def prune_runs(conn: sqlite3.Connection, before: float) -> tuple[int, int]:
    """Delete the runs last active before ``before`` (epoch seconds) and their events.

    Returns (runs, events) deleted. The caller commits (or runs it in a transaction).
    """
    old = "SELECT id FROM runs WHERE last_seen < ?"
    events = conn.execute(f"DELETE FROM events WHERE run IN ({old})", (before,)).rowcount
    runs = conn.execute("DELETE FROM runs WHERE last_seen < ?", (before,)).rowcount
    return int(runs), int(events)


def _write_prune(seconds: float) -> _Write:
    def write(conn: sqlite3.Connection) -> None:
        prune_runs(conn, time.time() - seconds)

    return write


def _write_start(session: str, run_key: str, agent_id: str | None, at: float) -> _Write:
    def write(conn: sqlite3.Connection) -> None:
        # A (re)started run gets a fresh row, like the guard's fresh in-memory run record.
        conn.execute(
            "INSERT INTO runs (session, run_key, agent_id, started_at, first_seen, last_seen) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (_text(session), _text(run_key), storable(agent_id), at, at, at),
        )

    return write


def _write_end(
    session: str,
    run_key: str,
    agent_id: str | None,
    at: float,
    outcome: str | None,
    stop_reason: str | None,
) -> _Write:
    def write(conn: sqlite3.Connection) -> None:
        run = _run_row(conn, _text(session), _text(run_key), at)
        conn.execute(
            "UPDATE runs SET ended_at = ?, outcome = ?, stop_reason = ?, "
            "last_seen = max(last_seen, ?), agent_id = coalesce(agent_id, ?) WHERE id = ?",
            (at, storable(outcome), storable(stop_reason), at, storable(agent_id), run),
        )

    return write


class RunRecorder:
    """Writes a guard's loop events and run starts/ends to a SQLite file (best effort).

    Thread-safe; one recorder may serve several guards. Attach it with :meth:`attach`, or give
    ``LoopGuard(record_db=path)``. Errors are logged (once per kind of failure) and never raised.
    ``retention``: seconds a run is kept after it was last active; older runs and their
    events are deleted whenever a run starts (default: kept for ever; the coding-CLI hooks keep
    :data:`RETENTION_DAYS`). ``batch``: rows written per transaction. The default 1 makes
    every row durable at once (a live guard); a bulk writer such as a transcript replay passes
    e.g. 500 and calls :meth:`close` (or :meth:`flush`) at the end. ``clock`` (monotonic
    seconds) times the back-off after a failure.
    """

    def __init__(
        self,
        path: PathLike | None = None,
        *,
        timeout: float = 2.0,
        batch: int = 1,
        clock: Callable[[], float] = time.monotonic,
        retention: float | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1 row, got {batch}")
        self.path = Path(path) if path is not None else default_db_path()
        self._timeout = timeout
        self._batch = batch
        self._chunk = max(batch, _FLUSH_ROWS)
        self._clock = clock
        self._retention = retention
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._disabled: str | None = None
        self._pending: deque[_Write] = deque()
        self._dropped = 0
        self._last_error: str | None = None
        self._retry_at = float("-inf")
        self._retry_delay = 0.0
        self._unsubscribes: list[Callable[[], None]] = []
        with self._lock:
            self._connect()

    # -- public API --------------------------------------------------------------------------

    def attach(self, guard: _Recorded) -> RunRecorder:
        """Record ``guard``'s loop events and run starts/ends; returns self."""
        if getattr(guard, "recorder", None) is not self:
            self._unsubscribes.append(guard.subscribe(self.record_event))
            guard.recorder = self
        return self

    @property
    def ok(self) -> bool:
        """True while the database is usable and nothing is waiting to be written."""
        return self._disabled is None and self._conn is not None and not self._pending

    def record_event(self, event: LoopEvent) -> None:
        """Write one loop event (a guard subscriber)."""
        self._submit(_write_event(event))

    def run_started(self, session: str, run_id: str | None, agent_id: str | None = None) -> None:
        """Write the start of a run (called by ``LoopGuard.start_run``); with ``retention``
        (seconds), runs inactive for longer are deleted first, with their events."""
        if self._retention is not None:
            self._submit(_write_prune(self._retention))
        self._submit(_write_start(session, run_id or "", agent_id, time.time()))

    def run_ended(self, record: RunRecord) -> None:
        """Write the end of a run with its outcome (called by ``LoopGuard.end_run``)."""
        at = record.ended_at or time.time()
        self._submit(
            _write_end(
                record.session,
                record.run_id or "",
                record.agent_id,
                at,
                record.outcome,
                record.stop_reason,
            )
        )

    def flush(self) -> bool:
        """Write every waiting row now (whatever the back-off); True when none is left."""
        with self._lock:
            return self._drain_locked()

    def close(self) -> None:
        """Flush what can be flushed, detach from guards, close the file."""
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        self._unsubscribes.clear()
        with self._lock:
            self._drain_locked()
            if self._pending:
                logger.error(
                    "run records: %d rows could not be written to %s before closing (%s)",
                    len(self._pending),
                    self.path,
                    self._last_error or "database unavailable",
                )
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------

    def _connect(self) -> None:
        try:
            self._conn = open_db(self.path, timeout=self._timeout)
        except RecordsError as exc:
            self._fail(exc)

    def _fail(self, error: RecordsError) -> None:
        reason = str(error)
        if error.permanent:
            self._disabled = reason
            self._pending.clear()
            logger.error("run records disabled: %s (the guard keeps working)", reason)
        elif reason != self._last_error:  # log each new kind of failure once, not per row
            logger.error(
                "run records: %s (the guard keeps working; up to %d rows wait in memory and "
                "are written when it succeeds)",
                reason,
                _MAX_PENDING,
            )
        self._last_error = reason
        if not error.locked:
            # A lock is retried on the next write (the busy timeout bounds each wait); anything
            # else, such as a full disk, is retried after a growing pause, so calls meanwhile
            # only queue their row instead of replaying the backlog into the same failure.
            self._retry_delay = min(_RETRY_MAX, max(_RETRY_FIRST, self._retry_delay * 2))
            self._retry_at = self._clock() + self._retry_delay

    def _submit(self, write: _Write) -> None:
        with self._lock:
            if self._disabled is not None:
                return
            self._pending.append(write)
            if len(self._pending) > _MAX_PENDING:
                self._drop_oldest()
            if len(self._pending) >= self._batch and self._clock() >= self._retry_at:
                self._write_some(self._chunk)

    def _drop_oldest(self) -> None:
        while len(self._pending) > _MAX_PENDING:
            self._pending.popleft()
            self._dropped += 1
            if self._dropped in (1, 100, 10_000) or self._dropped % 100_000 == 0:
                logger.error(
                    "run records: %d rows dropped in all: more than %d waited for %s (%s)",
                    self._dropped,
                    _MAX_PENDING,
                    self.path,
                    self._last_error or "database unavailable",
                )

    def _drain_locked(self) -> bool:
        while self._pending:
            if not self._write_some(self._chunk):
                return False
        return self._write_some(0)  # nothing waiting: True when the database is usable

    def _write_some(self, limit: int) -> bool:
        """Write up to ``limit`` waiting rows in one transaction; False on failure."""
        if self._disabled is not None:
            return False
        if self._conn is None:
            self._connect()
            if self._conn is None:
                return False
        if not self._pending:
            return True
        rows = list(itertools.islice(self._pending, limit))
        written = 0  # rows applied so far: on a failure, the one at this index failed
        try:
            with _transaction(self._conn):
                for write in rows:
                    write(self._conn)
                    written += 1
        except Exception as exc:
            if isinstance(exc, sqlite3.Error) and not _row_error(exc):
                self._fail(describe_error(self.path, exc))
            else:  # a value no row can hold: drop that row, never block the queue with it
                self._drop_bad_row(written, exc)
            return False
        for _ in rows:
            self._pending.popleft()
        self._recovered()
        return True

    def _drop_bad_row(self, index: int, exc: Exception) -> None:
        """Drop the row that failed for what it holds, so the rows behind it are written."""
        del self._pending[index]
        self._dropped += 1
        logger.error(
            "run records: a row that cannot be stored in %s was dropped (%s); the rows "
            "waiting behind it are written as usual",
            self.path,
            type(exc).__name__,
        )

    def _recovered(self) -> None:
        self._retry_delay = 0.0
        self._retry_at = float("-inf")
        if self._last_error is not None:
            dropped = f"; {self._dropped} rows were dropped meanwhile" if self._dropped else ""
            logger.info("run records: writing to %s again%s", self.path, dropped)
            self._last_error = None


def _row_error(exc: sqlite3.Error) -> bool:
    """True when ``exc`` is about a row's values (a parameter that cannot be bound), not the
    database; ProgrammingError and friends are subclasses of DatabaseError."""
    return type(exc) not in (sqlite3.OperationalError, sqlite3.DatabaseError)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (a full disk) leaves the transaction open: roll it back, or every
        # later BEGIN fails. After SQLite's own rollback there is nothing to roll back.
        _rollback_quietly(conn)
        raise


def _rollback_quietly(conn: sqlite3.Connection) -> None:
    """Roll back an open transaction; the error that caused it stays the one reported."""
    if conn.in_transaction:
        with suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


# ---------------------------------------------------------------------------------------------
# Reading (the ``loopwarden runs`` command)


@dataclass(frozen=True)
class RunSummary:
    """One run as listed by ``loopwarden runs list``."""

    id: int
    session: str
    run_id: str | None
    agent_id: str | None
    started_at: float | None
    ended_at: float | None
    outcome: str | None
    stop_reason: str | None
    first_seen: float
    last_seen: float
    warnings: int
    blocks: int
    stops: int

    @property
    def blocked(self) -> bool:
        """True when the guard blocked a call or stopped the run."""
        return self.blocks > 0 or self.stops > 0 or self.outcome == "stopped"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "id": self.id,
            "session": self.session,
            "run_id": self.run_id,
            "agent_id": self.agent_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "outcome": self.outcome,
            "stop_reason": self.stop_reason,
            "first_seen": self.first_seen,
            "last_seen": self.last_seen,
            "warnings": self.warnings,
            "blocks": self.blocks,
            "stops": self.stops,
        }


_SUMMARY_SQL = """
SELECT r.*,
       coalesce(sum(e.action = 'warn'), 0)  AS warnings,
       coalesce(sum(e.action = 'block'), 0) AS blocks,
       coalesce(sum(e.action = 'stop'), 0)  AS stops
FROM runs r LEFT JOIN events e ON e.run = r.id
"""


def _summary(row: sqlite3.Row) -> RunSummary:
    return RunSummary(
        id=row["id"],
        session=row["session"],
        run_id=row["run_key"] or None,
        agent_id=row["agent_id"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        outcome=row["outcome"],
        stop_reason=row["stop_reason"],
        first_seen=row["first_seen"],
        last_seen=row["last_seen"],
        warnings=int(row["warnings"]),
        blocks=int(row["blocks"]),
        stops=int(row["stops"]),
    )


def list_runs(
    conn: sqlite3.Connection,
    *,
    since: float | None = None,
    blocked_only: bool = False,
    limit: int | None = None,
) -> list[RunSummary]:
    """Runs active at or after ``since`` (epoch seconds), oldest first (the newest ``limit``)."""
    sql = _SUMMARY_SQL + " WHERE r.last_seen >= ? GROUP BY r.id"
    if blocked_only:
        sql += " HAVING blocks > 0 OR stops > 0 OR r.outcome = 'stopped'"
    sql += " ORDER BY r.last_seen DESC, r.id DESC"
    params: list[Any] = [since if since is not None else float("-inf")]
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = conn.execute(sql, params).fetchall()
    return [_summary(row) for row in reversed(rows)]


def find_runs(
    conn: sqlite3.Connection, run: str, *, session: str | None = None
) -> list[RunSummary]:
    """Runs whose run id is ``run`` (or whose row number is ``#N``, or ``N`` when no run has
    that id), oldest first."""
    params: list[Any]
    if run.startswith("#") and run[1:].isdigit():
        where, params = "r.id = ?", [int(run[1:])]
    elif run.isascii() and run.isdigit() and int(run) < 2**63:
        absent = "NOT EXISTS (SELECT 1 FROM runs WHERE run_key = ?)"
        where = f"(r.run_key = ? OR (r.id = ? AND {absent}))"
        params = [run, int(run), run]
    else:
        where, params = "r.run_key = ?", [run]
    if session is not None:
        where += " AND r.session = ?"
        params.append(session)
    rows = conn.execute(_SUMMARY_SQL + f" WHERE {where} GROUP BY r.id ORDER BY r.id", params)
    return [_summary(row) for row in rows.fetchall()]


def run_events(conn: sqlite3.Connection, run_row: int) -> list[LoopEvent]:
    """The loop events of one run row, in the order they happened."""
    rows = conn.execute("SELECT * FROM events WHERE run = ? ORDER BY id", (run_row,)).fetchall()
    session_row = conn.execute("SELECT session, run_key FROM runs WHERE id = ?", (run_row,))
    session, run_key = session_row.fetchone()
    return [
        LoopEvent(
            type=row["type"],
            level=row["level"],
            action=row["action"],
            detector=row["detector"],
            count=row["count"],
            tool_name=row["tool_name"],
            session=session,
            run_id=run_key or None,
            agent_id=row["agent_id"],
            message=row["message"],
            paired_tool_name=row["paired_tool_name"],
            args_hash=row["args_hash"],
            timestamp=row["ts"],
            # Files of schema 3 and before have no call column (read as they are).
            call=row["call"] if "call" in row.keys() else None,  # noqa: SIM118 (sqlite3.Row)
        )
        for row in rows
    ]

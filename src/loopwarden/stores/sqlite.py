"""A session store in SQLite, so a restarted single-node gateway keeps its loop counts.

Each session is one row of plain snapshot JSON (hashes, names, counts and model-visible text; see
:func:`loopwarden.store.snapshot_session`). ``update`` holds SQLite's write lock for the
read-modify-write, so several processes on one machine may share the file. Idle sessions
expire after ``session_ttl`` seconds of wall-clock time, across restarts.

On an event loop (``aupdate``, ``apeek``) each update runs in a worker thread
(``asyncio.to_thread``): Python's sqlite3 has no async interface, and the write lock may wait
for another process for up to ``timeout`` seconds, which must not stall the loop.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from loopwarden.records import (
    PathLike,
    RecordsError,
    default_db_path,
    describe_error,
    open_db,
    storable,
)
from loopwarden.store import GuardSession, restore_session, snapshot_session
from loopwarden.stores import OnStoreError, StoreUnavailableError, check_on_store_error

_T = TypeVar("_T")
_SWEEP_EVERY = 500  # updates between deletions of expired rows


def default_sessions_path() -> Path:
    """``sessions.db`` next to the default run-records file."""
    return default_db_path().with_name("sessions.db")


class SQLiteStore:
    """Guard sessions persisted in a SQLite file (WAL), shared by the processes of one machine."""

    def __init__(
        self,
        path: PathLike | None = None,
        *,
        session_ttl: float | None = 3600.0,
        timeout: float = 2.0,
        on_store_error: OnStoreError = "allow",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if session_ttl is not None and session_ttl <= 0:
            raise ValueError(f"session_ttl must be positive seconds or None, got {session_ttl}")
        self.on_store_error = check_on_store_error(on_store_error)
        self.path = Path(path) if path is not None else default_sessions_path()
        self.session_ttl = session_ttl
        self._timeout = timeout
        self._clock = clock
        # Re-entrant: an update inside transaction() joins the transaction the thread holds.
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._updates = 0
        self._in_transaction = False

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def aupdate(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """``update`` from an event loop, run in a worker thread (the loop keeps running)."""
        import asyncio  # loaded already on an event loop; kept out of a hook's start-up

        return await asyncio.to_thread(self.update, key, fn)

    async def apeek(self, key: str) -> GuardSession | None:
        """``peek`` from an event loop, run in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.peek, key)

    def update(self, key: str, fn: Callable[[GuardSession], _T]) -> _T:
        """Read, apply ``fn`` and write the session under SQLite's write lock."""
        with self.transaction() as conn:
            try:
                session = self._load(conn, key) or GuardSession(key)
                result = fn(session)
                data = json.dumps(snapshot_session(session), separators=(",", ":"))
                conn.execute(
                    "INSERT INTO sessions (key, data, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT (key) DO UPDATE SET data = excluded.data, "
                    "updated_at = excluded.updated_at",
                    (storable(key), data, self._clock()),
                )
                self._sweep(conn)
            except sqlite3.Error as exc:
                raise self._error(exc) from None
            return result

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Hold SQLite's write lock across several updates and the caller's own statements.

        Updates made inside join this one transaction (one commit, or one rollback if anything
        raises), so a process that must read and write more than one session row, or rows of
        its own next to them (the coding-CLI hooks), does so atomically against every other
        process sharing the file. Nested calls join the outer transaction.
        """
        with self._lock:
            conn = self._connection()
            if self._in_transaction:
                yield conn
                return
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error(exc) from None
            self._in_transaction = True
            try:
                yield conn
            except BaseException:
                self._in_transaction = False
                _rollback(conn)
                raise
            self._in_transaction = False
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                _rollback(conn)
                raise self._error(exc) from None

    def peek(self, key: str) -> GuardSession | None:
        """The stored session (a copy), or None when absent or expired."""
        with self._lock:
            try:
                return self._load(self._connection(), key)
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    def __len__(self) -> int:
        with self._lock:
            try:
                row = self._connection().execute(
                    "SELECT count(*) FROM sessions WHERE updated_at >= ?", (self._oldest(),)
                )
                return int(row.fetchone()[0])
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    def close(self) -> None:
        """Close the file (it is reopened if the store is used again)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- internals ---------------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self._conn = open_db(self.path, timeout=self._timeout)
            except RecordsError as exc:
                raise StoreUnavailableError(
                    f"session store: {exc}", policy=self.on_store_error
                ) from None
        return self._conn

    def _oldest(self) -> float:
        return float("-inf") if self.session_ttl is None else self._clock() - self.session_ttl

    def _load(self, conn: sqlite3.Connection, key: str) -> GuardSession | None:
        row = conn.execute(
            "SELECT data FROM sessions WHERE key = ? AND updated_at >= ?",
            (storable(key), self._oldest()),
        ).fetchone()
        return None if row is None else restore_session(json.loads(row[0]))

    def _sweep(self, conn: sqlite3.Connection) -> None:
        self._updates += 1
        if self._updates % _SWEEP_EVERY == 0:
            self.sweep()

    def sweep(self) -> None:
        """Delete the expired sessions now (``update`` does it every few hundred calls, which a
        short-lived process never reaches)."""
        if self.session_ttl is None:
            return
        with self.transaction() as conn:
            try:
                conn.execute("DELETE FROM sessions WHERE updated_at < ?", (self._oldest(),))
            except sqlite3.Error as exc:
                raise self._error(exc) from None

    def _error(self, exc: sqlite3.Error) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"session store: {describe_error(self.path, exc)}", policy=self.on_store_error
        )


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open (SQLite may already have rolled it back)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


__all__ = ["SQLiteStore", "default_sessions_path"]

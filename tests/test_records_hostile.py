"""Issue 24, item 7: the small ones around the records database and the CLI.

A non-ASCII digit in ``--limit``, a foreign database whose ``user_version`` is past ours, a full
disk that SQLite reports as a disk I/O error, a ``--db`` path holding ESC/BEL printed by the
hook, and a symbolic link at a records-database path.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import loopwarden as lw
from loopwarden.records import RecordsError, RunRecorder, open_db, open_readonly
from test_hooks import payload


def _cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", *args],
        input=stdin.encode(),
        capture_output=True,
        timeout=60,
    )
    # Decoded by hand: text=True would turn a raw "\r" into "\n" and hide it.
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def _records(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard({"enabled": True}, record_db=db)
    guard.start_run("s", "r")
    guard.end_run("s", "r")
    assert guard.recorder is not None
    guard.recorder.close()
    return db


@pytest.mark.parametrize("limit", ["٣", "３", "²", "-1", "0", "1" + "0" * 5000])
def test_limit_takes_only_the_digits_0_to_9(tmp_path: Path, limit: str) -> None:
    done = _cli("runs", "list", "--limit", limit, "--db", str(_records(tmp_path)))
    assert done.returncode == 2, done.stdout
    assert "--limit must be a whole number between 1 and" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_limit_in_ascii_digits_still_works(tmp_path: Path) -> None:
    done = _cli("runs", "list", "--limit", "007", "--db", str(_records(tmp_path)))
    assert done.returncode == 0, done.stderr


def _foreign(path: Path, version: int) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute(f"PRAGMA user_version={version}")
    conn.close()
    return path


def test_a_foreign_database_is_not_called_a_newer_loopwarden_schema(tmp_path: Path) -> None:
    db = _foreign(tmp_path / "other.db", 5)
    before = db.read_bytes()
    for opener in (open_db, open_readonly):
        with pytest.raises(RecordsError) as caught:
            opener(db)
        assert "is not a loopwarden run-records database" in str(caught.value)
        assert "newer" not in str(caught.value)
    assert db.read_bytes() == before
    done = _cli("runs", "list", "--db", str(db))
    assert done.returncode == 2 and "not a loopwarden run-records database" in done.stderr


def test_a_newer_loopwarden_schema_is_still_called_newer(tmp_path: Path) -> None:
    db = _records(tmp_path)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version=99")
    conn.close()
    for opener in (open_db, open_readonly):
        with pytest.raises(RecordsError, match="newer than this loopwarden understands"):
            opener(db)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: a real file system that fills up (needs root, as in CI)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        if os.environ.get("LOOPWARDEN_REQUIRE_ALL"):
            pytest.fail(f"cannot mount a small tmpfs: {done.stderr.decode()}")
        pytest.skip("cannot mount a small tmpfs (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> None:
    """Write until the file system is full (the unbuffered file fails at the full block)."""
    with (folder / "filler").open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)


def test_a_full_disk_is_called_full_not_a_disk_io_error(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from loopwarden.stores import StoreUnavailableError
    from loopwarden.stores.sqlite import SQLiteStore

    # Created while there is room; closed, so SQLite must make its WAL index (-shm) again.
    RunRecorder(small_disk / "runs.db").close()
    SQLiteStore(small_disk / "sessions.db").update("s", lambda session: None)
    _fill(small_disk)
    recorder = RunRecorder(small_disk / "runs.db")
    recorder.run_started("s", "r")
    assert not recorder.flush()
    failures = [r.getMessage() for r in caplog.records if r.name == "loopwarden.records"]
    assert any("is full" in m for m in failures), failures
    with pytest.raises(StoreUnavailableError) as caught:
        SQLiteStore(small_disk / "sessions.db").update("s", lambda session: None)
    assert "is full" in caught.value.message, caught.value.message


def test_the_hook_escapes_esc_and_bel_in_a_db_path(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    db = f"{blocker}/\x1b]0;owned\x07\x1b[2J/runs.db"  # cannot be created: its parent is a file
    event = json.dumps(payload("claude-code", "UserPromptSubmit", prompt_id="p1"))
    done = _cli("hook", "claude-code", "--db", db, stdin=event)
    assert done.returncode == 0
    assert "loopwarden hook claude-code:" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, repr(done.stderr)
    assert "\\x1b]0;owned\\x07" in done.stderr, done.stderr


@pytest.mark.parametrize("target", ["missing.db", "empty.db"])
def test_a_symlink_at_a_records_path_is_refused(
    tmp_path: Path, target: str, caplog: pytest.LogCaptureFixture
) -> None:
    real = tmp_path / target
    if target == "empty.db":
        real.write_bytes(b"")
    link = tmp_path / "runs.db"
    link.symlink_to(real)
    with pytest.raises(RecordsError, match="is a symbolic link"):
        open_db(link)
    guard = lw.LoopGuard({"enabled": True}, record_db=link)
    guard.start_run("s", "r")  # best effort: logged, never raised
    assert any("symbolic link" in r.getMessage() for r in caplog.records)
    # Nothing was created or turned into a database behind the link.
    assert real.exists() == (target == "empty.db")
    assert not real.exists() or real.read_bytes() == b""

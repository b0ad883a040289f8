"""The hook's state folder: private to its user, keyed signatures, and a record of its problems.

The hooks keep their state in one SQLite file (``runs.db``, in ``$XDG_STATE_HOME/loopwarden``
unless ``--db`` says otherwise). On a machine shared with other users:

- the folder is made ``0700`` and the files in it ``0600`` (the ``-wal`` and ``-shm`` files
  SQLite makes next to the database too: the hook runs under umask ``077``);
- a symbolic link at the folder or at the file is refused, and so is a folder or a file that
  belongs to another user: that user could read or swap it;
- the signatures the hook stores are keyed with a secret of the user's (``hook.key`` in the
  folder, made once), so nobody can confirm a guessed command by hashing it. Every signature
  and outcome hash of the hook's guard is keyed alike, so they compare exactly as plain ones do:
  no decision changes.

When the state cannot be used, the hook lets the call proceed (it fails open) and records the
problem in ``hook-status.json`` next to the database, for ``loopwarden hooks status`` to report
(:func:`read_problem`), and for the hook to tell the user once per CLI session. The file goes
away with the first event that uses the state again.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

STATUS_FILE = "hook-status.json"
"""Next to the database: the hook's latest problem with its state (absent when there is none)."""

KEY_FILE = "hook.key"
"""Next to the database: the user's secret the stored signatures are keyed with."""

_KEY_BYTES = 32
_MAX_TOLD = 64  # CLI sessions remembered as told about the problem
_SIDE_FILES = ("-wal", "-shm", "-journal")


class StateFolderError(OSError):
    """The state folder or file is not safe to use; the message says why and what to do."""


@contextmanager
def private_files() -> Iterator[None]:
    """Files and folders made inside are private to the user (umask ``077``), then as before."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def prepare(db: Path, *, own_folder: bool) -> bytes:
    """Make the state folder and file of ``db`` private, and return the user's signing key.

    ``own_folder``: the folder is loopwarden's own (the default one), so its mode is tightened
    to ``0700``; a folder named by ``--db`` keeps its mode (only the files are tightened).
    Raises :class:`StateFolderError` for a symbolic link or something another user owns.
    Call it under :func:`private_files`.
    """
    folder = db.parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StateFolderError(f"cannot create the state folder {folder}: {exc}") from None
    _check(folder, "state folder", want=0o700 if own_folder else None)
    for suffix in ("", *_SIDE_FILES):
        try:
            _check(db.with_name(db.name + suffix), "state file", want=0o600)
        except FileNotFoundError:
            # Absent, or SQLite's side file (a rollback journal) came and went while another
            # hook process wrote: either way there is nothing to tighten.
            continue
    return _key(folder / KEY_FILE)


def _check(path: Path, what: str, *, want: int | None) -> None:
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise StateFolderError(
            f"the {what} {path} is a symbolic link, which loopwarden does not follow (whoever "
            "can change it decides where the state goes); replace it with a real "
            f"{'folder' if what == 'state folder' else 'file'} or choose another path with --db"
        )
    if info.st_uid != os.geteuid():
        raise StateFolderError(
            f"the {what} {path} belongs to another user (uid {info.st_uid}), who could read or "
            "change it; loopwarden does not adopt it: remove it or choose another path with --db"
        )
    if want is not None and info.st_mode & 0o777 & ~want:
        os.chmod(path, want, follow_symlinks=False)


def _key(path: Path) -> bytes:
    """The user's secret, made on first use (``O_EXCL``: two processes agree on one)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return _new_key(path)
    with os.fdopen(fd, "rb") as file:
        if os.fstat(file.fileno()).st_uid != os.geteuid():
            raise StateFolderError(f"the key file {path} belongs to another user; remove it")
        key = file.read(_KEY_BYTES + 1)
    if len(key) != _KEY_BYTES:
        raise StateFolderError(
            f"the key file {path} is damaged ({len(key)} bytes, expected {_KEY_BYTES}); remove "
            "it and loopwarden makes a new one (the sessions in progress start afresh)"
        )
    return key


def _new_key(path: Path) -> bytes:
    key = os.urandom(_KEY_BYTES)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(key)
    try:
        os.link(temporary, path)  # fails if another process made the key first: use that one
    except FileExistsError:
        return _key(path)
    finally:
        os.unlink(temporary)
    return key


# -- the problem record -------------------------------------------------------------------------


def read_problem(db: Path) -> dict[str, Any] | None:
    """The hook's latest problem with the state file ``db`` (None when it has none).

    A JSON object: ``problem`` (one line: what is wrong and what to do), ``db`` (the state file,
    absolute), ``agent`` (the CLI whose hook met it last), ``since`` and ``last`` (Unix times of
    the first and latest event that met it), ``count`` (events that met it) and ``told`` (the
    CLI sessions already told, ``"<agent>:<session id>"``).
    """
    try:
        data = json.loads((db.parent / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("problem"), str) else None


def record_problem(db: Path, agent: str, session: str, problem: str) -> bool | None:
    """Record ``problem`` for ``hooks status``; whether ``session`` is told now (first time).

    None when the record cannot be written (the folder itself is the problem): the caller
    decides when to tell the user without it.
    """
    now = time.time()
    old = read_problem(db) or {}
    same = old.get("problem") == problem
    told = [str(s) for s in old.get("told", [])] if same else []
    first = session not in told
    if first:
        told = [*told, session][-_MAX_TOLD:]
    record = {
        "problem": problem,
        "db": str(db.absolute()),
        "agent": agent,
        "since": old.get("since", now) if same else now,
        "last": now,
        "count": int(old.get("count", 0)) + 1 if same else 1,
        "told": told,
    }
    try:
        _write_private(db.parent / STATUS_FILE, json.dumps(record, indent=1) + "\n")
    except OSError:
        return None
    return first


def clear_problem(db: Path) -> None:
    """The state works again: forget the recorded problem (one failed ``unlink`` when none)."""
    with suppress(OSError):
        os.unlink(db.parent / STATUS_FILE)


def _write_private(path: Path, text: str) -> None:
    if not path.parent.is_dir() or path.parent.is_symlink():
        raise OSError(f"no usable folder for {path}")
    if path.parent.stat().st_uid != os.geteuid():
        raise OSError(f"{path.parent} belongs to another user")
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise

"""The resident hook server: answers the hook processes of one user, then leaves when idle.

    python -c "from loopwarden.hooks._server import main; main([SOCKET])"

Started by a hook process that found none (``_client``), detached from the CLI. It listens on
``SOCKET`` in the user's private state folder, accepts only processes of its own user, and
answers each request exactly as ``loopwarden hook`` would alone: the same arguments, working
folder and ``LOOPWARDEN_*`` settings, the same code, the same state file, one transaction per
event (so hook processes working alone at the same moment stay consistent with it). What it
saves is the start-up: the imports, the config, and the opened state file are kept between
events.

One server per interpreter and loopwarden install (the socket's name says which), held by a
lock file: a second one started at the same moment leaves at once. It leaves after
``LOOPWARDEN_HOOK_IDLE`` seconds without a request (600 by default), or when its socket is
removed or replaced.
"""

from __future__ import annotations

import fcntl
import io
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, suppress

from loopwarden.hooks._client import PROTOCOL, _peer_uid, _read_all, decode, encode

IDLE_SECONDS = 600.0
"""How long the server waits for a request before it leaves (``LOOPWARDEN_HOOK_IDLE``)."""


def main(argv: list[str]) -> int:
    """Serve on the socket ``argv[0]`` until idle; 0 also when another server holds it."""
    path = argv[0]
    os.umask(0o077)
    os.chdir("/")  # pins no folder; each request names its own
    with open(path + ".lock", "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another server has it
        with suppress(FileNotFoundError):
            os.unlink(path)  # left by a server that died: we hold the lock, nobody listens
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(path)
            os.chmod(path, 0o600)  # like every file of the folder (connecting needs write)
            server.listen(64)
            server.settimeout(_idle())
            mine = os.stat(path).st_ino
            try:
                _serve(server, path, mine)
            finally:
                if _still(path, mine):
                    os.unlink(path)
    return 0


def _idle() -> float:
    try:
        return max(0.1, float(os.environ.get("LOOPWARDEN_HOOK_IDLE", IDLE_SECONDS)))
    except ValueError:
        return IDLE_SECONDS


def _still(path: str, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _serve(server: socket.socket, path: str, inode: int) -> None:
    from loopwarden.hooks import _handler

    _handler.serving()
    while _still(path, inode):
        try:
            conn, _ = server.accept()
        except TimeoutError:
            return
        with conn:
            conn.settimeout(30.0)
            with suppress(OSError):
                _answer(conn)


def _answer(conn: socket.socket) -> None:
    from loopwarden.hooks._handler import answer_for

    if _peer_uid(conn) != os.geteuid():
        return  # not our user: no answer (the folder is private; this is the second lock)
    fields = decode(_read_all(conn))
    if len(fields) != 5 or fields[0] != PROTOCOL:
        return  # another version's client: it works alone
    cwd, args, env, event = fields[1:]
    argv = args.decode("utf-8", "surrogateescape").split("\0")
    data = None if event == b"-" else event[1:]
    err = io.StringIO()
    with _request(os.fsdecode(cwd), env), redirect_stderr(err):
        out = answer_for(argv, data)
    conn.sendall(encode([out, err.getvalue().encode("utf-8", "backslashreplace")]))


@contextmanager
def _request(cwd: str, env: bytes) -> Iterator[None]:
    """The request's working folder and ``LOOPWARDEN_*`` settings, for its duration."""
    settings = dict(
        item.split("=", 1)
        for item in env.decode("utf-8", "surrogateescape").split("\0")
        if "=" in item
    )
    saved = {k: v for k, v in os.environ.items() if k.startswith("LOOPWARDEN_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(settings)
    try:
        os.chdir(cwd)
    except OSError:
        os.chdir("/")
    try:
        yield
    finally:
        for key in settings:
            os.environ.pop(key, None)
        os.environ.update(saved)
        os.chdir("/")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The resident hook server: answers the hook processes of one user, then leaves when idle.

    python -c "from loopwarden.hooks._server import main; main([SOCKET])"

Started by a hook process that found none (``_client``), detached from the CLI. It listens on
``SOCKET`` in the user's private state folder, accepts only processes of its own user, and
answers each request exactly as ``loopwarden hook`` would alone: the same arguments, working
folder and ``LOOPWARDEN_*`` settings, the same code, the same state file, one transaction per
event (so hook processes working alone at the same moment stay consistent with it). What it
saves is the start-up: the imports, the config, and the opened state file are kept between
events.

One server per interpreter and loopwarden install (the socket's name says which). A server
starting where a socket answers leaves at once; the lock file ``SOCKET.lock`` is held only while a
socket is put in place or taken away. It leaves after ``LOOPWARDEN_HOOK_IDLE`` seconds without a
request (600 by default), and within half a second of its socket being removed or replaced: by
``hooks uninstall``, by a user, or by a hook that found it hung (it did not take a connection
within ``_client.TAKE_SECONDS``, or did not answer within ``_client.ANSWER_SECONDS``) and started
another in its place.
"""

from __future__ import annotations

import io
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, suppress

from loopwarden.hooks._client import (
    PROTOCOL,
    TAKEN,
    _peer_uid,
    _read_all,
    _start_lock,
    decode,
    encode,
)

IDLE_SECONDS = 600.0
"""How long the server waits for a request before it leaves (``LOOPWARDEN_HOOK_IDLE``)."""
LOOK_SECONDS = 0.5
"""How often an idle server looks whether its socket is still there (it leaves when not)."""


def main(argv: list[str]) -> int:
    """Serve on the socket ``argv[0]`` until idle or replaced; 0 also when another serves."""
    path = argv[0]
    os.umask(0o077)
    os.chdir("/")  # pins no folder; each request names its own
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        with _start_lock(path) as held:
            if not held or _answers(path):
                return 0  # another server has it
            # Bound under a name no longer than the socket's, then renamed into place.
            fresh = os.path.join(os.path.dirname(path), f"hookd-{os.getpid()}.new")
            with suppress(FileNotFoundError):
                os.unlink(fresh)
            server.bind(fresh)
            os.chmod(fresh, 0o600)  # like every file of the folder (connecting needs write)
            server.listen(64)
            os.replace(fresh, path)  # a dead server's socket, if any, goes with it
            mine = os.stat(path).st_ino
        try:
            _serve(server, path, mine)
        finally:
            with _start_lock(path) as held:
                if held and _still(path, mine):
                    os.unlink(path)
    return 0


def _answers(path: str) -> bool:
    """Whether a server listens on ``path`` (a socket left by one that died does not)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
    return True


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
    idle = _idle()
    server.settimeout(min(LOOK_SECONDS, idle))
    last = time.monotonic()
    while _still(path, inode):
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if time.monotonic() - last >= idle:
                return
            continue
        with conn:
            conn.settimeout(30.0)
            with suppress(OSError):
                _answer(conn)
        last = time.monotonic()


def _answer(conn: socket.socket) -> None:
    from loopwarden.hooks._handler import answer_for

    if _peer_uid(conn) != os.geteuid():
        return  # not our user: no answer (the folder is private; this is the second lock)
    conn.sendall(TAKEN)  # the client sends its request now (one that gave up sends nothing)
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

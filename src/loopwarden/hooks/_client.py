"""The hook process's fast path: hand the event to the user's resident hook server.

A coding CLI starts ``loopwarden hook AGENT`` twice per tool call, and a Python process that
imports the guard, builds its config and opens the state costs several times a bare interpreter
start. So the hook process does as little as it can: it reads the event and passes it, with its
arguments and working folder, to a resident process of the same user (``_server``), over a Unix
socket in the private state folder, and prints what comes back. The server does exactly what
the hook would have done alone (the same code, the same state file, one transaction per event),
so the answers do not depend on which of them ran.

When there is no server (the first event, after it left idle, ``LOOPWARDEN_HOOK_SERVER=0``), the
hook works alone, then starts one for the next events. Anything unexpected makes it work alone
too: the server is only ever a shortcut. This module imports nothing beyond the interpreter's
own start-up modules and ``_socket``: its cost is the hook's cost.
"""

import os
import sys
from contextlib import suppress

from loopwarden.hooks._args import parse_args
from loopwarden.hooks._stdin import read_event

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Literal

PROTOCOL = b"loopwarden-hook-2"
TAKEN = b"+"
"""The server's first byte on a connection: it took it, and the client sends its request only
then (a request never waits in the queue of a server that may not be serving any more)."""
TAKE_SECONDS = 0.5
"""How long a hook waits for the server to take its connection. A healthy server takes one in
well under a millisecond when idle, and after the events before it when busy (each ~5-20 ms;
bench/bench_hook_hang.py measures both); a server that does not within this time is stopped,
stalled or stuck on a slow request (it serves one connection at a time): the hook works alone
and replaces it."""
ANSWER_SECONDS = 2.0
"""How long a hook waits for the answer once the server took its request (an event takes
~5-20 ms). With :data:`TAKE_SECONDS` and the event handled alone after it, no event waits much
more than 2.5 s on a server that hangs, and only until one hook has replaced it."""
_UNIX_PATH_MAX = 107  # sun_path on Linux, less its terminating NUL


def main(argv: "Sequence[str]") -> int:
    """``loopwarden hook ARGS``: through the server when there is one, else alone; exit 0.

    The caller checked :func:`plain` (anything else goes to the command line's parser).
    """
    args = list(argv)
    from loopwarden.hooks._scope import scope_of, skip

    if skip(args[0] if args else "", scope_of(args)):  # switched off, or the project decides
        with suppress(OSError):
            sys.stdin.buffer.read()  # the CLI is writing the event: take it, never a broken pipe
        return 0
    if os.environ.get("LOOPWARDEN_HOOK_SERVER") == "0":
        return _alone(args, "unread")  # reads stdin itself
    try:
        data = read_event(sys.stdin.buffer)
    except OSError:
        return _alone(args, b"")
    path = socket_path()
    reply = _ask(path, args, data) if path is not None else None
    if not isinstance(reply, tuple):  # no server to answer: this event alone, then a server
        code = _alone(args, data)
        if path is None:  # the folder may be new, made private just now, or not there (--db)
            with suppress(OSError):
                os.makedirs(state_folder(), mode=0o700, exist_ok=True)
            path = socket_path()
        if path is not None:
            if isinstance(reply, int):  # that server hangs: it steps aside once it can see
                retire(path, reply)
            _start_server(path)
        return code
    out, err = reply
    if err:
        sys.stderr.write(err.decode("utf-8", "replace"))
    if out:
        sys.stdout.buffer.write(out)
        sys.stdout.buffer.flush()
    return 0


def plain(args: "Sequence[str]") -> bool:
    """Whether ``args`` are a plain ``AGENT [--config F] [--set K=V]... [--db F] [--scope S]``;
    help and mistakes are the command line's."""
    return parse_args(args) is not None


def _alone(args: list[str], data: "bytes | Literal['unread'] | None") -> int:
    """The event ``data`` (None: over the cap; "unread": still on stdin) handled here."""
    from loopwarden.hooks._handler import main as alone

    return alone(args, data)


# -- where the server listens ----------------------------------------------------------------


def state_folder() -> str:
    """The default state folder (``default_db_path``'s, without importing the records)."""
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = base if os.path.isabs(base) else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(root, "loopwarden")


def socket_path() -> str | None:
    """The server's socket for this interpreter and this loopwarden, in the state folder.

    None when the folder is not private to the user (absent, a link, another user's, open to
    others: the hook alone then says what is wrong) or the path is too long for a socket.
    """
    folder = state_folder()
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if not (info.st_mode & 0o170000 == 0o040000 and info.st_uid == os.geteuid()):
        return None
    if info.st_mode & 0o077:
        return None
    path = os.path.join(folder, f"hookd-{_tag()}.sock")
    return path if len(os.fsencode(path)) <= _UNIX_PATH_MAX else None


def _tag() -> str:
    """Names the interpreter and the loopwarden it runs, and where it exports loop events: another
    one gets its own server.

    The server sets up OpenTelemetry export once, from the ``OTEL_*`` variables it started with;
    a hook with other ones (told to export, or to export elsewhere) needs a server of its own.
    Without an endpoint nothing is exported, and the tag leaves them out (reading the whole
    environment would cost every hook process).
    """
    from loopwarden._version import __version__

    here = os.path.abspath(__file__)
    stamp = os.stat(here).st_mtime_ns  # a reinstall of the same version gets a new server
    env = os.environ
    otel = ""
    # Export is on only with an endpoint (otel.export_requested); then every OTEL_* setting counts.
    if env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        otel = "\0".join(sorted(f"{k}={env[k]}" for k in env if k.startswith("OTEL_")))
    text = f"{sys.executable}\0{here}\0{__version__}\0{stamp}\0{otel}".encode(
        "utf-8", "surrogateescape"
    )
    value = 0xCBF29CE484222325  # FNV-1a, 64 bits: stable across processes, unlike hash()
    for byte in text:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{value:016x}"


# -- the exchange --------------------------------------------------------------------------------


def _ask(path: str, args: list[str], data: bytes | None) -> tuple[bytes, bytes] | int | None:
    """The server's (stdout, stderr) for this event; None when no server listens, or the
    socket's inode when the server there did not take the request or answer it in time."""
    import _socket

    try:
        inode = os.stat(path).st_ino
    except OSError:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(TAKE_SECONDS)
        try:
            sock.connect(path)
        except TimeoutError:  # its queue is full: it does not take connections
            return inode
        except OSError:
            return None  # nobody listening (a server that died left its socket)
        try:
            if _peer_uid(sock) != os.geteuid():
                return None
            if sock.recv(1) != TAKEN:
                return inode  # closed at once: a server leaving, or not one of ours
            sock.settimeout(ANSWER_SECONDS)
            sock.sendall(encode_request(args, data))
            sock.shutdown(_socket.SHUT_WR)
            fields = decode(_read_all(sock))
        except (OSError, ValueError):  # no answer in time (stopped, stalled, slow), or a bad one
            return inode
        if len(fields) != 2:
            return inode
        return fields[0], fields[1]
    finally:
        sock.close()


def retire(path: str, inode: int) -> bool:
    """Take the socket of a server that hangs away, if it is still ``inode``: hooks stop waiting
    for it, the next one starts a server in its place, and it leaves when it runs again."""
    with _start_lock(path) as held:
        if not held:
            return False
        try:
            if os.stat(path).st_ino != inode:
                return False  # already replaced
            os.unlink(path)
        except OSError:
            return False
        return True


def stop_servers() -> int:
    """Take every resident hook server's socket in the user's state folder away (each leaves
    within ``_server.LOOK_SECONDS``; the next hook event starts a new one); how many."""
    folder = state_folder()
    try:
        names = [n for n in os.listdir(folder) if n.startswith("hookd-") and n.endswith(".sock")]
    except OSError:
        return 0
    stopped = 0
    for name in names:
        path = os.path.join(folder, name)
        try:
            inode = os.stat(path).st_ino
        except OSError:
            continue
        stopped += retire(path, inode)
    return stopped


class _start_lock:
    """``PATH.lock``, held while a socket is put in place or taken away (``with ... as held``:
    False when it stayed busy for a second, which a normal holder never keeps it)."""

    def __init__(self, path: str) -> None:
        self.path = path + ".lock"
        self.fd = -1

    def __enter__(self) -> bool:
        import fcntl
        import time

        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return False
        deadline = time.monotonic() + 1.0
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.01)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


def _peer_uid(sock: object) -> int:
    """The uid of the process at the other end of a Unix socket (Linux ``SO_PEERCRED``)."""
    import _socket

    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:  # not Linux: the private folder alone keeps others out
        return os.geteuid()
    raw = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # type: ignore[attr-defined]
    return int.from_bytes(raw[4:8], sys.byteorder)  # struct ucred: pid, uid, gid


def _read_all(sock: object) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(1 << 16)  # type: ignore[attr-defined]
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def encode_request(args: list[str], data: bytes | None) -> bytes:
    """The request: protocol, working folder, arguments, ``LOOPWARDEN_*`` settings, event."""
    env = [f"{k}={v}" for k, v in os.environ.items() if k.startswith("LOOPWARDEN_")]
    fields = [
        PROTOCOL,
        os.fsencode(os.getcwd()),
        "\0".join(args).encode("utf-8", "surrogateescape"),
        "\0".join(env).encode("utf-8", "surrogateescape"),
        b"-" if data is None else b"+" + data,  # "-": larger than the cap, drained
    ]
    return encode(fields)


def encode(fields: list[bytes]) -> bytes:
    """Fields as ``<length>:<bytes>`` one after another (no JSON: it would cost an import)."""
    return b"".join(b"%d:%b" % (len(field), field) for field in fields)


def decode(raw: bytes) -> list[bytes]:
    """The fields of :func:`encode`; ``ValueError`` when ``raw`` is not made of them."""
    fields = []
    at = 0
    while at < len(raw):
        colon = raw.index(b":", at, at + 21)
        size = int(raw[at:colon])
        end = colon + 1 + size
        if size < 0 or end > len(raw):
            raise ValueError("truncated answer")
        fields.append(raw[colon + 1 : end])
        at = end
    return fields


# `-c` rather than `-m`, with the working folder taken off sys.path: the server outlives the
# project folder the CLI started the hook in, and must not import modules from it.
_SERVE = (
    "import sys; del sys.path[0]; "
    "from loopwarden.hooks._server import main; sys.exit(main(sys.argv[1:]))"
)


def _start_server(path: str) -> None:
    """Start the server in the background, detached from the CLI (never fails the hook)."""
    try:
        devnull = os.open(os.devnull, os.O_RDWR)
        try:
            os.posix_spawn(
                sys.executable,
                [sys.executable, "-c", _SERVE, path],
                dict(os.environ),
                file_actions=[(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)],
                setsid=True,
            )
        finally:
            os.close(devnull)
    except (OSError, AttributeError, NotImplementedError):
        pass  # no server: every event works alone, as it always could

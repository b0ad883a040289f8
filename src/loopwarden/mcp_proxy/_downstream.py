"""The downstream half of the proxy: a byte link to the wrapped server.

A :class:`Link` carries whole JSON-RPC messages as bytes (one message per ``send``/``receive``,
without the newline), never parsing them: the relay decides what to look at. The stdio link
starts the server as a child process in its own process group, relays its stderr (keeping the
last lines to explain an early exit) and stops the whole group on close. The streamable-HTTP
link (:mod:`loopwarden.mcp_proxy._http`) uses the MCP SDK's transport, imported only when a URL
is given, so the stdio path needs no SDK at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_log = logging.getLogger("loopwarden.mcp_proxy")

CHUNK = 1 << 20
"""Bytes read per call: large messages arrive in pieces of at most this size."""

# Why a process group of its own: the whole group (npx, a shell, node...) can be stopped at
# the end, and a Ctrl-C meant for the client (the terminal signals its foreground group) does
# not hit the server first. Why not a new session (setsid), which does both too: on Linux with
# automatic scheduler groups (autogroup, the default on desktops and many servers), a session
# is a scheduling group of its own, so each wake-up of the server, twice per message, competes
# with every other group instead of running beside the proxy that woke it.
# Python 3.10 has no process_group: a new session there.
_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)

_PAUSE_AT = 2 * CHUNK  # bytes waiting in whole lines before reading pauses (as a StreamReader)
_STDERR_TAIL = 10  # lines of the server's stderr kept to explain an exit
_STDERR_LINE = 300  # characters kept per stderr line


class DownstreamUnavailable(Exception):
    """The wrapped server cannot answer: it is gone, never started, or did not reply in time."""


@dataclass(frozen=True)
class DownstreamSpec:
    """Where the wrapped server is: a command to start (stdio) or a streamable-HTTP URL."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 30.0
    name: str | None = None  # what messages call the server (--name); see describe()

    def __post_init__(self) -> None:
        if bool(self.command) == (self.url is not None):
            raise ValueError("give exactly one of a server command or a server URL")

    def describe(self) -> str:
        """A short name for messages, which the client and the model see: never arguments.

        ``name`` when given (``--name``); otherwise the program's file name alone for a command
        (``bash -c 'exec server.py --api-key ...'`` is ``bash``: any argument may carry a
        token), or the URL without credentials, query and fragment.
        """
        if self.name:
            return self.name
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port else host
            return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        return os.path.basename(self.command[0].rstrip("/")) or self.command[0]


class Link(Protocol):
    """One connection to the wrapped server, carrying whole messages as bytes."""

    carries_batches: bool
    """Whether :meth:`send` takes a JSON-RPC batch (an array) as one message."""

    async def send(self, message: bytes) -> None:
        """Send one message (no newline); raises :class:`DownstreamUnavailable` when gone."""

    def deliver(self, handle: Handler, end: EndHandler, spawn: Spawn, *, inline: bool) -> None:
        """Hand each message from the server to ``handle``, in order; then ``end`` once.

        ``inline``: a message may be handled in the callback that read it (see
        :class:`LinePump`), when nothing the handler runs needs a task of its own.
        """

    async def end_reason(self) -> str:
        """Why the messages ended, for the log (called once, after the end)."""

    def diagnostics(self) -> str:
        """Extra lines for the log when the connection ended (the server's last stderr)."""

    async def close(self) -> None:
        """End the connection and stop what was started for it (idempotent)."""


class LineReader:
    """Newline-delimited messages from a byte stream, split as its bytes arrive.

    A protocol feeds it (``feed_data``, ``feed_eof``, ``set_exception``, as it would a
    ``StreamReader``); its listener (a :class:`LinePump`) is told when whole lines are ready and
    takes them with :meth:`take`. Why not a ``StreamReader``: ``readline``'s limit must exceed
    the largest message, and a stream buffer that large stops applying backpressure; ``read``
    copies each chunk into its buffer and out again, through several calls per message. Here a
    chunk is split where it lands; only the message being assembled grows, once, with one join
    at its end. Reading pauses while more than 2 MiB wait in whole lines nobody has taken,
    never while the rest of a line is awaited.

    Nothing is passed on before a line is whole: a server that dies while writing a large
    answer leaves a piece, returned at the end of the stream like a last line without its
    newline, which the relay forwards only if it parses as a message (a piece never does).
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._ready: deque[bytes] = deque()
        self._held = 0  # bytes in _parts and _ready
        self._listener: Callable[[], None] | None = None
        self._eof = False
        self._exception: BaseException | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def set_transport(self, transport: asyncio.ReadTransport) -> None:
        """The transport to pause while too much waits (none for a thread's feed)."""
        self._transport = transport

    def listen(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever lines are ready or the stream ends (now, if they are)."""
        self._listener = listener
        if self._ready or self._eof or self._exception is not None:
            listener()

    def feed_data(self, chunk: bytes) -> None:
        """Take the bytes that arrived."""
        self._held += len(chunk)
        self._split(chunk)
        if not self._ready:
            return
        if self._held > _PAUSE_AT and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()
        self._tell()

    def feed_eof(self) -> None:
        """The stream has ended."""
        self._eof = True
        self._tell()

    def set_exception(self, exc: BaseException) -> None:
        """The stream failed: :meth:`take` raises ``exc`` once the whole lines are taken."""
        self._exception = exc
        self._tell()

    def _tell(self) -> None:
        if self._listener is not None:
            self._listener()

    def take(self) -> bytes | None:
        """The next non-blank line without its newline; None when no line is ready.

        At the end of the stream the last piece (a line without its newline) comes once, then
        :attr:`ended` is true; if the stream failed, its exception is raised instead.
        """
        ready = self._ready
        if not ready:
            if self._exception is not None:
                raise self._exception
            return self._tail() if self._eof else None
        line = ready.popleft()
        self._held -= len(line) + 1
        if self._paused and not ready:
            self._paused = False
            if self._transport is not None:
                self._transport.resume_reading()
        return line

    @property
    def ended(self) -> bool:
        """Whether the stream has ended and every line of it was taken."""
        return self._eof and not self._ready and not self._parts

    def _tail(self) -> bytes | None:
        tail = b"".join(self._parts)
        self._parts.clear()
        self._held = 0
        return tail if tail and not tail.isspace() else None

    def _split(self, chunk: bytes) -> None:
        parts, ready = self._parts, self._ready
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            piece = chunk[start:end]
            if parts:
                parts.append(piece)
                line = b"".join(parts)
                parts.clear()
            else:
                line = piece
            # isspace() stops at the first JSON byte: no copy of a large line.
            if line and not line.isspace():
                ready.append(line)
            else:
                self._held -= len(line) + 1
            start = end + 1
            end = chunk.find(b"\n", start)
        if start < len(chunk):
            parts.append(chunk[start:] if start else chunk)


Handler = Callable[[bytes], Coroutine[Any, Any, None]]
"""What handles one message (its bytes, without the newline)."""

EndHandler = Callable[[BaseException | None], Coroutine[Any, Any, None]]
"""What runs once the messages have ended: with the exception that ended them, if any."""

Spawn = Callable[[Coroutine[Any, Any, Any]], None]
"""Runs a coroutine in a task (the relay's, which it cancels at shutdown)."""


class LinePump:
    """Hands each line of a :class:`LineReader` to a handler, in order, one line at a time.

    Why not a task that awaits each line: waking it costs the event loop one more pass per
    message (a pass is a system call and a round of callbacks), on the path of every call.
    With ``inline``, a line is handled in the callback that read it, as far as the handler
    goes without waiting; only a handler that must wait (a full pipe, a restart, a lock held by
    a thread) goes on in a task, which then handles the lines that came meanwhile. Without
    ``inline`` every line is handled in a task: for handlers that need one from the start
    (``asyncio.timeout`` and anyio's cancel scopes refuse to run outside a task, and an async
    store over the network or the HTTP link use them).
    """

    def __init__(
        self, lines: LineReader, handle: Handler, end: EndHandler, spawn: Spawn, *, inline: bool
    ) -> None:
        self._lines = lines
        self._handle = handle
        self._end = end
        self._spawn = spawn
        self._inline = inline
        self._busy = False  # a task is handling lines: the others wait for it
        self._stopped = False
        lines.listen(self._kick)

    def stop(self) -> None:
        """Handle no more lines (the relay is shutting down)."""
        self._stopped = True

    def _kick(self) -> None:
        if self._busy or self._stopped:
            return
        lines = self._lines
        try:
            while (line := lines.take()) is not None:
                work = self._handle(line)
                if not self._inline:
                    self._carry_on(work)
                    return
                try:
                    waits_for = work.send(None)
                except StopIteration:
                    continue
                self._carry_on(_Resumed(work, waits_for))
                return
        except Exception as exc:  # the handler failed, or the stream did
            self._finish(exc)
            return
        if lines.ended:
            self._finish(None)

    def _carry_on(self, work: Awaitable[None]) -> None:
        self._busy = True
        self._spawn(self._in_task(work))

    async def _in_task(self, work: Awaitable[None]) -> None:
        try:
            await work
            while not self._stopped and (line := self._lines.take()) is not None:
                await self._handle(line)
        except Exception as exc:
            self._finish(exc)
            return
        self._busy = False
        if self._lines.ended:
            self._finish(None)

    def _finish(self, exc: BaseException | None) -> None:
        if not self._stopped:
            self._stopped = True
            self._spawn(self._end(exc))


class _Resumed:
    """A coroutine started outside any task that had to wait: awaiting this carries it on.

    What it waits for (a future, or None for a bare yield) is passed up to the task, which
    resumes it when that is done, exactly as if the coroutine had been awaited in the task
    from the start (the same delegation as ``yield from``).
    """

    __slots__ = ("_coro", "_waits_for")

    def __init__(self, coro: Coroutine[Any, Any, None], waits_for: Any) -> None:
        self._coro = coro
        self._waits_for = waits_for

    def __await__(self) -> Generator[Any, Any, None]:
        coro, value = self._coro, self._waits_for
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # e.g. the task was cancelled: the coroutine decides
                try:
                    value = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    value = coro.send(sent)
                except StopIteration:
                    return


class LineProtocol(asyncio.Protocol):
    """Feeds a read pipe's bytes to a :class:`LineReader`."""

    def __init__(self, lines: LineReader) -> None:
        self._lines = lines

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Reading may be paused on this transport."""
        if isinstance(transport, asyncio.ReadTransport):
            self._lines.set_transport(transport)

    def data_received(self, data: bytes) -> None:
        """Bytes arrived."""
        self._lines.feed_data(data)

    def eof_received(self) -> None:
        """The writer closed its end."""
        self._lines.feed_eof()

    def connection_lost(self, exc: Exception | None) -> None:
        """The pipe is closed (after an error, ``exc``)."""
        if exc is None:
            self._lines.feed_eof()
        else:
            self._lines.set_exception(exc)


class StdioLink:
    """The wrapped server as a child process: its stdin and stdout carry the messages."""

    carries_batches = True

    def __init__(
        self,
        spec: DownstreamSpec,
        process: asyncio.subprocess.Process,
        stdout: asyncio.ReadTransport,
        lines: LineReader,
    ) -> None:
        self.spec = spec
        self._process = process
        assert process.stdin is not None
        self._stdin = process.stdin
        self._stdout = stdout
        self._lines = lines
        self._tail: deque[str] = deque(maxlen=_STDERR_TAIL)
        self._stderr_task = asyncio.ensure_future(self._relay_stderr())
        self._closed = False
        self._write_lock = asyncio.Lock()

    @classmethod
    async def start(cls, spec: DownstreamSpec) -> StdioLink:
        """Start the server; raises :class:`DownstreamUnavailable` when it cannot start."""
        loop = asyncio.get_running_loop()
        # Why a pipe of our own for its stdout, not stdout=PIPE: asyncio's subprocess
        # transport hands each read to its protocol in a later pass of the event loop, one
        # more pass per answer; a pipe read as any other is handed over in the pass that read it.
        read_fd, write_fd = os.pipe()
        try:
            # The child inherits the proxy's environment: users put API keys in the client's
            # "env" block, and the wrapped server is the one that needs them.
            process = await asyncio.create_subprocess_exec(
                *spec.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=write_fd,
                stderr=asyncio.subprocess.PIPE,
                limit=CHUNK,
                **_OWN_GROUP,
            )
        except FileNotFoundError as exc:
            os.close(read_fd)
            raise DownstreamUnavailable(
                f"could not start the MCP server {spec.describe()!r}: command not found "
                f"({exc.filename or spec.command[0]}); check the command and your PATH"
            ) from None
        except OSError as exc:
            os.close(read_fd)
            raise DownstreamUnavailable(
                f"could not start the MCP server {spec.describe()!r}: {exc.strerror or exc}"
            ) from None
        finally:
            os.close(write_fd)  # the server holds it now: its exit ends our reading
        lines = LineReader()
        stdout, _ = await loop.connect_read_pipe(
            lambda: LineProtocol(lines), os.fdopen(read_fd, "rb", buffering=0)
        )
        widen_pipe(read_fd)
        stdin = process.stdin.get_extra_info("pipe") if process.stdin is not None else None
        if stdin is not None:
            widen_pipe(stdin.fileno())
        return cls(spec, process, stdout, lines)

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._process.pid

    async def send(self, message: bytes) -> None:
        """Write one message and a newline; waits only when the pipe is backed up."""
        stdin = self._stdin
        if self._closed or stdin.is_closing():
            raise DownstreamUnavailable("its stdin is closed")
        write_line(stdin, message)
        if stdin.transport.get_write_buffer_size() > CHUNK:
            async with self._write_lock:
                try:
                    await stdin.drain()
                except (ConnectionError, RuntimeError) as exc:
                    raise DownstreamUnavailable(f"writing to it failed ({exc})") from None

    def deliver(self, handle: Handler, end: EndHandler, spawn: Spawn, *, inline: bool) -> None:
        """Each line of the server's stdout to ``handle`` (see :class:`LinePump`)."""
        LinePump(self._lines, handle, end, spawn, inline=inline)

    async def end_reason(self) -> str:
        """The exit status, once the process has exited (it is stopped if it lingers)."""
        try:
            code = await asyncio.wait_for(self._process.wait(), 2.0)
        except asyncio.TimeoutError:
            await self.close()
            return "it closed the connection (its stdout; the process was stopped)"
        return f"it closed the connection (the process exited with {_exit_text(code)})"

    def diagnostics(self) -> str:
        """The last lines the server wrote to stderr (already passed through to ours)."""
        if not self._tail:
            return ""
        return "; its last stderr lines: " + " | ".join(self._tail)

    async def close(self) -> None:
        """Close stdin, give the server 2 s to exit, then stop its process group."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process.returncode is None:
            try:
                self._stdin.close()
                await asyncio.wait_for(process.wait(), 2.0)
            except asyncio.TimeoutError:
                _kill_group(process.pid, signal.SIGTERM)
                try:
                    await asyncio.wait_for(process.wait(), 2.0)
                except asyncio.TimeoutError:
                    _kill_group(process.pid, signal.SIGKILL)
                    await process.wait()
            except (ConnectionError, OSError):  # pragma: no cover - the pipe broke meanwhile
                pass
        # Helpers the server started (npx starts node) must not outlive it.
        _kill_group(process.pid, signal.SIGTERM)
        self._stdout.close()
        try:
            await asyncio.wait_for(self._stderr_task, 2.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):  # pragma: no cover
            self._stderr_task.cancel()

    async def _relay_stderr(self) -> None:
        """Pass the server's stderr through to ours, keeping its last lines."""
        stream = self._process.stderr
        assert stream is not None
        target = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
        partial = b""
        while True:
            chunk = await stream.read(1 << 16)
            if not chunk:
                break
            if target is not None:
                try:
                    target.write(chunk)
                    target.flush()
                except (OSError, ValueError):  # our stderr is gone: keep the tail anyway
                    target = None
            lines = (partial + chunk).split(b"\n")
            partial = lines.pop()[-4096:]
            for line in lines:
                text = line.decode("utf-8", "replace").strip()
                if text:
                    self._tail.append(text[:_STDERR_LINE])
        if partial.strip():
            self._tail.append(partial.decode("utf-8", "replace").strip()[:_STDERR_LINE])


def write_line(writer: asyncio.StreamWriter, message: bytes) -> None:
    """One message and its newline, in one write when small.

    Why one write: each write wakes the reader, and a reader woken by a message without its
    newline reads, finds no line, and sleeps again: two wake-ups per message instead of one.
    """
    if len(message) < CHUNK:
        writer.write(message + b"\n")
    else:  # no copy of a large message
        writer.write(message)
        writer.write(b"\n")


def widen_pipe(fd: int) -> None:
    """Give a pipe a 1 MiB buffer (Linux; elsewhere a no-op).

    Why: a large message then crosses in a few wake-ups instead of one per 64 KiB, which is
    most of what relaying megabytes costs.
    """
    setter = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setter is None:
        return
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, setter, CHUNK)


def _exit_text(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def _kill_group(pid: int, signum: int) -> None:
    killpg = getattr(os, "killpg", None)  # POSIX; elsewhere only the process itself
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if killpg is not None:
            killpg(pid, signum)
        else:  # pragma: no cover - Windows
            os.kill(pid, signum)

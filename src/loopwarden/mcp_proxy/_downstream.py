"""The downstream half of the proxy: one MCP client session to the wrapped server.

The session lives in its own supervisor task, so a server that crashes, closes its pipe or
speaks garbage can only fail *that* task: the proxy keeps answering its client with a clear
error instead of dying or hanging. Every request goes through :meth:`Downstream.request`,
which bounds it by a timeout, fails it as soon as the server is gone, and tells the server
when a request is abandoned (the SDK itself does not send ``notifications/cancelled``).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc
import httpx
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.client.session import (
    ClientSession,
    ElicitationFnT,
    ListRootsFnT,
    MessageHandlerFnT,
    SamplingFnT,
)
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ValidationError

_log = logging.getLogger("loopwarden.mcp_proxy")

_ResultT = TypeVar("_ResultT", bound=BaseModel)
_ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
_WriteStream = MemoryObjectSendStream[SessionMessage]

# The SDK's own HTTP defaults: 30 s to connect/write, a long read for held-open SSE streams.
_HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)


class DownstreamUnavailable(Exception):
    """The wrapped server cannot answer: it is gone, never started, or did not reply in time."""


@dataclass(frozen=True)
class DownstreamSpec:
    """Where the wrapped server is: a command to start (stdio) or a streamable-HTTP URL."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = 30.0

    def __post_init__(self) -> None:
        if bool(self.command) == (self.url is not None):
            raise ValueError("give exactly one of a server command or a server URL")

    def describe(self) -> str:
        """A short name for messages, which the model may see: never the whole command line.

        Why short: arguments and URL query strings often carry tokens. The program and its
        first non-option argument (``npx server-filesystem``) or the URL without query and
        credentials are enough to tell which server failed.
        """
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port else host
            return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        names = [os.path.basename(self.command[0])]
        first = next((arg for arg in self.command[1:] if not arg.startswith("-")), None)
        if first is not None:
            names.append(os.path.basename(first.rstrip("/")) or first)
        return " ".join(names)


@dataclass
class DownstreamHooks:
    """Callbacks into the upstream side, late-bound because upstream starts after downstream."""

    message_handler: MessageHandlerFnT | None = None
    sampling: SamplingFnT | None = None
    elicitation: ElicitationFnT | None = None
    list_roots: ListRootsFnT | None = None


@asynccontextmanager
async def _open_transport(spec: DownstreamSpec) -> AsyncIterator[tuple[_ReadStream, _WriteStream]]:
    """Open the SDK transport for ``spec``; the stdio child inherits the proxy's environment."""
    if spec.url is not None:
        async with (
            httpx.AsyncClient(headers=dict(spec.headers), timeout=_HTTP_TIMEOUT) as http,
            streamable_http_client(spec.url, http_client=http) as (read, write, _),
        ):
            yield read, write
        return
    # Why the full environment: users put API keys in the client's "env" block for the proxy,
    # and the wrapped server is the one that needs them (the SDK default passes only a few).
    params = StdioServerParameters(
        command=spec.command[0], args=list(spec.command[1:]), env=dict(os.environ)
    )
    async with stdio_client(params, errlog=sys.stderr) as (read, write):
        yield read, write


class Downstream:
    """One client session to the wrapped server, with liveness tracking and reconnection.

    When the server goes away, the next request starts a fresh session (a new process for a
    command, a new HTTP session for a URL), so a crash or a dropped remote session costs the
    requests in flight, not the rest of the client's connection. A failed restart is not
    retried for :data:`RETRY_AFTER` seconds, so a server that cannot start fails fast.
    """

    RETRY_AFTER = 5.0

    def __init__(self, spec: DownstreamSpec, hooks: DownstreamHooks) -> None:
        self.spec = spec
        self._hooks = hooks
        self._session: ClientSession | None = None
        self.init_result: types.InitializeResult | None = None
        self.failure: str | None = None
        self._stop = anyio.Event()
        self._inflight: set[anyio.CancelScope] = set()
        self.finished = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None
        self._lock = anyio.Lock()
        self._closing = False
        self._failed_start_at: float | None = None

    # ---------------------------------------------------------------- lifecycle
    async def start(self, tg: anyio.abc.TaskGroup) -> None:
        """First connection, supervised in ``tg``; raises :class:`DownstreamUnavailable`."""
        self._tg = tg
        await tg.start(self.run)

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Connect, initialize, report ready, then hold the session until closed or failed.

        Before ``started`` a failure raises :class:`DownstreamUnavailable` (the proxy cannot
        serve at all); afterwards it is recorded in :attr:`failure` and answered per request.
        """
        started = False
        try:
            async with _open_transport(self.spec) as (read, write), anyio.create_task_group() as tg:
                inbound_send, inbound_recv = anyio.create_memory_object_stream[
                    SessionMessage | Exception
                ](0)
                tg.start_soon(self._relay, read, inbound_send)
                async with self._client_session(inbound_recv, write) as session:
                    with anyio.fail_after(self.spec.connect_timeout):
                        self.init_result = await session.initialize()
                    self._session = session
                    started = True
                    task_status.started()
                    await self._stop.wait()
                tg.cancel_scope.cancel()
        except Exception as exc:
            reason = _describe_exception(exc, self.spec.connect_timeout)
            if not started:
                self.failure = f"could not start the MCP server {self.spec.describe()!r}: {reason}"
                raise DownstreamUnavailable(self.failure) from exc
            self._fail(f"the connection failed ({reason})")
        finally:
            self._session = None
            self._fail("the proxy closed the connection")
            self.finished.set()

    def close(self) -> None:
        """Ask the supervisor to shut the session (and the child process) down, for good."""
        self._closing = True
        self._stop.set()

    async def _reconnect(self) -> None:
        """Replace a failed session with a new one (one attempt at a time)."""
        async with self._lock:
            if self.failure is None or self._closing or self._tg is None:
                return  # reconnected meanwhile, shutting down, or never started
            failed_at = self._failed_start_at
            if failed_at is not None and anyio.current_time() - failed_at < self.RETRY_AFTER:
                return
            await self.finished.wait()  # the old supervisor is done with the shared state
            previous = self.failure
            self.failure, self._stop, self.finished = None, anyio.Event(), anyio.Event()
            try:
                await self._tg.start(self.run)
            except DownstreamUnavailable as exc:
                self._failed_start_at = anyio.current_time()
                self.failure = f"{previous}; restarting it failed: {exc}"
                _log.error("%s", self.failure)
                return
            self._failed_start_at = None
            _log.warning("reconnected to the MCP server %s (%s)", self.spec.describe(), previous)

    def _client_session(self, read: _ReadStream, write: _WriteStream) -> ClientSession:
        hooks = self._hooks
        return ClientSession(
            read,
            write,
            sampling_callback=hooks.sampling,
            elicitation_callback=hooks.elicitation,
            list_roots_callback=hooks.list_roots,
            message_handler=self._on_message,
            client_info=types.Implementation(name="loopwarden-mcp-proxy", version=_version()),
        )

    async def _relay(self, source: _ReadStream, sink: MemoryObjectSendStream[Any]) -> None:
        """Pass server messages to the session; the end of the stream means the server is gone."""
        async with sink:
            try:
                async for message in source:
                    await sink.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            # Mark the failure before the session sees the stream end, so waiting requests
            # report "the server exited" rather than a bare "Connection closed".
            self._fail("it closed the connection (the process exited or the server went away)")

    def _fail(self, reason: str) -> None:
        if self.failure is not None:
            return
        self.failure = reason
        if not self._stop.is_set():
            _log.error("downstream MCP server %s: %s", self.spec.describe(), reason)
        for scope in list(self._inflight):
            scope.cancel()
        self._stop.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            # Privacy: the offending line may hold tool output, so only its kind is logged.
            _log.error(
                "downstream MCP server %s sent a message that is not valid JSON-RPC (%s)",
                self.spec.describe(),
                type(message).__name__,
            )
            return
        handler = self._hooks.message_handler
        if handler is not None:
            await handler(message)

    # ---------------------------------------------------------------- requests
    async def request(
        self, request: types.ClientRequest, result_type: type[_ResultT], *, timeout: float | None
    ) -> _ResultT:
        """Send ``request`` and return the typed result.

        Raises :class:`McpError` when the server answers with a JSON-RPC error, and
        :class:`DownstreamUnavailable` when it is gone or silent for ``timeout`` seconds.
        """
        if self.failure is not None:
            await self._reconnect()
        session = self._live_session()
        # Why peek: ClientSession numbers requests synchronously from this counter and does not
        # tell the server when a request is abandoned; knowing the id lets us cancel it there.
        downstream_id: int | None = getattr(session, "_request_id", None)
        scope = anyio.CancelScope()
        self._inflight.add(scope)
        done = False
        try:
            with scope, anyio.move_on_after(timeout) as timer:
                result = await session.send_request(request, result_type)
                done = True
        except McpError as exc:
            done = True
            if exc.error.code == types.CONNECTION_CLOSED and self.failure is not None:
                raise DownstreamUnavailable(self._gone()) from exc
            raise
        except ValidationError as exc:
            done = True
            raise DownstreamUnavailable(self._malformed(exc)) from None
        finally:
            self._inflight.discard(scope)
            if not done:
                await self._cancel_remote(session, downstream_id)
        if done:
            return result
        if timer.cancelled_caught and self.failure is None:
            raise DownstreamUnavailable(
                f"the MCP server {self.spec.describe()!r} did not answer within {timeout:g} s"
            )
        raise DownstreamUnavailable(self._gone())

    async def notify(self, notification: types.ClientNotification) -> None:
        """Forward a client notification; dropped (logged) when the server is gone."""
        session = self._session
        if session is None or self.failure is not None:
            _log.debug("dropping %s: downstream is not connected", type(notification.root).__name__)
            return
        try:
            await session.send_notification(notification)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            _log.debug("dropping notification: downstream stream closed")

    def _live_session(self) -> ClientSession:
        if self.failure is not None or self._session is None:
            raise DownstreamUnavailable(self._gone())
        return self._session

    def _malformed(self, exc: ValidationError) -> str:
        # Privacy: the location of the first problem only, never the offending values.
        errors = exc.errors(include_url=False, include_input=False)
        where = ".".join(str(part) for part in errors[0]["loc"]) if errors else "?"
        return (
            f"the MCP server {self.spec.describe()!r} sent a malformed answer "
            f"({len(errors)} problem(s), first at '{where}': {errors[0]['msg'] if errors else ''})"
        )

    def _gone(self) -> str:
        reason = self.failure or "it is not connected"
        return f"the MCP server {self.spec.describe()!r} is not available: {reason}"

    async def _cancel_remote(self, session: ClientSession, request_id: int | None) -> None:
        """Tell the server to stop working on an abandoned request (best effort, bounded)."""
        if request_id is None or self.failure is not None:
            return
        note = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(
                    requestId=request_id, reason="abandoned by loopwarden mcp-proxy"
                )
            )
        )
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(2.0),
            suppress(anyio.ClosedResourceError, anyio.BrokenResourceError),
        ):
            await session.send_notification(note)


def _describe_exception(exc: BaseException, connect_timeout: float) -> str:
    """One readable line for a transport failure (exception groups unwrapped)."""
    # Exception groups (anyio task groups) are unwrapped by duck typing: the builtin only
    # exists from Python 3.11.
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    if isinstance(exc, TimeoutError):
        return f"no answer to 'initialize' within {connect_timeout:g} s"
    if isinstance(exc, FileNotFoundError):
        return f"command not found ({exc.filename or exc}); check the command and your PATH"
    if isinstance(exc, McpError):
        return f"it answered with an error: {exc.error.message}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _version() -> str:
    from loopwarden._version import __version__

    return __version__

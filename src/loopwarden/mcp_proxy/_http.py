"""The streamable-HTTP downstream: the MCP SDK's transport (1.x or 2.x), no SDK session.

Only the transport is used: it handles HTTP, SSE streams and the session header, while the
messages stay the client's own (``initialize`` included). Each message is parsed into the
SDK's JSON-RPC model to hand it to the transport, and dumped back with only the fields it
arrived with. The SDK is imported when a URL is given, never on the stdio path.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Callable
from typing import Any

from loopwarden.mcp_proxy._downstream import (
    DownstreamSpec,
    DownstreamUnavailable,
    EndHandler,
    Handler,
    Spawn,
)

_log = logging.getLogger("loopwarden.mcp_proxy")

# The SDK's own HTTP defaults: 30 s to connect/write, a long read for held-open SSE streams.
_CONNECT_TIMEOUT = 30.0
_READ_TIMEOUT = 300.0


class _Sdk:
    """The pieces of the SDK the HTTP link needs, found in whichever major version is there."""

    def __init__(self) -> None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared.message import SessionMessage

        self.client = streamable_http_client
        self.session_message = SessionMessage
        # mcp 2.x: a TypeAdapter over a union, and httpx2; mcp 1.x: a RootModel, and httpx.
        types = importlib.import_module("mcp.types")
        adapter = getattr(types, "jsonrpc_message_adapter", None)
        self.parse: Callable[[bytes], Any]
        if adapter is not None:
            self.parse = lambda raw: adapter.validate_json(raw, by_name=False)
            self.http = importlib.import_module("httpx2")
        else:
            self.parse = types.JSONRPCMessage.model_validate_json
            self.http = importlib.import_module("httpx")


def _sdk() -> _Sdk:
    return _Sdk()


def sdk_problem() -> str | None:
    """Why ``--url`` cannot work with the installed SDK, or None when it can."""
    try:
        _sdk()
    except ImportError as exc:
        try:
            from importlib.metadata import version

            installed = f"mcp {version('mcp')} is installed"
        except Exception:
            installed = "mcp is not installed"
        return (
            f"--url needs the MCP SDK's streamable-HTTP client, which could not be loaded "
            f"({type(exc).__name__}: {exc}; {installed}). Install a supported SDK with: "
            "pip install '.[mcp]' from loopwarden's repository root (mcp 1.24 or later, 1.x or "
            "2.x). Servers started over stdio (-- COMMAND) need no SDK."
        )
    return None


class HttpLink:
    """One streamable-HTTP session to the server, held open by a task of its own.

    Why a task: the SDK's transport is an anyio context manager that must be entered and left
    in the same task; the relay talks to it through a queue and the transport's write stream.
    """

    carries_batches = False  # the SDK's messages are single: a batch's are sent one by one

    def __init__(self, spec: DownstreamSpec) -> None:
        self.spec = spec
        self._sdk = _sdk()
        self._incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._write: Any = None
        self._stop = asyncio.Event()
        self._reason = "it closed the connection"
        self._task: asyncio.Future[None] | None = None
        # The id of an `initialize` sent and not yet answered. The transport learns the
        # session id from that answer, and a message sent before it is refused (400) and ends
        # the session: a client that sends everything at once (`printf ... |`) waits here.
        self._init_id: Any = None
        self._initialized = asyncio.Event()
        self._initialized.set()

    @classmethod
    async def start(cls, spec: DownstreamSpec) -> HttpLink:
        """Open the transport; no request is sent until the client's first message."""
        link = cls(spec)
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        link._task = asyncio.ensure_future(link._run(ready))
        await ready
        return link

    async def _run(self, ready: asyncio.Future[None]) -> None:
        sdk = self._sdk
        timeout = sdk.http.Timeout(_CONNECT_TIMEOUT, read=_READ_TIMEOUT)
        hooks = {"response": [self._watch_answer]}
        try:
            async with (
                sdk.http.AsyncClient(
                    headers=dict(self.spec.headers), timeout=timeout, event_hooks=hooks
                ) as http,
                sdk.client(str(self.spec.url), http_client=http) as streams,
            ):
                read, self._write = streams[0], streams[1]
                ready.set_result(None)
                reader = asyncio.ensure_future(self._read(read))
                stopper = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                reader.cancel()
        except BaseException as exc:  # the transport's task group failed: the session is over
            self._reason = f"the connection failed ({_describe(exc)})"
            if not ready.done():
                ready.set_exception(
                    DownstreamUnavailable(
                        f"could not start the MCP server {self.spec.describe()!r}: {_describe(exc)}"
                    )
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._write = None
            self._initialized.set()  # nothing waits for an answer that cannot come
            self._incoming.put_nowait(None)

    async def _watch_answer(self, response: Any) -> None:
        """An httpx response hook: watch the body of each POST's answer as it is read.

        The SDK's transport drops a POST whose answer stream breaks (the server died in the
        middle of a call) without telling anyone, and the request would wait for its timeout.
        A broken answer ends this session instead, as a closed stdio connection does: every
        request in flight gets the proxy's error result, and the next one reconnects.
        """
        if response.request.method == "POST":
            response.stream = _watched(self._sdk.http, response.stream, self._broken)

    def _broken(self, exc: BaseException) -> None:
        self._reason = f"it closed the connection in the middle of an answer ({_describe(exc)})"
        self._stop.set()

    async def _read(self, read: Any) -> None:
        async for item in read:
            if isinstance(item, Exception):
                # Privacy: the offending body may hold tool output, so only its kind is logged.
                _log.error(
                    "downstream MCP server %s sent a message that is not valid JSON-RPC (%s)",
                    self.spec.describe(),
                    type(item).__name__,
                )
                continue
            if self._stop.is_set():
                # The session is over (an answer broke): what the transport makes up now, such
                # as mcp 2.x's -32000 "SSE stream ended without a response", is not the
                # server's; the requests in flight get the proxy's own error instead.
                continue
            message = item.message
            dumped = message.model_dump_json(by_alias=True, exclude_unset=True)
            root = getattr(message, "root", message)  # mcp 1.x wraps it, 2.x does not
            if self._init_id is not None and getattr(root, "id", None) == self._init_id:
                self._init_id = None
                self._initialized.set()
            self._incoming.put_nowait(dumped.encode())
        self._reason = "it closed the connection (the HTTP session ended)"

    async def send(self, message: bytes) -> None:
        """Hand one message to the transport (it POSTs it)."""
        write = self._write
        if write is None:
            raise DownstreamUnavailable("the HTTP session is closed")
        try:
            parsed = self._sdk.parse(message)
        except ValueError as exc:
            raise DownstreamUnavailable(f"the message is not valid JSON-RPC ({exc})") from None
        await self._after_initialize()
        root = getattr(parsed, "root", parsed)  # mcp 1.x wraps it, 2.x does not
        if getattr(root, "method", None) == "initialize" and hasattr(root, "id"):
            self._init_id = root.id
            self._initialized.clear()
        write = self._write
        if write is None:
            raise DownstreamUnavailable("the HTTP session is closed")
        try:
            await write.send(self._sdk.session_message(parsed))
        except Exception as exc:
            raise DownstreamUnavailable(f"the HTTP session is closed ({_describe(exc)})") from None

    async def _after_initialize(self) -> None:
        """Wait for the answer to an ``initialize`` in flight (bounded by the connect timeout)."""
        if self._initialized.is_set():
            return
        try:
            await asyncio.wait_for(self._initialized.wait(), self.spec.connect_timeout)
        except asyncio.TimeoutError:
            raise DownstreamUnavailable(
                f"no answer to 'initialize' within {self.spec.connect_timeout:g} s"
            ) from None

    def deliver(self, handle: Handler, end: EndHandler, spawn: Spawn, *, inline: bool) -> None:
        """Each message the transport receives to ``handle``, in a task (the SDK's streams
        need one: ``inline`` is not taken)."""
        spawn(self._deliver(handle, end))

    async def _deliver(self, handle: Handler, end: EndHandler) -> None:
        try:
            while (message := await self._incoming.get()) is not None:
                await handle(message)
        except Exception as exc:  # a transport failure: this connection is over
            await end(exc)
            return
        await end(None)

    async def end_reason(self) -> str:
        """Why the session ended."""
        return self._reason

    def diagnostics(self) -> str:
        """Nothing beyond the reason for HTTP."""
        return ""

    async def close(self) -> None:
        """End the session (the SDK sends its DELETE) and wait for the task."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 5.0)
            task.cancel()


def _watched(http: Any, stream: Any, broken: Callable[[BaseException], None]) -> Any:
    """``stream`` (an httpx byte stream) that calls ``broken`` if reading it fails midway."""

    class Watched(http.AsyncByteStream):  # type: ignore[misc]  # httpx or httpx2: Any here
        async def __aiter__(self) -> Any:
            try:
                async for chunk in stream:
                    yield chunk
            except http.TransportError as exc:
                broken(exc)
                raise

        async def aclose(self) -> None:
            await stream.aclose()

    return Watched()


def _describe(exc: BaseException) -> str:
    """One readable line for a transport failure (exception groups unwrapped)."""
    inner = getattr(exc, "exceptions", None)
    while isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        exc = inner[0]
        inner = getattr(exc, "exceptions", None)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

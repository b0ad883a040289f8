"""The upstream half: serve one MCP client over stdio and forward it to the downstream server.

Every client request except ``tools/call`` is forwarded unchanged and its result (or JSON-RPC
error) returned unchanged; server notifications and server-to-client requests (sampling,
elicitation, roots) travel the other way. ``tools/call`` goes through the :class:`LoopGuard`.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.abc
from mcp import types
from mcp.client.session import ClientSession
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.shared.session import RequestResponder
from pydantic import BaseModel

from loopwarden.guard import LoopGuard
from loopwarden.mcp_proxy._downstream import (
    Downstream,
    DownstreamHooks,
    DownstreamSpec,
    DownstreamUnavailable,
)
from loopwarden.mcp_proxy._guarding import (
    EventsFile,
    blocked_call_result,
    outcome_of,
    read_meta,
    stopped_call_result,
    text_result,
    with_notes,
)

_log = logging.getLogger("loopwarden.mcp_proxy")
_ClientContext = RequestContext[ClientSession, Any]
_R = TypeVar("_R", bound=BaseModel)

# Client requests forwarded as they are, with the result type to parse the answer as. Task
# requests (experimental, deprecated in the SDK) are not forwarded and the ``tasks``
# capability is not advertised: a task-augmented call would bypass the guard's accounting.
_FORWARDED: dict[type[BaseModel], type[BaseModel]] = {
    types.ListToolsRequest: types.ListToolsResult,
    types.ListResourcesRequest: types.ListResourcesResult,
    types.ListResourceTemplatesRequest: types.ListResourceTemplatesResult,
    types.ReadResourceRequest: types.ReadResourceResult,
    types.SubscribeRequest: types.EmptyResult,
    types.UnsubscribeRequest: types.EmptyResult,
    types.ListPromptsRequest: types.ListPromptsResult,
    types.GetPromptRequest: types.GetPromptResult,
    types.CompleteRequest: types.CompleteResult,
    types.SetLevelRequest: types.EmptyResult,
}

_PROXY_PREFIX = "loopwarden mcp-proxy: "


@dataclass(frozen=True)
class ProxyOptions:
    """How to run one proxy: the downstream server, timeouts and the events file."""

    downstream: DownstreamSpec
    call_timeout: float | None = 300.0
    events_path: Path | None = None


class _Proxy:
    """The per-connection state: one guard session, the runs seen, both peers."""

    def __init__(self, guard: LoopGuard, options: ProxyOptions) -> None:
        self.guard = guard
        self.options = options
        # Session = this client connection; run = the connection unless _meta names one.
        self.session = f"mcp-proxy-{uuid.uuid4().hex[:12]}"
        self.connection_run = self.session
        self._runs: set[str] = set()
        # Batches: a tools/call arriving while none is in flight starts a new one; calls that
        # arrive while others are in flight join it (the client sent them together).
        self._calls_in_flight = 0
        self._batches = 0
        self.upstream: ServerSession | None = None
        self.downstream = Downstream(
            options.downstream,
            DownstreamHooks(
                message_handler=self._from_server,
                sampling=self._sampling,
                elicitation=self._elicitation,
                list_roots=self._list_roots,
            ),
        )

    # ------------------------------------------------------------ client -> server
    async def handle(self, message: Any) -> None:
        """Answer one client request, or forward one client notification."""
        if isinstance(message, RequestResponder):
            await self._respond(message)
        elif isinstance(message, types.ClientNotification):
            root = message.root
            if not isinstance(root, types.InitializedNotification | types.CancelledNotification):
                await self.downstream.notify(_fresh(root, types.ClientNotification))
        else:
            _log.error(
                "the MCP client sent a message that is not valid JSON-RPC (%s)",
                type(message).__name__,
            )

    async def _respond(self, responder: RequestResponder[Any, Any]) -> None:
        with responder:
            try:
                response = await self._answer(responder)
            except anyio.get_cancelled_exc_class():
                # The client cancelled this request: the SDK has already answered it, and its
                # responder does not swallow the cancellation itself (the SDK's server does the
                # same check); any other cancellation is the proxy shutting down.
                if responder.cancelled:
                    return
                raise
            except Exception:
                # A bug here must cost one request, not the client's whole connection.
                _log.exception("failed to handle %s", type(responder.request.root).__name__)
                response = types.ErrorData(
                    code=types.INTERNAL_ERROR, message=f"{_PROXY_PREFIX}internal error"
                )
            try:
                await responder.respond(response)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                _log.debug("client went away before the answer to %s", responder.request_id)

    async def _answer(
        self, responder: RequestResponder[Any, Any]
    ) -> types.ServerResult | types.ErrorData:
        request = responder.request.root
        if isinstance(request, types.PingRequest):
            return types.ServerResult(types.EmptyResult())
        if isinstance(request, types.CallToolRequest):
            return await self._call_tool(request, str(responder.request_id))
        result_type = _FORWARDED.get(type(request))
        if result_type is None:
            return types.ErrorData(
                code=types.METHOD_NOT_FOUND,
                message=f"{_PROXY_PREFIX}{request.method} is not forwarded",
            )
        try:
            result = await self.downstream.request(
                _fresh(request, types.ClientRequest), result_type, timeout=self.options.call_timeout
            )
        except McpError as exc:
            return exc.error
        except DownstreamUnavailable as exc:
            return types.ErrorData(code=types.INTERNAL_ERROR, message=f"{_PROXY_PREFIX}{exc}")
        return types.ServerResult(result)  # type: ignore[arg-type]

    async def _call_tool(
        self, request: types.CallToolRequest, call_id: str
    ) -> types.ServerResult | types.ErrorData:
        """``tools/call`` through the guard: block, stop, or forward (with a warning note)."""
        params = request.params
        run_id, compacted, forward_meta = read_meta(params.meta)
        run = run_id or self.connection_run
        self._ensure_run(run)
        if compacted:
            self.guard.on_compaction_retry(self.session, run_id=run)
        name, args = params.name, params.arguments or {}
        if self._calls_in_flight == 0:
            self._batches += 1
        batch = str(self._batches)
        self._calls_in_flight += 1
        try:
            decision = self.guard.before_tool_call(
                self.session, name, args, run_id=run, tool_call_id=call_id, batch=batch
            )
            if decision.action == "block":
                return types.ServerResult(blocked_call_result(decision))
            if decision.action == "stop":
                return types.ServerResult(stopped_call_result(decision))
            forwarded = types.CallToolRequest(
                params=params.model_copy(update={"meta": forward_meta})
            )
            outcome = await self._run_tool(forwarded)
            after = self.guard.after_tool_call(
                self.session,
                name,
                args,
                **_outcome_kwargs(outcome),
                run_id=run,
                tool_call_id=call_id,
                batch=batch,
            )
        finally:
            self._calls_in_flight -= 1
        if isinstance(outcome, types.ErrorData):
            # A JSON-RPC error passes through unchanged; the warning, if any, is in the logs.
            return outcome
        notes = [decision.message] if decision.action == "warn" and decision.message else []
        if after.action == "stop" and after.message:
            notes.append(after.message)
        return types.ServerResult(with_notes(outcome, notes))

    async def _run_tool(
        self, request: types.CallToolRequest
    ) -> types.CallToolResult | types.ErrorData:
        """Forward one call; an unreachable server becomes an ``isError`` result."""
        try:
            return await self.downstream.request(
                _fresh(request, types.ClientRequest),
                types.CallToolResult,
                timeout=self.options.call_timeout,
            )
        except McpError as exc:
            return exc.error
        except DownstreamUnavailable as exc:
            return text_result(f"{_PROXY_PREFIX}{exc}", is_error=True)

    def _ensure_run(self, run: str) -> None:
        if run not in self._runs:
            self._runs.add(run)
            self.guard.start_run(self.session, run)

    def end_runs(self) -> None:
        """Close every run record of this connection."""
        for run in sorted(self._runs):
            self.guard.end_run(self.session, run, outcome="disconnected")

    # ------------------------------------------------------------ server -> client
    async def _from_server(self, message: Any) -> None:
        if not isinstance(message, types.ServerNotification):
            return  # server requests are answered by the session callbacks below
        upstream = self.upstream
        if upstream is None:
            _log.debug("dropping %s: the client is not connected yet", type(message.root).__name__)
            return
        try:
            await upstream.send_notification(_fresh(message.root, types.ServerNotification))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            _log.debug("dropping notification: the client went away")

    async def _ask_client(
        self, request: Any, result_type: type[_R], capability: types.ClientCapabilities
    ) -> _R | types.ErrorData:
        """Forward a server-to-client request, if the client announced the capability."""
        upstream = self.upstream
        method = request.method
        if upstream is None or not upstream.check_client_capability(capability):
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=f"{_PROXY_PREFIX}the MCP client does not support {method}",
            )
        try:
            return await upstream.send_request(types.ServerRequest(request), result_type)
        except McpError as exc:
            return exc.error

    async def _sampling(
        self, context: _ClientContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        result_type: type[types.CreateMessageResult | types.CreateMessageResultWithTools] = (
            types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        )
        return await self._ask_client(
            types.CreateMessageRequest(params=params),
            result_type,
            types.ClientCapabilities(sampling=types.SamplingCapability()),
        )

    async def _elicitation(
        self, context: _ClientContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._ask_client(
            types.ElicitRequest(params=params),
            types.ElicitResult,
            types.ClientCapabilities(elicitation=types.ElicitationCapability()),
        )

    async def _list_roots(self, context: _ClientContext) -> types.ListRootsResult | types.ErrorData:
        return await self._ask_client(
            types.ListRootsRequest(),
            types.ListRootsResult,
            types.ClientCapabilities(roots=types.RootsCapability()),
        )


def _outcome_kwargs(outcome: types.CallToolResult | types.ErrorData) -> dict[str, Any]:
    """``result=``/``error=`` keyword arguments of ``after_tool_call`` for a call's outcome."""
    if isinstance(outcome, types.ErrorData):
        return {"error": outcome.message}
    value, failure = outcome_of(outcome)
    return {"result": value, "error": failure}


def _fresh(message: BaseModel, root: type[_R]) -> _R:
    """A copy of a received request or notification fit for sending: ``method`` and ``params``.

    Why: the SDK parses incoming messages with extra fields allowed, so the received model
    still carries the JSON-RPC envelope (``jsonrpc``, ``id``), which must not be sent again.
    """
    data = message.model_dump(by_alias=True, mode="json", exclude_none=True)
    return root.model_validate({key: data[key] for key in ("method", "params") if key in data})


def _init_options(init: types.InitializeResult) -> InitializationOptions:
    """Present the downstream server's identity and capabilities to the client as they are."""
    capabilities = init.capabilities.model_copy(update={"tasks": None})
    return InitializationOptions(
        server_name=init.serverInfo.name,
        server_version=init.serverInfo.version,
        capabilities=capabilities,
        instructions=init.instructions,
        website_url=init.serverInfo.websiteUrl,
        icons=init.serverInfo.icons,
    )


class _Stopper:
    """Where a termination signal lands: the scope of whatever phase the proxy is in."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.signals: list[int] = []

    def stop(self, signum: int) -> None:
        _log.info("received signal %d; shutting down", signum)
        self.signals.append(signum)
        if self.scope is not None:
            self.scope.cancel()


async def serve(guard: LoopGuard, options: ProxyOptions) -> int:
    """Run the proxy until the client disconnects; returns the process exit code."""
    proxy = _Proxy(guard, options)
    events = EventsFile(options.events_path) if options.events_path else None
    unsubscribe = guard.subscribe(events) if events else None
    stopper = _Stopper()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_signals, stopper)
            code = await _start_and_serve(proxy, tg, stopper)
            tg.cancel_scope.cancel()  # the signal watcher
        return code
    finally:
        proxy.end_runs()
        if unsubscribe:
            unsubscribe()
        if events:
            events.close()


async def _start_and_serve(proxy: _Proxy, tg: anyio.abc.TaskGroup, stopper: _Stopper) -> int:
    with anyio.CancelScope() as startup:
        stopper.scope = startup
        try:
            # Cancelled by a signal, the SDK's process cleanup kills the server it started.
            await proxy.downstream.start(tg)
        except DownstreamUnavailable as exc:
            _log.error("%s%s", _PROXY_PREFIX, exc)
            return 1
    if startup.cancelled_caught:
        return 0
    assert proxy.downstream.init_result is not None
    await _serve_upstream(proxy, _init_options(proxy.downstream.init_result), stopper)
    return 0


async def _serve_upstream(proxy: _Proxy, init: InitializationOptions, stopper: _Stopper) -> None:
    """Serve the client over stdio; on EOF or a signal, shut the downstream server down."""
    async with stdio_server() as (read, write), ServerSession(read, write, init) as upstream:
        proxy.upstream = upstream
        try:
            async with anyio.create_task_group() as tg:
                stopper.scope = tg.cancel_scope
                async for message in upstream.incoming_messages:
                    tg.start_soon(proxy.handle, message)
                _log.info("the MCP client disconnected; shutting down")
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                proxy.downstream.close()
                await proxy.downstream.finished.wait()
            if stopper.signals:
                _exit_now(proxy)


async def _watch_signals(stopper: _Stopper) -> None:
    """Turn SIGTERM/SIGINT/SIGHUP into an orderly shutdown (the server is stopped too)."""
    wanted = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGHUP"):
        wanted.append(signal.SIGHUP)
    try:
        with anyio.open_signal_receiver(*wanted) as received:
            async for signum in received:
                stopper.stop(signum)
    except NotImplementedError:  # Windows event loops: the client's pipe close still works
        _log.debug("signal handling is not available on this platform")


def _exit_now(proxy: _Proxy) -> None:
    """Leave at once after a signal, the downstream server already stopped.

    Why: the SDK reads stdin in a worker thread that cannot be interrupted, so an orderly
    return would wait until the client closes the pipe, which a client that sent a signal may
    never do.
    """
    proxy.end_runs()
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)

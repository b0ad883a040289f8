"""The relay: one MCP client over stdio, one wrapped server, bytes passed through untouched.

Each newline-delimited message is parsed once for its JSON-RPC envelope (``id``, ``method``)
and forwarded as the bytes it arrived as. Only ``tools/call`` requests and their answers are
looked into, for the :class:`~loopwarden.LoopGuard`; a call's bytes change only when the guard
has something to say (loopwarden's ``_meta`` keys removed, a warning appended) or answers it
itself (block, stop). Everything else, ``initialize`` included, goes through as sent, so each
side sees exactly what the other offers.

The relay also keeps what the SDK-based proxy did: a timeout per request (the server is told
to cancel it), clear errors when the server crashes, a fresh server (replaying the client's
``initialize``) for the next request, and no child process left behind.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import stat
import sys
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from loopwarden._exact_json import NO_VALUE, fast_loads
from loopwarden.guard import LoopGuard
from loopwarden.mcp_proxy._downstream import (
    CHUNK,
    DownstreamSpec,
    DownstreamUnavailable,
    LineProtocol,
    LinePump,
    LineReader,
    Link,
    StdioLink,
    widen_pipe,
    write_line,
)
from loopwarden.mcp_proxy._guarding import (
    CallGuard,
    EventsFile,
    ToolCall,
    blocked_call_result,
    never_waits,
    outcome_of,
    result_problem,
    stopped_call_result,
    text_result,
    with_notes,
)

_log = logging.getLogger("loopwarden.mcp_proxy")

_Recording = Callable[[], Awaitable[Any]]

_PROXY_PREFIX = "loopwarden mcp-proxy: "
_INTERNAL_ERROR = -32603
_ABANDONED_KEPT = 1024  # ids of timed-out requests whose late answers are dropped
_DRAIN_POLL = 0.02  # seconds between checks for the last answers after the client's input ended
_CLOCK_RESOLUTION = time.get_clock_info("monotonic").resolution  # as asyncio's loop uses it

RETRY_AFTER = 5.0
"""Seconds a failed restart of the server is not retried (so a broken server fails fast)."""


async def open_link(spec: DownstreamSpec) -> Link:
    """Start a stdio server or open an HTTP session; raises :class:`DownstreamUnavailable`."""
    if spec.url is None:
        return await StdioLink.start(spec)
    from loopwarden.mcp_proxy._http import HttpLink  # the MCP SDK: only for a URL

    return await HttpLink.start(spec)


@dataclass(frozen=True)
class ProxyOptions:
    """How to run one proxy: the downstream server, timeouts and the events file."""

    downstream: DownstreamSpec
    call_timeout: float | None = 300.0
    events_path: Path | None = None


def _encode(message: dict[str, Any]) -> bytes:
    # ASCII escapes: a lone surrogate in a string stays valid JSON and valid UTF-8.
    return json.dumps(message, separators=(",", ":")).encode("ascii")


def _parse(line: bytes) -> Any:
    """``json.loads(line)``, or None when the line is not JSON (computed by orjson when that
    gives the same value)."""
    value = fast_loads(line)
    if value is not NO_VALUE:
        return value
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\n\r]*")


def _items(line: bytes, parsed: list[Any]) -> list[tuple[Any, bytes]]:
    """The messages of a batch (``line``, which parsed as ``parsed``), each with its bytes.

    Why the bytes: an item the proxy does not touch goes on exactly as it was sent.
    """
    try:
        items = _spans(line.decode("utf-8"))
    except (ValueError, IndexError, RecursionError):  # e.g. a byte order mark before the "["
        items = []
    if len(items) != len(parsed):
        return [(item, _encode(item)) for item in parsed]
    return items


def _spans(text: str) -> list[tuple[Any, bytes]]:
    items: list[tuple[Any, bytes]] = []
    index = _skip(text, _skip(text, 0) + 1)  # past the "["
    while text[index] != "]":
        item, end = _DECODER.raw_decode(text, index)
        items.append((item, text[index:end].encode("utf-8")))
        index = _skip(text, end)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return items


def _skip(text: str, index: int) -> int:
    """The index of the first character from ``index`` on that is not JSON whitespace."""
    blank = _BLANK.match(text, index)
    return index if blank is None else blank.end()


def _array(items: list[bytes]) -> bytes:
    return b"[" + b",".join(items) + b"]"


def _key(request_id: Any) -> Any:
    """A dict key for a JSON-RPC id.

    Why "1" matches 1: servers that echo the id as a string exist, and the SDK clients match
    such an answer to the numeric request, so the relay must pair them the same way.
    """
    if isinstance(request_id, str):
        text = request_id.strip()
        if text.isdigit() and str(int(text)) == text:
            return int(text)
        return request_id
    if isinstance(request_id, bool) or not isinstance(request_id, int):
        return (type(request_id).__name__, repr(request_id))
    return request_id


@dataclass
class _Generation:
    """One connection to the server; a restart makes a new one."""

    link: Link
    number: int
    alive: bool = True
    server_requests: set[Any] = field(default_factory=set)  # awaiting the client's answer


@dataclass
class _Batch:
    """A JSON-RPC batch (an array) of the client's: answered with one array, as it was sent.

    The server gets the batch as an array too (less the calls the guard answered), so it
    answers as it would directly: an array, an error, or nothing (servers of protocol versions
    without batches ignore them). The proxy's own answers for the batch (blocks, stops,
    failures) wait here and go out inside the server's array, or as one array of their own once
    none of the batch's requests is still waiting on the server.
    """

    waiting: int = 0  # requests of the batch forwarded and not answered yet
    sealed: bool = False  # every item has been looked at
    answers: list[bytes] = field(default_factory=list)
    split: bool = False  # sent one by one (the link takes no arrays): the server's answers wait


@dataclass
class _Pending:
    """A client request forwarded to the server and not answered yet."""

    request_id: Any
    method: str
    generation: _Generation
    timeout: float | None = None  # seconds, from when it was forwarded
    deadline: float | None = None  # the loop's time when it times out, until it is settled
    call: ToolCall | None = None
    batch: _Batch | None = None


class _ClientOut:
    """The proxy's stdout: whole messages, each written in one go (never interleaved)."""

    def __init__(self, writer: asyncio.StreamWriter | None) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()
        self.closed = False

    async def send(self, message: bytes) -> None:
        if self.closed:
            return
        writer = self._writer
        if writer is None:  # stdout is a regular file: plain blocking writes
            try:
                _write_all(1, message + b"\n")
            except OSError:
                self.closed = True
            return
        if writer.is_closing():
            self.closed = True
            return
        write_line(writer, message)
        if writer.transport.get_write_buffer_size() > CHUNK:
            async with self._lock:
                try:
                    await writer.drain()
                except (ConnectionError, RuntimeError):
                    self.closed = True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Relay:
    """The per-connection state: the guard, the server connection, requests in flight."""

    def __init__(self, guard: LoopGuard, options: ProxyOptions) -> None:
        self.options = options
        self.spec = options.downstream
        self.calls = CallGuard(guard, f"mcp-proxy-{uuid.uuid4().hex[:12]}")
        self.out = _ClientOut(None)
        self._loop = asyncio.get_running_loop()
        self._generation: _Generation | None = None
        self._generations = 0
        self._pending: dict[Any, _Pending] = {}
        self._own: dict[Any, tuple[_Generation, asyncio.Future[dict[str, Any]]]] = {}
        self._abandoned: OrderedDict[Any, None] = OrderedDict()
        self._stale: OrderedDict[Any, None] = OrderedDict()
        self._init: dict[str, Any] | None = None  # the client's initialize, for restarts
        self._initialized_sent = False
        self._ready = False  # the server answered the client's first initialize
        self._failure: str | None = None  # why the server is not available
        self._failed_restart_at: float | None = None
        self._restart_lock = asyncio.Lock()
        self._tasks: set[asyncio.Future[Any]] = set()
        self._watchdog: asyncio.TimerHandle | None = None  # at the earliest deadline (_watch)
        self._recording = 0  # outcome recordings under way (after their answers went out)
        self._recorded = asyncio.Event()
        self._recorded.set()
        self._answers_batches = False  # the server answered a request sent in a batch
        self.exit_code: asyncio.Future[int] = self._loop.create_future()
        self.closing = False
        # Messages handled in the callback that read them (see LinePump) when nothing on
        # their way needs a task: the stdio link and a guard that never waits.
        self._inline = never_waits(guard) and self.spec.url is None

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start the server (no ``initialize``: that is the client's to send)."""
        await self._attach(await open_link(self.spec))

    async def _attach(self, link: Link) -> _Generation:
        self._generations += 1
        generation = _Generation(link, self._generations)
        self._generation = generation
        link.deliver(
            partial(self._from_server, generation),
            partial(self._server_ended, generation),
            self._spawn,
            inline=self._inline,
        )
        return generation

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def finish(self, code: int) -> None:
        """End the proxy with ``code`` (the first call wins)."""
        if not self.exit_code.done():
            self.exit_code.set_result(code)

    async def shutdown(self) -> None:
        """Stop the server and every task; close the runs."""
        self.closing = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        generation = self._generation
        if generation is not None:
            await generation.link.close()
        for task in list(self._tasks):
            task.cancel()
        await self.calls.end_runs()

    def _gone(self) -> str:
        reason = self._failure or "it is not connected"
        return f"the MCP server {self.spec.describe()!r} is not available: {reason}"

    # ------------------------------------------------------------ client -> server
    def pump_client(self, lines: LineReader) -> LinePump:
        """Relay the client's messages until it disconnects (then the proxy finishes)."""
        return LinePump(
            lines, self._client_line, self._client_ended, self._spawn, inline=self._inline
        )

    async def _client_line(self, line: bytes) -> None:
        message = _parse(line)
        if isinstance(message, list):  # a JSON-RPC batch (protocol 2025-03-26)
            await self._client_batch(line, message)
            return
        forward = await self._from_client(message, line, None)
        if forward is not None:
            await self._to_current(forward)

    async def _client_ended(self, exc: BaseException | None) -> None:
        """The client's input ended (or relaying it failed): finish, once it is answered."""
        if exc is not None:
            _log.error("relaying the client's messages failed", exc_info=exc)
            self.finish(1)
            return
        if self._pending:
            # A client may send its requests and close its input at once (`printf ... |`):
            # each request that arrived is answered first, each within its own timeout.
            _log.info(
                "the MCP client closed its input; answering its %d requests in flight first",
                len(self._pending),
            )
            while self._awaited() and not self.out.closed and not self.closing:
                await asyncio.sleep(_DRAIN_POLL)
        _log.info("the MCP client disconnected; shutting down")
        self.finish(0)

    def _awaited(self) -> bool:
        """Whether an answer is still to come after the client's input ended.

        A batch the server got as an array counts only once the server has answered one:
        servers of protocol versions without batches ignore them, and no answer would come.
        """
        return any(
            pending.batch is None or pending.batch.split or self._answers_batches
            for pending in self._pending.values()
        )

    async def _client_batch(self, line: bytes, parsed: list[Any]) -> None:
        """Look at each message of a batch; the server gets what is left as one array."""
        batch = _Batch()
        forward: list[bytes] = []
        changed = False
        for item, raw in _items(line, parsed):
            kept = await self._from_client(item, raw, batch)
            changed = changed or kept is not raw
            if kept is not None:
                forward.append(kept)
        batch.sealed = True
        generation = self._generation
        if generation is not None and not generation.link.carries_batches:
            batch.split = True  # its answers are joined into one array here
            for item in forward:
                await self._to_current(item)
        elif not changed:
            await self._to_current(line)
        elif forward:
            await self._to_current(_array(forward))
        await self._batch_done(batch)

    async def _from_client(self, message: Any, line: bytes, batch: _Batch | None) -> bytes | None:
        """Handle one client message; returns the bytes to forward to the server, if any."""
        if not isinstance(message, dict):
            if batch is not None:
                return line  # the server answers an invalid item of a batch as it would
            # Privacy: the line may hold tool arguments, so only the fact is logged.
            _log.error("the MCP client sent a message that is not valid JSON-RPC")
            return None
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                return await self._client_request(message, method, line, batch)
            return self._client_notification(message, method, line)
        # An answer to a request of the server (sampling, elicitation, roots).
        key = _key(message.get("id"))
        generation = self._generation
        if generation is None or not generation.alive or key in self._stale:
            _log.debug("dropping an answer meant for a server that has gone")
            return None
        generation.server_requests.discard(key)
        return line

    async def _to_current(self, line: bytes) -> None:
        """Forward to the server as it is now (dropped when it is not connected)."""
        generation = self._generation
        if generation is None or not generation.alive:
            _log.debug("dropping a message: the server is not connected")
            return
        await self._to_server(generation, line)

    def _client_notification(self, message: dict[str, Any], method: str, line: bytes) -> bytes:
        if method == "notifications/cancelled":
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            pending = self._pending.pop(_key(request_id), None)
            if pending is not None:
                # The server may still answer (then the answer is passed on, the client
                # ignores it); the call leaves the guard's flight without an outcome.
                self._settle(pending)
                if pending.call is not None:
                    self.calls.abandon(pending.call)
                if pending.batch is not None:
                    self._spawn(self._batch_done(pending.batch))
        elif method == "notifications/initialized":
            self._initialized_sent = True
        return line

    async def _client_request(
        self, message: dict[str, Any], method: str, line: bytes, batch: _Batch | None
    ) -> bytes | None:
        """Returns the request's bytes to forward, or None when the proxy answered it."""
        request_id = message["id"]
        if method == "initialize":
            self._init = message
        call: ToolCall | None = None
        if method == "tools/call":
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                if not self._recorded.is_set():  # decide as if the calls ran one by one
                    await self._recorded.wait()
                decision, call, changed = await self.calls.before(str(request_id), params)
                if decision.action in ("block", "stop"):
                    result = (
                        blocked_call_result(decision)
                        if decision.action == "block"
                        else stopped_call_result(decision)
                    )
                    await self._answer(request_id, result=result, batch=batch)
                    return None
                if changed:
                    line = _encode(message)
        try:
            generation = await self._live()
        except DownstreamUnavailable as exc:
            await self._fail_request(request_id, method, call, str(exc), batch)
            return None
        timeout = self.spec.connect_timeout if method == "initialize" else self.options.call_timeout
        pending = _Pending(request_id, method, generation, timeout, call=call, batch=batch)
        if timeout is not None:
            pending.deadline = self._loop.time() + timeout
            self._watch(pending.deadline)
        self._pending[_key(request_id)] = pending
        if batch is not None:
            batch.waiting += 1
        return line

    async def _to_server(self, generation: _Generation, line: bytes) -> None:
        try:
            await generation.link.send(line)
        except DownstreamUnavailable as exc:
            _log.debug("could not write to the server: %s", exc)

    # ------------------------------------------------------------ server -> client
    async def _server_ended(self, generation: _Generation, exc: BaseException | None) -> None:
        """The server's messages ended: ``exc`` when a transport failure ended them."""
        link = generation.link
        if exc is None:
            try:
                reason = await link.end_reason()
            except Exception as failure:
                exc = failure
        if exc is not None:  # this connection is over
            reason = f"the connection failed ({type(exc).__name__}: {exc})"
        await self._lost(generation, reason, link.diagnostics())

    async def _from_server(self, generation: _Generation, line: bytes) -> None:
        """Route one server message (or one batch of them)."""
        message = _parse(line)
        if isinstance(message, list):
            await self._server_batch(generation, line, message)
            return
        if not isinstance(message, dict):
            # Privacy: the line may hold tool output, so only the fact is logged.
            _log.error(
                "downstream MCP server %s sent a message that is not valid JSON-RPC",
                self.spec.describe(),
            )
            return
        later: list[_Recording] = []
        out, batch = await self._from_server_message(generation, message, line, later)
        if batch is not None and batch.split and out is not None:
            batch.answers.append(out)
        elif out is not None:
            await self.out.send(out)
        if batch is not None:  # the rest of the batch may be complete now
            await self._batch_done(batch)
        await self._record(later)

    async def _server_batch(self, generation: _Generation, line: bytes, parsed: list[Any]) -> None:
        """An array from the server: each item routed; the proxy's own answers joined in."""
        later: list[_Recording] = []
        out: list[bytes] = []
        batches: list[_Batch] = []
        changed = False
        for item, raw in _items(line, parsed):
            kept: bytes | None = raw
            if isinstance(item, dict):
                kept, batch = await self._from_server_message(generation, item, raw, later)
                if batch is not None and batch not in batches:
                    batches.append(batch)
            changed = changed or kept is not raw
            if kept is not None:
                out.append(kept)
        for batch in batches:
            if batch.sealed and not batch.waiting and batch.answers:
                out.extend(batch.answers)
                batch.answers = []
                changed = True
        if not changed:
            await self.out.send(line)
        elif out:
            await self.out.send(_array(out))
        await self._record(later)

    async def _from_server_message(
        self,
        generation: _Generation,
        message: dict[str, Any],
        line: bytes,
        later: list[_Recording],
    ) -> tuple[bytes | None, _Batch | None]:
        """One server message: the bytes for the client (None: nothing) and its batch."""
        if "method" in message:  # a request or notification of the server: pass it on
            if "id" in message:
                key = _key(message["id"])
                generation.server_requests.add(key)
                self._stale.pop(key, None)  # a restarted server numbers its requests anew
            return line, None
        key = _key(message.get("id"))
        own = self._own.pop(key, None)
        if own is not None:
            if not own[1].done():
                own[1].set_result(message)
            return None, None
        pending = self._pending.pop(key, None)
        if pending is None:
            if key in self._abandoned:
                del self._abandoned[key]
                _log.debug("dropping a late answer to a request that timed out")
                return None, None
            return line, None  # e.g. the answer to a request the client cancelled
        self._settle(pending)
        if pending.batch is not None:
            self._answers_batches = True
        if pending.method == "initialize" and "result" in message:
            self._ready = True
        if pending.method == "tools/list" and "result" in message:
            self.calls.learn_tools(message["result"])
        if pending.call is not None:
            line = await self._finish_call(pending.call, message, line, later)
        return line, pending.batch

    async def _finish_call(
        self, call: ToolCall, message: dict[str, Any], line: bytes, later: list[_Recording]
    ) -> bytes:
        """The bytes for the client; they change only if the model must be told more.

        Why ``later``: when no note can come of it, the outcome is recorded after the answer is
        on its way, so the guard's bookkeeping adds nothing to the call's latency.
        """
        after = self.calls.after
        if "result" not in message:
            error = message.get("error")
            text = error.get("message") if isinstance(error, dict) else None
            later.append(partial(after, call, error=text if isinstance(text, str) else "error"))
            return line  # a JSON-RPC error passes through unchanged
        result = message["result"]
        if call.task:
            # A task-augmented call answers with the task, not the tool's result: recorded as
            # it is (each task is new, so it never looks like a repeat) and passed through.
            later.append(partial(after, call, result=result))
            return line
        problem = result_problem(result)
        if problem is not None:
            text = f"the MCP server {self.spec.describe()!r} sent a malformed answer ({problem})"
            _log.error("%s", text)
            later.append(partial(after, call, error=text))
            return _encode(
                _response(message.get("id"), text_result(_PROXY_PREFIX + text, is_error=True))
            )
        value, error, failed = outcome_of(result)
        if not self.calls.may_annotate(call):
            later.append(partial(after, call, result=value, error=error, failed=failed))
            return line
        notes = await after(call, result=value, error=error, failed=failed)
        if not notes:
            return line
        structured = self.calls.structured_note_allowed(call.name)
        return _encode({**message, "result": with_notes(result, notes, structured=structured)})

    async def _record(self, later: list[_Recording]) -> None:
        """Record outcomes whose answers have gone out; the next ``tools/call`` waits for it."""
        if not later:
            return
        self._recording += 1
        self._recorded.clear()
        try:
            for recording in later:
                await recording()
        finally:
            self._recording -= 1
            if not self._recording:
                self._recorded.set()

    # ------------------------------------------------------------ failures
    async def _lost(self, generation: _Generation, reason: str, diagnostics: str) -> None:
        """The server's connection ended: fail what waited on it, remember why."""
        generation.alive = False
        for key in generation.server_requests:
            _remember(self._stale, key)
        for key, (owner, future) in list(self._own.items()):
            if owner is generation:
                del self._own[key]
                if not future.done():
                    future.set_exception(DownstreamUnavailable(reason))
        if self.closing:
            return
        await generation.link.close()
        if generation is not self._generation:
            return
        self._failure = reason
        _log.error("downstream MCP server %s: %s%s", self.spec.describe(), reason, diagnostics)
        if not self._ready:
            _log.error(
                "%scould not start the MCP server %r: %s%s",
                _PROXY_PREFIX,
                self.spec.describe(),
                reason,
                diagnostics,
            )
        for key, pending in list(self._pending.items()):
            if pending.generation is generation:
                del self._pending[key]
                self._settle(pending)
                await self._fail_request(
                    pending.request_id, pending.method, pending.call, "", pending.batch
                )
        if not self._ready:
            self.finish(1)

    def _watch(self, deadline: float) -> None:
        """Have :meth:`_expire` run at ``deadline`` at the latest.

        Why one timer for all requests, not one each: almost every request is answered in
        time, and making and cancelling a timer for each was about 2% of the proxy's work per
        call (instructions counted).
        """
        watchdog = self._watchdog
        if watchdog is not None:
            if watchdog.when() <= deadline:
                return
            watchdog.cancel()
        self._watchdog = self._loop.call_at(deadline, self._expire)

    def _expire(self) -> None:
        """Time out each request past its deadline; watch for the next deadline."""
        self._watchdog = None
        now = self._loop.time() + _CLOCK_RESOLUTION  # what the loop counts as due
        upcoming: float | None = None
        for pending in list(self._pending.values()):
            deadline, timeout = pending.deadline, pending.timeout
            if deadline is None or timeout is None:
                continue
            if deadline <= now:
                pending.deadline = None
                self._spawn(self._timed_out(pending, timeout))
            elif upcoming is None or deadline < upcoming:
                upcoming = deadline
        if upcoming is not None:
            self._watch(upcoming)

    async def _timed_out(self, pending: _Pending, timeout: float) -> None:
        key = _key(pending.request_id)
        if self._pending.get(key) is not pending:
            return
        del self._pending[key]
        self._settle(pending)
        _remember(self._abandoned, key)
        if pending.method == "initialize" and not self._ready:
            text = (
                f"could not start the MCP server {self.spec.describe()!r}: "
                f"no answer to 'initialize' within {timeout:g} s"
            )
            _log.error("%s%s", _PROXY_PREFIX, text)
            await self._answer_error(pending.request_id, _PROXY_PREFIX + text, pending.batch)
            self.finish(1)
            return
        text = f"the MCP server {self.spec.describe()!r} did not answer within {timeout:g} s"
        await self._fail_request(
            pending.request_id, pending.method, pending.call, text, pending.batch
        )
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {
                "requestId": pending.request_id,
                "reason": "abandoned by loopwarden mcp-proxy",
            },
        }
        if pending.generation.alive:
            await self._to_server(pending.generation, _encode(cancel))

    async def _fail_request(
        self,
        request_id: Any,
        method: str,
        call: ToolCall | None,
        reason: str,
        batch: _Batch | None = None,
    ) -> None:
        """Answer a request the server cannot: ``isError`` for a call, else a JSON-RPC error."""
        text = _PROXY_PREFIX + (reason or self._gone())
        if call is not None:
            await self.calls.after(call, error=text)
            await self._answer(request_id, result=text_result(text, is_error=True), batch=batch)
        else:
            await self._answer_error(request_id, text, batch)

    def _settle(self, pending: _Pending) -> None:
        """The request waits no more (answered, failed, timed out or cancelled)."""
        pending.deadline = None
        if pending.batch is not None:
            pending.batch.waiting -= 1

    async def _answer(
        self, request_id: Any, *, result: dict[str, Any], batch: _Batch | None = None
    ) -> None:
        await self._reply(_encode(_response(request_id, result)), batch)

    async def _answer_error(self, request_id: Any, text: str, batch: _Batch | None = None) -> None:
        error = {"code": _INTERNAL_ERROR, "message": text}
        await self._reply(_encode({"jsonrpc": "2.0", "id": request_id, "error": error}), batch)

    async def _reply(self, answer: bytes, batch: _Batch | None) -> None:
        """Send the proxy's own answer, or keep it for its batch's array."""
        if batch is None:
            await self.out.send(answer)
            return
        batch.answers.append(answer)
        await self._batch_done(batch)

    async def _batch_done(self, batch: _Batch) -> None:
        """Once no request of the batch waits on the server, its kept answers go out."""
        if batch.sealed and not batch.waiting and batch.answers:
            answers, batch.answers = batch.answers, []
            await self.out.send(_array(answers))

    # ------------------------------------------------------------ restarts
    async def _live(self) -> _Generation:
        """The current connection, or a fresh one when the server has gone."""
        generation = self._generation
        if generation is not None and generation.alive:
            return generation
        async with self._restart_lock:
            generation = self._generation
            if generation is not None and generation.alive:
                return generation
            failed_at = self._failed_restart_at
            if failed_at is not None and self._loop.time() - failed_at < RETRY_AFTER:
                raise DownstreamUnavailable(self._gone())
            crash = (self._failure or "").split("; restarting it failed: ")[0]
            try:
                generation = await self._restart()
            except DownstreamUnavailable as exc:
                self._failed_restart_at = self._loop.time()
                self._failure = f"{crash}; restarting it failed: {exc}"
                _log.error("%s", self._failure)
                raise DownstreamUnavailable(self._gone()) from None
            self._failed_restart_at = None
            self._failure = None
            _log.warning("reconnected to the MCP server %s (%s)", self.spec.describe(), crash)
            return generation

    async def _restart(self) -> _Generation:
        """Start the server again and replay the client's ``initialize`` to it."""
        generation = await self._attach(await open_link(self.spec))
        if self._init is None:
            return generation
        request_id = f"loopwarden-mcp-proxy-{uuid.uuid4().hex}"
        future: asyncio.Future[dict[str, Any]] = self._loop.create_future()
        self._own[_key(request_id)] = (generation, future)
        await self._to_server(generation, _encode({**self._init, "id": request_id}))
        timeout = self.spec.connect_timeout
        name = self.spec.describe()
        try:
            answer = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            await generation.link.close()
            raise DownstreamUnavailable(
                f"could not start the MCP server {name!r}: "
                f"no answer to 'initialize' within {timeout:g} s"
            ) from None
        except DownstreamUnavailable as exc:
            raise DownstreamUnavailable(f"could not start the MCP server {name!r}: {exc}") from None
        if "result" not in answer:
            await generation.link.close()
            raise DownstreamUnavailable(
                f"could not start the MCP server {name!r}: it answered 'initialize' with an error"
            )
        if self._initialized_sent:
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await self._to_server(generation, _encode(note))
        return generation


def _response(request_id: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _remember(seen: OrderedDict[Any, None], key: Any) -> None:
    seen[key] = None
    if len(seen) > _ABANDONED_KEPT:
        seen.popitem(last=False)


# ---------------------------------------------------------------- the process
async def _open_stdio() -> tuple[LineReader, asyncio.StreamWriter | None, list[int]]:
    """Our stdin as a message reader and stdout as a writer, non-blocking where possible.

    Pipes and sockets (what MCP clients give) are watched by the event loop; anything else
    (a file, ``/dev/null``, which epoll refuses) is read by a thread and written blocking.
    Returns the fds switched to non-blocking mode, to switch back at the end: they may be
    shared with the parent.
    """
    loop = asyncio.get_running_loop()
    lines = LineReader()
    switched = [fd for fd in (0, 1) if _pollable(fd) and os.get_blocking(fd)]
    if _pollable(0):
        await loop.connect_read_pipe(lambda: LineProtocol(lines), os.fdopen(0, "rb", closefd=False))
    else:
        _spawn_file_reader(loop, lines)
    for fd in (0, 1):
        if _pollable(fd):
            widen_pipe(fd)
    writer: asyncio.StreamWriter | None = None
    if _pollable(1):
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop),
            os.fdopen(1, "wb", closefd=False),
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return lines, writer, switched


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _spawn_file_reader(loop: asyncio.AbstractEventLoop, lines: LineReader) -> None:
    import threading

    def pump() -> None:
        while chunk := os.read(0, CHUNK):
            loop.call_soon_threadsafe(lines.feed_data, chunk)
        loop.call_soon_threadsafe(lines.feed_eof)

    threading.Thread(target=pump, name="loopwarden-stdin", daemon=True).start()


async def serve(guard: LoopGuard, options: ProxyOptions) -> int:
    """Run the proxy until the client disconnects; returns the process exit code."""
    events = EventsFile(options.events_path) if options.events_path else None
    unsubscribe = guard.subscribe(events) if events else None
    relay = Relay(guard, options)
    switched: list[int] = []
    try:
        _watch_signals(relay)
        try:
            await relay.start()
        except DownstreamUnavailable as exc:
            _log.error("%s%s", _PROXY_PREFIX, exc)
            return 1
        lines, writer, switched = await _open_stdio()
        relay.out = _ClientOut(writer)
        client = relay.pump_client(lines)
        code = await relay.exit_code
        client.stop()
        await relay.shutdown()
        if writer is not None:
            writer.close()
        return code
    finally:
        await relay.calls.end_runs()
        for fd in switched:
            os.set_blocking(fd, True)
        if unsubscribe:
            unsubscribe()
        if events:
            events.close()


def _watch_signals(relay: Relay) -> None:
    """Turn SIGTERM/SIGINT/SIGHUP into an orderly shutdown (the server is stopped too)."""
    loop = asyncio.get_running_loop()
    wanted = [signal.SIGTERM, signal.SIGINT]
    if hasattr(signal, "SIGHUP"):
        wanted.append(signal.SIGHUP)

    def received(signum: int) -> None:
        _log.info("received signal %d; shutting down", signum)
        relay.finish(0)

    for signum in wanted:
        try:
            loop.add_signal_handler(signum, received, signum)
        except (NotImplementedError, RuntimeError):  # Windows: the pipe close still works
            _log.debug("signal handling is not available on this platform")
            return


def run(guard: LoopGuard, options: ProxyOptions) -> int:
    """Run :func:`serve` in a fresh event loop."""
    code = asyncio.run(serve(guard, options))
    sys.stderr.flush()
    return code

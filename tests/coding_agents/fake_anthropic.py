"""A fake Anthropic Messages API server playing a scripted model, to drive the real Claude Code.

Two layers, so the OpenAI Responses twin can share the first one:

* generic: :class:`ToolCall` / :class:`Reply` (what the scripted model answers), the
  :class:`ScriptedModel` protocol, and :class:`RecordingServer` (a ``ThreadingHTTPServer`` on
  127.0.0.1:0 in a thread that records every request body and writes server-sent events);
* Anthropic: :class:`FakeAnthropic` (``POST /v1/messages`` with SSE streaming or a plain JSON
  answer, ``/v1/messages/count_tokens``, ``HEAD /``) and helpers that read a Messages request
  (:func:`tool_results`, :func:`is_compaction_request`, :func:`last_user_text`).

The scripted model sees every request body (a ``dict``) and returns the next :class:`Reply`; it
decides from the conversation, not from a call counter, so the retries and side requests the CLI
makes cannot push it off script.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

# ---------------------------------------------------------------------------------------------
# generic: the scripted-model protocol and a recording HTTP server
# ---------------------------------------------------------------------------------------------

_ids = itertools.count(1)


def fresh_id(prefix: str) -> str:
    """A unique id with the API's prefix (``toolu_…``, ``msg_…``), unique in this process."""
    return f"{prefix}{next(_ids):024d}"


@dataclass
class ToolCall:
    """One tool call the model makes: the tool's name and its input object."""

    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: fresh_id("toolu_"))


@dataclass
class Reply:
    """The model's next message: some text and/or tool calls, and the usage it reports.

    ``input_tokens`` is what the server claims the prompt cost: a large value makes the CLI
    believe its context is full, which is how a test triggers automatic compaction.
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 100
    output_tokens: int = 10

    @property
    def stop_reason(self) -> str:
        """``tool_use`` when the reply calls a tool, else ``end_turn``."""
        return "tool_use" if self.tool_calls else "end_turn"


class ScriptedModel(Protocol):
    """Decides the model's next reply from the (parsed JSON) request body."""

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next reply for this request."""
        ...


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    body: Any  # parsed JSON, or None


class RecordingServer:
    """A threaded HTTP server on 127.0.0.1 that records requests; subclasses route them.

    Use as a context manager; ``url`` is ``http://127.0.0.1:PORT``. ``requests`` holds every
    request in arrival order (guarded by a lock: the CLI may send requests concurrently).
    """

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to hand to the CLI."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> RecordingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def record(self, method: str, path: str, body: Any) -> None:
        """Keep one request (called by the handler)."""
        with self._lock:
            self.requests.append(Recorded(method, path, body))

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        """Answer one request; subclasses override. Default: 404."""
        send_json(handler, 404, {"error": f"no route for {method} {handler.path}"})

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _dispatch(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                server.record(method, self.path, body)
                try:
                    server.handle(self, method, body)
                except Exception as exc:  # surface scripted-model bugs in the test, not as hangs
                    server.errors.append(f"{method} {self.path}: {exc!r}")
                    send_json(self, 500, {"type": "error", "error": {"message": repr(exc)}})

            def do_GET(self) -> None:
                self._dispatch("GET")

            def do_HEAD(self) -> None:
                self._dispatch("HEAD")

            def do_POST(self) -> None:
                self._dispatch("POST")

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

        return Handler


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Write one JSON response (no body for HEAD)."""
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    if handler.command != "HEAD":
        handler.wfile.write(data)


def send_sse(handler: BaseHTTPRequestHandler, events: Iterator[tuple[str, dict[str, Any]]]) -> None:
    """Write a complete server-sent-events stream of ``(event name, data)`` pairs, then close."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    handler.wfile.flush()
    handler.close_connection = True


# ---------------------------------------------------------------------------------------------
# Anthropic Messages API
# ---------------------------------------------------------------------------------------------

MODEL = "claude-sonnet-4-5-20250929"


class FakeAnthropic(RecordingServer):
    """The Anthropic Messages API in front of a :class:`ScriptedModel`.

    ``messages`` lists the bodies of the ``/v1/messages`` requests (what the model saw, in
    order); ``replies`` the replies it gave.
    """

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__()
        self.model = model
        self.replies: list[Reply] = []

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The bodies of every ``POST /v1/messages`` request, in arrival order."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"
            ]

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        """Route HEAD /, count_tokens and messages; anything else gets an empty 200."""
        path = handler.path.split("?")[0]
        if method == "POST" and path == "/v1/messages/count_tokens":
            send_json(handler, 200, {"input_tokens": 100})
        elif method == "POST" and path == "/v1/messages":
            reply = self.model.reply(body)
            with self._lock:
                self.replies.append(reply)
            if body.get("stream"):
                send_sse(handler, stream_events(reply, body.get("model", MODEL)))
            else:
                send_json(handler, 200, message_json(reply, body.get("model", MODEL)))
        else:
            send_json(handler, 200, {})


def _content(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    return blocks


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message_json(reply: Reply, model: str) -> dict[str, Any]:
    """The non-streaming ``/v1/messages`` answer."""
    return {
        "id": fresh_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def stream_events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed message, as the real API sends them."""
    start = message_json(reply, model) | {"content": [], "stop_reason": None}
    start["usage"] = _usage(reply) | {"output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            opening = block | {"input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        started = {"type": "content_block_start", "index": index, "content_block": opening}
        yield "content_block_start", started
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield "message_stop", {"type": "message_stop"}


# --- reading a Messages request ----------------------------------------------------------------


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def block_text(block: dict[str, Any]) -> str:
    """The text of a text block, or of a tool_result's content (string or list of blocks)."""
    if block.get("type") == "text":
        return str(block.get("text", ""))
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or [] if isinstance(b, dict))


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``tool_result`` block in the request's messages, oldest first."""
    return [
        block
        for message in request.get("messages", [])
        if message.get("role") == "user"
        for block in _blocks(message)
        if block.get("type") == "tool_result"
    ]


def user_texts(request: dict[str, Any]) -> list[str]:
    """The text blocks of every user message (prompts, reminders, hook context), oldest first."""
    return [
        block_text(block)
        for message in request.get("messages", [])
        if message.get("role") == "user"
        for block in _blocks(message)
        if block.get("type") == "text"
    ]


def last_user_text(request: dict[str, Any]) -> str:
    """All text of the last user message (empty if there is none)."""
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    if not users:
        return ""
    return "\n".join(block_text(b) for b in _blocks(users[-1]) if b.get("type") == "text")


def all_text(request: dict[str, Any]) -> str:
    """Every piece of text the model is shown (system, messages, tool results) as one string."""
    parts: list[str] = []
    system = request.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(str(b.get("text", "")) for b in system if isinstance(b, dict))
    for message in request.get("messages", []):
        parts.extend(block_text(b) for b in _blocks(message))
    return "\n".join(parts)


def is_compaction_request(request: dict[str, Any]) -> bool:
    """True for Claude Code's compaction call: the last user message asks for a summary."""
    text = last_user_text(request).lower()
    return "summary of the conversation" in text or "create a detailed summary" in text


# --- a ready-made scripted model ----------------------------------------------------------------


@dataclass
class RepeatCommand:
    """Calls Bash with ``commands[i]`` until it has seen ``len(commands)`` results, then answers.

    ``commands`` may be a single repeated command (a loop) or many different ones. Tool results
    are counted from the request, so a blocked call (its result is the hook's reason) counts too.
    After compaction the old results are gone from the request, so the model tracks what it has
    seen itself: ``seen`` only grows. ``input_tokens_after`` reports a large prompt once that
    many results are in, to trigger automatic compaction; the compaction request itself is
    answered with ``summary``.
    """

    commands: list[str]
    final_text: str = "done"
    input_tokens: int = 100
    compact_after: int | None = None
    compact_input_tokens: int = 99_000
    summary: str = "Summary: the user asked to run a command repeatedly; keep running it."
    seen: int = 0
    _seen_ids: set[str] = field(default_factory=set)
    compactions: int = 0

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next step of the script."""
        if is_compaction_request(request):
            self.compactions += 1
            return Reply(text=self.summary)
        if not request.get("tools"):  # a side request (title, topic…): answer briefly
            return Reply(text="ok")
        for block in tool_results(request):
            self._seen_ids.add(str(block.get("tool_use_id")))
        self.seen = max(self.seen, len(self._seen_ids))
        if self.seen >= len(self.commands):
            return Reply(text=self.final_text)
        tokens = self.input_tokens
        if self.compact_after is not None and not self.compactions:
            tokens = self.compact_input_tokens if self.seen >= self.compact_after else tokens
        call = ToolCall("Bash", {"command": self.commands[self.seen], "description": "run it"})
        return Reply(tool_calls=[call], input_tokens=tokens)

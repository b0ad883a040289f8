"""A fake OpenAI Responses API server playing a scripted model, to drive the real Codex CLI.

Two layers, like its twin ``fake_anthropic.py`` (the generic layer is the same code, so the two
can later share one module):

* generic: :class:`ToolCall` / :class:`Reply` (what the scripted model answers), the
  :class:`ScriptedModel` protocol, and :class:`RecordingServer` (a ``ThreadingHTTPServer`` on
  127.0.0.1:0 in a thread that records every request body and writes server-sent events);
* OpenAI Responses: :class:`FakeOpenAI` (``POST /v1/responses`` with SSE streaming:
  ``response.created``, ``response.output_item.added`` / ``.done`` per output item and
  ``response.completed`` with the usage Codex reads for its automatic compaction: all that
  Codex 0.171 needs) and helpers that read a Responses request (:func:`tool_outputs`,
  :func:`is_compaction_request`, :func:`input_text`).

Codex's shell tool is ``exec_command`` with ``{"cmd": ...}`` (its hooks see it as ``Bash``).
Codex compacts by sending an ordinary ``/v1/responses`` request (no tools, a "CONTEXT
CHECKPOINT COMPACTION" prompt); the model's text answer becomes the summary.
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
    """A unique id with the API's prefix (``call_…``, ``msg_…``), unique in this process."""
    return f"{prefix}{next(_ids):024d}"


@dataclass
class ToolCall:
    """One tool call the model makes: the tool's name and its input object."""

    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: fresh_id("call_"))


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
# OpenAI Responses API
# ---------------------------------------------------------------------------------------------

MODEL = "gpt-5.1-codex"


class FakeOpenAI(RecordingServer):
    """The OpenAI Responses API (``POST /v1/responses``, SSE) in front of a :class:`ScriptedModel`.

    ``base_url`` (``…/v1``) goes into Codex's ``model_providers.<id>.base_url``.
    """

    def __init__(self, model: ScriptedModel) -> None:
        super().__init__()
        self.model = model

    @property
    def base_url(self) -> str:
        """The provider base URL Codex appends ``/responses`` to."""
        return f"{self.url}/v1"

    @property
    def responses(self) -> list[dict[str, Any]]:
        """The bodies of every ``/v1/responses`` request, in order (what the model was shown)."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.path.split("?", 1)[0] == "/v1/responses" and isinstance(r.body, dict)
            ]

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        """Route ``POST /v1/responses`` to the scripted model; anything else is a 404."""
        if method == "POST" and handler.path.split("?", 1)[0] == "/v1/responses":
            reply = self.model.reply(body if isinstance(body, dict) else {})
            send_sse(handler, stream_events(reply, str((body or {}).get("model") or MODEL)))
        else:
            super().handle(handler, method, body)


def output_items(reply: Reply) -> list[dict[str, Any]]:
    """The Responses output items of a reply: an assistant message, then the function calls."""
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": fresh_id("msg_"),
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": fresh_id("fc_"),
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.input),
                "status": "completed",
            }
        )
    return items


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def stream_events(reply: Reply, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed Responses answer."""
    response = {
        "id": fresh_id("resp_"),
        "object": "response",
        "model": model,
        "status": "in_progress",
        "output": [],
    }
    yield "response.created", {"type": "response.created", "response": response}
    items = output_items(reply)
    for index, item in enumerate(items):
        for kind in ("response.output_item.added", "response.output_item.done"):
            yield kind, {"type": kind, "output_index": index, "item": item}
    done = {**response, "status": "completed", "output": items, "usage": _usage(reply)}
    yield "response.completed", {"type": "response.completed", "response": done}


# --- reading a Responses request ----------------------------------------------------------------


def _items(request: dict[str, Any]) -> list[dict[str, Any]]:
    items = request.get("input")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def content_text(content: Any) -> str:
    """The text of a message ``content`` or a call ``output`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def tool_outputs(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``function_call_output`` items of a request, oldest first."""
    return [i for i in _items(request) if i.get("type") == "function_call_output"]


def output_text(item: dict[str, Any]) -> str:
    """The text the model was given as a call's result."""
    return content_text(item.get("output"))


def messages(request: dict[str, Any], role: str) -> list[str]:
    """The texts of the request's messages with this role (``user``, ``developer``…)."""
    return [
        content_text(i.get("content"))
        for i in _items(request)
        if i.get("type") == "message" and i.get("role") == role
    ]


def input_text(request: dict[str, Any]) -> str:
    """Everything in the request's ``input`` as one string (for "did the model see X")."""
    return json.dumps(_items(request))


def is_compaction_request(request: dict[str, Any]) -> bool:
    """True for Codex's compaction call (it then wants the summary as plain text).

    Codex 0.171 marks it ``"request_kind":"compaction"`` in the turn metadata it sends in
    ``client_metadata``; the prompt check covers versions without that field.
    """
    metadata = request.get("client_metadata")
    turn = metadata.get("x-codex-turn-metadata") if isinstance(metadata, dict) else None
    if isinstance(turn, str) and '"request_kind":"compaction"' in turn:
        return True
    users = messages(request, "user")
    return bool(users) and "CONTEXT CHECKPOINT COMPACTION" in users[-1]


# --- a ready-made scripted model ----------------------------------------------------------------


def shell(command: str) -> ToolCall:
    """A call of Codex's shell tool."""
    return ToolCall("exec_command", {"cmd": command})


@dataclass
class RepeatCommand:
    """Runs ``commands[i]`` in Codex's shell until it has seen ``len(commands)`` results.

    ``commands`` may be a single repeated command (a loop) or many different ones. Results are
    counted from the request, so a blocked call (its result is the hook's reason) counts too.
    After compaction the old results are gone from the request, so the model tracks what it
    has seen itself: ``seen`` only grows. ``compact_after`` reports ``compact_input_tokens``
    once that many results are in (once: Codex would compact again and again otherwise); the
    compaction request itself is answered with ``summary``.
    """

    commands: list[str]
    final_text: str = "done"
    input_tokens: int = 1000
    compact_after: int | None = None
    compact_input_tokens: int = 60_000
    summary: str = "Summary: the user asked to run a command repeatedly; keep running it."
    seen: int = 0
    _seen_ids: set[str] = field(default_factory=set)
    compactions: int = 0
    _reported_full: bool = False

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next step of the script."""
        # Count first: the compaction request carries the last result before the summary.
        for item in tool_outputs(request):
            self._seen_ids.add(str(item.get("call_id")))
        self.seen = max(self.seen, len(self._seen_ids))
        if is_compaction_request(request):
            self.compactions += 1
            return Reply(text=self.summary)
        if self.seen >= len(self.commands):
            return Reply(text=self.final_text)
        tokens = self.input_tokens
        full = self.compact_after is not None and self.seen >= self.compact_after
        if full and not self._reported_full:
            self._reported_full = True
            tokens = self.compact_input_tokens
        return Reply(tool_calls=[shell(self.commands[self.seen])], input_tokens=tokens)

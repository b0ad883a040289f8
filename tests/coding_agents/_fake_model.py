"""The generic layer of the fake model servers that drive the real coding CLIs offline.

``fake_anthropic.py`` (Claude Code), ``fake_openai.py`` (Codex) and ``fake_gemini.py`` (Gemini
CLI) put one API each on top of this module:

* :class:`ToolCall` / :class:`Reply` (what a scripted model answers) and the
  :class:`ScriptedModel` protocol (Anthropic and OpenAI; Gemini's model answers in parts);
* :class:`RecordingServer`: a ``ThreadingHTTPServer`` on 127.0.0.1:0 in a thread that records
  every request body and hands the request to the subclass's :meth:`RecordingServer.handle`;
* :func:`send_json` and :func:`send_sse`, which write the answers.

The scripted model sees every request body (a ``dict``) and returns the next :class:`Reply`; it
decides from the conversation, not from a call counter, so the retries and side requests the CLI
makes cannot push it off script.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TypeVar

_ids = itertools.count(1)


def fresh_id(prefix: str) -> str:
    """A unique id with the API's prefix (``toolu_…``, ``call_…``, ``msg_…``), unique in this
    process."""
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
class RepeatScript:
    """What the APIs' ``RepeatCommand`` models share: run ``commands[i]`` until ``len(commands)``
    results came back, then answer ``final_text``.

    ``commands`` may be a single repeated command (a loop) or many different ones. Results are
    counted from the request, so a blocked call (its result is the hook's reason) counts too.
    After compaction the old results are gone from the request, so the model tracks what it has
    seen itself (:meth:`count`): ``seen`` only grows. ``compact_after`` reports
    ``compact_input_tokens`` once that many results are in, to trigger automatic compaction; the
    compaction request itself is answered with ``summary``.
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

    def count(self, result_ids: Iterable[str]) -> int:
        """Note the call ids of the results in a request; how many results were seen so far."""
        self._seen_ids.update(result_ids)
        self.seen = max(self.seen, len(self._seen_ids))
        return self.seen


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    body: Any  # parsed JSON, or None


_Server = TypeVar("_Server", bound="RecordingServer")


class RecordingServer:
    """A threaded HTTP server on 127.0.0.1 that records requests; subclasses route them.

    Use as a context manager; ``url`` is ``http://127.0.0.1:PORT``. ``requests`` holds every
    request in arrival order (guarded by a lock: the CLI may send requests concurrently);
    ``errors`` what the server could not answer (a test asserts it stays empty).
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

    def __enter__(self: _Server) -> _Server:
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

    def bodies(self, path: str, method: str = "POST") -> list[dict[str, Any]]:
        """The JSON object bodies of the requests to ``path`` (query ignored), in order."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if r.method == method
                and r.path.split("?", 1)[0] == path
                and isinstance(r.body, dict)
            ]

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
                    error = {"code": 500, "message": repr(exc)}  # read by every API's client
                    send_json(self, 500, {"type": "error", "error": error})

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


def send_sse(
    handler: BaseHTTPRequestHandler, events: Iterator[tuple[str | None, dict[str, Any]]]
) -> None:
    """Write a complete server-sent-events stream of ``(event name, data)`` pairs, then close.

    A ``None`` name writes a bare ``data:`` event (the Gemini API names none).
    """
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for name, data in events:
        line = "" if name is None else f"event: {name}\n"
        handler.wfile.write(f"{line}data: {json.dumps(data)}\n\n".encode())
    handler.wfile.flush()
    handler.close_connection = True

"""OTLP JSON as the OpenTelemetry collector's file exporter writes it, from real SDK spans.

The spans are encoded by OpenTelemetry's own OTLP encoder (the protobuf message an OTLP
exporter sends); its JSON form differs from protobuf's default JSON mapping only in that trace
and span ids are hex, as the OTLP/JSON specification says.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import ReadableSpan

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """One ``{"resourceSpans": [...]}`` export object of ``spans``."""
    export: dict[str, Any] = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    _hex_ids(export)
    return export


def write_otlp_file(path: Path, batches: Sequence[Sequence[ReadableSpan]]) -> Path:
    """The collector's file exporter output: one export object per line, one line per batch."""
    path.write_text("".join(json.dumps(otlp_json(batch)) + "\n" for batch in batches))
    return path


def _hex_ids(node: Any) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)


_HOOK_EVENTS = Path(__file__).parent / "data" / "coding_agents" / "claude-code" / "hook-events"


def claude_code_loop(
    env: dict[str, str], calls: int = 5, python: Sequence[str] = (), session: str = "s1"
) -> list[subprocess.CompletedProcess[str]]:
    """Real ``loopwarden hook claude-code`` processes for one failing command run ``calls`` times.

    Each call is a PreToolUse and a PostToolUseFailure event (captured payloads), one process
    each; ``python`` are interpreter options (``-X importtime``).
    """
    done = []
    for n in range(1, calls + 1):
        for name in ("PreToolUse", "PostToolUseFailure"):
            event = json.loads((_HOOK_EVENTS / f"{name}.json").read_text())
            event.update(session_id=session, prompt_id="p1", tool_use_id=f"toolu_{n}")
            event.update(tool_input={"command": "npm test"}, error="Exit code 1")
            command = [sys.executable, *python, "-m", "loopwarden", "hook", "claude-code"]
            done.append(
                subprocess.run(
                    command,
                    input=json.dumps(event),
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=60,
                    check=True,
                )
            )
    return done


class OtlpReceiver:
    """A real OTLP/HTTP trace receiver on 127.0.0.1: each POST to ``/v1/traces`` is decoded as
    the protobuf ``ExportTraceServiceRequest`` OTLP exporters send, and kept.

    ``endpoint`` is what ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes (the exporter adds
    ``/v1/traces``). Used as a context manager, it serves on a thread of its own.
    """

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver._lock:
                    receiver.requests.append(request)
                    receiver.raw.append(body)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[tuple[dict[str, Any], Any]]:
        """Every span received so far, with its resource's attributes."""
        with self._lock:
            requests = list(self.requests)
        return [
            (_attributes(resource.resource.attributes), span)
            for request in requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def loop_events(self, expected: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The attributes of the ``loopwarden.loop`` span events received, in time order, once
        ``expected`` have arrived (or the time is up)."""
        deadline = time.monotonic() + timeout
        while True:
            found = sorted(
                (event.time_unix_nano, _attributes(event.attributes))
                for _, span in self.spans()
                for event in span.events
                if event.name == "loopwarden.loop"
            )
            if len(found) >= expected or time.monotonic() > deadline:
                return [attrs for _, attrs in found]
            time.sleep(0.1)


def _attributes(pairs: Any) -> dict[str, Any]:
    """OTLP ``KeyValue`` attributes as a dict (string and integer values)."""
    found: dict[str, Any] = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        found[pair.key] = getattr(pair.value, kind) if kind is not None else None
    return found

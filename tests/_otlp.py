"""OTLP JSON as the OpenTelemetry collector's file exporter writes it, from real SDK spans.

The spans are encoded by OpenTelemetry's own OTLP encoder (the protobuf message an OTLP
exporter sends); its JSON form differs from protobuf's default JSON mapping only in that trace
and span ids are hex, as the OTLP/JSON specification says.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
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
    env: dict[str, str], calls: int = 5, python: Sequence[str] = ()
) -> list[subprocess.CompletedProcess[str]]:
    """Real ``loopwarden hook claude-code`` processes for one failing command run ``calls`` times.

    Each call is a PreToolUse and a PostToolUseFailure event (captured payloads), one process
    each; ``python`` are interpreter options (``-X importtime``).
    """
    done = []
    for n in range(1, calls + 1):
        for name in ("PreToolUse", "PostToolUseFailure"):
            event = json.loads((_HOOK_EVENTS / f"{name}.json").read_text())
            event.update(session_id="s1", prompt_id="p1", tool_use_id=f"toolu_{n}")
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

"""A fake Gemini API server that plays a scripted model, for driving the real Gemini CLI offline.

Gemini CLI 0.61 sends its model traffic to ``$GOOGLE_GEMINI_BASE_URL`` (auth type "gateway"
when that variable is set) through ``@google/genai``: ``POST
/v1beta/models/<model>:streamGenerateContent?alt=sse`` for the agent loop, plus
``:generateContent`` and ``:countTokens`` for utility calls. This server answers those on
127.0.0.1 only (the recording server of ``_fake_model.py``), records every request body, and
lets a small Python object (the scripted model) decide each answer from the request, so a test
can reproduce a tool-call loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from _fake_model import RecordingServer, send_json, send_sse

Json = dict[str, Any]
Part = dict[str, Any]


def function_call(name: str, args: Json) -> Part:
    """A model part that asks the CLI to run tool ``name`` with ``args``."""
    return {"functionCall": {"name": name, "args": args}}


def text(value: str) -> Part:
    """A plain text model part."""
    return {"text": value}


def is_agent_request(body: Json) -> bool:
    """True for the CLI's main agent-loop request (it offers tools), not a utility call."""
    return any("functionDeclarations" in tool for tool in body.get("tools") or [])


def turn_contents(body: Json) -> list[Json]:
    """The contents of the current user turn: everything after the last user text message."""
    contents: list[Json] = body.get("contents") or []
    start = 0
    for index, content in enumerate(contents):
        parts = content.get("parts") or []
        is_text = any("text" in p for p in parts)
        is_result = any("functionResponse" in p for p in parts)
        if content.get("role") == "user" and is_text and not is_result:
            start = index
    return contents[start:]


def function_responses(body: Json) -> list[Json]:
    """Every ``functionResponse`` of the current turn, oldest first."""
    return [
        part["functionResponse"]
        for content in turn_contents(body)
        for part in content.get("parts") or []
        if "functionResponse" in part
    ]


def all_function_responses(body: Json) -> list[Json]:
    """Every ``functionResponse`` in the whole request history, oldest first."""
    return [
        part["functionResponse"]
        for content in body.get("contents") or []
        for part in content.get("parts") or []
        if "functionResponse" in part
    ]


class ScriptedModel:
    """Decides the model's next parts from the request. Subclasses override :meth:`next_parts`."""

    def next_parts(self, body: Json) -> list[Part]:
        """The parts of the model's answer to an agent-loop request."""
        return [text("done")]


@dataclass
class RepeatCommand(ScriptedModel):
    """Calls ``run_shell_command`` with one command until ``times`` results came back.

    ``batch`` calls go out in each model response (the CLI then runs their hooks concurrently).
    """

    command: str
    times: int
    final_text: str = "I give up."
    batch: int = 1

    def next_parts(self, body: Json) -> list[Part]:
        """The next batch of identical shell calls, or a text answer once ``times`` were seen."""
        left = self.times - len(function_responses(body))
        if left <= 0:
            return [text(self.final_text)]
        call = function_call("run_shell_command", {"command": self.command})
        return [call] * min(self.batch, left)


@dataclass
class ToolCalls(ScriptedModel):
    """Makes each ``(tool, args)`` call of a list once, in order, ``batch`` per response."""

    calls: list[tuple[str, Json]]
    final_text: str = "All calls made."
    batch: int = 1

    def next_parts(self, body: Json) -> list[Part]:
        """The next calls of the list, or the final text when all results came back."""
        seen = len(function_responses(body))
        if seen >= len(self.calls):
            return [text(self.final_text)]
        return [function_call(name, args) for name, args in self.calls[seen : seen + self.batch]]


def shell_commands(commands: list[str], batch: int = 1) -> ToolCalls:
    """A model that runs each shell command of ``commands`` once, in order."""
    return ToolCalls([("run_shell_command", {"command": c}) for c in commands], batch=batch)


class FakeGemini(RecordingServer):
    """The Gemini API in front of a :class:`ScriptedModel`, on 127.0.0.1; a context manager.

    ``prompt_tokens`` is the promptTokenCount it reports: a number, or a function of the request
    (a test reports a large count to make the CLI compress its history, which it does above
    half the window).
    """

    def __init__(
        self, model: ScriptedModel, prompt_tokens: int | Callable[[Json], int] = 1000
    ) -> None:
        super().__init__()
        self.model = model
        self.prompt_tokens = prompt_tokens

    @property
    def base_url(self) -> str:
        """The URL to put in ``GOOGLE_GEMINI_BASE_URL``."""
        return self.url

    def agent_requests(self) -> list[Json]:
        """Bodies of the agent-loop requests (the ones that offer tools), in order."""
        with self._lock:
            return [
                r.body
                for r in self.requests
                if isinstance(r.body, dict) and is_agent_request(r.body)
            ]

    def handle(self, handler: BaseHTTPRequestHandler, method: str, body: Any) -> None:
        """Route countTokens, streamGenerateContent and generateContent; any other request is
        an error the test sees (``errors``) and a 404."""
        request: Json = body if isinstance(body, dict) else {}
        if method == "POST" and ":countTokens" in handler.path:
            send_json(handler, 200, {"totalTokens": self.tokens_for(request)})
        elif method == "POST" and ":streamGenerateContent" in handler.path:
            send_sse(handler, iter([(None, self.answer(request))]))
        elif method == "POST" and ":generateContent" in handler.path:
            send_json(handler, 200, self.answer(request))
        else:
            self.errors.append(f"unexpected request {method} {handler.path}")
            send_json(handler, 404, {"error": {"code": 404, "message": "unknown"}})

    def tokens_for(self, body: Json) -> int:
        """The promptTokenCount to report for ``body``."""
        if callable(self.prompt_tokens):
            return self.prompt_tokens(body)
        return self.prompt_tokens

    def answer(self, body: Json) -> Json:
        """A GenerateContentResponse for ``body``: the scripted model's parts for agent calls."""
        if is_agent_request(body):
            parts = self.model.next_parts(body)
        else:
            parts = [text(_utility_answer(body))]
        tokens = self.tokens_for(body)
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": tokens,
                "candidatesTokenCount": 10,
                "totalTokenCount": tokens + 10,
            },
            "modelVersion": "fake-gemini",
        }


def _utility_answer(body: Json) -> str:
    """Text for a non-agent call: valid JSON when a JSON answer was asked for."""
    config = body.get("generationConfig") or {}
    if config.get("responseMimeType") == "application/json":
        return json.dumps(_json_for_schema(config.get("responseJsonSchema") or {}))
    return "summary"


def _json_for_schema(schema: Json) -> Any:
    """A minimal value that satisfies a JSON schema (objects, strings, numbers, booleans)."""
    kind = str(schema.get("type", "")).lower()  # the CLI sends "OBJECT", "STRING", ...
    if kind == "object":
        props: Json = schema.get("properties") or {}
        return {name: _json_for_schema(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return False
    if "enum" in schema:
        return schema["enum"][0]
    return ""

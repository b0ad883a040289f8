"""A fake OpenAI Responses API server playing a scripted model, to drive the real Codex CLI.

:class:`FakeOpenAI` (``POST /v1/responses`` with SSE streaming: ``response.created``,
``response.output_item.added`` / ``.done`` per output item and ``response.completed`` with the
usage Codex reads for its automatic compaction: all that Codex 0.171 needs) on top of the
generic layer of ``_fake_model.py`` (recording server on 127.0.0.1, SSE, the
:class:`ScriptedModel` protocol), helpers that read a Responses request (:func:`tool_outputs`,
:func:`is_compaction_request`, :func:`input_text`) and a ready-made scripted model
(:class:`RepeatCommand`).

Codex's shell tool is ``exec_command`` with ``{"cmd": ...}`` (its hooks see it as ``Bash``).
Codex compacts by sending an ordinary ``/v1/responses`` request (no tools, a "CONTEXT
CHECKPOINT COMPACTION" prompt); the model's text answer becomes the summary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from _fake_model import (
    RecordingServer,
    RepeatScript,
    Reply,
    ScriptedModel,
    ToolCall,
    fresh_id,
    send_sse,
)

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
        return self.bodies("/v1/responses")

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
class RepeatCommand(RepeatScript):
    """Runs ``commands[i]`` in Codex's shell until it has seen ``len(commands)`` results (see
    :class:`RepeatScript`). It reports the full context once: Codex would compact again and
    again otherwise."""

    input_tokens: int = 1000
    compact_input_tokens: int = 60_000
    _reported_full: bool = False

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next step of the script."""
        # Count first: the compaction request carries the last result before the summary.
        seen = self.count(str(item.get("call_id")) for item in tool_outputs(request))
        if is_compaction_request(request):
            self.compactions += 1
            return Reply(text=self.summary)
        if seen >= len(self.commands):
            return Reply(text=self.final_text)
        tokens = self.input_tokens
        full = self.compact_after is not None and seen >= self.compact_after
        if full and not self._reported_full:
            self._reported_full = True
            tokens = self.compact_input_tokens
        return Reply(tool_calls=[shell(self.commands[seen])], input_tokens=tokens)


@dataclass
class ParallelCalls:
    """Runs ``command`` ``times`` times in one response (parallel calls), then, once every
    output is in, answers ``final_text``."""

    command: str
    times: int
    final_text: str = "done"

    def reply(self, request: dict[str, Any]) -> Reply:
        """All the calls at once, then the final text."""
        if is_compaction_request(request):
            return Reply(text="summary")
        if tool_outputs(request):
            return Reply(text=self.final_text)
        return Reply(tool_calls=[shell(self.command) for _ in range(self.times)])

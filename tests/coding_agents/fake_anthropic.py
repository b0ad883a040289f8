"""A fake Anthropic Messages API server playing a scripted model, to drive the real Claude Code.

:class:`FakeAnthropic` (``POST /v1/messages`` with SSE streaming or a plain JSON answer,
``/v1/messages/count_tokens``, ``HEAD /``) on top of the generic layer of ``_fake_model.py``
(recording server on 127.0.0.1, SSE, the :class:`ScriptedModel` protocol), helpers that read a
Messages request (:func:`tool_results`, :func:`is_compaction_request`, :func:`last_user_text`)
and a ready-made scripted model (:class:`RepeatCommand`).

The scripted model sees every request body (a ``dict``) and returns the next :class:`Reply`; it
decides from the conversation, not from a call counter, so the retries and side requests the CLI
makes cannot push it off script.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import _fake_model
from _fake_model import (
    RecordingServer,
    RepeatScript,
    Reply,
    ScriptedModel,
    fresh_id,
    send_json,
    send_sse,
)

MODEL = "claude-sonnet-4-5-20250929"


@dataclass
class ToolCall(_fake_model.ToolCall):
    """One tool call the model makes; its id has the Anthropic prefix (``toolu_…``)."""

    id: str = field(default_factory=lambda: fresh_id("toolu_"))


def stop_reason(reply: Reply) -> str:
    """``tool_use`` when the reply calls a tool, else ``end_turn``."""
    return "tool_use" if reply.tool_calls else "end_turn"


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
        return self.bodies("/v1/messages")

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
        "stop_reason": stop_reason(reply),
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
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": None},
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
class RepeatCommand(RepeatScript):
    """Calls Bash with ``commands[i]`` until it has seen ``len(commands)`` results, then answers
    (see :class:`RepeatScript`); a request offering no tools is a side request (title...)."""

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next step of the script."""
        if is_compaction_request(request):
            self.compactions += 1
            return Reply(text=self.summary)
        if not request.get("tools"):  # a side request (title, topic…): answer briefly
            return Reply(text="ok")
        seen = self.count(str(block.get("tool_use_id")) for block in tool_results(request))
        if seen >= len(self.commands):
            return Reply(text=self.final_text)
        tokens = self.input_tokens
        if self.compact_after is not None and not self.compactions:
            tokens = self.compact_input_tokens if seen >= self.compact_after else tokens
        call = ToolCall("Bash", {"command": self.commands[seen], "description": "run it"})
        return Reply(tool_calls=[call], input_tokens=tokens)


@dataclass
class ParallelCalls:
    """Calls ``tool`` with ``input`` ``times`` times in one message (parallel calls), then, once
    every result is in, answers ``final_text``."""

    tool: str
    input: dict[str, Any]
    times: int
    final_text: str = "done"

    def reply(self, request: dict[str, Any]) -> Reply:
        """All the calls at once, then the final text."""
        if not request.get("tools"):
            return Reply(text="ok")
        if tool_results(request):
            return Reply(text=self.final_text)
        return Reply(tool_calls=[ToolCall(self.tool, dict(self.input)) for _ in range(self.times)])

"""Anthropic Messages transcripts.

Accepted: an array of ``{role, content}`` messages, a request body ``{messages: [...]}``, a list
of response objects ``{type: "message", role: "assistant", content}``, or JSONL with one message
(or one ``{messages}`` object) per line. ``tool_use`` blocks are linked to ``tool_result`` blocks
by id; server and MCP tool results sit in the same assistant message as their call.

A response object records its ``model`` and ``usage`` (``input_tokens``, which leaves out the
prompt-cache writes and reads counted in ``cache_creation_input_tokens`` and
``cache_read_input_tokens``, and ``output_tokens``): they go on the message's first call. A
request body names its ``model``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import as_dict, iter_jsonl, load_json, text_of, token_sum, usage_of
from loopwarden.transcripts.model import (
    MISSING,
    CallLinker,
    ToolCall,
    Trajectory,
    TranscriptError,
    Usage,
)

FORMAT = "anthropic"

_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import an Anthropic Messages file as one trajectory (or one per JSONL conversation)."""
    stem = path.name.split(".")[0]
    if doc is None and path.name.endswith((".jsonl", ".jsonl.gz")):
        yield from _read_jsonl(path, stem)
        return
    doc = load_json(path) if doc is None else doc
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list):
        raise TranscriptError(str(path), 'expected a message array or {"messages": [...]}')
    trajectory = from_messages(path, stem, messages)
    if isinstance(doc, dict) and trajectory.model is None:
        trajectory.model = model_name(doc.get("model"))  # a request body
    yield trajectory


def usage(message: dict[str, Any]) -> Usage | None:
    """The ``usage`` of an Anthropic response: every prompt token (cache writes and reads
    included) as input, the cache reads as cached."""
    found = as_dict(message.get("usage"))
    return usage_of(
        token_sum(found, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"),
        found.get("output_tokens"),
        found.get("cache_read_input_tokens"),
    )


def spent_tokens(spent: Usage) -> int:
    """A response's tokens in all (prompt and output), for the report's token figures."""
    return (spent.input_tokens or 0) + (spent.output_tokens or 0)


def model_name(value: Any) -> str | None:
    """A recorded model name, or None."""
    # Claude Code writes "<synthetic>" on messages it made up itself (an API error, say).
    return value if isinstance(value, str) and value and value != "<synthetic>" else None


def _read_jsonl(path: Path, stem: str) -> Iterator[Trajectory]:
    """JSONL: either one conversation object per line, or one message per line (one run)."""
    single: Trajectory | None = None
    linker: CallLinker | None = None
    for lineno, obj in iter_jsonl(path):
        if isinstance(obj.get("messages"), list):
            given = obj.get("id")
            traj_id = given if isinstance(given, str) else f"{stem}:{lineno}"
            yield from_messages(path, traj_id, obj["messages"])
            continue
        if single is None:
            single = Trajectory(id=stem, source=str(path), format=FORMAT)
            linker = CallLinker(single)
        assert linker is not None
        _message(linker, obj, lineno)
    if single is not None:
        yield single


def from_messages(path: Path, traj_id: str, messages: list[Any]) -> Trajectory:
    """Build a trajectory from a list of Anthropic messages."""
    trajectory = Trajectory(id=traj_id, source=str(path), format=FORMAT)
    linker = CallLinker(trajectory)
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TranscriptError(str(path), f"{traj_id}: message [{index}] is not an object")
        _message(linker, message, index)
    return trajectory


def _message(linker: CallLinker, message: dict[str, Any], position: int) -> None:
    content = message.get("content")
    if not isinstance(content, list):
        return
    spent = usage(message) if message.get("role") == "assistant" else None
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in _CALL_BLOCKS and message.get("role") == "assistant":
            block_id = block.get("id")
            linker.add_call(
                ToolCall(
                    tool=str(block.get("name") or "unknown"),
                    params=block.get("input", {}),
                    tool_call_id=str(block_id) if block_id is not None else None,
                    line=position,
                    usage=spent,
                    tokens=None if spent is None else spent_tokens(spent),
                )
            )
            spent = None  # a response's tokens go on its first call
            trajectory = linker.trajectory
            trajectory.model = trajectory.model or model_name(message.get("model"))
        elif isinstance(kind, str) and kind.endswith("tool_result"):
            _result(linker, block)


def _result(linker: CallLinker, block: dict[str, Any]) -> None:
    call = linker.take(block.get("tool_use_id"))
    if call is None:
        return
    content = block.get("content")
    if block.get("is_error") is True:
        call.result, call.error = MISSING, text_of(content)
    elif block.get("type") == "tool_result":
        call.result = text_of(content)
        if block.get("is_error") is False:  # the caller said it succeeded
            call.failed = False
    else:
        call.result = content  # server/MCP results are structured: keep them whole

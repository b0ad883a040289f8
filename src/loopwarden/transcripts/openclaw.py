"""OpenClaw / pi session transcripts: one JSONL file per session.

The file is a tree (``id``/``parentId``); only the active branch — walked back from the last
entry — is replayed, so abandoned branches are never interleaved with the live one. Lines are
streamed; per entry only the few fields replay needs are kept until the branch is known.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import (
    epoch_seconds,
    iter_jsonl,
    parse_arguments,
    text_of,
    token_sum,
    usage_of,
)
from loopwarden.transcripts.model import MISSING, CallLinker, ToolCall, Trajectory, Usage

FORMAT = "openclaw"

# Results the runtime inserts for calls that never returned: not real executions.
_SYNTHETIC_PREFIXES = ("[openclaw] missing tool result", "[clawdbot] missing tool result")


@dataclass(slots=True)
class _Entry:
    """The replay-relevant part of one line."""

    line: int
    id: str | None
    parent: str | None
    calls: list[ToolCall] | None = None  # assistant toolCall blocks
    result_for: str | None = None  # toolResult: the call id it answers
    # toolResult: (result or MISSING, error, failed)
    outcome: tuple[Any, str | None, bool | None] | None = None
    compaction: bool = False
    model: str | None = None  # assistant: the model that answered


def read(path: Path) -> Iterator[Trajectory]:
    """Import one OpenClaw session file as one trajectory (its active branch)."""
    session_id: str | None = None
    entries: list[_Entry] = []
    for lineno, obj in iter_jsonl(path):
        kind = obj.get("type")
        if kind == "session":
            if session_id is None and isinstance(obj.get("id"), str):
                session_id = obj["id"]
            continue
        entry = _entry(lineno, obj)
        if entry is not None:
            entries.append(entry)
        elif isinstance(obj.get("id"), str):
            # Non-replayed lines (model_change, labels...) still link the tree together.
            entries.append(_Entry(lineno, obj["id"], _parent_of(obj)))
    traj_id = session_id or path.name.split(".")[0]
    trajectory = Trajectory(id=traj_id, source=str(path), format=FORMAT)
    linker = CallLinker(trajectory)
    for entry in _active_branch(entries):
        _replay_entry(linker, entry)
        if entry.calls:  # the run's model: the first that made a call
            trajectory.model = trajectory.model or entry.model
    yield trajectory


def _parent_of(obj: dict[str, Any]) -> str | None:
    parent = obj.get("parentId")
    return parent if isinstance(parent, str) else None


def _entry(lineno: int, obj: dict[str, Any]) -> _Entry | None:
    entry_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    kind = obj.get("type")
    if kind == "compaction":
        return _Entry(lineno, entry_id, _parent_of(obj), compaction=True)
    message = obj.get("message")
    if kind != "message" or not isinstance(message, dict):
        return None
    role = message.get("role")
    if role == "assistant":
        blocks = _blocks(message)
        calls = [_call(block, lineno) for block in blocks if block.get("type") == "toolCall"]
        _cost(calls, obj, message)
        model = message.get("model")
        model = model if isinstance(model, str) and model else None
        return _Entry(lineno, entry_id, _parent_of(obj), calls=calls, model=model)
    if role == "toolResult":
        call_id = message.get("toolCallId")
        return _Entry(
            lineno,
            entry_id,
            _parent_of(obj),
            result_for=str(call_id) if call_id is not None else None,
            outcome=_outcome(message),
        )
    return None


def _cost(calls: list[ToolCall], obj: dict[str, Any], message: dict[str, Any]) -> None:
    """The response's time on each of its calls, its tokens on the first one."""
    at = epoch_seconds(message.get("timestamp", obj.get("timestamp")))
    usage = message.get("usage")
    total = usage.get("totalTokens") if isinstance(usage, dict) else None
    if type(total) is not int:
        total = token_sum(usage, "input", "output", "cacheRead", "cacheWrite")
    for call in calls:
        call.at = at
    if calls:
        calls[0].tokens = total
        calls[0].usage = _usage(usage)


def _usage(usage: Any) -> Usage | None:
    """OpenClaw's usage: input, cache reads and writes are all prompt tokens; cost in USD."""
    if not isinstance(usage, dict):
        return None
    prompt = token_sum(usage, "input", "cacheRead", "cacheWrite")
    cost = usage.get("cost")
    return usage_of(
        prompt,
        usage.get("output"),
        usage.get("cacheRead"),
        # OpenClaw writes 0 for a model it has no price for: that is not a free response.
        (cost.get("total") or None) if isinstance(cost, dict) else None,
    )


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _call(block: dict[str, Any], lineno: int) -> ToolCall:
    # A call cut off by a broken stream carries partialJson instead of arguments.
    raw = block["arguments"] if "arguments" in block else block.get("partialJson")
    call_id = block.get("id")
    return ToolCall(
        tool=str(block.get("name") or "unknown"),
        params=parse_arguments(raw),
        tool_call_id=str(call_id) if call_id is not None else None,
        line=lineno,
    )


def _outcome(message: dict[str, Any]) -> tuple[Any, str | None, bool | None]:
    """Map a toolResult to (result, error, failed) the way the live runtime would have
    reported it; ``failed`` is what the entry states (``isError``, an exec's exit code)."""
    content = message.get("content")
    text = text_of(content)
    if text.lstrip().startswith(_SYNTHETIC_PREFIXES):
        return MISSING, None, None  # transcript repair, not an execution: no outcome to hash
    details = message.get("details")
    if message.get("isError") is True and not isinstance(details, dict):
        # A tool that threw: live, the guard receives the error, not a result object.
        return MISSING, text, True
    result: dict[str, Any] = {"content": content if isinstance(content, list) else []}
    if isinstance(content, str):
        result["content"] = [{"type": "text", "text": content}]
    if isinstance(details, dict):
        result["details"] = details
    if message.get("isError") is True:
        return result, "isError", True
    return result, None, _exec_failed(details, message.get("isError"))


def _exec_failed(details: Any, is_error: Any) -> bool | None:
    """Whether a toolResult without ``isError: true`` failed: an exec's exit code or status
    says so (OpenClaw keeps ``isError`` false for a command that ran and exited non-zero),
    else an explicit ``isError: false`` says it did not; None when nothing is stated."""
    if isinstance(details, dict):
        code = details.get("exitCode")
        if isinstance(code, int) and not isinstance(code, bool):
            return code != 0
        status = details.get("status")
        if status in ("failed", "error", "timeout"):
            return True
    return False if is_error is False else None


def _active_branch(entries: list[_Entry]) -> list[_Entry]:
    """Entries on the path from the root to the last entry, in file order.

    Version-1 files (no ids) are linear: every entry is on the branch.
    """
    if not entries or any(entry.id is None for entry in entries):
        return entries
    by_id = {entry.id: entry for entry in entries}
    on_path: set[str] = set()
    cursor: str | None = entries[-1].id
    while cursor is not None and cursor not in on_path and cursor in by_id:
        on_path.add(cursor)
        cursor = by_id[cursor].parent
    return [entry for entry in entries if entry.id in on_path]


def _replay_entry(linker: CallLinker, entry: _Entry) -> None:
    if entry.compaction:
        linker.add_compaction(entry.line)
    elif entry.calls is not None:
        for call in entry.calls:
            linker.add_call(call)
    elif entry.outcome is not None:
        answered = linker.take(entry.result_for)
        if answered is not None:
            answered.result, answered.error, answered.failed = entry.outcome

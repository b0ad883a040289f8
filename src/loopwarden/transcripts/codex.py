"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``.

Every line is ``{timestamp, type, payload}``. ``session_meta`` names the session; ``response_item``
lines hold what the model saw and did: ``function_call`` / ``custom_tool_call`` /
``local_shell_call`` are the calls, ``function_call_output`` / ``custom_tool_call_output`` their
results, linked by ``call_id``. A run is one turn: ``turn_context`` and the ``task_started``
event carry the turn's id (files without turn ids are split at each ``user_message`` event). A
``compacted`` line marks a context compaction. Other lines (``event_msg`` notifications,
reasoning, messages) are not replayed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._hook_answers import mark_refused
from loopwarden.transcripts._io import as_dict, iter_jsonl, parse_arguments, text_of, usage_of
from loopwarden.transcripts._turns import TurnSplitter
from loopwarden.transcripts.model import MISSING, ToolCall, Trajectory, TranscriptError

FORMAT = "codex"

_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_TURN_EVENTS = frozenset({"task_started", "turn_started"})
# exec_command output starts with a header; its chunk id and wall time change on every call.
_VOLATILE = ("Chunk ID: ", "Wall time: ")
_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.M)
_ROLLOUT_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def read(path: Path) -> Iterator[Trajectory]:
    """Import one rollout: one trajectory per turn that made tool calls."""
    splitter: TurnSplitter | None = None
    unpriced: list[ToolCall] = []  # calls of the response whose token count is still to come
    model: str | None = None
    for lineno, obj in iter_jsonl(path):
        kind, payload = obj.get("type"), obj.get("payload")
        if not isinstance(payload, dict):
            what = f'a "{kind}" line' if isinstance(kind, str) else 'a line without a "type"'
            raise TranscriptError(
                str(path),
                f'{what} without a "payload" object (each line of a Codex rollout has both)',
                lineno,
            )
        if splitter is None:
            splitter = TurnSplitter(str(path), FORMAT, _session_id(path, kind, payload))
        if kind == "turn_context":
            splitter.turn_key(payload.get("turn_id"))
            model = payload["model"] if isinstance(payload.get("model"), str) else model
        elif kind == "event_msg":
            event = payload.get("type")
            if event == "token_count":
                _count_tokens(unpriced, payload)
            elif event in _TURN_EVENTS:
                splitter.turn_key(payload.get("turn_id"))
            elif event == "user_message" and not splitter.keyed:
                splitter.start_turn()  # older rollouts name no turns: a user message starts one
        elif kind == "compacted":
            splitter.add_compaction(lineno)
        elif kind == "response_item":
            added = _item(splitter, payload, lineno)
            if added is not None:
                unpriced.append(added)
        yield from _with_model(splitter.drain(), model)
    if splitter is not None:
        yield from _with_model(splitter.finish(), model)


def _count_tokens(unpriced: list[ToolCall], payload: dict[str, Any]) -> None:
    """A ``token_count`` event: the last response's usage goes on its first call."""
    last = as_dict(as_dict(payload.get("info")).get("last_token_usage"))
    if unpriced:
        unpriced[0].usage = usage_of(
            last.get("input_tokens"), last.get("output_tokens"), last.get("cached_input_tokens")
        )
        unpriced.clear()


def _with_model(trajectories: Iterator[Trajectory], model: str | None) -> Iterator[Trajectory]:
    for trajectory in trajectories:
        trajectory.model = model
        yield trajectory


def _session_id(path: Path, kind: Any, payload: dict[str, Any]) -> str:
    """The session id from ``session_meta``, else from the file name, else the file name."""
    if kind == "session_meta" and isinstance(payload.get("id"), str) and payload["id"]:
        return str(payload["id"])
    stem = path.name.split(".")[0]
    found = _ROLLOUT_ID.search(stem)
    return found.group(1) if found else stem


def _item(splitter: TurnSplitter, payload: dict[str, Any], lineno: int) -> ToolCall | None:
    """Record a call or an output; returns the call when the item was one."""
    item = payload.get("type")
    if item in _CALLS:
        call_id = payload.get("call_id") or payload.get("id")
        call = ToolCall(
            tool=_tool_name(item, payload),
            params=_params(item, payload),
            tool_call_id=str(call_id) if call_id is not None else None,
            line=lineno,
        )
        splitter.add_call(call)
        return call
    if item in _OUTPUTS:
        answered = splitter.take(payload.get("call_id"))
        if answered is not None:
            answered.result, answered.error, answered.failed = _outcome(payload.get("output"))
            output = payload.get("output")
            mark_refused(answered, output if isinstance(output, str) else None)
    return None


def _tool_name(item: Any, payload: dict[str, Any]) -> str:
    if item == "local_shell_call":
        return "local_shell"
    return str(payload.get("name") or "unknown")


def _params(item: Any, payload: dict[str, Any]) -> Any:
    if item == "function_call":
        return parse_arguments(payload.get("arguments"))
    if item == "custom_tool_call":
        return payload.get("input", "")  # free-form input (apply_patch): the text is the identity
    return payload.get("action", {})


def _outcome(output: Any) -> tuple[Any, str | None, bool | None]:
    """``(result, error, failed)`` of a call output: a string, or ``{content, success}``.

    ``failed``: what Codex states, its ``success`` flag or the command's exit code (None when
    it states neither).
    """
    if isinstance(output, dict):
        text = text_of(output.get("content"))
        success = output.get("success")
        if success is False:
            return MISSING, text, True
        return text, None, (False if success is True else None)
    if isinstance(output, list):
        return text_of(output), None, None
    if output is None:
        return MISSING, None, None
    return _shell_outcome(str(output))


def _shell_outcome(text: str) -> tuple[Any, str | None, bool | None]:
    """A shell command's output: volatile header lines dropped, its exit code says whether it
    failed (a non-zero one is the error).

    0.1xx ``exec_command``: ``Chunk ID: …\nWall time: …\nProcess exited with code N\n…
    Output:\n<output>``. Older ``shell`` tool: a JSON string ``{"output", "metadata":
    {"exit_code", "duration_seconds"}}``.
    """
    legacy = parse_arguments(text) if text.startswith("{") else None
    if isinstance(legacy, dict) and isinstance(legacy.get("metadata"), dict):
        body, code = legacy.get("output"), legacy["metadata"].get("exit_code")
        result = body if isinstance(body, str) else text
        if not isinstance(code, int) or isinstance(code, bool):
            return result, None, None
        return result, (f"exit code {code}" if code != 0 else None), code != 0
    head, marker, body = text.partition("Output:\n")
    if marker and head.startswith(_VOLATILE):
        kept = [line for line in head.splitlines(keepends=True) if not line.startswith(_VOLATILE)]
        text = "".join(kept) + marker + body
    exit_code = _EXIT.search(text)
    if exit_code is None:
        return text, None, None
    if exit_code.group(1) != "0":
        return text, f"exit code {exit_code.group(1)}", True
    return text, None, False

"""mini-swe-agent ``.traj.json`` files, v1 text actions and v2 tool calls.

v1: the command is the single ```` ```bash ```` block of an assistant message and its output is
the next ``user`` message. A turn with zero or several blocks was a format error and executed
nothing, so it is not a call. The mapping matches the eval corpus conversion (tool ``bash``,
params ``{"command"}``, result the observation text, error ``returncode=N`` or ``timeout``).
v2: assistant ``tool_calls`` linked to ``role:"tool"`` messages by ``tool_call_id``; text-mode
v2 runs use ```` ```mswea_bash_command ```` blocks and ``user`` observations like v1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import (
    as_dict,
    load_json,
    parse_arguments,
    text_of,
    total,
    usage_of,
)
from loopwarden.transcripts.model import (
    CallLinker,
    ToolCall,
    Trajectory,
    TranscriptError,
    Usage,
)

FORMAT = "mini-swe-agent"

# mini-swe-agent's own action regex (v1 ``bash``; v2 text mode ``mswea_bash_command``).
_ACTION_RE = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE_RE = re.compile(r"<returncode>(-?\d+)</returncode>")
_TIMEOUT_MARK = "timed out and has been killed"


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import one mini-swe-agent trajectory file."""
    doc = load_json(path) if doc is None else doc
    messages = doc.get("messages") if isinstance(doc, dict) else None
    if not isinstance(messages, list):
        raise TranscriptError(str(path), 'not a mini-swe-agent trajectory: no "messages" list')
    instance = doc.get("instance_id")
    traj_id = instance if isinstance(instance, str) else path.name.split(".")[0]
    trajectory = Trajectory(id=traj_id, source=str(path), format=FORMAT)
    linker = CallLinker(trajectory)
    awaiting: ToolCall | None = None  # text-mode call waiting for its user observation
    responses: list[Usage] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TranscriptError(str(path), f"messages[{index}] is not an object")
        role = message.get("role")
        if role == "assistant":
            before = len(trajectory.items)
            awaiting = _assistant(linker, message, index)
            usage = _response_usage(message)
            if usage is not None:
                responses.append(usage)
                if len(trajectory.items) > before:  # on the response's first call
                    trajectory.calls[before].usage = usage
        elif role == "tool":
            _tool_result(linker, message)
        elif role == "user" and awaiting is not None:
            _text_result(awaiting, text_of(message.get("content")))
            awaiting = None
    _run_usage(trajectory, doc, responses)
    yield trajectory


def _response_usage(message: dict[str, Any]) -> Usage | None:
    """A model response's tokens and cost (LiteLLM's ``usage``, kept under ``extra``)."""
    usage = as_dict(as_dict(as_dict(message.get("extra")).get("response")).get("usage"))
    details = as_dict(usage.get("prompt_tokens_details"))
    return usage_of(
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        details.get("cached_tokens"),
        usage.get("cost"),
    )


def _run_usage(trajectory: Trajectory, doc: dict[str, Any], responses: list[Usage]) -> None:
    """The run's tokens (its responses summed) and cost (``instance_cost``), and its model."""
    info = as_dict(doc.get("info"))
    trajectory.model = as_dict(as_dict(info.get("config")).get("model")).get("model_name")
    if not isinstance(trajectory.model, str):
        trajectory.model = None

    trajectory.usage = usage_of(
        total([r.input_tokens for r in responses]),
        total([r.output_tokens for r in responses]),
        total([r.cached_tokens for r in responses]),
        as_dict(info.get("model_stats")).get("instance_cost"),
    )


def _assistant(linker: CallLinker, message: dict[str, Any], index: int) -> ToolCall | None:
    """Record the calls of one assistant turn; return the text-mode call awaiting output."""
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list) and tool_calls:
        for entry in tool_calls:
            if not isinstance(entry, dict):
                continue
            function = as_dict(entry.get("function"))
            call_id = entry.get("id")
            linker.add_call(
                ToolCall(
                    tool=str(function.get("name") or "bash"),
                    params=parse_arguments(function.get("arguments")),
                    tool_call_id=str(call_id) if call_id is not None else None,
                    line=index,
                )
            )
        return None
    actions = _ACTION_RE.findall(text_of(message.get("content")))
    if len(actions) != 1:
        return None  # format error: nothing was executed
    return linker.add_call(
        ToolCall(tool="bash", params={"command": actions[0].strip()}, line=index)
    )


def _text_result(call: ToolCall, text: str) -> None:
    call.result = text
    match = _RETURNCODE_RE.search(text)
    if match is not None:
        code = int(match.group(1))
        call.error = f"returncode={code}" if code != 0 else None
        call.failed = code != 0  # the command's exit code says it, whatever its output reads
    elif _TIMEOUT_MARK in text:
        call.error = "timeout"


def _tool_result(linker: CallLinker, message: dict[str, Any]) -> None:
    call = linker.take(message.get("tool_call_id"))
    if call is None:
        return
    extra = as_dict(message.get("extra"))
    if extra.get("exception_info") == "action was not executed":
        return  # the run stopped before this call: no outcome
    call.result = text_of(message.get("content"))
    code = extra.get("returncode")
    if isinstance(code, int) and code != 0:
        call.error = f"returncode={code}"
    elif extra.get("exception_info"):
        call.error = "exception"
    elif isinstance(code, int) and not isinstance(code, bool):
        call.failed = False  # exit code 0: the command succeeded, whatever its output reads

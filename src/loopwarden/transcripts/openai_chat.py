"""OpenAI Chat Completions message lists, and tau-bench run arrays.

Generic chat files are an array of messages, an object ``{messages: [...]}``, or JSONL with one
``{messages: [...]}`` object per line (one trajectory per line, streamed). tau-bench files are a
JSON array of runs ``{task_id, trial, reward, info, traj}`` whose ``traj`` is a chat list.
Not handled (no samples to check them against): Responses-API item lists, and tau-bench's
text-action strategies (``Action: {json}`` / ``API output:``), which import with no calls.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import iter_jsonl, load_json, parse_arguments, text_of
from loopwarden.transcripts.model import CallLinker, ToolCall, Trajectory, TranscriptError

FORMAT = "openai"
TAU_FORMAT = "tau-bench"

# tau-bench reports tool failures only as text.
_TAU_ERROR_PREFIXES = ("Error", "Unknown action")


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import a chat file: one trajectory per message list."""
    stem = path.name.split(".")[0]
    if doc is None and path.name.endswith((".jsonl", ".jsonl.gz")):
        for lineno, obj in iter_jsonl(path):
            messages = obj.get("messages")
            if not isinstance(messages, list):
                raise TranscriptError(
                    str(path), 'expected {"messages": [...]} on each line', lineno
                )
            given = obj.get("id")
            yield from_messages(
                path, given if isinstance(given, str) else f"{stem}:{lineno}", messages, FORMAT
            )
        return
    doc = load_json(path) if doc is None else doc
    messages = doc.get("messages") if isinstance(doc, dict) else doc
    if not isinstance(messages, list):
        raise TranscriptError(str(path), 'expected a message array or {"messages": [...]}')
    yield from_messages(path, stem, messages, FORMAT)


def read_tau_bench(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import a tau-bench results array: one trajectory per ``(task_id, trial)`` run."""
    doc = load_json(path) if doc is None else doc
    if not isinstance(doc, list):
        raise TranscriptError(
            str(path), "not a tau-bench results file: expected a JSON array of runs"
        )
    stem = path.name.split(".")[0]
    for index, run in enumerate(doc):
        if not isinstance(run, dict) or not isinstance(run.get("traj"), list):
            raise TranscriptError(str(path), f'run [{index}] has no "traj" message list')
        traj_id = f"{stem}/task{run.get('task_id')}/trial{run.get('trial')}"
        trajectory = from_messages(path, traj_id, run["traj"], TAU_FORMAT)
        reward = run.get("reward")
        if isinstance(reward, (int, float)) and not isinstance(reward, bool):
            trajectory.succeeded = reward >= 1
        for call in trajectory.calls:
            if isinstance(call.result, str) and call.result.startswith(_TAU_ERROR_PREFIXES):
                call.error = call.result
        yield trajectory


def from_messages(path: Path, traj_id: str, messages: list[Any], fmt: str) -> Trajectory:
    """Build a trajectory from an OpenAI chat message list."""
    trajectory = Trajectory(id=traj_id, source=str(path), format=fmt)
    linker = CallLinker(trajectory)
    legacy: list[ToolCall] = []  # function_call turns, answered in order by role "function"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TranscriptError(str(path), f"{traj_id}: message [{index}] is not an object")
        role = message.get("role")
        if role == "assistant":
            _assistant(linker, legacy, message, index)
        elif role == "tool":
            call = linker.take(message.get("tool_call_id"))
            if call is not None:
                call.result = text_of(message.get("content"))
        elif role == "function":
            if legacy:
                legacy.pop(0).result = text_of(message.get("content"))
            else:
                trajectory.orphan_results += 1
    return trajectory


def _assistant(
    linker: CallLinker, legacy: list[ToolCall], message: dict[str, Any], index: int
) -> None:
    tool_calls = message.get("tool_calls")
    for entry in tool_calls if isinstance(tool_calls, list) else []:
        function = entry.get("function") if isinstance(entry, dict) else None
        if not isinstance(function, dict):
            continue
        call_id = entry.get("id")
        linker.add_call(
            ToolCall(
                tool=str(function.get("name") or "unknown"),
                params=parse_arguments(function.get("arguments")),
                tool_call_id=str(call_id) if call_id is not None else None,
                line=index,
            )
        )
    function_call = message.get("function_call")
    if isinstance(function_call, dict):
        call = ToolCall(
            tool=str(function_call.get("name") or "unknown"),
            params=parse_arguments(function_call.get("arguments")),
            line=index,
        )
        legacy.append(linker.add_call(call))

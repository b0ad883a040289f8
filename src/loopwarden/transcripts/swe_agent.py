"""SWE-agent ``.traj`` files, versions 0.x and 1.x.

Each ``trajectory[i]`` step is one executed action. In 1.x function-calling runs the structured
call (tool name, parsed arguments, id) lives in ``history``; steps are paired with the history's
action items by their action text, in order. Without such a pairing (0.x, or a step missing from
history) the tool is the action's command word and the parameters are the whole action text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import as_dict, load_json, parse_arguments, usage_of
from loopwarden.transcripts.model import ToolCall, Trajectory, TranscriptError

FORMAT = "swe-agent"

# 0.x forced exits are recorded as pseudo-actions; nothing was executed.
_PSEUDO_ACTIONS = frozenset({"exit_cost", "exit_format", "exit_context", "exit_api", "exit_error"})


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import one ``.traj`` file as one trajectory (the chosen attempt, for retry runs)."""
    doc = load_json(path) if doc is None else doc
    if not isinstance(doc, dict) or not isinstance(doc.get("trajectory"), list):
        raise TranscriptError(str(path), 'not a SWE-agent trajectory: no "trajectory" list')
    stem = path.name.removesuffix(".traj")
    trajectory = Trajectory(id=stem, source=str(path), format=FORMAT)
    structured = _history_calls(doc.get("history"))
    cursor = 0
    for index, step in enumerate(doc["trajectory"]):
        if not isinstance(step, dict):
            raise TranscriptError(str(path), f"trajectory[{index}] is not an object")
        action = step.get("action")
        wanted = action.strip() if isinstance(action, str) else ""
        if not wanted:
            continue  # 1.x forced exit: the exit message is in thought/response
        if wanted in _PSEUDO_ACTIONS:
            continue
        if cursor < len(structured) and structured[cursor][0] == wanted:  # the usual case
            match: ToolCall | None = structured[cursor][1]
            cursor += 1
        else:
            match, cursor = _match(structured, cursor, wanted)
        call = match or ToolCall(tool=wanted.split()[0], params={"command": wanted})
        call.tool_call_id = call.tool_call_id or f"{stem}:{index}"
        observation = step.get("observation")
        call.result = observation if isinstance(observation, str) else ""
        trajectory.items.append(call)
    stats = as_dict(as_dict(doc.get("info")).get("model_stats"))
    trajectory.usage = usage_of(
        stats.get("tokens_sent"), stats.get("tokens_received"), cost=stats.get("instance_cost")
    )
    trajectory.model = _model_name(doc.get("replay_config"))
    yield trajectory


def _model_name(replay_config: Any) -> str | None:
    """The model a 1.x run used (its replay config, a JSON text); 0.x files do not say."""
    if isinstance(replay_config, str):
        try:
            replay_config = json.loads(replay_config)
        except json.JSONDecodeError:
            return None
    name = as_dict(as_dict(as_dict(replay_config).get("agent")).get("model")).get("name")
    return name if isinstance(name, str) else None


def _history_calls(history: Any) -> list[tuple[str, ToolCall]]:
    """(action text, structured call) for each function-calling action item of the history."""
    calls: list[tuple[str, ToolCall]] = []
    if not isinstance(history, list):
        return calls
    for item in history:
        # The role first: half the items are tool results.
        if not isinstance(item, dict) or item.get("role") != "assistant" or item.get("is_demo"):
            continue
        tool_calls = item.get("tool_calls")
        action = item.get("action")
        if not isinstance(tool_calls, list) or not tool_calls or not isinstance(action, str):
            continue
        first = tool_calls[0]
        function = first.get("function") if isinstance(first, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str):
            continue
        call_id = first.get("id")
        arguments = parse_arguments(function.get("arguments"))  # type: ignore[union-attr]
        call = ToolCall(name, arguments, str(call_id) if call_id is not None else None)
        calls.append((action.strip(), call))
    return calls


def _match(
    structured: list[tuple[str, ToolCall]], cursor: int, wanted: str
) -> tuple[ToolCall | None, int]:
    """The next history call whose action text equals this step's (stripped), searching
    forward."""
    for position in range(cursor, len(structured)):
        if structured[position][0] == wanted:
            return structured[position][1], position + 1
    return None, cursor

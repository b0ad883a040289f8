"""OpenHands software-agent-sdk conversation events.

Accepted: events joined as JSONL (streamed), or a persisted conversation directory
(``base_state.json`` + ``events/event-<idx>-<uuid>.json``). ``ActionEvent`` is a call,
``ObservationEvent`` / ``AgentErrorEvent`` its outcome (linked by ``tool_call_id``, else by
``action_id``), ``Condensation`` a compaction. Trimmed slices start with observations whose
action is missing: those are counted as orphans, not errors. When events carry ``parent_id``
(newer files), only the branch leading to the last event is replayed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import (
    as_dict,
    iter_jsonl,
    load_json,
    parse_arguments,
    text_of,
    total,
    usage_of,
)
from loopwarden.transcripts._shapes import openhands_conversation_dir as is_conversation_dir
from loopwarden.transcripts.model import MISSING, CallLinker, ToolCall, Trajectory

FORMAT = "openhands"

# Keys the SDK adds to the model's arguments that vary between otherwise identical calls.
_ANNOTATION_KEYS = ("security_risk", "summary")
_EVENT_FILE_RE = re.compile(r"event-(\d+)")


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import one conversation (a JSONL stream of events, or a conversation directory)."""
    if is_conversation_dir(path):
        yield _build(path, path.name, _dir_events(path))
    else:
        yield _build(path, path.name.split(".")[0], iter_jsonl(path))


def _dir_events(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    def index(file: Path) -> int:
        match = _EVENT_FILE_RE.match(file.name)
        return int(match.group(1)) if match else -1

    for file in sorted((path / "events").glob("event-*.json"), key=index):
        event = load_json(file)
        if isinstance(event, dict):
            yield index(file), event


def _active_branch(
    events: list[tuple[int, dict[str, Any]]],
) -> list[tuple[int, dict[str, Any]]]:
    """Newer files form a tree (``parent_id``; absent means "the event before"): keep only the
    path from the root to the last event, so abandoned branches are not interleaved."""
    if not any("parent_id" in event for _, event in events):
        return events
    parents: dict[str, str | None] = {}
    previous: str | None = None
    for _, event in events:
        event_id = str(event.get("id"))
        parent = event.get("parent_id", previous)
        parents[event_id] = str(parent) if parent is not None else None
        previous = event_id
    on_path: set[str] = set()
    cursor: str | None = previous
    while cursor is not None and cursor in parents and cursor not in on_path:
        on_path.add(cursor)
        cursor = parents[cursor]
    return [(position, event) for position, event in events if str(event.get("id")) in on_path]


def _build(path: Path, traj_id: str, events: Iterable[tuple[int, dict[str, Any]]]) -> Trajectory:
    trajectory = Trajectory(id=traj_id, source=str(path), format=FORMAT)
    linker = CallLinker(trajectory)
    call_id_of_action: dict[str, str] = {}  # ActionEvent.id -> tool_call_id
    for position, event in _active_branch(list(events)):
        kind = event.get("kind")
        if kind == "ActionEvent":
            call = linker.add_call(_call(event, position))
            if isinstance(event.get("id"), str) and call.tool_call_id is not None:
                call_id_of_action[event["id"]] = call.tool_call_id
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            call_id = event.get("tool_call_id")
            if call_id is None and isinstance(event.get("action_id"), str):
                call_id = call_id_of_action.get(event["action_id"])
            answered = linker.take(call_id)
            if answered is not None:
                _set_outcome(answered, kind, event)
        elif kind == "Condensation":
            linker.add_compaction(position)
        elif kind == "ConversationStateUpdateEvent" and event.get("key") == "stats":
            _stats(trajectory, event.get("value"))  # accumulated: the last one is the total
    return trajectory


def _stats(trajectory: Trajectory, stats: Any) -> None:
    """The run's accumulated cost and tokens, summed over its LLMs (agent, condenser...)."""
    metrics = [as_dict(m) for m in as_dict(as_dict(stats).get("usage_to_metrics")).values()]
    if not metrics:
        return
    usages = [as_dict(m.get("accumulated_token_usage")) for m in metrics]

    cache_read = total([u.get("cache_read_tokens") for u in usages])
    prompt = total([u.get("prompt_tokens") for u in usages])
    trajectory.usage = usage_of(
        prompt,
        total([u.get("completion_tokens") for u in usages]),
        cache_read,
        # 0 is what it accumulates for a model LiteLLM has no price for, not a free run.
        total([m.get("accumulated_cost") for m in metrics]) or None,
    )
    model = metrics[0].get("model_name")
    trajectory.model = model if isinstance(model, str) else trajectory.model


def _call(event: dict[str, Any], position: int) -> ToolCall:
    action = event.get("action")
    if isinstance(action, dict):
        params: Any = action  # the typed arguments the tool actually received
    else:
        params = parse_arguments(as_dict(event.get("tool_call")).get("arguments"))
        if isinstance(params, dict):
            params = {k: v for k, v in params.items() if k not in _ANNOTATION_KEYS}
    call_id = event.get("tool_call_id")
    return ToolCall(
        tool=str(event.get("tool_name") or "unknown"),
        params=params,
        tool_call_id=str(call_id) if call_id is not None else None,
        line=position,
    )


def _set_outcome(call: ToolCall, kind: Any, event: dict[str, Any]) -> None:
    if kind == "UserRejectObservation":
        return  # the user refused it: never executed, no outcome
    if kind == "AgentErrorEvent":
        error = event.get("error")
        call.result, call.error = MISSING, error if isinstance(error, str) else json.dumps(error)
        return
    observation = event.get("observation")
    observation = observation if isinstance(observation, dict) else {}
    text = text_of(observation.get("content"))
    if observation.get("is_error") is True:
        call.result, call.error = MISSING, text
        return
    call.result = text
    # A terminal's exit code says whether the command failed (its observation keeps
    # is_error false for a command that ran and exited non-zero); else the tool's own flag.
    code = observation.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        call.failed = code != 0
    elif observation.get("is_error") is False:
        call.failed = False

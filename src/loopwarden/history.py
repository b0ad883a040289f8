"""SPEC §4 — a session's tool-call history: records, call and outcome recording, trimming.

This is the plain engine: a list and linear walks, written to be obviously correct.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from loopwarden.canonical import UNDEFINED, hash_tool_call, js_trim
from loopwarden.config import ResolvedConfig, resolve_config
from loopwarden.outcome import hash_tool_outcome

ConfigLike = Mapping[str, Any] | ResolvedConfig | None


@dataclass(slots=True)
class ToolCallRecord:
    """One recorded tool call; ``result_hash`` is filled when its outcome arrives."""

    tool_name: str
    args_hash: str
    tool_call_id: str | None = None
    run_id: str | None = None
    result_hash: str | None = None
    unknown_tool_name: str | None = None
    timestamp: float = 0.0


@dataclass
class SessionState:
    """One session's history, oldest record first, shared by all of the session's runs."""

    history: list[ToolCallRecord] = field(default_factory=list)


def normalize_run_id(run_id: object) -> str | None:
    """Trimmed run id; empty, blank or non-string ids mean "no run" (SPEC §4)."""
    if not isinstance(run_id, str):
        return None
    trimmed = js_trim(run_id)
    return trimmed or None


def _now_ms() -> float:
    return time.time() * 1000.0


def _append(state: SessionState, record: ToolCallRecord, config: ResolvedConfig) -> None:
    state.history.append(record)
    overflow = len(state.history) - config.history_size
    if overflow > 0:
        del state.history[:overflow]


def record_call(
    state: SessionState,
    tool: str,
    params: Any,
    tool_call_id: str | None = None,
    config: ConfigLike = None,
    run_id: str | None = None,
) -> None:
    """Append a call with no result yet, then trim to ``historySize`` (SPEC §4)."""
    resolved = resolve_config(config)
    record = ToolCallRecord(
        tool_name=tool,
        args_hash=hash_tool_call(tool, params),
        tool_call_id=tool_call_id,
        run_id=normalize_run_id(run_id),
        timestamp=_now_ms(),
    )
    _append(state, record, resolved)


def _pending_match(
    state: SessionState, tool: str, args_hash: str, tool_call_id: str | None, run: str | None
) -> ToolCallRecord | None:
    for record in reversed(state.history):
        if (
            record.run_id == run
            and record.tool_name == tool
            and record.args_hash == args_hash
            and record.result_hash is None
            and (tool_call_id is None or record.tool_call_id == tool_call_id)
        ):
            return record
    return None


def record_outcome(
    state: SessionState,
    tool: str,
    params: Any,
    tool_call_id: str | None = None,
    result: Any = UNDEFINED,
    error: Any = UNDEFINED,
    config: ConfigLike = None,
    run_id: str | None = None,
    *,
    send_tools: Collection[str] = (),
) -> ToolCallRecord | None:
    """Attach an outcome to the newest matching pending record, or append a new one (SPEC §4).

    Returns the stored record, or None when the outcome has no hash (nothing is stored).
    """
    resolved = resolve_config(config)
    result_hash, unknown = hash_tool_outcome(tool, params, result, error, send_tools=send_tools)
    if result_hash is None:
        return None
    args_hash = hash_tool_call(tool, params)
    run = normalize_run_id(run_id)
    record = _pending_match(state, tool, args_hash, tool_call_id, run)
    if record is None:
        record = ToolCallRecord(tool, args_hash, tool_call_id, run, timestamp=_now_ms())
        record.result_hash, record.unknown_tool_name = result_hash, unknown
        _append(state, record, resolved)
    else:
        record.result_hash, record.unknown_tool_name = result_hash, unknown
    return record

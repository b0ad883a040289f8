"""loop events: plain data delivered to subscribers, logs and run records.

Privacy: an event carries tool names, signatures (hashes) and counts, never raw parameters or
results. The model-visible message is built from the tool name and counts only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

EventType = Literal["tool.loop", "compaction.loop_persisted"]
Action = Literal["warn", "block", "stop"]


@dataclass(frozen=True)
class LoopEvent:
    """One loop event (a warning emitted, a call blocked, or a run stopped)."""

    type: EventType
    level: str
    action: Action
    detector: str
    count: int
    tool_name: str
    session: str
    run_id: str | None
    agent_id: str | None
    message: str
    paired_tool_name: str | None = None
    args_hash: str | None = None
    timestamp: float = 0.0
    # The call's number in its run, counting from 1, where the runtime knows it (a replay by
    # `loopwarden analyze --record` does; a live guard sees calls, not their place in the run).
    call: int | None = None
    # The runtime's id of the call (a model's tool-call id), when it gave one.
    tool_call_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the event (``call`` and ``tool_call_id`` only where known)."""
        data = asdict(self)
        for optional in ("call", "tool_call_id"):
            if data[optional] is None:
                del data[optional]
        return data

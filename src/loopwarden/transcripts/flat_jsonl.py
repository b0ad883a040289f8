"""loopwarden's own flat JSONL: one line per tool call, trajectories contiguous.

Streams: a trajectory is yielded as soon as the next one starts, so a corpus of any size is
imported with the memory of one trajectory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import iter_jsonl
from loopwarden.transcripts.model import MISSING, Compaction, ToolCall, Trajectory, TranscriptError

FORMAT = "jsonl"


def read(path: Path) -> Iterator[Trajectory]:
    """Import every trajectory of a flat JSONL file, in file order."""
    current: Trajectory | None = None
    finished: set[str] = set()
    for lineno, obj in iter_jsonl(path):
        traj_id = obj.get("trajectory")
        if not isinstance(traj_id, str) or not traj_id:
            raise TranscriptError(
                str(path), 'missing "trajectory" (the run id string) on this line', lineno
            )
        if current is None or current.id != traj_id:
            if traj_id in finished:
                raise TranscriptError(
                    str(path),
                    f"trajectory {traj_id!r} appears again after other trajectories; "
                    "the lines of one trajectory must be contiguous",
                    lineno,
                )
            if current is not None:
                finished.add(current.id)
                yield current
            current = Trajectory(id=traj_id, source=str(path), format=FORMAT)
        current.items.append(_item(path, lineno, obj, current))
    if current is not None:
        yield current


def _item(path: Path, lineno: int, obj: dict[str, Any], traj: Trajectory) -> ToolCall | Compaction:
    if obj.get("compaction") is True:
        return Compaction(line=lineno)
    tool = obj.get("tool")
    if not isinstance(tool, str) or not tool:
        raise TranscriptError(
            str(path), 'missing "tool" (the tool name string); or "compaction": true', lineno
        )
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise TranscriptError(
            str(path), f'"error" must be null or a string, got {type(error).__name__}', lineno
        )
    step = obj.get("step")
    call_id = f"{traj.id}:{step if isinstance(step, int) else len(traj.items)}"
    return ToolCall(
        tool=tool,
        params=obj.get("args", {}),
        tool_call_id=call_id,
        result=_result(obj, error),
        error=error,
        line=lineno,
    )


def _result(obj: dict[str, Any], error: str | None) -> Any:
    """The recorded result; a null or absent result leaves the error string as the outcome."""
    if "result" not in obj:
        return MISSING
    result = obj["result"]
    if result is None and error is not None:
        return MISSING
    return result

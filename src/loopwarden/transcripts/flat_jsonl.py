"""loopwarden's own flat JSONL: one line per tool call, trajectories contiguous.

Streams: a trajectory is yielded as soon as the next one starts, so a corpus of any size is
imported with the memory of one trajectory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from loopwarden.transcripts._io import iter_jsonl
from loopwarden.transcripts.model import MISSING, Compaction, ToolCall, Trajectory, TranscriptError

FORMAT = "jsonl"

Fields = Mapping[str, str]


def read(path: Path, fields: Fields | None = None) -> Iterator[Trajectory]:
    """Import every trajectory of a flat JSONL file, in file order.

    ``fields`` maps a field to the name it has in this file (``{"trajectory": "session_id"}``).
    """
    names = _Names(fields or {})
    current: Trajectory | None = None
    finished: set[str] = set()
    for lineno, raw in iter_jsonl(path):
        obj = names.line(raw)
        traj_id = obj.get("trajectory")
        if isinstance(traj_id, int) and not isinstance(traj_id, bool):
            traj_id = str(traj_id)  # a numeric session id names a run as well
        if not isinstance(traj_id, str) or not traj_id:
            raise TranscriptError(
                str(path),
                f"missing {names.said('trajectory')} (the run id string) on this line",
                lineno,
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
        current.items.append(_item((path, lineno), obj, current, names))
    if current is not None:
        yield current


class _Names:
    """Reads a line's fields under the names the user gave them (``--field``)."""

    def __init__(self, fields: Fields) -> None:
        self.fields = dict(fields)

    def said(self, field: str) -> str:
        """How an error names a field: as the file names it."""
        name = self.fields.get(field)
        return f'"{field}"' if name is None else f'"{name}" (--field {field}={name})'

    def line(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The line with its fields under their own names (unchanged without ``--field``)."""
        if not self.fields:
            return raw
        obj = dict(raw)
        for field, name in self.fields.items():
            obj.pop(field, None)  # a field mapped elsewhere is not read under its own name
            found = _lookup(raw, name)
            if found is not _ABSENT:
                obj[field] = found
        return obj


_ABSENT = object()


def _lookup(obj: dict[str, Any], name: str) -> Any:
    """``obj[name]``; a dotted name walks into nested objects (``function.name``)."""
    if name in obj:
        return obj[name]
    value: Any = obj
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


def _item(
    where: tuple[Path, int], obj: dict[str, Any], traj: Trajectory, names: _Names
) -> ToolCall | Compaction:
    path, lineno = where
    if obj.get("compaction") is True:
        return Compaction(line=lineno)
    tool = obj.get("tool")
    if not isinstance(tool, str) or not tool:
        raise TranscriptError(
            str(path),
            f"missing {names.said('tool')} (the tool name string); or "
            f"{names.said('compaction')}: true",
            lineno,
        )
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise TranscriptError(
            str(path),
            f"{names.said('error')} must be null or a string, got {type(error).__name__}",
            lineno,
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

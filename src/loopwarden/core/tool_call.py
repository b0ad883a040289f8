"""the record of one tool call, as a session's history keeps it.

Its own module because both the history (``history``) and its incremental engine (``_engine``)
work on records, and the history builds on the engine: with the record here, neither needs the
other's import to name it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True, init=False)
class ToolCallRecord:
    """One recorded tool call; ``result_hash`` is filled when its outcome arrives.

    Records are owned by their ``SessionState``: change them only through ``record_call`` and
    ``record_outcome``, since the session's counters follow those two functions.
    """

    tool_name: str
    args_hash: str
    tool_call_id: str | None = None
    run_id: str | None = None
    result_hash: str | None = None
    unknown_tool_name: str | None = None
    timestamp: float = 0.0

    def __init__(
        self,
        tool_name: str,
        args_hash: str,
        tool_call_id: str | None = None,
        run_id: str | None = None,
        result_hash: str | None = None,
        unknown_tool_name: str | None = None,
        timestamp: float = 0.0,
    ) -> None:
        # Written out instead of generated (init=False): the compiled build runs this as native
        # code, where the generated __init__ would be interpreted, once per recorded call.
        self.tool_name = tool_name
        self.args_hash = args_hash
        self.tool_call_id = tool_call_id
        self.run_id = run_id
        self.result_hash = result_hash
        self.unknown_tool_name = unknown_tool_name
        self.timestamp = timestamp

    def __reduce__(self) -> tuple[type[ToolCallRecord], tuple[object, ...]]:
        # Copy and pickle through the constructor: the compiled class's __new__ runs __init__,
        # so the default protocol (an empty object, then its state) fails there.
        return (ToolCallRecord, tuple(getattr(self, field.name) for field in fields(self)))

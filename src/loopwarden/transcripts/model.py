"""The neutral shape every transcript importer produces.

A :class:`Trajectory` is one agent run: an ordered list of :class:`ToolCall` items (each with
its outcome when the transcript recorded one) and :class:`Compaction` markers. Replay feeds
these items to the guard in order; nothing format-specific survives past the importer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class _Missing(enum.Enum):
    """Sentinel type for "the transcript recorded no result" (distinct from a JSON null)."""

    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing.MISSING
"""No result was recorded for a call (an enum member, so it survives pickling between processes)."""


class TranscriptError(Exception):
    """A transcript file that cannot be read: names the file, the line when known, and why."""

    def __init__(self, path: str, reason: str, line: int | None = None) -> None:
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}")


@dataclass(frozen=True, slots=True)
class Usage:
    """What model responses cost, as a transcript records it (None: not recorded).

    ``input_tokens`` counts every prompt token, those read from a prompt cache included;
    ``cached_tokens`` says how many of them were. ``cost`` is money in US dollars.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost: float | None = None

    @property
    def empty(self) -> bool:
        """True when nothing is recorded."""
        return (
            self.input_tokens is None
            and self.output_tokens is None
            and self.cached_tokens is None
            and self.cost is None
        )


@dataclass(slots=True)
class ToolCall:
    """One tool call and, when recorded, its outcome.

    ``result`` is what the tool returned (a string, or an OpenClaw-style ``{content, details}``
    object), or :data:`MISSING`. ``error`` is an error text; it is the outcome only when
    ``result`` is :data:`MISSING` (otherwise it just marks the call as failed, as in the
    loopwarden flat JSONL format). ``failed`` is what the transcript's structured signal says
    (an error flag, an exit code, a span status): True a failure, False a success it states,
    None when it says nothing (an ``error`` is always a failure). Replay hands it to the guard
    as ``failed=``, so a stated outcome is not second-guessed from the text.
    """

    tool: str
    params: Any
    tool_call_id: str | None = None
    result: Any = MISSING
    error: str | None = None
    line: int | None = None  # where the call sits in the source file, for messages
    # What the call cost, where the transcript records it (for the report's cost of loops):
    # when the model issued it (epoch seconds), and the tokens of the model response that did,
    # counted on that response's first call only.
    at: float | None = None
    tokens: int | None = None
    # loopwarden's own hook refused the call in the recorded session: it never ran (replay
    # does not count it among the calls the guard would save).
    refused: bool = False
    # The same response's tokens and money by kind, where recorded (first call only as well).
    usage: Usage | None = None
    failed: bool | None = None

    @property
    def has_outcome(self) -> bool:
        """True when the transcript recorded a result or an error for this call."""
        return self.result is not MISSING or self.error is not None

    @property
    def failure(self) -> bool | None:
        """Whether the call failed, as replay tells the guard: an error is a failure, else
        what ``failed`` states (None: the transcript does not say)."""
        return True if self.error is not None else self.failed


@dataclass(frozen=True, slots=True)
class Compaction:
    """A context compaction (OpenClaw ``compaction`` entry, OpenHands ``Condensation``...)."""

    line: int | None = None


Item = ToolCall | Compaction


@dataclass(slots=True)
class Trajectory:
    """One run of one agent, in the neutral shape."""

    id: str
    source: str
    format: str
    items: list[Item] = field(default_factory=list)
    orphan_results: int = 0  # results whose call is not in the file (trimmed slices)
    # Whether the run reached its goal, where the transcript says (tau-bench's reward): the
    # report counts blocks in runs that succeeded, the price of a setting.
    succeeded: bool | None = None
    # What the whole run cost, where the agent records a total (SWE-agent, mini-swe-agent,
    # OpenHands), and the model that ran it.
    usage: Usage | None = None
    model: str | None = None

    @property
    def calls(self) -> list[ToolCall]:
        """The tool calls only, in order."""
        return [item for item in self.items if isinstance(item, ToolCall)]


class CallLinker:
    """Builds a trajectory's items, linking results to their calls by tool-call id.

    Formats that split a call and its result into separate records (OpenClaw, OpenAI chat,
    Anthropic, OpenHands) use it: ``add_call`` appends in call order, ``pending(id)`` finds the
    call a result belongs to, and a result with no matching call is counted as an orphan.
    """

    def __init__(self, trajectory: Trajectory) -> None:
        self.trajectory = trajectory
        self._pending: dict[str, ToolCall] = {}

    def add_call(self, call: ToolCall) -> ToolCall:
        """Append a call; if it has an id, remember it until its result arrives."""
        if call.tool_call_id is None:
            call.tool_call_id = f"{self.trajectory.id}:{len(self.trajectory.items)}"
        self._pending[call.tool_call_id] = call
        self.trajectory.items.append(call)
        return call

    def add_compaction(self, line: int | None) -> None:
        """Append a compaction marker."""
        self.trajectory.items.append(Compaction(line=line))

    def take(self, tool_call_id: Any) -> ToolCall | None:
        """The pending call with this id (removed from pending), or None for an orphan result."""
        call = self._pending.pop(str(tool_call_id), None) if tool_call_id is not None else None
        if call is None:
            self.trajectory.orphan_results += 1
        return call

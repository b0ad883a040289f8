"""Transcript importers: agent run logs in many formats, turned into one neutral shape.

``read_transcripts(path, fmt="auto")`` yields :class:`Trajectory` objects (tool calls with their
outcomes, and compaction markers) from any supported format (docs/transcript-formats.md).
JSONL formats are streamed line by line; document formats (one JSON value per file) are loaded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from loopwarden.transcripts import (
    anthropic,
    claude_code,
    codex,
    flat_jsonl,
    gemini_cli,
    mini_swe_agent,
    openai_chat,
    openclaw,
    openhands,
    otlp,
    swe_agent,
)
from loopwarden.transcripts.detect import Detected, detect, iter_sources
from loopwarden.transcripts.model import (
    MISSING,
    Compaction,
    Item,
    ToolCall,
    Trajectory,
    TranscriptError,
)

__all__ = [
    "EXPECTED",
    "FORMATS",
    "MISSING",
    "Compaction",
    "Detected",
    "Item",
    "NotATranscript",
    "ToolCall",
    "Trajectory",
    "TranscriptError",
    "detect",
    "iter_sources",
    "read_transcripts",
]

_Reader = Callable[[Path, Any], Iterator[Trajectory]]


def _jsonl_only(reader: Callable[[Path], Iterator[Trajectory]]) -> _Reader:
    def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
        return reader(path)

    return read


_READERS: dict[str, _Reader] = {
    "openclaw": _jsonl_only(openclaw.read),
    "swe-agent": swe_agent.read,
    "mini-swe-agent": mini_swe_agent.read,
    "openai": openai_chat.read,
    "anthropic": anthropic.read,
    "tau-bench": openai_chat.read_tau_bench,
    "openhands": openhands.read,
    "claude-code": _jsonl_only(claude_code.read),
    "codex": _jsonl_only(codex.read),
    "gemini-cli": gemini_cli.read,
    "jsonl": _jsonl_only(flat_jsonl.read),
    "otlp": otlp.read,
}

FORMATS: tuple[str, ...] = tuple(_READERS)
"""Every importable format name (the ``--format`` choices besides ``auto``)."""

EXPECTED: dict[str, str] = {
    "openclaw": 'an OpenClaw session: JSON lines of entries ("type": "message", ...) whose '
    'assistant messages hold "toolCall" blocks',
    "swe-agent": 'a SWE-agent .traj document: an object with a "trajectory" list of steps',
    "mini-swe-agent": 'a mini-swe-agent trajectory: an object with "messages" and '
    '"trajectory_format"',
    "openai": 'an OpenAI chat: a list of messages whose assistant messages hold "tool_calls"',
    "anthropic": 'an Anthropic chat: a list of messages with "tool_use" blocks',
    "tau-bench": 'tau-bench results: a list of objects with "task_id" and "traj"',
    "openhands": "OpenHands events: JSON lines (or a conversation directory) of events with "
    '"kind", "source" and "timestamp", the tool calls as ActionEvent',
    "claude-code": "a Claude Code session log: JSON lines whose assistant messages hold "
    '"tool_use" blocks',
    "codex": 'a Codex rollout: JSON lines with "type" and "payload", the tool calls as '
    '"function_call" items',
    "gemini-cli": 'a Gemini CLI chat or checkpoint: messages with "toolCalls"',
    "jsonl": 'flat JSON lines, one tool call per line: "trajectory", "tool", "args", "result"',
}
"""What each format looks like, for the error when a forced ``--format`` finds no tool call."""


class NotATranscript(TranscriptError):
    """Raised by auto-detection for a file that holds no known transcript format."""

    def __init__(self, path: str, detail: str) -> None:
        self.detail = detail  # what the file looks like instead, e.g. "empty file"
        super().__init__(
            path, f"not a recognised transcript ({detail}); pass --format to force one"
        )


def read_transcripts(
    path: Path, fmt: str = "auto", fields: Mapping[str, str] | None = None
) -> Iterator[Trajectory]:
    """Import every trajectory in ``path`` (a file or an OpenHands conversation directory).

    With ``fmt="auto"`` the format is detected; a file that is not a transcript raises
    :class:`NotATranscript` (callers scanning directories may skip those). Malformed content
    raises :class:`TranscriptError` naming the file and, for JSONL, the line. ``fields``
    renames the fields of the flat ``jsonl`` format (and implies it).
    """
    if fields:
        return flat_jsonl.read(path, fields)
    doc: Any = None
    if fmt == "auto":
        found = detect(path)
        if found.format is None:
            raise NotATranscript(str(path), found.reason)
        fmt, doc = found.format, found.doc
    reader = _READERS.get(fmt)
    if reader is None:
        raise ValueError(f"unknown transcript format {fmt!r}; choose from {', '.join(FORMATS)}")
    return reader(path, doc)

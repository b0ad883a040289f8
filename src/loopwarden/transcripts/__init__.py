"""Transcript importers: agent run logs in many formats, turned into one neutral shape.

``read_transcripts(path, fmt="auto")`` yields :class:`Trajectory` objects (tool calls with their
outcomes, and compaction markers) from any supported format (docs/transcript-formats.md).
JSONL formats are streamed line by line; document formats (one JSON value per file) are loaded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from importlib import import_module
from pathlib import Path
from typing import Any

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

# Each format's reader: its module (imported when a file of the format is first met: a run
# over one format loads one reader) and function, and whether it takes a parsed document.
_READERS: dict[str, tuple[str, str, bool]] = {
    "openclaw": ("openclaw", "read", False),
    "swe-agent": ("swe_agent", "read", True),
    "mini-swe-agent": ("mini_swe_agent", "read", True),
    "openai": ("openai_chat", "read", True),
    "anthropic": ("anthropic", "read", True),
    "tau-bench": ("openai_chat", "read_tau_bench", True),
    "openhands": ("openhands", "read", True),
    "claude-code": ("claude_code", "read", False),
    "codex": ("codex", "read", False),
    "gemini-cli": ("gemini_cli", "read", True),
    "jsonl": ("flat_jsonl", "read", False),
    "otlp": ("otlp", "read", True),
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
        return _reader("flat_jsonl", "read")(path, fields)
    doc: Any = None
    if fmt == "auto":
        found = detect(path)
        if found.format is None:
            raise NotATranscript(str(path), found.reason)
        fmt, doc = found.format, found.doc
    how = _READERS.get(fmt)
    if how is None:
        raise ValueError(f"unknown transcript format {fmt!r}; choose from {', '.join(FORMATS)}")
    module, function, takes_doc = how
    read = _reader(module, function)
    return read(path, doc) if takes_doc else read(path)


def _reader(module: str, function: str) -> Callable[..., Iterator[Trajectory]]:
    """A reader function, its module imported on first use."""
    loaded = import_module(f"loopwarden.transcripts.{module}")
    read: Callable[..., Iterator[Trajectory]] = getattr(loaded, function)
    return read

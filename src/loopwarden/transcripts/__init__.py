"""Transcript importers: agent run logs in many formats, turned into one neutral shape.

``read_transcripts(path, fmt="auto")`` yields :class:`Trajectory` objects (tool calls with their
outcomes, and compaction markers) from any supported format (docs/transcript-formats.md).
JSONL formats are streamed line by line; document formats (one JSON value per file) are loaded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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


class NotATranscript(TranscriptError):
    """Raised by auto-detection for a file that holds no known transcript format."""

    def __init__(self, path: str, detail: str) -> None:
        self.detail = detail  # what the file looks like instead, e.g. "empty file"
        super().__init__(
            path, f"not a recognised transcript ({detail}); pass --format to force one"
        )


def read_transcripts(path: Path, fmt: str = "auto") -> Iterator[Trajectory]:
    """Import every trajectory in ``path`` (a file or an OpenHands conversation directory).

    With ``fmt="auto"`` the format is detected; a file that is not a transcript raises
    :class:`NotATranscript` (callers scanning directories may skip those). Malformed content
    raises :class:`TranscriptError` naming the file and, for JSONL, the line.
    """
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

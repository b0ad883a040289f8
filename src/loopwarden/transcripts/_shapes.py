"""What some formats' files look like: the checks detection makes, without loading the readers.

Detection runs on every file; each reader module is imported only when a file of its format
is met (see ``read_transcripts``), so the checks it needs live here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FLAT_JSONL_FIELDS = ("trajectory", "tool", "args", "result", "error", "step", "compaction")
"""The fields of a flat JSON line; ``--field KEY=NAME`` reads one of them from another name
(``a.b``: the field ``b`` of the object ``a``)."""

_CODEX_LINE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)


def claude_code_line(obj: dict[str, Any]) -> bool:
    """True when a first line is a Claude Code transcript line.

    Message lines carry ``uuid`` (``summary`` lines a ``leafUuid``); a file may also start with
    a bookkeeping line (``queue-operation``, ``file-history-snapshot``...) naming the session.
    """
    kind = obj.get("type")
    if not isinstance(kind, str) or "payload" in obj or "projectHash" in obj:
        return False  # Codex and Gemini CLI lines (checked by their own importers)
    if any(key in obj for key in ("uuid", "parentUuid", "leafUuid")):
        return True
    if kind in ("user", "assistant", "system"):
        return False  # a message line without a uuid is some other tool's log
    return "sessionId" in obj or (kind == "file-history-snapshot" and "snapshot" in obj)


def codex_line(obj: dict[str, Any]) -> bool:
    """True when a first line is a Codex rollout line."""
    return obj.get("type") in _CODEX_LINE_TYPES and isinstance(obj.get("payload"), dict)


def gemini_cli_session(obj: dict[str, Any]) -> bool:
    """True for a Gemini CLI session file's first record (JSONL) or a whole legacy session."""
    return isinstance(obj.get("sessionId"), str) and "projectHash" in obj


def gemini_cli_checkpoint(doc: Any) -> bool:
    """True for a ``/chat save`` checkpoint: a list of ``{role, parts}`` (or ``{history}``)."""
    history = doc.get("history") if isinstance(doc, dict) else doc
    return (
        isinstance(history, list)
        and bool(history)
        and all(isinstance(item, dict) and isinstance(item.get("parts"), list) for item in history)
        and all(isinstance(item.get("role"), str) for item in history)
    )


def openhands_conversation_dir(path: Path) -> bool:
    """True for a persisted OpenHands conversation directory (``base_state.json`` + ``events/``)."""
    return path.is_dir() and (path / "base_state.json").is_file() and (path / "events").is_dir()


def otlp_export(obj: Any) -> bool:
    """Whether a JSON value is an OTLP traces export (one line of the file exporter, or all)."""
    return isinstance(obj, dict) and isinstance(obj.get("resourceSpans"), list)

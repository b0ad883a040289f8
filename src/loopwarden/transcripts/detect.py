"""Format detection and file discovery.

Detection looks at the file name (OpenClaw sidecars and archives are not transcripts) and then
at the first line: a JSON object there means a JSONL format; otherwise the file is one JSON
document, loaded once and handed to the importer so it is never parsed twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwarden._exact_json import FAST, NO_VALUE, fast_loads
from loopwarden.transcripts import _shapes
from loopwarden.transcripts._io import iter_lines, load_json, open_text
from loopwarden.transcripts.model import TranscriptError

# OpenClaw writes these next to session transcripts; they are not transcripts.
_NOT_TRANSCRIPT_MARKERS = (".trajectory.jsonl", ".trajectory-path.json", ".reset.", ".corrupt-")
_SUFFIXES = (".jsonl", ".json", ".traj", ".jsonl.gz", ".json.gz", ".traj.gz")
_OPENCLAW_ENTRY_TYPES = frozenset(
    {
        "message",
        "compaction",
        "branch_summary",
        "model_change",
        "thinking_level_change",
        "custom",
        "custom_message",
        "label",
        "session_info",
    }
)
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "server_tool_use", "mcp_tool_use", "mcp_tool_result", "thinking"}
)


@dataclass(frozen=True, slots=True)
class Detected:
    """The outcome of detection: a format name, or None with the reason it is not a transcript."""

    format: str | None
    reason: str = ""
    doc: Any = None  # the parsed document, for whole-document formats


def detect(path: Path) -> Detected:
    """Work out which transcript format a file (or OpenHands conversation directory) holds."""
    if _shapes.openhands_conversation_dir(path):
        return Detected("openhands")
    name = path.name
    if any(marker in name for marker in _NOT_TRANSCRIPT_MARKERS) or ".checkpoint." in name:
        return Detected(None, "an OpenClaw sidecar or archive file, not a session transcript")
    doc = _pretty_document(path)
    if doc is not NO_VALUE:
        return _detect_doc(doc)
    first = _first_line(path)
    if first is None:
        return Detected(None, "empty file")
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None  # a pretty-printed document: its first line is not a whole value
    if isinstance(head, dict):
        found = _detect_line(head)
        if found is not None:
            return found
    try:
        doc = load_json(path)
    except TranscriptError:
        if isinstance(head, dict):  # more JSON lines follow (a CLI's history.jsonl...)
            return Detected(None, "JSON lines of no known transcript format")
        raise
    return _detect_doc(doc)


def _pretty_document(path: Path) -> Any:
    """The value of a file that opens as a pretty-printed JSON document (``{`` or ``[`` alone
    on its first line, as SWE-agent, mini-swe-agent and tau-bench write them), read and parsed
    once; :data:`NO_VALUE` for any other file, and when orjson cannot give the value.

    Such a first line is no whole JSON value, so detection would load the document anyway:
    this skips reading the first line as text first (a tenth of a small file's analysis).
    Anything else, an error included, takes the usual way, which reports it as before.
    """
    if not FAST or path.suffix == ".gz":
        return NO_VALUE
    try:
        # Unbuffered: the whole file is read straight into one bytes object (a buffered
        # reader would join what it holds to the rest, copying the document once more).
        with path.open("rb", buffering=0) as handle:
            if handle.read(2) not in (b"{\n", b"[\n"):
                return NO_VALUE
            handle.seek(0)
            raw = handle.readall()
    except OSError:
        return NO_VALUE
    return fast_loads(raw)


def _first_line(path: Path) -> str | None:
    try:
        with open_text(path) as handle:
            for _, raw in iter_lines(handle, path):  # bounded: a huge first line is an error
                if raw.strip():
                    return raw
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TranscriptError(str(path), f"cannot read: {exc}") from exc
    return None


def _detect_line(obj: dict[str, Any]) -> Detected | None:
    """Recognise a JSONL format from its first object; None when it may be a one-line document."""
    if _shapes.otlp_export(obj):  # the collector's file exporter: one export per line
        return Detected("otlp")
    kind = obj.get("type")
    if kind == "session" or (kind in _OPENCLAW_ENTRY_TYPES and "parentId" in obj):
        return Detected("openclaw")
    if obj.get("traceSchema") == "openclaw-trajectory":
        return Detected(None, "an OpenClaw trajectory sidecar, not a session transcript")
    if isinstance(obj.get("trajectory"), str):
        if "tool" in obj or obj.get("compaction") is True:
            return Detected("jsonl")
        return Detected(None, "a run-metadata file (no tool calls)")
    if isinstance(obj.get("kind"), str) and "source" in obj and "timestamp" in obj:
        return Detected("openhands")
    # The coding CLIs' session logs.
    if _shapes.codex_line(obj):
        return Detected("codex")
    if _shapes.gemini_cli_session(obj):
        return Detected("gemini-cli")
    if _shapes.claude_code_line(obj):
        return Detected("claude-code")
    if isinstance(obj.get("messages"), list) and not _is_doc(obj):
        return _chat(obj["messages"])
    if isinstance(obj.get("role"), str):
        flavour = _chat([obj])
        return flavour if flavour.format == "anthropic" else None
    return None


def _is_doc(obj: dict[str, Any]) -> bool:
    return "trajectory_format" in obj or "instance_id" in obj


def _detect_doc(doc: Any) -> Detected:
    if _shapes.gemini_cli_checkpoint(doc) or (
        isinstance(doc, dict) and _shapes.gemini_cli_session(doc)
    ):
        return Detected("gemini-cli", doc=doc)
    if _shapes.otlp_export(doc):
        return Detected("otlp", doc=doc)
    if isinstance(doc, dict):
        if isinstance(doc.get("trajectory"), list) and ("history" in doc or "info" in doc):
            return Detected("swe-agent", doc=doc)
        messages = doc.get("messages")
        if isinstance(messages, list):
            if _is_mini_swe_agent(doc):
                return Detected("mini-swe-agent", doc=doc)
            return _with_doc(_chat(messages), doc)
        return Detected(None, "a JSON object of no known transcript format")
    if isinstance(doc, list) and doc and all(isinstance(item, dict) for item in doc):
        if all("traj" in item and "task_id" in item for item in doc):
            return Detected("tau-bench", doc=doc)
        return _with_doc(_chat(doc), doc)
    return Detected(None, "a JSON value of no known transcript format")


def _is_mini_swe_agent(doc: dict[str, Any]) -> bool:
    marker = doc.get("trajectory_format")
    info = doc.get("info")
    return (isinstance(marker, str) and marker.startswith("mini-swe-agent")) or (
        isinstance(info, dict) and "mini_version" in info
    )


def _with_doc(found: Detected, doc: Any) -> Detected:
    return Detected(found.format, found.reason, doc) if found.format else found


def _chat(messages: list[Any]) -> Detected:
    """Anthropic or OpenAI chat, by the markers its messages carry."""
    if not messages or not all(isinstance(m, dict) and "role" in m for m in messages):
        return Detected(None, "a list that is not a chat message list")
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(block, dict) and block.get("type") in _ANTHROPIC_BLOCKS for block in content
        ):
            return Detected("anthropic")
        if message.get("type") == "message":  # Anthropic response objects
            return Detected("anthropic")
    return Detected("openai")


def iter_sources(paths: Iterable[Path]) -> Iterator[Path]:
    """Expand files and directories (recursed, sorted) into candidate transcript sources.

    An OpenHands conversation directory is one source. Missing paths raise TranscriptError.
    """
    for path in paths:
        if _shapes.openhands_conversation_dir(path) or path.is_file():
            yield path
        elif path.is_dir():
            yield from _walk(path)
        else:
            raise TranscriptError(str(path), "no such file or directory")


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames.sort()
        for name in list(dirnames):
            if _shapes.openhands_conversation_dir(here / name):
                dirnames.remove(name)
                yield here / name
        for name in sorted(filenames):
            if name.endswith(_SUFFIXES) and not name.startswith("."):
                yield here / name

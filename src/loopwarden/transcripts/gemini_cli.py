"""Gemini CLI sessions: ``~/.gemini/tmp/<project>/chats/session-<time>-<id>.jsonl``.

Since 0.4x the CLI appends records to a JSONL file: a first metadata record (``sessionId``,
``projectHash``), message records (``id``, ``type`` ``user`` / ``gemini`` / ``info``...,
``content``; a ``gemini`` message lists its ``toolCalls`` with ``args``, ``status`` and the
``result`` parts), ``{"$set": {...}}`` metadata updates and ``{"$rewindTo": id}``. A message is
re-appended whenever it changes (a tool call gets its result), so the last record of an id wins,
at the place the id first appeared. ``$set.messages`` replaces the history the model sees: when
it drops older messages and keeps newer ones, the chat was compressed (compaction). Older CLIs
wrote the same record as one JSON document (``session-*.json``); ``/chat save`` checkpoints
(``checkpoint-<tag>.json``) hold the raw model history (``role`` / ``parts`` with
``functionCall`` / ``functionResponse``). A run is one user prompt and its tool calls.

A ``gemini`` message records its model and the response's ``tokens`` (``input``: the prompt,
cached tokens included; ``cached``; ``output``; ``thoughts``, billed as output; ``tool``: the
tool-use prompt, billed as input): they go on the message's first call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwarden.transcripts._hook_answers import mark_refused, without_hook_context
from loopwarden.transcripts._io import as_dict, iter_jsonl, load_json, token_sum, usage_of
from loopwarden.transcripts._shapes import gemini_cli_checkpoint as is_checkpoint
from loopwarden.transcripts._turns import TurnSplitter
from loopwarden.transcripts.model import MISSING, ToolCall, Trajectory, TranscriptError, Usage

FORMAT = "gemini-cli"

# The shell tool's output names the process group, a new number on every run of one command.
_PGID = re.compile(r"^Process Group PGID: .*\n?", re.M)
# ... and ends with the exit code: a failed command is a successful tool call otherwise.
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)$", re.M)


@dataclass(slots=True)
class _Log:
    """The session rebuilt from its records: messages by id, in first-seen order, and markers."""

    order: list[str | int] = field(default_factory=list)  # message ids; ints: compaction lines
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)  # what the model currently sees
    not_prompts: set[str] = field(default_factory=set)  # messages the CLI made up
    lines: dict[str, int] = field(default_factory=dict)  # where each message was last written

    def put(self, message: dict[str, Any], line: int, *, synthetic: bool = False) -> None:
        msg_id = str(message["id"])
        self.lines[msg_id] = line
        if msg_id not in self.messages:
            self.order.append(msg_id)
            self.live.append(msg_id)
            if synthetic:
                self.not_prompts.add(msg_id)
        self.messages[msg_id] = message

    def replace(self, messages: list[Any], lineno: int) -> None:
        """A ``$set.messages`` record: the history the model sees from now on.

        Messages it introduces are the CLI's own (the session context, a compression summary,
        copies of kept messages under new ids): never prompts, and their ``functionCall`` parts
        are copies of calls already recorded with their results. When it drops messages the
        model saw and introduces new ones, the history was compressed: a compaction. (A resume
        or a rollback only restores or cuts known messages.)
        """
        listed = [m for m in messages if _is_message(m)]
        kept = [str(m["id"]) for m in listed]
        fresh = [m for m in listed if str(m["id"]) not in self.messages]
        if fresh and set(self.live) - set(kept):
            self.order.append(lineno)
        for message in fresh:
            self.put(message, lineno, synthetic=True)
        self.live = kept

    def rewind(self, msg_id: Any) -> None:
        """``$rewindTo``: the model no longer sees that message and the later ones."""
        if msg_id in self.live:
            self.live = self.live[: self.live.index(msg_id)]


def read(path: Path, doc: Any = None) -> Iterator[Trajectory]:
    """Import a session file (JSONL or legacy JSON) or a checkpoint, one trajectory per prompt."""
    if doc is None and path.name.endswith((".jsonl", ".jsonl.gz")):
        log, session = _read_jsonl(path)
    else:
        doc = load_json(path) if doc is None else doc
        if is_checkpoint(doc):
            yield from _checkpoint(path, doc)
            return
        if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
            raise TranscriptError(
                str(path), 'expected a Gemini CLI session {"sessionId", "messages"}'
            )
        log, session = _Log(), str(doc.get("sessionId") or path.name.split(".")[0])
        for index, message in enumerate(doc["messages"]):
            if _is_message(message):
                log.put(message, index)
    yield from _replay(path, session, log)


def _is_message(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("id"), str) and "type" in record


def _read_jsonl(path: Path) -> tuple[_Log, str]:
    log = _Log()
    session: str | None = None
    for lineno, record in iter_jsonl(path):
        if session is None and isinstance(record.get("sessionId"), str):
            session = record["sessionId"]
        if _is_message(record):
            log.put(record, lineno)
        elif "$rewindTo" in record:
            log.rewind(record["$rewindTo"])
        elif isinstance(record.get("$set"), dict):
            messages = record["$set"].get("messages")
            if isinstance(messages, list):
                log.replace(messages, lineno)
        elif lineno == 1 and "sessionId" not in record:
            raise TranscriptError(str(path), "not a Gemini CLI session (no sessionId)", lineno)
    return log, session or path.name.split(".")[0]


def _replay(path: Path, session: str, log: _Log) -> Iterator[Trajectory]:
    splitter = TurnSplitter(str(path), FORMAT, session)
    for entry in log.order:
        if isinstance(entry, int):
            splitter.add_compaction(entry)
            continue
        message = log.messages[entry]
        kind = message.get("type")
        if kind == "user" and entry not in log.not_prompts and _is_prompt(message.get("content")):
            splitter.start_turn()
        elif kind == "gemini":
            # The CLI's own copies (``$set.messages``) repeat calls already counted.
            usage = None if entry in log.not_prompts else _usage(message.get("tokens"))
            for call in message.get("toolCalls") or []:
                if isinstance(call, dict):
                    _call(splitter, call, log.lines[entry], usage)
                    usage = None  # a response's tokens go on its first call
                    splitter.note_model(message.get("model"))
    yield from splitter.finish()


def _usage(tokens: Any) -> Usage | None:
    """A ``gemini`` message's ``tokens``: thoughts are output, the tool-use prompt is input."""
    tokens = as_dict(tokens)
    return usage_of(
        token_sum(tokens, "input", "tool"),
        token_sum(tokens, "output", "thoughts"),
        tokens.get("cached"),
    )


def _is_prompt(content: Any) -> bool:
    """A user message with text of its own (function responses are not prompts)."""
    if isinstance(content, str):
        return bool(content.strip())
    if not isinstance(content, list):
        return False
    parts = [part for part in content if isinstance(part, dict)]
    if any("functionResponse" in part for part in parts):
        return False
    return any(isinstance(part.get("text"), str) and part["text"].strip() for part in parts)


def _call(splitter: TurnSplitter, call: dict[str, Any], line: int, usage: Usage | None) -> None:
    call_id = call.get("id")
    tool = ToolCall(
        tool=str(call.get("name") or "unknown"),
        params=call.get("args", {}),
        tool_call_id=str(call_id) if call_id is not None else None,
        line=line,
        tokens=None if usage is None else (usage.input_tokens or 0) + (usage.output_tokens or 0),
        usage=usage,
    )
    tool.result, tool.error, tool.failed = _outcome(call)
    mark_refused(tool, tool.error)
    splitter.add_call(tool)


def _outcome(call: dict[str, Any]) -> tuple[Any, str | None, bool | None]:
    """The text the model got back; a call whose status is ``error`` failed with it."""
    status = call.get("status")
    if status == "cancelled":
        return MISSING, None, None  # never ran to the end: nothing to compare
    text = _response_text(call.get("result"))
    if text is None:
        return MISSING, None, None
    return _classify(text, failed=status == "error", succeeded=status == "success")


def _classify(
    text: str, *, failed: bool, succeeded: bool = False
) -> tuple[Any, str | None, bool | None]:
    """``(result, error, failed)``: a tool error is the outcome; a shell command's exit code
    says whether it failed (a non-zero one marks the failure); else the call's ``status``.

    A hook's context appended to the output (loopwarden's warning) is not part of it.
    """
    text = without_hook_context(text)
    if failed:
        return MISSING, text, True
    code = _EXIT_CODE.search(text)
    if code is not None and code.group(1) != "0":
        # The output is the outcome; the exit code marks the failure.
        return text, code.group(0), True
    if code is not None or succeeded:
        return text, None, False
    return text, None, None


def _response_text(parts: Any) -> str | None:
    """The output of the ``functionResponse`` parts of a tool result, PGID lines removed."""
    if not isinstance(parts, list):
        return None
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        response = part.get("functionResponse")
        if isinstance(response, dict):
            texts.append(_text(response.get("response")))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return _PGID.sub("", "\n".join(texts)) if texts else None


def _text(response: Any) -> str:
    if isinstance(response, dict):
        for key in ("output", "error", "llmContent"):
            if isinstance(response.get(key), str):
                return str(response[key])
        return str(sorted(response.items()))
    return "" if response is None else str(response)


def _checkpoint(path: Path, doc: Any) -> Iterator[Trajectory]:
    """``/chat save``: the model history; function responses follow their calls by id or name."""
    history = doc.get("history") if isinstance(doc, dict) else doc
    assert isinstance(history, list)  # is_checkpoint() checked the shape
    splitter = TurnSplitter(str(path), FORMAT, path.name.split(".")[0])
    for index, content in enumerate(history):
        parts = [part for part in content["parts"] if isinstance(part, dict)]
        if content["role"] == "user":
            if _is_prompt(parts):
                splitter.start_turn()
            for part in parts:
                _checkpoint_response(splitter, part)
            continue
        for part in parts:
            call = part.get("functionCall")
            if isinstance(call, dict):
                call_id = call.get("id")
                splitter.add_call(
                    ToolCall(
                        tool=str(call.get("name") or "unknown"),
                        params=call.get("args", {}),
                        tool_call_id=str(call_id) if call_id else None,
                        line=index,
                    )
                )
    yield from splitter.finish()


def _checkpoint_response(splitter: TurnSplitter, part: dict[str, Any]) -> None:
    response = part.get("functionResponse")
    if not isinstance(response, dict):
        return
    call = splitter.take(response.get("id") or splitter.pending_by_name(response.get("name")))
    if call is not None:
        body = response.get("response")
        failed = isinstance(body, dict) and "error" in body and "output" not in body
        outcome = _classify(_PGID.sub("", _text(body)), failed=failed)
        call.result, call.error, call.failed = outcome

"""Outcome hashing: a digest of what a tool call returned, or None.

The digest deliberately ignores what changes on every call without meaning progress (exec
durations and PIDs, message ids and timestamps, update_plan step wording), so that a loop whose
results differ only in such noise is still seen as "no progress".
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Final

from loopwarden.core.canonical import (
    _JS_WHITESPACE,
    UNDEFINED,
    _digest_plain,
    _float_text,
    _int_text,
    _safe_str,
    _stored_items,
    digest_stable,
    js_trim,
    normalize_plan,
    stable_stringify,
)

__all__ = ["SEND_ACTIONS", "VOLATILE_KEYS", "extract_unknown_tool_name", "hash_tool_outcome"]

SEND_ACTIONS: Final = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)
"""`message` tool actions whose results carry fresh ids on every call (§3 rule 7)."""

VOLATILE_KEYS: Final = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)
"""Keys dropped (at any depth) from the details of a send result before hashing."""

# JavaScript regexes: \s is JavaScript's whitespace set and /i folds ASCII letters only (no
# Kelvin sign or long s matching [a-z]), hence the explicit class and re.ASCII.
_WS: Final = f"[{_JS_WHITESPACE}]"
_UNKNOWN_TOOL_PATTERNS: Final = (
    re.compile(f"unknown tool[:{_JS_WHITESPACE}]+[\"']?([a-z0-9_.-]+)[\"']?", re.I | re.A),
    re.compile(
        f"tool{_WS}+[\"']?([a-z0-9_.-]+)[\"']?{_WS}+(?:not found|is not available)", re.I | re.A
    ),
)

_EXEC_FINISHED: Final = frozenset({"completed", "failed"})
_EXEC_APPROVAL: Final = frozenset({"approval-pending", "approval-unavailable"})


def hash_tool_outcome(
    tool: str,
    params: object,
    result: object = UNDEFINED,
    error: object = UNDEFINED,
    *,
    send_tools: Collection[str] = (),
) -> tuple[str | None, str | None]:
    """``(result_hash, unknown_tool_name)`` of a call's outcome, per the outcome rules below.

    `send_tools` names extra tools whose results are treated like message sends (rule 7: volatile
    ids stripped), for hosts with their own provider send tools.
    """
    if error is not None and error is not UNDEFINED:
        text = _error_text(error)
        return "error:" + digest_stable(text), extract_unknown_tool_name(text)
    if not isinstance(result, dict):
        return (None if result is UNDEFINED else digest_stable(result)), None
    raw_details = _get(result, "details")
    details: dict[Any, Any] = raw_details if isinstance(raw_details, dict) else {}
    if _is(_get(details, "status"), "blocked") and _is(_get(details, "deniedReason"), "tool-loop"):
        return None, None  # the detector's own veto is never progress
    return _shaped_digest(tool, params, result, details, send_tools), None


def _shaped_digest(
    tool: str,
    params: object,
    result: dict[Any, Any],
    details: dict[Any, Any],
    send_tools: Collection[str],
) -> str:
    """The digest of the value hashed for a dict result: rules 5-8, first that applies.

    The content text is joined only by the rules that use it: most exec results carry their
    output twice (content and details.aggregated), and copying 20 kB for nothing is not free.
    The shapes of exec and process outcomes are built here with constant keys, so only their
    values' types decide whether they can be encoded without the canonical walk
    (`_digest_flat`).
    """
    status = _get(details, "status")
    if tool == "exec" and isinstance(status, str):
        shaped = _exec_outcome(status, details, result)
        if shaped is not None:
            return _digest_flat(shaped)
    action = _get(params, "action") if isinstance(params, dict) else None
    if tool == "process" and _is(action, "poll"):
        return _digest_flat(_process_outcome("poll", details, _content_text(result)))
    if tool == "process" and _is(action, "log"):
        return _digest_flat(_process_outcome("log", details, _content_text(result)))
    if tool == "sessions_send" or tool in send_tools or (tool == "message" and _is_send(action)):
        return digest_stable(strip_volatile_ids(details))
    if tool == "update_plan":
        return digest_stable({"details": normalize_plan(details), "text": ""})
    return digest_stable({"details": details, "text": _content_text(result)})


def _digest_flat(shaped: dict[str, object]) -> str:
    """``digest_stable(shaped)`` for a shape whose keys are this module's ASCII names.

    When every value is an exact str, int, bool or None, the canonical walk would find the
    dict plain as it is: it is encoded directly (floats, containers and subclasses take
    the walk, as before).
    """
    for value in shaped.values():
        kind = type(value)
        if not (kind is str or kind is int or kind is bool or value is None):
            return digest_stable(shaped)
    return _digest_plain(shaped)


def _is(value: object, text: str) -> bool:
    # JavaScript's ===: only a string equals a string. Also keeps == away from objects whose
    # comparison raises or returns something odd (an array's elementwise ==).
    return isinstance(value, str) and value == text


def _get(mapping: dict[Any, Any], key: str) -> Any:
    # dict's own get(): a dict subclass is read as what it stores, never through an override,
    # so the compiled build (which may read the storage directly) and the pure one agree. The
    # method call on an exact dict is the compiled build's native lookup.
    if type(mapping) is dict:
        return mapping.get(key)
    return dict.get(mapping, key)


def _is_send(action: object) -> bool:
    return isinstance(action, str) and action in SEND_ACTIONS


def _content_text(result: dict[Any, Any]) -> str:
    """The text items of the result's content, joined with newlines and trimmed (rule 3)."""
    content = _get(result, "content")
    if not isinstance(content, (list, tuple)):  # a tuple, not list | tuple: no union per call
        return ""
    parts: list[str] = []
    for item in _stored_items(content):
        if isinstance(item, dict) and isinstance(_get(item, "type"), str):
            text = _get(item, "text")
            if isinstance(text, str):
                parts.append(text)
    return js_trim("\n".join(parts))


def _exec_outcome(
    status: str, details: dict[Any, Any], result: dict[Any, Any]
) -> dict[str, object] | None:
    if status == "running":
        tail = _get(details, "tail")
        return {"status": status, "tail": tail if isinstance(tail, str) else ""}
    if status in _EXEC_FINISHED:
        exit_code = _get(details, "exitCode")
        aggregated = _get(details, "aggregated")
        output = js_trim(aggregated) if isinstance(aggregated, str) else ""
        return {
            "status": status,
            "exitCode": exit_code if _is_number(exit_code) else None,
            "timedOut": _get(details, "timedOut") is True,
            "output": output or _content_text(result),
        }
    if status in _EXEC_APPROVAL:
        return {
            "status": status,
            "reason": _str_or(_get(details, "reason"), None),
            "host": _str_or(_get(details, "host"), None),
            "command": _str_or(_get(details, "command"), ""),
            "warningText": _str_or(_get(details, "warningText"), ""),
        }
    return None  # another status: the later rules decide


def _is_number(value: object) -> bool:
    # JavaScript's `typeof x === "number"`: JSON cannot tell 1 from 1.0, and bool is not a number.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _str_or(value: object, default: str | None) -> str | None:
    return value if isinstance(value, str) else default


def _process_outcome(action: str, details: dict[Any, Any], text: str) -> dict[str, object]:
    fields: tuple[str, ...] = ("exitCode", "exitSignal", "aggregated")
    if action == "log":
        fields = ("totalLines", "totalChars", "truncated", "exitCode", "exitSignal")
    shaped: dict[str, object] = {"action": action, "status": dict.get(details, "status", UNDEFINED)}
    for name in fields:
        value = _get(details, name)
        shaped[name] = None if value is UNDEFINED else value
    shaped["text"] = text
    return shaped


def strip_volatile_ids(value: object) -> object:
    """A copy of `value` without volatile send ids (§3 rule 7), at any depth.

    Walks with an explicit stack and one copy per original container, so deep nesting does not
    recurse and cycles or shared references keep their shape in the copy.
    """
    copies: dict[int, Any] = {}
    pending: list[tuple[Any, Any]] = []

    def copy_of(item: object) -> object:
        if not isinstance(item, (dict, list, tuple)):
            return item
        copy = copies.get(id(item))
        if copy is None:
            copy = {} if isinstance(item, dict) else []
            copies[id(item)] = copy
            pending.append((item, copy))
        return copy

    root = copy_of(value)
    while pending:
        original, copy = pending.pop()
        if isinstance(original, dict):
            drop_id = _is_message_object(original)
            for key, item in list(dict.items(original)):
                if isinstance(key, str) and (key in VOLATILE_KEYS or (drop_id and key == "id")):
                    continue
                copy[key] = copy_of(item)
        else:
            copy.extend([copy_of(item) for item in _stored_items(original)])
    return root


def _is_message_object(obj: dict[Any, Any]) -> bool:
    """A sent message echoed back: its `id` is as volatile as a messageId."""
    if not (isinstance(_get(obj, "id"), str) and isinstance(_get(obj, "text"), str)):
        return False
    return any(
        isinstance(_get(obj, key), str) for key in ("direction", "senderId", "accountId")
    ) or isinstance(_get(obj, "conversation"), dict)


def _error_text(error: object) -> str:
    """The text an error is hashed by: message, the string, a JS-written number, else canonical."""
    if isinstance(error, BaseException):
        return _safe_str(error) or type(error).__name__
    if isinstance(error, str):
        return error
    if isinstance(error, bool):
        return "true" if error else "false"
    if isinstance(error, int):
        return _int_text(error)
    if isinstance(error, float):
        return _float_text(error).strip('"')  # String(NaN) is NaN, unquoted
    return stable_stringify(error)


def extract_unknown_tool_name(text: str) -> str | None:
    """The missing tool named by an error text ("Unknown tool: Weather" -> "weather"), or None."""
    trimmed = js_trim(text)
    for pattern in _UNKNOWN_TOOL_PATTERNS:
        match = pattern.search(trimmed)
        if match is not None:
            return match.group(1).lower()
    return None

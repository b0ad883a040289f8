"""What the guard needs from an MCP ``tools/call`` and what the client gets back.

Pure helpers (no I/O but the events file): read loopwarden's ``_meta`` keys, turn a
``CallToolResult`` into the outcome the guard hashes, and turn a guard decision into a
``CallToolResult`` for the client.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import IO, Any

from mcp import types

from loopwarden.canonical import UNDEFINED
from loopwarden.events import LoopEvent
from loopwarden.guard import Decision

RUN_ID_KEY = "loopwarden/runId"
"""``_meta`` key of a ``tools/call`` naming the agent run the call belongs to."""

COMPACTED_KEY = "loopwarden/compacted"
"""``_meta`` key; ``true`` means the client compacted its context just before this call."""

_log = logging.getLogger("loopwarden.mcp_proxy")


def read_meta(
    meta: types.RequestParams.Meta | None,
) -> tuple[str | None, bool, types.RequestParams.Meta | None]:
    """Split a request's ``_meta`` into (run id, compacted, the ``_meta`` to forward).

    loopwarden's own keys are removed before forwarding: the wrapped server has no use for
    them. A wrongly typed value is ignored with a warning on stderr, never sent to the model,
    since only the client's configuration (not the model) can fix it.
    """
    if meta is None:
        return None, False, None
    extra = dict(meta.model_extra or {})
    raw_run = extra.pop(RUN_ID_KEY, None)
    raw_compacted = extra.pop(COMPACTED_KEY, None)
    run_id: str | None = None
    if isinstance(raw_run, str) and raw_run.strip():
        run_id = raw_run.strip()
    elif raw_run is not None:
        _log.warning(
            "ignoring _meta[%r]: expected a non-empty string, got %s",
            RUN_ID_KEY,
            type(raw_run).__name__,
        )
    if raw_compacted is not None and not isinstance(raw_compacted, bool):
        _log.warning(
            "ignoring _meta[%r]: expected true or false, got %s",
            COMPACTED_KEY,
            type(raw_compacted).__name__,
        )
    if meta.progressToken is not None:
        extra["progressToken"] = meta.progressToken
    forwarded = types.RequestParams.Meta.model_validate(extra) if extra else None
    return run_id, raw_compacted is True, forwarded


def outcome_of(result: types.CallToolResult) -> tuple[Any, Any]:
    """(result, error) for ``after_tool_call``: an ``isError`` result counts as an error.

    Why an error: servers report unknown tools and failures as ``isError`` results with the
    message as text ("Unknown tool: x"), which is what the unknown-tool detector reads.
    """
    data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    if not result.isError:
        return data, None
    text = "\n".join(
        block.text for block in result.content if isinstance(block, types.TextContent)
    ).strip()
    return UNDEFINED, text or "tool returned isError without text"


def text_result(
    text: str, *, is_error: bool, meta: dict[str, Any] | None = None
) -> types.CallToolResult:
    """A one-text ``CallToolResult`` (the proxy's own answers: blocks, stops, failures)."""
    return types.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": text}],
            "isError": is_error,
            **({"_meta": meta} if meta else {}),
        }
    )


def blocked_call_result(decision: Decision) -> types.CallToolResult:
    """The client-facing result of a call the guard blocked; the server never saw the call."""
    blocked = decision.blocked_result or {}
    texts = [
        item["text"]
        for item in blocked.get("content", [])
        if isinstance(item, dict) and isinstance(item.get("text"), str)
    ] or [decision.message or "blocked by loopwarden"]
    return types.CallToolResult.model_validate(
        {
            "content": [{"type": "text", "text": text} for text in texts],
            "isError": True,
            "_meta": {"loopwarden/action": "block", "loopwarden/details": blocked.get("details")},
        }
    )


def stopped_call_result(decision: Decision) -> types.CallToolResult:
    """The answer to every call of a run the guard stopped (post-compaction loop)."""
    return text_result(
        decision.message or "stopped by loopwarden",
        is_error=True,
        meta={"loopwarden/action": "stop"},
    )


def with_notes(result: types.CallToolResult, notes: list[str]) -> types.CallToolResult:
    """``result`` with each note appended as an extra text item, so the model sees it."""
    if not notes:
        return result
    extra = [types.TextContent(type="text", text=note) for note in notes]
    return result.model_copy(update={"content": [*result.content, *extra]})


class EventsFile:
    """Appends each loop event as one JSON line (``--events FILE``); flushed per line."""

    def __init__(self, path: Path) -> None:
        try:
            self._handle: IO[str] = path.open("a", encoding="utf-8")
        except OSError as exc:
            raise OSError(
                f"--events {str(path)!r}: cannot open for appending ({exc.strerror or exc}); "
                "check that the folder exists and is writable"
            ) from exc

    def __call__(self, event: LoopEvent) -> None:
        """Write one event (events carry names, hashes and counts only — never arguments)."""
        self._handle.write(json.dumps(event.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
        self._handle.flush()

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

"""Everything between an MCP ``tools/call`` and the :class:`~loopwarden.LoopGuard`.

:class:`CallGuard` is the only place the proxy talks to the guard: one guard session per client
connection, the runs it saw, the batches of concurrent calls, and the calls in flight. The rest
are pure helpers over plain JSON data (no SDK): read loopwarden's ``_meta`` keys, check and read
a ``CallToolResult``, and build the proxy's own results (blocks, stops, failures).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopwarden._terminal import printable
from loopwarden.core.canonical import UNDEFINED
from loopwarden.core.config import ResolvedConfig, ToolPolicy, with_tool_policies
from loopwarden.events import LoopEvent
from loopwarden.guard import Decision, LoopGuard
from loopwarden.store import MemoryStore

RUN_ID_KEY = "loopwarden/runId"
"""``_meta`` key of a ``tools/call`` naming the agent run the call belongs to."""

COMPACTED_KEY = "loopwarden/compacted"
"""``_meta`` key; ``true`` means the client compacted its context just before this call."""

WARNING_KEY = "loopwarden_warning"
"""Key of loopwarden's notes in a result's ``structuredContent``, where the tool's output schema
allows it: clients such as Claude Code give the model ``structuredContent`` instead of
``content`` when a result has both."""

_log = logging.getLogger("loopwarden.mcp_proxy")


def never_waits(guard: LoopGuard) -> bool:
    """Whether nothing the guard does for a call waits: its store is the in-memory one and no
    run-records writer (which the async methods run in a thread) is attached.

    Then the guard's sync methods decide exactly as its async ones, without their coroutines
    (about 20,000 instructions per call, counted), and a message can be handled outside a
    task (see :class:`~loopwarden.mcp_proxy._downstream.LinePump`).
    """
    return type(guard.store) is MemoryStore and guard.recorder is None


@dataclass
class ToolCall:
    """One ``tools/call`` the guard let through, until its outcome is recorded."""

    call_id: str
    name: str
    args: Any
    run: str
    batch: str
    warning: str | None
    task: bool = False  # task-augmented (``params.task``): the answer is a task, not a result


class CallGuard:
    """The guard's view of one client connection.

    Batches: a call that arrives while no call of the connection is in flight starts a new
    batch; calls that arrive while others are in flight join it (the model issued them
    together). A call leaves the flight when its outcome is recorded or it is abandoned.
    """

    def __init__(self, guard: LoopGuard, session: str) -> None:
        self.guard = guard
        self.session = session
        self.connection_run = session  # the run of calls whose _meta names none
        self._runs: set[str] = set()
        self._in_flight = 0
        self._batches = 0
        self._compacted_runs: set[str] = set()
        # Tool name → whether its structuredContent may carry one more key (from tools/list).
        self._open_schemas: dict[str, bool] = {}
        # The config as the user gave it, and the policies the tools' annotations give them.
        self._own_config = guard.config
        self._annotated: dict[str, ToolPolicy] = {}

    def learn_tools(self, result: Any) -> None:
        """Note from a ``tools/list`` result which tools' structured results may take a note,
        and the policies the tools' annotations give them (unless ``toolAnnotations`` is off)."""
        tools = result.get("tools") if isinstance(result, dict) else None
        listed = [
            tool
            for tool in (tools if isinstance(tools, list) else ())
            if isinstance(tool, dict) and isinstance(tool.get("name"), str)
        ]
        for tool in listed:
            self._open_schemas[tool["name"]] = schema_takes_a_key(tool.get("outputSchema"))
        config = self._own_config
        if config.tool_annotations and config.detection_enabled:
            self._learn_annotations(listed, config)

    def _learn_annotations(self, listed: list[dict[str, Any]], config: ResolvedConfig) -> None:
        """Derive each listed tool's policy from its annotations; the guard's config gets them
        under the user's own ``toolPolicies`` entries, which win."""
        changed: dict[str, ToolPolicy | None] = {}
        for tool in listed:
            name = tool["name"]
            policy = policy_from_annotations(tool.get("annotations"), config)
            if policy != self._annotated.get(name):
                changed[name] = policy
        if not changed:
            return  # the same listing again (a client re-lists often): nothing to redo
        for name, policy in changed.items():
            if policy is None:
                del self._annotated[name]
            else:
                self._annotated[name] = policy
        self.guard.config = with_tool_policies(config, self._annotated)
        _log_annotation_policies(changed, config)

    def structured_note_allowed(self, tool: str) -> bool:
        """Whether a note may go into ``tool``'s ``structuredContent`` (never for a tool the
        client did not list through this proxy: its schema is unknown)."""
        return self._open_schemas.get(tool, False)

    async def before(self, call_id: str, params: dict[str, Any]) -> tuple[Decision, ToolCall, bool]:
        """Check one call; returns the decision, the call, and whether ``params`` changed.

        ``params`` loses loopwarden's ``_meta`` keys in place (the server has no use for
        them); the caller re-encodes the request only when the flag says so.
        """
        run_id, compacted, changed = strip_meta(params)
        run = run_id or self.connection_run
        if run not in self._runs:
            self._runs.add(run)
            await self.guard.astart_run(self.session, run)
        if compacted:
            self._compacted_runs.add(run)
            await self.guard.aon_compaction_retry(self.session, run_id=run)
        name = params.get("name")
        args = params.get("arguments")
        args = {} if args is None else args
        if self._in_flight == 0:
            self._batches += 1
        batch = f"{self.session}-{self._batches}"
        # The guard's async methods: with a store that waits on the network (Redis), the relay
        # keeps passing other messages meanwhile. The relay handles the client's messages one
        # at a time, so batches are counted as they arrive.
        guard = self.guard
        # The sync method when the guard never waits: the same decision, fewer coroutines.
        decide = guard.before_tool_call if never_waits(guard) else guard.abefore_tool_call
        decided = decide(
            self.session, str(name), args, run_id=run, tool_call_id=call_id, batch=batch
        )
        decision = decided if isinstance(decided, Decision) else await decided
        warning = decision.message if decision.action == "warn" else None
        call = ToolCall(call_id, str(name), args, run, batch, warning, "task" in params)
        if decision.allowed:
            self._in_flight += 1
        return decision, call, changed

    async def after(
        self,
        call: ToolCall,
        *,
        result: Any = UNDEFINED,
        error: Any = None,
        failed: bool | None = None,
    ) -> list[str]:
        """Record the outcome; returns the notes for the model (warning, stop reason).

        ``failed``: what the answer states (``outcome_of``); an ``error`` is a failure anyway.
        """
        self._in_flight = max(0, self._in_flight - 1)
        guard = self.guard
        record = guard.after_tool_call if never_waits(guard) else guard.aafter_tool_call
        recorded = record(
            self.session,
            call.name,
            call.args,
            result=result,
            error=error,
            failed=failed,
            run_id=call.run,
            tool_call_id=call.call_id,
            batch=call.batch,
        )
        after = recorded if isinstance(recorded, Decision) else await recorded
        notes = [call.warning] if call.warning else []
        if after.action == "stop" and after.message:
            notes.append(after.message)
        return notes

    def may_annotate(self, call: ToolCall) -> bool:
        """Whether the answer to ``call`` may need a note appended (so must be held whole).

        A warning is known before the call; a stop after it can only come from the
        post-compaction guard, so any run that ever compacted counts (conservatively).
        """
        return call.warning is not None or call.run in self._compacted_runs

    def abandon(self, call: ToolCall) -> None:
        """The client cancelled the call: it leaves the flight with no outcome recorded."""
        self._in_flight = max(0, self._in_flight - 1)

    async def end_runs(self) -> None:
        """Close every run record of this connection (once)."""
        runs, self._runs = sorted(self._runs), set()
        for run in runs:
            await self.guard.aend_run(self.session, run, outcome="disconnected")


def policy_from_annotations(annotations: Any, config: ResolvedConfig) -> ToolPolicy | None:
    """The policy a tool's MCP annotations justify, or None (docs/mcp-proxy.md, the table).

    The hints are the server's word, not verified, so they only ever make a block come sooner
    (a destructive tool that is not idempotent) or drop a warning about repeats that make
    progress (a read-only tool); nothing they say lets a loop run longer before its block. A
    hint counts only when it is literally ``true``: the spec's defaults (``destructiveHint``
    true) say what a client should assume before asking a user, not that repeats do harm.
    """
    if not isinstance(annotations, dict):
        return None
    if annotations.get("readOnlyHint") is True:  # the other hints mean nothing then (spec)
        return ToolPolicy(read_only=True)
    if annotations.get("destructiveHint") is True and annotations.get("idempotentHint") is not True:
        # Each repeat may destroy more: block it at half the repeats (rounded up).
        consecutive = config.detectors.consecutive_repeat
        return ToolPolicy(
            warning_threshold=_half(config.warning_threshold),
            critical_threshold=_half(config.critical_threshold),
            consecutive_warning_threshold=(
                _half(config.consecutive_warning_threshold) if consecutive else None
            ),
            consecutive_critical_threshold=(
                _half(config.consecutive_critical_threshold) if consecutive else None
            ),
        )
    return None


def _half(threshold: int) -> int:
    return (threshold + 1) // 2


def _log_annotation_policies(changed: dict[str, ToolPolicy | None], config: ResolvedConfig) -> None:
    """Say which tools got which policy from their annotations (tool names only, privacy)."""
    own = {name for name, _ in config.tool_policies}
    groups: dict[str, list[str]] = {}
    for name, policy in changed.items():
        if name in own:
            shown = "none: your toolPolicies entry for it wins"
        elif policy is None:
            shown = "none (its annotations no longer justify one)"
        else:
            shown = json.dumps(policy.to_camel(), sort_keys=True)
        groups.setdefault(shown, []).append(name)
    for shown, names in groups.items():
        _log.info(
            "policy from tool annotations for %d tool(s) (%s): %s",
            len(names),
            ", ".join(printable(name) for name in sorted(names)),  # a server's names
            shown,
        )


def strip_meta(params: dict[str, Any]) -> tuple[str | None, bool, bool]:
    """Take loopwarden's keys out of ``params["_meta"]``: (run id, compacted, changed).

    A wrongly typed value is ignored with a warning on stderr, never sent to the model,
    since only the client's configuration (not the model) can fix it.
    """
    meta = params.get("_meta")
    if not isinstance(meta, dict) or (RUN_ID_KEY not in meta and COMPACTED_KEY not in meta):
        return None, False, False
    meta = dict(meta)
    raw_run = meta.pop(RUN_ID_KEY, None)
    raw_compacted = meta.pop(COMPACTED_KEY, None)
    if meta:
        params["_meta"] = meta
    else:
        del params["_meta"]
    run_id: str | None = None
    if isinstance(raw_run, str) and raw_run.strip():
        run_id = raw_run.strip()
    elif raw_run is not None:
        _log.warning(
            "ignoring _meta[%r]: expected a non-empty string, got %s",
            RUN_ID_KEY,
            _json_type(raw_run),
        )
    if raw_compacted is not None and not isinstance(raw_compacted, bool):
        _log.warning(
            "ignoring _meta[%r]: expected true or false, got %s",
            COMPACTED_KEY,
            _json_type(raw_compacted),
        )
    return run_id, raw_compacted is True, True


def _json_type(value: Any) -> str:
    return type(value).__name__


def result_problem(result: Any) -> str | None:
    """Where a ``CallToolResult`` breaks the schema, or None; never quotes a value (privacy)."""
    if not isinstance(result, dict):
        return "the result is not an object"
    content = result.get("content")
    if not isinstance(content, list):
        return "first problem at 'content': expected a list"
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"first problem at 'content.{index}': expected an object with a 'type'"
    for key, kind in (("isError", bool), ("structuredContent", dict), ("_meta", dict)):
        if result.get(key) is not None and not isinstance(result[key], kind):
            return f"first problem at {key!r}: wrong type"
    return None


def outcome_of(result: dict[str, Any]) -> tuple[Any, Any, bool]:
    """(result, error, failed) for ``after_tool_call``: an ``isError`` result counts as an
    error, and failed; a result without it is a success, as MCP says (a tool reports its
    failures with ``isError``), whatever its text reads like.

    Why an error: servers report unknown tools and failures as ``isError`` results with the
    message as text ("Unknown tool: x"), which is what the unknown-tool detector reads.
    """
    if not result.get("isError"):
        return result, None, False
    text = "\n".join(
        block["text"]
        for block in result["content"]
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    ).strip()
    return UNDEFINED, text or "tool returned isError without text", True


def text_result(text: str, *, is_error: bool, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """A one-text ``CallToolResult`` (the proxy's own answers: blocks, stops, failures)."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if meta:
        result["_meta"] = meta
    return result


def blocked_call_result(decision: Decision) -> dict[str, Any]:
    """The client-facing result of a call the guard blocked; the server never saw the call."""
    blocked = decision.blocked_result or {}
    texts = [
        item["text"]
        for item in blocked.get("content", [])
        if isinstance(item, dict) and isinstance(item.get("text"), str)
    ] or [decision.message or "blocked by loopwarden"]
    return {
        "content": [{"type": "text", "text": text} for text in texts],
        "isError": True,
        "_meta": {"loopwarden/action": "block", "loopwarden/details": blocked.get("details")},
    }


def stopped_call_result(decision: Decision) -> dict[str, Any]:
    """The answer to every call of a run the guard stopped (post-compaction loop)."""
    return text_result(
        decision.message or "stopped by loopwarden",
        is_error=True,
        meta={"loopwarden/action": "stop"},
    )


def with_notes(
    result: dict[str, Any], notes: list[str], *, structured: bool = False
) -> dict[str, Any]:
    """``result`` with each note appended as an extra text item, so the model sees it; with
    ``structured`` (the tool's output schema allows another key) also under
    :data:`WARNING_KEY` in its ``structuredContent``, which some clients show instead."""
    extra = [{"type": "text", "text": note} for note in notes]
    noted = {**result, "content": [*result["content"], *extra]}
    content = result.get("structuredContent")
    if structured and isinstance(content, dict) and WARNING_KEY not in content:
        noted["structuredContent"] = {**content, WARNING_KEY: "\n\n".join(notes)}
    return noted


def schema_takes_a_key(schema: Any) -> bool:
    """Whether an object matching the output ``schema`` stays valid with one more key: no
    schema, or an object schema that does not close its properties (JSON Schema allows other
    keys unless ``additionalProperties`` or ``unevaluatedProperties`` says otherwise)."""
    if schema is None:
        return True
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return False
    closed = (schema.get("additionalProperties"), schema.get("unevaluatedProperties"))
    if False in closed or any(isinstance(rule, dict) for rule in closed):
        return False
    combined = ("allOf", "anyOf", "oneOf", "not", "if", "$ref", "patternProperties")
    return not any(key in schema for key in combined)


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

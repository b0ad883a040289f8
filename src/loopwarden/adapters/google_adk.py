"""Google ADK adapter: ``LoopGuardPlugin``, a Runner plugin that guards every tool call.

Requires the ``google-adk`` extra (from the repository's root: ``pip install '.[google-adk]'``)::

    from google.adk.runners import InMemoryRunner
    from loopwarden import LoopGuard
    from loopwarden.adapters.google_adk import LoopGuardPlugin

    runner = InMemoryRunner(agent, plugins=[LoopGuardPlugin(LoopGuard())])

A plugin covers every agent the ``Runner`` runs (sub-agents, agents used as tools). What the
model sees:

- **warn**: the tool runs; the warning is appended to its result (a text result gets it as a
  new paragraph, a dict result under the key ``loopwarden_warning``).
- **block**: the tool does not run; ``before_tool_callback`` answers the call with
  ``{"error": <blocked text>}``, which ADK hands to the model as the tool's response.
- **stop** (a loop that survived a compaction, or the guard's ``stopAfterBlocks``): the
  stopping call is answered like a block, and every later model call of the invocation is
  answered by the plugin with the reason as the model's final text, so the run ends without
  another model request. That final event carries ``custom_metadata["loopwarden"]``.

The run is ADK's invocation (one ``runner.run_async`` / ``run``); the session is ADK's session
(``app_name/user_id/session_id``), so the runs of one conversation share a history and each
starts clean. An events compaction that appears in the session during a run (``App`` with
``EventsCompactionConfig``) arms the post-compaction guard.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from loopwarden.adapters._common import (
    RunBook,
    RunState,
    detector_of,
    guard_or_default,
    output_text,
    stop_reason,
    with_warning,
)

try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.agents.invocation_context import InvocationContext
    from google.adk.events.event import Event
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.google_adk needs Google ADK: "
        "pip install '.[google-adk]' from loopwarden's repository root"
    ) from exc

if TYPE_CHECKING:
    from loopwarden.guard import Decision, LoopGuard

__all__ = ["WARNING_KEY", "LoopGuardPlugin"]

PLUGIN_NAME = "loopwarden"
# Where the warning goes in a dict result (ADK sends dicts to the model as they are).
WARNING_KEY = "loopwarden_warning"
SessionKey = Callable[[CallbackContext], str] | None


class LoopGuardPlugin(BasePlugin):
    """Runs every tool call of an ADK ``Runner`` through a ``LoopGuard``.

    Args:
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of the ADK context (``ToolContext`` / ``CallbackContext``) naming
            the guard session; default: ``app_name/user_id/session_id`` of ADK's session.
        name: the plugin's name in the runner (ADK wants plugin names unique).
        max_runs: how many unfinished invocations the plugin keeps state for.
    """

    def __init__(
        self,
        guard: LoopGuard | None = None,
        *,
        session: SessionKey = None,
        name: str = PLUGIN_NAME,
        max_runs: int = 4096,
    ) -> None:
        super().__init__(name=name)
        self.guard = guard_or_default(guard)
        self._session = session
        self._runs: RunBook[str] = RunBook(max_runs)
        # Per run: how many model responses with tool calls each agent has had, and how many
        # session events were already searched for compactions (the session only appends).
        self._turns: dict[str, dict[str, int]] = {}
        self._scanned: dict[str, int] = {}
        self._lock = threading.Lock()
        self._max_runs = max_runs

    # -- run boundaries -------------------------------------------------------------------------

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        """Open the run in the guard; compactions already in the session are not news."""
        run = self._runs.get(
            invocation_context.invocation_id,
            _default_session(invocation_context.session),
            invocation_context.invocation_id,
        )
        events = invocation_context.session.events
        run.seen_compactions.update(_compaction_keys(events))
        with self._lock:
            self._scanned[run.run_id] = len(events)
        await self.guard.astart_run(run.session, run.run_id)
        return None

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """Close the run in the guard."""
        await self._end(invocation_context.invocation_id, "completed")

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        """Close a run that failed."""
        await self._end(invocation_context.invocation_id, "failed")

    # -- model turns ----------------------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Arm the compaction guard on a fresh compaction; answer for the model once stopped."""
        run = self._run(callback_context)
        events = callback_context.session.events
        with self._lock:
            start = self._scanned.get(run.run_id, 0)
            start = 0 if start > len(events) else start  # events were rewound: look again
            self._scanned[run.run_id] = len(events)
        fresh = [k for k in _compaction_keys(events[start:]) if k not in run.seen_compactions]
        if fresh:
            run.seen_compactions.update(fresh)
            await self.guard.aon_compaction_retry(run.session, run_id=run.run_id)
        if run.stopped is None:
            return None
        # A stopped run spends no more model requests: the reason is the model's last word.
        return LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=stop_reason(run.stopped))]),
            custom_metadata={"loopwarden": _stop_metadata(run.stopped)},
            turn_complete=True,
        )

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """Count the model responses that carry tool calls: each one is a batch."""
        content = llm_response.content
        calls = content is not None and any(p.function_call for p in content.parts or ())
        if calls and not llm_response.partial:
            run_id = callback_context.invocation_id
            with self._lock:
                turns = self._turns.setdefault(run_id, {})
                turns[callback_context.agent_name] = turns.get(callback_context.agent_name, 0) + 1
                while len(self._turns) > self._max_runs:
                    self._turns.pop(next(iter(self._turns)))
                while len(self._scanned) > self._max_runs:
                    self._scanned.pop(next(iter(self._scanned)))
        return None

    # -- around each tool call ----------------------------------------------------------------

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Ask the guard before the tool runs; a dict returned here replaces the tool's run."""
        run = self._run(tool_context)
        decision = await self.guard.abefore_tool_call(
            run.session,
            tool.name,
            tool_args,
            run_id=run.run_id,
            tool_call_id=tool_context.function_call_id,
            batch=self._batch(tool_context),
        )
        if decision.action == "stop":
            run.stopped = run.stopped or decision
        if decision.action in ("block", "stop"):
            return {"error": stop_reason(decision)}
        if decision.action == "warn" and decision.message:
            run.pending_warnings[_call_key(tool_context)] = decision.message
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Record the outcome; put a pending warning into the result the model gets."""
        run = self._run(tool_context)
        failed = _stated_failure(result)
        await self._after(run, tool, tool_args, tool_context, result=result, failed=failed)
        warning = run.pending_warnings.pop(_call_key(tool_context), None)
        return None if warning is None else _warned(result, warning)

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Record a failed call (a tool that raised, or a tool name ADK does not know).

        The error goes on as ADK would handle it; only a pending warning is added to it, as the
        error response the model reads.
        """
        if not isinstance(error, Exception):  # a cancelled call: no outcome to record
            return None
        run = self._run(tool_context)
        text = str(error) or type(error).__name__
        await self._after(run, tool, tool_args, tool_context, error=text)
        warning = run.pending_warnings.pop(_call_key(tool_context), None)
        return None if warning is None else {"error": with_warning(text, warning)}

    # -- helpers ------------------------------------------------------------------------------

    def _run(self, context: CallbackContext) -> RunState:
        session = (
            str(self._session(context))
            if self._session is not None
            else _default_session(context.session)
        )
        return self._runs.get(context.invocation_id, session, context.invocation_id)

    def _batch(self, context: ToolContext) -> str:
        """The model response the call came from: the agent's count of tool-calling turns."""
        with self._lock:
            turn = self._turns.get(context.invocation_id, {}).get(context.agent_name, 0)
        return f"{context.agent_name}#{turn}"

    async def _after(
        self,
        run: RunState,
        tool: BaseTool,
        tool_args: dict[str, Any],
        context: ToolContext,
        **outcome: Any,
    ) -> None:
        after = await self.guard.aafter_tool_call(
            run.session,
            tool.name,
            tool_args,
            run_id=run.run_id,
            tool_call_id=context.function_call_id,
            batch=self._batch(context),
            **outcome,
        )
        if after.action == "stop":
            run.stopped = run.stopped or after

    async def _end(self, run_id: str, outcome: str) -> None:
        with self._lock:
            self._turns.pop(run_id, None)
            self._scanned.pop(run_id, None)
        run = self._runs.pop(run_id)
        if run is not None:
            await self.guard.aend_run(run.session, run.run_id, outcome=outcome)


# ADK's convention for a tool's answer: a dict whose "status" says how the call went.
_FAILED_STATUSES = frozenset({"error", "failed", "failure"})


def _stated_failure(result: Any) -> bool | None:
    """Whether a tool's answer says it failed: ADK tools report a failure by returning
    ``{"status": "error", "error_message": ...}`` rather than raising (a raise ends the run),
    and a success with ``"status": "success"``; None when the answer says neither."""
    status = result.get("status") if isinstance(result, dict) else None
    if not isinstance(status, str):
        return None
    status = status.strip().lower()
    if status in _FAILED_STATUSES:
        return True
    return False if status == "success" else None


def _default_session(session: Any) -> str:
    """ADK session ids are unique per app and user, so all three name the conversation."""
    return f"{session.app_name}/{session.user_id}/{session.id}"


def _call_key(context: ToolContext) -> str:
    return context.function_call_id or f"{context.agent_name}:{id(context)}"


def _compaction_keys(events: Iterable[Event]) -> list[str]:
    """A key per compaction event of the session (a digest of its range, not its summary)."""
    keys: list[str] = []
    for event in events:
        compaction = getattr(event.actions, "compaction", None) if event.actions else None
        if compaction is not None:
            text = f"{event.id}\x00{compaction.start_timestamp}\x00{compaction.end_timestamp}"
            keys.append(hashlib.sha256(text.encode()).hexdigest())
    return keys


def _stop_metadata(decision: Decision) -> dict[str, Any]:
    return {"action": "stop", "detector": detector_of(decision)}


def _warned(result: Any, warning: str) -> dict[str, Any]:
    """The tool's result with the warning: appended to its text, or next to its fields."""
    if isinstance(result, dict):
        text = result.get("result")
        if set(result) == {"result"} and isinstance(text, str):
            return {"result": with_warning(text, warning)}
        return {**result, WARNING_KEY: warning}
    # ADK sends any other value as {"result": value}; the text form carries the warning.
    return {"result": with_warning(output_text(result), warning)}

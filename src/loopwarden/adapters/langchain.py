"""LangChain v1 adapter: ``LoopGuardMiddleware`` for ``create_agent(..., middleware=[...])``.

Requires the ``langchain`` extra (from the repository's root: ``pip install '.[langchain]'``)::

    from langchain.agents import create_agent
    from loopwarden import LoopGuard
    from loopwarden.adapters.langchain import LoopGuardMiddleware

    guard = LoopGuard()
    agent = create_agent(model, tools, middleware=[LoopGuardMiddleware(guard)])

What the model sees:

- **warn**: the tool runs; the warning is appended to its ``ToolMessage``.
- **block**: the tool does not run; the model gets an error ``ToolMessage`` whose text is the
  blocked message (the guard's blocked result is kept as the message's ``artifact``).
- **stop** (a loop that survived a summarisation, or the guard's ``stopAfterBlocks``): the
  next ``before_model`` jumps to the end of the graph with a final ``AIMessage`` saying why, so the
  run ends cleanly instead of hitting the recursion limit.

The session is the LangGraph thread id (the run id when there is no checkpointer); every
``invoke`` gets a fresh run id, kept in private graph state. When LangChain's
``SummarizationMiddleware`` compacts the conversation, the post-compaction guard is armed.

``ainvoke`` / ``astream`` run the middleware's async hooks, which call the guard's async
methods (``abefore_tool_call`` ...): with an ``AsyncRedisStore`` no guard call blocks the loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any

from loopwarden.adapters._common import (
    RunBook,
    RunState,
    detector_of,
    guard_or_default,
    new_run_id,
    stop_reason,
    with_warning,
)

try:
    from langchain.agents.middleware.types import (
        AgentMiddleware,
        AgentState,
        PrivateStateAttr,
        hook_config,
    )
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command
    from typing_extensions import NotRequired
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.langchain needs LangChain v1: "
        "pip install '.[langchain]' from loopwarden's repository root"
    ) from exc

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

    from loopwarden.guard import Decision, LoopGuard

__all__ = ["LoopGuardMiddleware", "LoopGuardState"]

_RUN_KEY = "loopwarden_run_id"
_SUMMARY_SOURCE = "summarization"  # additional_kwargs["lc_source"] of SummarizationMiddleware
_SUMMARY_OPENING = "Here is a summary of the conversation to date:"

ToolResponse = ToolMessage | Command[Any]


class LoopGuardState(AgentState[Any]):
    """Agent state with the adapter's private run id (hidden from the graph's input/output)."""

    loopwarden_run_id: NotRequired[Annotated[str | None, PrivateStateAttr]]


class LoopGuardMiddleware(AgentMiddleware[LoopGuardState, Any, Any]):
    """Runs every tool call of a LangChain v1 agent through a ``LoopGuard``.

    Args:
        guard: the ``LoopGuard`` that owns the sessions' histories and the thresholds; default:
            ``LoopGuard()``, the ``recommended`` profile.
        max_runs: how many in-flight runs the middleware remembers (oldest forgotten first).

    Put it first in ``middleware=[...]``: its ``before_model`` then ends a stopped run before
    other middleware (a summarisation, say) spends a model call on it.
    """

    state_schema = LoopGuardState

    def __init__(
        self,
        guard: LoopGuard | None = None,
        *,
        max_runs: int = 4096,
    ) -> None:
        super().__init__()
        self.guard = guard_or_default(guard)
        self.tools = []
        self._runs: RunBook[str] = RunBook(max_runs)

    # -- run boundaries -------------------------------------------------------------------------

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Start a fresh run: new run id in private state; summaries already present are old."""
        run = self._open_run(state, runtime)
        self.guard.start_run(run.session, run.run_id)
        return {_RUN_KEY: run.run_id}

    async def abefore_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``before_agent`` (the guard's async methods)."""
        run = self._open_run(state, runtime)
        await self.guard.astart_run(run.session, run.run_id)
        return {_RUN_KEY: run.run_id}

    def after_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Close the run in the guard and forget it here."""
        run = self._close_run(state)
        if run is not None:
            self.guard.end_run(run.session, run.run_id, outcome=_outcome_of(run))
        return None

    async def aafter_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``after_agent``."""
        run = self._close_run(state)
        if run is not None:
            await self.guard.aend_run(run.session, run.run_id, outcome=_outcome_of(run))
        return None

    # -- before each model call: compaction and stop ----------------------------------------------

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """End a stopped run with a final ``AIMessage``; arm the guard after a summarisation."""
        run = self._run_of(state, runtime)
        if run is None:
            return None
        if _fresh_compaction(run, state.get("messages", ())):
            self.guard.on_compaction_retry(run.session, run_id=run.run_id)
        return _stop_update(run)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async twin of ``before_model``."""
        run = self._run_of(state, runtime)
        if run is None:
            return None
        if _fresh_compaction(run, state.get("messages", ())):
            await self.guard.aon_compaction_retry(run.session, run_id=run.run_id)
        return _stop_update(run)

    # -- around each tool call ----------------------------------------------------------------

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolResponse],
    ) -> ToolResponse:
        """Ask the guard before the tool runs, record the outcome after it."""
        run, compacted, call = self._prepare(request)
        if compacted:
            self.guard.on_compaction_retry(run.session, run_id=run.run_id)
        decision = self.guard.before_tool_call(*call.args, **call.before)
        if decision.action in ("block", "stop"):
            return self._refuse(run, request, decision)
        try:
            response = handler(request)
        except GraphBubbleUp:  # an interrupt is control flow, not an outcome
            raise
        except Exception as exc:
            self._stopped_by(run, self.guard.after_tool_call(*call.args, **call.after(error=exc)))
            raise
        outcome = _outcome(request, response)
        self._stopped_by(run, self.guard.after_tool_call(*call.args, **call.after(**outcome)))
        return _with_decision(response, request, decision)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResponse]],
    ) -> ToolResponse:
        """Async twin of ``wrap_tool_call``: the guard is awaited, never blocks the loop."""
        run, compacted, call = self._prepare(request)
        if compacted:
            await self.guard.aon_compaction_retry(run.session, run_id=run.run_id)
        decision = await self.guard.abefore_tool_call(*call.args, **call.before)
        if decision.action in ("block", "stop"):
            return self._refuse(run, request, decision)
        try:
            response = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            after = await self.guard.aafter_tool_call(*call.args, **call.after(error=exc))
            self._stopped_by(run, after)
            raise
        outcome = _outcome(request, response)
        self._stopped_by(
            run, await self.guard.aafter_tool_call(*call.args, **call.after(**outcome))
        )
        return _with_decision(response, request, decision)

    # -- helpers ------------------------------------------------------------------------------

    def _run_of(self, state: Any, runtime: Any) -> RunState | None:
        run_id = state.get(_RUN_KEY) if isinstance(state, dict) else None
        if not isinstance(run_id, str) or not run_id:
            return None
        return self._runs.get(run_id, _thread_id(runtime) or run_id, run_id)

    def _tool_run(self, request: ToolCallRequest) -> RunState:
        run = self._run_of(request.state, request.runtime)
        if run is None:
            # Used outside create_agent (a bare ToolNode): no before_agent gave us a run id, so
            # all calls of the thread count as one run.
            session = _thread_id(request.runtime) or "langchain"
            run = self._runs.get(f"thread:{session}", session, session)
        return run

    def _open_run(self, state: LoopGuardState, runtime: Runtime[Any]) -> RunState:
        run_id = new_run_id()
        session = _thread_id(runtime) or run_id
        run = self._runs.get(run_id, session, run_id)
        run.seen_compactions.update(_summary_ids(state.get("messages", ())))
        return run

    def _close_run(self, state: LoopGuardState) -> RunState | None:
        run_id = state.get(_RUN_KEY)
        return self._runs.pop(run_id) if isinstance(run_id, str) else None

    def _prepare(self, request: ToolCallRequest) -> tuple[RunState, bool, _Call]:
        """The call's run, whether a summary appeared since the last look, and its guard args."""
        run = self._tool_run(request)
        state = request.state
        compacted = isinstance(state, dict) and _fresh_compaction(run, state.get("messages", ()))
        call = request.tool_call
        guard_call = _Call(
            (run.session, call["name"], call.get("args", {})),
            {
                "run_id": run.run_id,
                "tool_call_id": call.get("id"),
                "batch": _batch_of(state, call.get("id")),
            },
        )
        return run, compacted, guard_call

    def _refuse(self, run: RunState, request: ToolCallRequest, decision: Decision) -> ToolMessage:
        if decision.action == "stop":  # the blocked call gets its result, then the run ends
            run.stopped = run.stopped or decision
        call = request.tool_call
        return ToolMessage(
            content=stop_reason(decision),
            tool_call_id=call.get("id") or "",
            name=call["name"],
            status="error",
            artifact=decision.blocked_result,
        )

    @staticmethod
    def _stopped_by(run: RunState, after: Decision) -> None:
        if after.action == "stop":
            run.stopped = run.stopped or after


@dataclass(frozen=True)
class _Call:
    """The guard's arguments for one tool call: positional, and keywords of before/after."""

    args: tuple[str, str, Any]
    before: dict[str, Any]

    def after(self, **outcome: Any) -> dict[str, Any]:
        return {**self.before, **outcome}


def _outcome_of(run: RunState) -> str:
    return "stopped" if run.stopped is not None else "completed"


def _fresh_compaction(run: RunState, messages: Sequence[AnyMessage]) -> bool:
    """Whether a summary the run has not seen is in the conversation (it is now seen)."""
    fresh = [sid for sid in _summary_ids(messages) if sid not in run.seen_compactions]
    run.seen_compactions.update(fresh)
    return bool(fresh)


def _stop_update(run: RunState) -> dict[str, Any] | None:
    """The graph update that ends a stopped run with a final message (None: go on)."""
    if run.stopped is None:
        return None
    return {"jump_to": "end", "messages": [_stop_message(run.stopped)]}


def _outcome(request: ToolCallRequest, response: ToolResponse) -> dict[str, Any]:
    """The after_tool_call keywords that describe what the tool produced."""
    message = _tool_message(response, request.tool_call.get("id"))
    if request.tool is None:
        # No such tool: phrase the outcome the way the unknown-tool rule recognises, so a model that
        # keeps calling a missing tool trips the unknown-tool detector.
        return {"error": f"Unknown tool: {request.tool_call['name']}"}
    if message is None:
        return {}  # a Command without a ToolMessage: no outcome to hash
    if message.status == "error":
        return {"error": message.text or "error"}
    return {"result": message.content}


def _with_decision(
    response: ToolResponse, request: ToolCallRequest, decision: Decision
) -> ToolResponse:
    """The tool's response, with the warning appended when the guard warned."""
    if decision.action == "warn" and decision.message:
        return _append_warning(response, request.tool_call.get("id"), decision.message)
    return response


def _batch_of(state: Any, call_id: str | None) -> str | None:
    """The batch of a tool call: the id of the model message that asked for it.

    ToolNode runs the tool calls of the newest AIMessage, so only that message is read (O(1)).
    A message without an id is named by its tool-call ids. None when the call is not found
    (a bare ToolNode fed by hand): the guard then takes calls one at a time.
    """
    messages = state.get("messages") if isinstance(state, dict) else None
    if not messages or call_id is None:
        return None
    for message in reversed(messages):
        if not isinstance(message, AIMessage):
            continue
        ids = [tc.get("id") for tc in message.tool_calls]
        if call_id not in ids:
            return None
        return message.id or "calls:" + ",".join(str(i) for i in ids)
    return None


def _thread_id(runtime: Any) -> str | None:
    """The LangGraph thread id of the current run, or None without a checkpointer."""
    info = getattr(runtime, "execution_info", None)
    thread_id = getattr(info, "thread_id", None)
    if thread_id:
        return str(thread_id)
    config = getattr(runtime, "config", None)
    if not isinstance(config, dict):
        try:  # older LangGraph: no execution_info, but the node's config is in a context var
            config = get_config()
        except RuntimeError:  # called outside a graph run
            return None
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    return str(thread_id) if thread_id else None


def _is_summary(message: Any) -> bool:
    if not isinstance(message, HumanMessage):
        return False
    if message.additional_kwargs.get("lc_source") == _SUMMARY_SOURCE:
        return True
    # LangChain before 1.3 did not mark its summaries; their fixed opening line does.
    return "lc_source" not in message.additional_kwargs and message.text.startswith(
        _SUMMARY_OPENING
    )


def _summary_ids(messages: Sequence[Any]) -> list[str]:
    """Ids of the summary messages SummarizationMiddleware left in the conversation."""
    return [m.id or f"content:{hash(m.text)}" for m in messages if _is_summary(m)]


def _stop_message(decision: Decision) -> AIMessage:
    # response_metadata is never sent back to a provider, so it can say who ended the run.
    return AIMessage(
        content=stop_reason(decision),
        response_metadata={"loopwarden": {"action": "stop", "detector": detector_of(decision)}},
    )


def _tool_message(response: ToolResponse, call_id: str | None) -> ToolMessage | None:
    if isinstance(response, ToolMessage):
        return response
    update = response.update
    messages = update.get("messages", ()) if isinstance(update, dict) else ()
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message
    return None


def _warned(message: ToolMessage, warning: str) -> ToolMessage:
    content = message.content
    if isinstance(content, str):
        new_content: Any = with_warning(content, warning)
    else:
        new_content = [*content, {"type": "text", "text": warning}]
    return message.model_copy(update={"content": new_content})


def _append_warning(response: ToolResponse, call_id: str | None, warning: str) -> ToolResponse:
    if isinstance(response, ToolMessage):
        return _warned(response, warning)
    update = response.update
    if not isinstance(update, dict):
        return response
    messages = [
        _warned(m, warning) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
        for m in update.get("messages", ())
    ]
    return replace(response, update={**update, "messages": messages})

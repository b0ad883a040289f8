"""PydanticAI adapter: ``LoopGuardCapability``, an agent capability that guards every tool call.

Requires the ``pydantic-ai`` extra (from the repository's root: ``pip install '.[pydantic-ai]'``)::

    from pydantic_ai import Agent
    from loopwarden import LoopGuard
    from loopwarden.adapters.pydantic_ai import LoopGuardCapability, LoopStopped

    guard = LoopGuard()
    agent = Agent(model, tools=[...], capabilities=[LoopGuardCapability(guard)])
    try:
        result = agent.run_sync("...")
    except LoopStopped as stop:
        print(stop.reason)

What the model sees:

- **warn**: the tool runs; the warning is appended to a text result, or sent alongside any other
  result (``ToolReturn.content``).
- **block**: the tool does not run; the model gets the blocked text as a failed tool result
  (``ToolFailed``), which does not spend the tool's retry budget.
- **stop** (a loop that survived a compaction, or the guard's ``stopAfterBlocks``): the run
  raises :class:`AgentRunLoopStopped` (a :class:`LoopStopped` and an ``AgentRunError``) whose
  ``reason`` says why.

The run id is PydanticAI's ``ctx.run_id``; the session is ``ctx.conversation_id`` (so runs that
continue a conversation share one history). A ``CompactionPart`` that appears in the conversation
during a run (provider or application compaction) arms the post-compaction guard.

**Missing tools**: PydanticAI answers a call to a tool that does not exist itself (a retry
prompt, ``cause="unknown_tool"``), before any tool hook runs, and each one spends the agent's
retry budget (``retries``, 1 by default: the run fails at the second such call). The capability
reads those answers in ``before_model_request``, before the model sees them, and tells the
guard: with a larger budget, repeated calls to a missing tool trip the unknown-tool detector,
and the model reads loopwarden's warning or refusal in the retry prompt (a stop ends the run).

Every guard call is awaited (``abefore_tool_call`` ...): with an ``AsyncRedisStore`` no guard
call blocks the event loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from loopwarden.adapters._common import (
    LoopStopped,
    RunBook,
    RunState,
    guard_or_default,
    stop_reason,
    with_warning,
)

try:
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import WrapRunHandler, WrapToolExecuteHandler
    from pydantic_ai.exceptions import AgentRunError, ToolFailed
    from pydantic_ai.messages import (
        CompactionPart,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        ToolCallPart,
        ToolReturn,
        ToolReturnPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext, ToolDefinition
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.pydantic_ai needs PydanticAI: "
        "pip install '.[pydantic-ai]' from loopwarden's repository root"
    ) from exc

if TYPE_CHECKING:
    from pydantic_ai.run import AgentRunResult

    from loopwarden.guard import Decision, LoopGuard

__all__ = ["AgentRunLoopStopped", "LoopGuardCapability", "LoopStopped"]


class AgentRunLoopStopped(LoopStopped, AgentRunError):
    """The loop guard ended a PydanticAI run; catch it as ``LoopStopped`` or ``AgentRunError``."""


@dataclass
class LoopGuardCapability(AbstractCapability[Any]):
    """Runs every tool call of a PydanticAI agent through a ``LoopGuard``.

    Args:
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of the ``RunContext`` naming the guard session; default: the
            conversation id (falling back to the run id).
    """

    guard: LoopGuard = field(default_factory=lambda: guard_or_default(None))
    _: KW_ONLY
    session: Callable[[RunContext[Any]], str] | None = None
    id: str | None = "loopwarden"
    _runs: RunBook[str] = field(default_factory=RunBook, init=False, repr=False, compare=False)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Not constructible from an agent spec: it needs a live ``LoopGuard``."""
        return None

    # -- run boundaries -------------------------------------------------------------------------

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Open the run in the guard, close it however the run ends."""
        run = self._run(ctx)
        run.seen_compactions.update(_compaction_keys(ctx.messages))
        await self.guard.astart_run(run.session, run.run_id)
        outcome = "failed"
        try:
            result = await handler()
            outcome = "completed"
            return result
        finally:
            self._runs.pop(run.run_id)
            await self.guard.aend_run(run.session, run.run_id, outcome=outcome)

    # -- before each model request: calls to missing tools ----------------------------------------

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Tell the guard about the calls to missing tools PydanticAI just answered.

        Their answers (retry prompts) are in the newest request; the calls are in the response
        before it. The guard's refusal or warning replaces or extends the answer's text, in
        place, so the model and the kept history read the same.
        """
        run = self._run(ctx)
        # The model response that asked for these calls was the previous run step.
        batch = f"step-{ctx.run_step - 1}"
        for answer, params in _missing_tool_answers(ctx.messages, run.seen_missing):
            decision = await self.guard.abefore_tool_call(
                run.session,
                answer.tool_name,
                params,
                run_id=run.run_id,
                tool_call_id=answer.tool_call_id,
                batch=batch,
            )
            if decision.action in ("block", "stop"):
                answer.content = stop_reason(decision)
                self._stop_if(run, answer.tool_name, decision)
                continue
            # Phrased the way loopwarden's outcome rules name a missing tool.
            after = await self.guard.aafter_tool_call(
                run.session,
                answer.tool_name,
                params,
                error=f"Unknown tool: {answer.tool_name}",
                run_id=run.run_id,
                tool_call_id=answer.tool_call_id,
                batch=batch,
            )
            self._stop_if(run, answer.tool_name, after)
            if decision.action == "warn" and decision.message:
                answer.content = with_warning(str(answer.content), decision.message)
        return request_context

    # -- around each tool call ----------------------------------------------------------------

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Ask the guard before the tool runs, record the outcome after it."""
        run = self._run(ctx)
        await self._note_compaction(run, ctx.messages)
        params = call.args_as_dict()
        # The run step names the model response whose tool calls PydanticAI runs together.
        batch = f"step-{ctx.run_step}"
        decision = await self.guard.abefore_tool_call(
            run.session,
            call.tool_name,
            params,
            run_id=run.run_id,
            tool_call_id=call.tool_call_id,
            batch=batch,
        )
        if decision.action in ("block", "stop"):
            self._refuse(run, call, decision)
        try:
            result = await handler(args)
        except Exception as exc:
            await self._after(run, call, params, batch, error=_error_text(exc))
            raise
        await self._after(run, call, params, batch, result=_outcome_value(result))
        if decision.action == "warn" and decision.message:
            return _warned(result, decision.message)
        return result

    # -- helpers ------------------------------------------------------------------------------

    def _run(self, ctx: RunContext[Any]) -> RunState:
        run_id = ctx.run_id or "pydantic-ai"
        if self.session is not None:
            session = str(self.session(ctx))
        else:
            session = ctx.conversation_id or run_id
        return self._runs.get(run_id, session, run_id)

    async def _note_compaction(self, run: RunState, messages: Iterable[ModelMessage]) -> None:
        fresh = [key for key in _compaction_keys(messages) if key not in run.seen_compactions]
        if fresh:
            run.seen_compactions.update(fresh)
            await self.guard.aon_compaction_retry(run.session, run_id=run.run_id)

    def _refuse(self, run: RunState, call: ToolCallPart, decision: Decision) -> None:
        if decision.action == "stop":
            run.stopped = run.stopped or decision
            raise AgentRunLoopStopped(decision, tool_name=call.tool_name)
        # ToolFailed: the model sees a failed tool result, and the tool's retry budget is kept.
        raise ToolFailed(stop_reason(decision))

    async def _after(
        self, run: RunState, call: ToolCallPart, params: Any, batch: str, **outcome: Any
    ) -> None:
        after = await self.guard.aafter_tool_call(
            run.session,
            call.tool_name,
            params,
            run_id=run.run_id,
            tool_call_id=call.tool_call_id,
            batch=batch,
            **outcome,
        )
        self._stop_if(run, call.tool_name, after)

    @staticmethod
    def _stop_if(run: RunState, tool: str, decision: Decision) -> None:
        """End the run when the guard says stop."""
        if decision.action == "stop":
            run.stopped = run.stopped or decision
            raise AgentRunLoopStopped(decision, tool_name=tool)


def _missing_tool_answers(
    messages: list[ModelMessage], seen: set[str]
) -> list[tuple[ToolReturnPart, dict[str, Any]]]:
    """PydanticAI's answers to calls of missing tools in the newest request, not seen before,
    each with the arguments of its call (marked seen)."""
    if not messages or not isinstance(messages[-1], ModelRequest):
        return []
    answers = [
        part
        for part in messages[-1].parts
        if isinstance(part, ToolReturnPart)
        and part.retry is not None
        and part.retry.cause == "unknown_tool"
        and part.tool_call_id not in seen
    ]
    if not answers:
        return []
    calls = {
        part.tool_call_id: part
        for message in messages[-2:-1]
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    }
    found = []
    for answer in answers:
        seen.add(answer.tool_call_id)
        call = calls.get(answer.tool_call_id)
        found.append((answer, call.args_as_dict() if call is not None else {}))
    return found


def _compaction_keys(messages: Iterable[ModelMessage]) -> list[str]:
    """A key per CompactionPart in the conversation (a digest: summaries are not kept)."""
    keys: list[str] = []
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, CompactionPart):
                text = f"{part.id}\x00{part.content}\x00{part.provider_details}"
                keys.append(hashlib.sha256(text.encode()).hexdigest())
    return keys


def _error_text(exc: Exception) -> str:
    """The failure the model is shown: ``ToolFailed``/``ModelRetry`` carry it as ``message``."""
    message = getattr(exc, "message", None)
    return message if isinstance(message, str) and message else (str(exc) or type(exc).__name__)


def _outcome_value(result: Any) -> Any:
    """What a tool call produced, for outcome hashing: the return value of a ``ToolReturn``."""
    return result.return_value if isinstance(result, ToolReturn) else result


def _warned(result: Any, warning: str) -> Any:
    if isinstance(result, str):
        return with_warning(result, warning)
    if isinstance(result, ToolReturn):
        content = result.content
        if content is None:
            extra: Any = warning
        elif isinstance(content, str):
            extra = with_warning(content, warning)
        else:
            extra = [*content, warning]
        return replace(result, content=extra)
    # Structured results keep their shape; the warning travels next to them.
    return ToolReturn(result, content=warning)

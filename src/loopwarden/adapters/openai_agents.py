"""OpenAI Agents SDK adapter: ``guard_agent(agent, guard)`` adds loop protection to an agent.

Requires the ``openai-agents`` extra (``pip install 'loopwarden[openai-agents]'``)::

    from agents import Agent, Runner
    from loopwarden import LoopGuard
    from loopwarden.adapters.openai_agents import LoopStopped, guard_agent

    agent = guard_agent(Agent(name="assistant", tools=[...]), LoopGuard({"enabled": True}))
    try:
        result = await Runner.run(agent, "...")
    except LoopStopped as stop:
        print(stop.reason)

``guard_agent`` attaches a tool input guardrail and a tool output guardrail to every function
tool and every MCP server of the agent and of the agents it hands off to (hosted tools run at
the provider and cannot be guarded). What the model sees:

- **warn**: the tool runs; its output reaches the model as text with the warning appended.
- **block**: the tool does not run; ``reject_content`` hands the model the blocked text instead.
- **stop** (a loop that survived a compaction, or the guard's ``stopAfterBlocks``):
  ``Runner.run`` raises :class:`AgentLoopStopped` (a :class:`LoopStopped` and an
  ``AgentsException``) whose ``reason`` says why.

Every ``Runner.run`` is a fresh run (one run id per run context). The session is the run id
unless ``session=`` names one (a string, or a function of the run context).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loopwarden.adapters._common import (
    LoopStopped,
    RunBook,
    RunState,
    new_run_id,
    output_text,
    parse_arguments,
    stop_reason,
    with_warning,
)

try:
    from agents import (
        Agent,
        FunctionTool,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
    from agents.exceptions import AgentsException
    from agents.handoffs import Handoff
    from agents.run_context import RunContextWrapper
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'loopwarden[openai-agents]'"
    ) from exc

if TYPE_CHECKING:
    from loopwarden.guard import Decision, LoopGuard

__all__ = ["AgentLoopStopped", "LoopGuardrails", "LoopStopped", "guard_agent"]

GUARDRAIL_NAME = "loopwarden"
SessionKey = str | Callable[[RunContextWrapper[Any]], str] | None


class AgentLoopStopped(LoopStopped, AgentsException):
    """The loop guard ended an Agents SDK run; catch it as ``LoopStopped`` or ``AgentsException``.

    ``reason`` is the guard's message; the SDK fills ``run_data`` with the run so far.
    """

    def __init__(self, decision: Decision, *, tool_name: str = "") -> None:
        LoopStopped.__init__(self, decision, tool_name=tool_name)
        self.run_data = None


class _RunIds:
    """One run id per Agents SDK run, keyed by the run's own ``Usage`` object.

    The SDK builds a ``RunContextWrapper`` per ``Runner.run`` and every ``ToolContext`` of that
    run shares its ``usage`` object, so the object's identity names the run. A weak reference
    forgets the run when the SDK drops it, and guards against a recycled ``id()``.
    """

    def __init__(self) -> None:
        self._ids: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._lock = threading.Lock()

    def of(self, context: RunContextWrapper[Any]) -> tuple[str, bool]:
        """The run id of ``context``'s run, and whether this is the first time it is seen."""
        usage = context.usage
        key = id(usage)
        with self._lock:
            entry = self._ids.get(key)
            if entry is not None and entry[0]() is usage:
                return entry[1], False
            run_id = new_run_id()
            # The callback runs at garbage collection: a lock-free pop, never the guard.
            self._ids[key] = (weakref.ref(usage, lambda _ref: self._ids.pop(key, None)), run_id)
            return run_id, True


class LoopGuardrails:
    """The input/output tool guardrail pair that runs an agent's tool calls through a guard.

    ``guard_agent(agent, guard)`` is ``LoopGuardrails(guard).attach(agent)``. Keep the object
    to find a run in the guard afterwards (``run_of(result.context_wrapper)``), or to guard
    single tools (``tool.tool_input_guardrails = [guardrails.input]``, likewise ``output``).
    """

    def __init__(
        self,
        guard: LoopGuard,
        *,
        session: SessionKey = None,
        max_runs: int = 4096,
    ) -> None:
        if session is not None and not isinstance(session, str) and not callable(session):
            raise TypeError(
                "guard_agent(session=...) must be a string, a function of the run context "
                f"returning one, or None; got {type(session).__name__}"
            )
        self.guard = guard
        self._session = session
        self._run_ids = _RunIds()
        self._runs: RunBook[str] = RunBook(max_runs)
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._check_input, name=GUARDRAIL_NAME
        )
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._check_output, name=GUARDRAIL_NAME
        )

    def run_of(self, context: RunContextWrapper[Any]) -> tuple[str, str]:
        """The guard ``(session, run_id)`` of the run that ``context`` belongs to.

        ``context`` is any context of the run: a ``ToolContext`` inside a tool, or
        ``result.context_wrapper`` after ``Runner.run``; use the pair with
        ``guard.run_record(session, run_id)`` or ``guard.on_compaction_retry(...)``.
        """
        run = self._run(context)
        return run.session, run.run_id

    def attach(self, agent: Agent[Any]) -> Agent[Any]:
        """Guard ``agent``'s function tools and MCP servers, and its handoff targets'; returns it.

        Attaching replaces loopwarden guardrails attached earlier, so the latest guard wins.
        """
        pending, seen = [agent], set()
        while pending:
            current = pending.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            for tool in current.tools:
                if isinstance(tool, FunctionTool):
                    _attach(tool, self)
            for server in current.mcp_servers:
                _attach(server, self)
            pending.extend(_handoff_targets(current))
        return agent

    def _run(self, context: RunContextWrapper[Any]) -> RunState:
        run_id, first = self._run_ids.of(context)
        session = self._session_of(context, run_id)
        run = self._runs.get(run_id, session, run_id)
        if first:
            self.guard.start_run(session, run_id)
        return run

    def _session_of(self, context: RunContextWrapper[Any], run_id: str) -> str:
        if self._session is None:
            return run_id
        if isinstance(self._session, str):
            return self._session
        return str(self._session(context))

    def _check_input(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        run = self._run(context)
        decision = self.guard.before_tool_call(
            run.session,
            context.tool_name,
            parse_arguments(context.tool_arguments),
            run_id=run.run_id,
            tool_call_id=context.tool_call_id,
            batch=_batch_of(context),
        )
        if decision.action == "stop":
            run.stopped = run.stopped or decision
            raise AgentLoopStopped(decision, tool_name=context.tool_name)
        if decision.action == "block":
            return ToolGuardrailFunctionOutput.reject_content(
                stop_reason(decision), output_info=decision.blocked_result
            )
        if decision.action == "warn" and decision.message:
            run.pending_warnings[context.tool_call_id] = decision.message
        return ToolGuardrailFunctionOutput.allow()

    def _check_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        run = self._run(context)
        after = self.guard.after_tool_call(
            run.session,
            context.tool_name,
            parse_arguments(context.tool_arguments),
            result=data.output,
            run_id=run.run_id,
            tool_call_id=context.tool_call_id,
            batch=_batch_of(context),
        )
        if after.action == "stop":
            run.stopped = run.stopped or after
            raise AgentLoopStopped(after, tool_name=context.tool_name)
        warning = run.pending_warnings.pop(context.tool_call_id, None)
        if warning is None:
            return ToolGuardrailFunctionOutput.allow()
        # Output guardrails cannot edit an output, only replace it: the replacement is the
        # output's own text followed by the warning.
        return ToolGuardrailFunctionOutput.reject_content(
            with_warning(output_text(data.output), warning)
        )


def _batch_of(context: RunContextWrapper[Any]) -> str:
    """The batch of a tool call: the model response of the run that asked for it.

    The SDK runs the function tools of one model response concurrently; the run's shared
    ``Usage`` counts model responses (``requests``) and is updated before their tools run.
    """
    return f"response-{context.usage.requests}"


def _attach(holder: Any, guardrails: LoopGuardrails) -> None:
    """Put ``guardrails`` on a FunctionTool or MCP server, replacing an earlier loopwarden pair."""
    for attr, ours in (
        ("tool_input_guardrails", guardrails.input),
        ("tool_output_guardrails", guardrails.output),
    ):
        existing = [g for g in (getattr(holder, attr, None) or []) if g.name != GUARDRAIL_NAME]
        setattr(holder, attr, [*existing, ours])


def _handoff_targets(agent: Agent[Any]) -> list[Agent[Any]]:
    targets: list[Agent[Any]] = []
    for handoff in agent.handoffs:
        if isinstance(handoff, Agent):
            targets.append(handoff)
        elif isinstance(handoff, Handoff):
            # handoff(agent) keeps a weak reference to its target; a hand-built Handoff may not.
            ref = getattr(handoff, "_agent_ref", None)
            target = ref() if callable(ref) else None
            if isinstance(target, Agent):
                targets.append(target)
    return targets


def guard_agent(
    agent: Agent[Any],
    guard: LoopGuard,
    *,
    session: SessionKey = None,
) -> Agent[Any]:
    """Attach loop guardrails to ``agent``, its MCP servers and its handoff targets; returns it.

    Args:
        agent: the starting agent; it is changed in place (its tools get the guardrails).
        guard: the ``LoopGuard`` deciding about each call.
        session: the guard session: a fixed name, or a function of the run context (for
            example the conversation id you keep in ``ctx.context``). Default: one per run.

    Guarding again replaces the earlier loopwarden guardrails, so the latest guard wins.
    """
    guardrails = LoopGuardrails(guard, session=session)
    return guardrails.attach(agent)

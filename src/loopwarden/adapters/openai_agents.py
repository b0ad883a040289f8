"""OpenAI Agents SDK adapter: ``guard_agent(agent, guard)`` returns a loop-guarded agent.

Requires the ``openai-agents`` extra (from the repository's root:
``pip install '.[openai-agents]'``)::

    from agents import Agent, Runner
    from loopwarden import LoopGuard
    from loopwarden.adapters.openai_agents import LoopStopped, guard_agent

    guard = LoopGuard()  # no config: the recommended profile
    agent = guard_agent(Agent(name="assistant", tools=[...]), guard)
    try:
        result = await Runner.run(agent, "...", max_turns=30)
    except LoopStopped as stop:
        print(stop.reason)

``guard_agent`` never changes the agent, tools, MCP servers or handoffs you pass: it returns a
guarded copy of the agent (a clone of the same class). At every turn the SDK asks the agent for
its tools (``Agent.get_all_tools``, which resolves function tools, MCP servers' tools and
enabled flags at run time); the guarded copy hands back a copy of each function tool carrying
loopwarden's tool input and output guardrails next to the tool's own. So tools added to the
agent's list after guarding, clones of the guarded agent (``agent.clone(tools=[...])``) and
tools shared with other agents are all covered, and guarding one agent never touches another.
Handoff targets are guarded the same way (as they are listed when ``guard_agent`` is called).
Hosted tools run at the provider and cannot be guarded. What the model sees:

- **warn**: the tool runs; its output reaches the model as text with the warning appended.
- **block**: the tool does not run; ``reject_content`` hands the model the blocked text instead.
- **stop** (a loop that survived a compaction, or the guard's ``stopAfterBlocks``):
  ``Runner.run`` raises :class:`AgentLoopStopped` (a :class:`LoopStopped` and an
  ``AgentsException``) whose ``reason`` says why.

**max_turns**: ``Runner.run`` ends a run after 10 turns by default (``MaxTurnsExceeded``), one
tool call per turn in a typical loop. The ``openclaw`` profile warns at the 10th identical
call and blocks at the 20th, so with the default the SDK ends the run first and loopwarden never
acts. Use the ``recommended`` profile (it warns at the 3rd identical result and blocks at the
4th call) and give ``max_turns`` room above your profile's critical threshold (30 is plenty for
``recommended``; more than 20 for ``openclaw``).

**Missing tools**: with the SDK's default ``tool_not_found_behavior="raise_error"`` the first
call to a tool that does not exist raises ``ModelBehaviorError``. With
``"return_error_to_model"`` the model is told and may retry forever; pass
``run_config=guardrails.run_config(RunConfig(tool_not_found_behavior="return_error_to_model"))``
and loopwarden sees each such call through the SDK's ``tool_error_formatter``.

The guardrails await the guard's async methods (``abefore_tool_call`` ...): give the guard an
``AsyncRedisStore`` and no guard call blocks the event loop. Every ``Runner.run`` is a fresh run
(one run id per run context). The session is the run id unless ``session=`` names one (a
string, or a function of the run context).
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from loopwarden.adapters._common import (
    LoopStopped,
    RunBook,
    RunState,
    guard_or_default,
    new_run_id,
    output_text,
    parse_arguments,
    stop_reason,
    with_warning,
)

try:
    from agents import (
        Agent,
        AgentHooks,
        FunctionTool,
        RunConfig,
        ToolGuardrailFunctionOutput,
        ToolInputGuardrail,
        ToolInputGuardrailData,
        ToolOutputGuardrail,
        ToolOutputGuardrailData,
    )
    from agents.exceptions import AgentsException
    from agents.handoffs import Handoff
    from agents.lifecycle import AgentHooksBase
    from agents.run_config import ToolErrorFormatterArgs
    from agents.run_context import RunContextWrapper
    from agents.tool import Tool
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install '.[openai-agents]' from loopwarden's repository root"
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
    to find a run in the guard afterwards (``run_of(result.context_wrapper)``), to see calls to
    missing tools (:meth:`run_config`), or to guard a tool yourself (``input`` and ``output``
    are the guardrails: ``FunctionTool(..., tool_input_guardrails=[guardrails.input])``).
    """

    def __init__(
        self,
        guard: LoopGuard | None = None,
        *,
        session: SessionKey = None,
        max_runs: int = 4096,
    ) -> None:
        if session is not None and not isinstance(session, str) and not callable(session):
            raise TypeError(
                "guard_agent(session=...) must be a string, a function of the run context "
                f"returning one, or None; got {type(session).__name__}"
            )
        self.guard = guard_or_default(guard)
        self._session = session
        self._run_ids = _RunIds()
        self._runs: RunBook[str] = RunBook(max_runs)
        self.input: ToolInputGuardrail[Any] = ToolInputGuardrail(
            guardrail_function=self._check_input, name=GUARDRAIL_NAME
        )
        self.output: ToolOutputGuardrail[Any] = ToolOutputGuardrail(
            guardrail_function=self._check_output, name=GUARDRAIL_NAME
        )
        self._classes: dict[type[Any], type[Any]] = {}
        self._tools = _GuardedTools(self)
        self._lock = threading.Lock()

    def run_of(self, context: RunContextWrapper[Any]) -> tuple[str, str]:
        """The guard ``(session, run_id)`` of the run that ``context`` belongs to.

        ``context`` is any context of the run: a ``ToolContext`` inside a tool, or
        ``result.context_wrapper`` after ``Runner.run``; use the pair with
        ``guard.run_record(session, run_id)`` or ``guard.on_compaction_retry(...)``.
        """
        run = self._run(context)
        return run.session, run.run_id

    def attach(self, agent: Agent[Any]) -> Agent[Any]:
        """A guarded copy of ``agent`` (and of its handoff targets); ``agent`` is unchanged.

        Guarding a copy guarded earlier replaces that guard: the latest guard wins.
        """
        return self._guarded(agent, {})

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default ``RunConfig``) with a ``tool_error_formatter`` that tells the
        guard about each call to a tool that does not exist.

        The SDK calls the formatter only with ``tool_not_found_behavior="return_error_to_model"``
        (set it in ``base``). Repeated missing-tool calls then trip the unknown-tool detector:
        the model reads loopwarden's warning or refusal in place of the SDK's error text, and a
        stop ends the run at the next turn. Your own formatter, if ``base`` has one, still
        formats every other error and the missing-tool text loopwarden leaves alone.
        """
        base = base if base is not None else RunConfig()
        return dataclasses.replace(base, tool_error_formatter=_Formatter(self, base))

    # -- guarded copies ------------------------------------------------------------------------

    def _guarded(self, agent: Agent[Any], memo: dict[int, Agent[Any]]) -> Agent[Any]:
        """A guarded clone of ``agent`` with guarded handoff targets (``memo``: cycles)."""
        done = memo.get(id(agent))
        if done is not None:
            return done
        clone = agent.clone()
        clone.__class__ = self._guarded_class(type(agent))  # our own new object
        clone.hooks = _RunEnd(self, agent.hooks)  # the run ends with this agent's final output
        memo[id(agent)] = clone
        clone.handoffs = [self._guarded_handoff(h, memo) for h in agent.handoffs]
        return clone

    def _guarded_class(self, cls: type[Any]) -> type[Any]:
        """``cls`` with ``get_all_tools`` guarded by these guardrails (one per class).

        The guardrails live on the class, so clones (``dataclasses.replace`` keeps the class)
        stay guarded. A class guarded by other guardrails is unwrapped first: latest guard wins.
        """
        base: type[Any] = getattr(cls, "_loopwarden_base", cls)
        with self._lock:
            guarded = self._classes.get(base)
            if guarded is None:
                guarded = type(
                    base.__name__,
                    (base,),
                    {
                        "__module__": base.__module__,
                        "__qualname__": base.__qualname__,
                        "_loopwarden_base": base,
                        "_loopwarden": self,
                        "get_all_tools": _guarded_get_all_tools(base),
                    },
                )
                self._classes[base] = guarded
            return guarded

    def _guarded_handoff(self, item: Any, memo: dict[int, Agent[Any]]) -> Any:
        if isinstance(item, Agent):
            return self._guarded(item, memo)
        if not isinstance(item, Handoff):
            return item
        ref = getattr(item, "_agent_ref", None)
        target = ref() if callable(ref) else None
        if not isinstance(target, Agent):
            return item  # a hand-built Handoff: its target is unknown until invoked
        guarded = self._guarded(target, memo)
        invoke = item.on_invoke_handoff

        async def on_invoke(context: RunContextWrapper[Any], arguments: str) -> Any:
            new_agent = await invoke(context, arguments)
            # The handoff's own target becomes its guarded copy (held here, strongly).
            return guarded if new_agent is target else new_agent

        copied = dataclasses.replace(item, on_invoke_handoff=on_invoke)
        copied._agent_ref = weakref.ref(guarded)
        return copied

    async def _tools_of_turn(
        self, tools: list[Tool], context: RunContextWrapper[Any]
    ) -> list[Tool]:
        """The tools of one turn, guarded; a run the guard stopped ends here."""
        run = await self._started(context)
        if run.stopped is not None:
            await self._stop(run, run.stopped)
        return [self._tools.guarded(t) if isinstance(t, FunctionTool) else t for t in tools]

    # -- runs ------------------------------------------------------------------------------------

    def _run(self, context: RunContextWrapper[Any]) -> RunState:
        run_id, _ = self._run_ids.of(context)
        session = self._session_of(context, run_id)
        return self._runs.get(run_id, session, run_id)

    async def _started(self, context: RunContextWrapper[Any]) -> RunState:
        """The run of ``context``, started in the guard on first sight."""
        run = self._run(context)
        if not run.started:
            run.started = True
            await self.guard.astart_run(run.session, run.run_id)
        return run

    async def _end(self, run: RunState) -> None:
        """Tell the guard the run ended (once: a stop and a final output may both come)."""
        if not run.ended:
            run.ended = True
            await self.guard.aend_run(
                run.session, run.run_id, outcome="completed" if run.stopped is None else "stopped"
            )

    async def _stop(self, run: RunState, decision: Decision, tool_name: str = "") -> NoReturn:
        """End the run in the guard, then end it in the SDK (the exception leaves Runner.run)."""
        run.stopped = run.stopped or decision
        await self._end(run)
        raise AgentLoopStopped(decision, tool_name=tool_name)

    def _model_called(self, context: RunContextWrapper[Any]) -> None:
        """The SDK is about to call the model: the tool calls that follow are a new batch."""
        self._run(context).model_calls += 1

    async def _finished(self, context: RunContextWrapper[Any]) -> None:
        """The run produced its final output: end it in the guard and forget it here."""
        run = await self._started(context)
        await self._end(run)
        self._runs.pop(run.run_id)

    def _session_of(self, context: RunContextWrapper[Any], run_id: str) -> str:
        if self._session is None:
            return run_id
        if isinstance(self._session, str):
            return self._session
        return str(self._session(context))

    # -- the guardrails ----------------------------------------------------------------------

    async def _check_input(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        run = await self._started(context)
        decision = await self.guard.abefore_tool_call(
            run.session,
            context.tool_name,
            parse_arguments(context.tool_arguments),
            run_id=run.run_id,
            tool_call_id=context.tool_call_id,
            batch=_batch_of(run, context),
        )
        if decision.action == "stop":
            await self._stop(run, decision, context.tool_name)
        if decision.action == "block":
            return ToolGuardrailFunctionOutput.reject_content(
                stop_reason(decision), output_info=decision.blocked_result
            )
        if decision.action == "warn" and decision.message:
            run.pending_warnings[context.tool_call_id] = decision.message
        return ToolGuardrailFunctionOutput.allow()

    async def _check_output(self, data: ToolOutputGuardrailData) -> ToolGuardrailFunctionOutput:
        context = data.context
        run = await self._started(context)
        # A tool that raised reaches the model as its failure_error_function's text (the SDK's
        # default is one fixed sentence): that text is the outcome, and the call failed.
        failed = context.tool_call_id in run.failed_calls
        run.failed_calls.discard(context.tool_call_id)
        after = await self.guard.aafter_tool_call(
            run.session,
            context.tool_name,
            parse_arguments(context.tool_arguments),
            result=data.output,
            failed=True if failed else None,
            run_id=run.run_id,
            tool_call_id=context.tool_call_id,
            batch=_batch_of(run, context),
        )
        if after.action == "stop":
            await self._stop(run, after, context.tool_name)
        warning = run.pending_warnings.pop(context.tool_call_id, None)
        if warning is None:
            return ToolGuardrailFunctionOutput.allow()
        # Output guardrails cannot edit an output, only replace it: the replacement is the
        # output's own text followed by the warning.
        return ToolGuardrailFunctionOutput.reject_content(
            with_warning(output_text(data.output), warning)
        )

    async def _missing_tool(self, args: ToolErrorFormatterArgs[Any], text: str) -> str:
        """A call to a tool that does not exist, through the guard; the text the model reads."""
        run = await self._started(args.run_context)
        tool, call_id, batch = args.tool_name, args.call_id, _batch_of(run, args.run_context)
        decision = await self.guard.abefore_tool_call(
            run.session, tool, {}, run_id=run.run_id, tool_call_id=call_id, batch=batch
        )
        if decision.action in ("block", "stop"):
            if decision.action == "stop":
                run.stopped = run.stopped or decision
            return stop_reason(decision)
        # Phrased the way loopwarden's outcome rules name a missing tool.
        after = await self.guard.aafter_tool_call(
            run.session,
            tool,
            {},
            error=f"Unknown tool: {tool}",
            run_id=run.run_id,
            tool_call_id=call_id,
            batch=batch,
        )
        if after.action == "stop":
            run.stopped = run.stopped or after
        if decision.action == "warn" and decision.message:
            return with_warning(text, decision.message)
        return text


class _RunEnd(AgentHooks[Any]):
    """An agent's hooks: the user's own, each called as before, plus the end of the run.

    The SDK calls ``on_end`` of the agent that produces the run's final output, and has no other
    run-end hook an agent can carry. Every other hook passes straight to the user's hooks.
    """

    guardrails: LoopGuardrails
    inner: AgentHooks[Any] | None

    def __init__(self, guardrails: LoopGuardrails, inner: AgentHooks[Any] | None) -> None:
        while isinstance(inner, _RunEnd):  # a guarded agent guarded again: latest guard wins
            inner = inner.inner
        self.guardrails = guardrails
        self.inner = inner

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        if self.inner is not None:
            await self.inner.on_end(context, agent, output)
        await self.guardrails._finished(context)

    async def on_llm_start(self, context: Any, agent: Any, *args: Any, **kwargs: Any) -> None:
        self.guardrails._model_called(context)
        if self.inner is not None:
            await self.inner.on_llm_start(context, agent, *args, **kwargs)


def _passing_on(name: str) -> Callable[..., Any]:
    async def hook(self: _RunEnd, *args: Any, **kwargs: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args, **kwargs)

    hook.__name__ = name
    return hook


# Every other hook of this SDK version, whatever it adds, passes on to the user's hooks.
for _name, _hook in vars(AgentHooksBase).items():
    _own = _name in ("on_end", "on_llm_start")
    if _name.startswith("on_") and not _own and inspect.iscoroutinefunction(_hook):
        setattr(_RunEnd, _name, _passing_on(_name))


class _Formatter:
    """``RunConfig.tool_error_formatter``: missing tools through the guard, the rest as before."""

    def __init__(self, guardrails: LoopGuardrails, base: RunConfig) -> None:
        self._guardrails = guardrails
        self._user = base.tool_error_formatter

    async def __call__(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        text: Any = None
        if self._user is not None:
            text = self._user(args)
            if inspect.isawaitable(text):
                text = await text
        if args.kind != "tool_not_found":
            return text if isinstance(text, str) else None  # None: the SDK's own text
        base = text if isinstance(text, str) else args.default_message
        return await self._guardrails._missing_tool(args, base)


class _GuardedTools:
    """Guarded copies of function tools, one per tool object while it lives.

    A copy is rebuilt when the tool changes: any attribute set anew, or a guardrail added to
    or removed from its own lists. A tool the SDK builds afresh at every turn is copied afresh.
    """

    def __init__(self, guardrails: LoopGuardrails) -> None:
        self._guardrails = guardrails
        self._copies: dict[int, tuple[weakref.ref[FunctionTool], tuple[int, ...], FunctionTool]]
        self._copies = {}
        self._lock = threading.Lock()

    def guarded(self, tool: FunctionTool) -> FunctionTool:
        key = id(tool)
        stamp = _stamp(tool)
        with self._lock:
            entry = self._copies.get(key)
            if entry is not None and entry[0]() is tool and entry[1] == stamp:
                return entry[2]
        guarded = copy.copy(tool)  # the SDK's own copy: rebinds the invoker to the copy
        ours = self._guardrails
        guarded.tool_input_guardrails = [*_others(tool.tool_input_guardrails), ours.input]
        guarded.tool_output_guardrails = [*_others(tool.tool_output_guardrails), ours.output]
        _note_failures(guarded, ours)
        with self._lock:
            # The callback runs at garbage collection: a lock-free pop.
            ref = weakref.ref(tool, lambda _ref: self._copies.pop(key, None))
            self._copies[key] = (ref, stamp, guarded)
        return guarded


class _NotingFailures:
    """A function tool's implementation that notes, by tool-call id, each call that raised.

    The SDK's invoker runs it and turns its exception into the text of the tool's
    ``failure_error_function`` (or re-raises it); the output guardrail then reads the note to
    tell the guard that the call failed. Every other attribute is the implementation's own.
    """

    def __init__(self, impl: Callable[..., Any], guardrails: LoopGuardrails) -> None:
        self._impl = impl
        self._guardrails = guardrails

    async def __call__(self, context: ToolContext[Any], arguments: str) -> Any:
        try:
            return await self._impl(context, arguments)
        except BaseException:  # a timeout's cancellation too: the model reads a failure
            if isinstance(context, ToolContext):
                self._guardrails._run(context).failed_calls.add(context.tool_call_id)
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._impl, name)


def _note_failures(tool: FunctionTool, guardrails: LoopGuardrails) -> None:
    """Make the copy ``tool`` note its calls that raise (see ``_NotingFailures``).

    The SDK's function tools run an invoker that holds the implementation and handles its
    failures (``_invoke_tool_impl``, in every supported version); a copy of that invoker gets
    the noting implementation. A tool with any other invoker is left as it is: its failures
    are then known by their text alone.
    """
    invoker = tool.on_invoke_tool
    impl = getattr(invoker, "_invoke_tool_impl", None)
    if impl is None or not callable(impl) or isinstance(impl, _NotingFailures):
        return
    noting = copy.copy(invoker)
    setattr(noting, "_invoke_tool_impl", _NotingFailures(impl, guardrails))  # noqa: B010
    tool.on_invoke_tool = noting


def _stamp(tool: FunctionTool) -> tuple[int, ...]:
    """Identities of the tool's attributes and of its own guardrails: what a copy was made of."""
    own = [*(tool.tool_input_guardrails or ()), *(tool.tool_output_guardrails or ())]
    return (*map(id, vars(tool).values()), -1, *map(id, own))


def _others(guardrails: list[Any] | None) -> list[Any]:
    """A tool's own guardrails, without loopwarden's (a tool guarded by hand, or a copy)."""
    return [g for g in (guardrails or []) if getattr(g, "name", None) != GUARDRAIL_NAME]


def _guarded_get_all_tools(base: type[Any]) -> Callable[..., Any]:
    """``get_all_tools`` of a guarded agent class: the base class's, then guarded per turn."""

    async def get_all_tools(self: Any, run_context: RunContextWrapper[Any]) -> list[Tool]:
        tools: list[Tool] = await base.get_all_tools(self, run_context)
        guardrails: LoopGuardrails = type(self)._loopwarden
        return await guardrails._tools_of_turn(tools, run_context)

    return get_all_tools


def _batch_of(run: RunState, context: RunContextWrapper[Any]) -> str:
    """The batch of a tool call: the model response of the run that asked for it.

    The SDK runs the function tools of one model response concurrently, after that response
    and before the next model call. The guarded agents' hooks count the run's model calls
    (``on_llm_start``, which the SDK always calls); the run's ``Usage.requests`` is only what the
    model reports (0 from a model that reports no usage), kept for a model call of an agent
    whose hooks were replaced after guarding.
    """
    return f"response-{run.model_calls}-{context.usage.requests}"


def guard_agent(
    agent: Agent[Any],
    guard: LoopGuard | None = None,
    *,
    session: SessionKey = None,
) -> Agent[Any]:
    """A loop-guarded copy of ``agent``; run the returned agent (``agent`` itself is unchanged).

    Args:
        agent: the starting agent. Neither it nor its tools, MCP servers or handoff targets
            are modified, so objects shared with other agents keep their own guards.
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: the guard session: a fixed name, or a function of the run context (for
            example the conversation id you keep in ``ctx.context``). Default: one per run.

    The copy's tools are resolved and guarded at every turn: tools added to the agent's list
    later, and clones of the returned agent, are guarded too. Guarding a guarded agent again
    replaces the earlier guard (the latest guard wins). The copy's ``hooks`` call the agent's
    own hooks, then close the guard's run record when the run produces its final output.

    Give ``Runner.run`` enough turns for loopwarden to act: the SDK's default ``max_turns=10``
    ends a looping run before the ``openclaw`` profile warns (10th identical call) or blocks
    (20th). Recommended together::

        guard = LoopGuard()  # the recommended profile: warns at the 3rd, blocks at the 4th
        result = await Runner.run(guard_agent(agent, guard), text, max_turns=30)

    To also catch repeated calls to tools that do not exist, use :class:`LoopGuardrails` and
    pass ``run_config=guardrails.run_config(RunConfig(tool_not_found_behavior=
    "return_error_to_model"))`` to ``Runner.run``.
    """
    return LoopGuardrails(guard, session=session).attach(agent)

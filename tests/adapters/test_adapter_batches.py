"""Several identical tool calls per model turn, run concurrently by the frameworks themselves.

Each framework's own offline model asks for ``PER_TURN`` identical calls in every turn; the
framework runs them concurrently (LangChain: a thread pool for sync tools, asyncio tasks for
async ones; PydanticAI and the Agents SDK: asyncio tasks). With the ``recommended`` profile:

- the tool really runs as often as it does when the same calls come one per turn;
- the run's stop never lands in the turn that got the run's first block: the model is asked
  again after reading that block (the recovery chance survives a batch).

Every guard event is tagged with the number of model turns so far, to tell in which turn it came.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from loopwarden import LoopGuard
from loopwarden.events import LoopEvent

from _support import require_module

RECOMMENDED = {"profile": "recommended"}
PER_TURN = 3
TURNS = 12  # enough turns for any threshold of the profile to block, then stop
_ids = itertools.count()


@dataclass
class Observed:
    """What happened in one agent run: model turns, real executions, events by turn."""

    turns: int = 0
    executions: int = 0
    events: list[tuple[int, LoopEvent]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def watch(self, guard: LoopGuard) -> None:
        guard.subscribe(lambda event: self.events.append((self.turns, event)))

    def executed(self) -> None:
        with self.lock:
            self.executions += 1

    def first_turn(self, action: str) -> int | None:
        return next((turn for turn, e in self.events if e.action == action), None)


def assert_recovery_chance(batched: Observed, sequential: Observed) -> None:
    """Same executions as one call per turn; a block is read by the model before the stop."""
    assert batched.executions == sequential.executions
    first_block, stop = batched.first_turn("block"), batched.first_turn("stop")
    assert first_block is not None and stop is not None, batched.events
    # The stop came in a later turn: the model was asked again after reading the block.
    assert stop > first_block, [(t, e.action) for t, e in batched.events]
    # And the warning (if any) came no later than the first block.
    warned = batched.first_turn("warn")
    assert warned is None or warned <= first_block


# --------------------------------------------------------------------------------- LangChain
def _langchain() -> Any:
    require_module("langchain.agents", "langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver

    from loopwarden.adapters.langchain import LoopGuardMiddleware

    class Model(GenericFakeChatModel):
        observed: Any = None

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            self.observed.turns += 1
            return super()._generate(messages, *args, **kwargs)

    def script(per_turn: int) -> Iterator[AIMessage]:
        paris = {"name": "get_weather", "args": {"city": "Paris"}}
        for _ in range(TURNS):
            calls = [{**paris, "id": f"c{next(_ids)}"} for _ in range(per_turn)]
            yield AIMessage(content="", tool_calls=calls)
        yield AIMessage(content="I give up.")

    def run(per_turn: int, *, use_async: bool, wait: float) -> Observed:
        observed = Observed()
        guard = LoopGuard(RECOMMENDED)
        observed.watch(guard)
        if use_async:

            @tool
            async def get_weather(city: str) -> str:
                """Current weather of a city."""
                observed.executed()
                await asyncio.sleep(wait)  # in flight while the turn's other calls start
                return f"It is 21C in {city}."

        else:

            @tool
            def get_weather(city: str) -> str:
                """Current weather of a city."""
                observed.executed()
                time.sleep(wait)  # in flight while the pool starts the other calls
                return f"It is 21C in {city}."

        model = Model(messages=script(per_turn), observed=observed)
        agent = create_agent(
            model,
            [get_weather],
            middleware=[LoopGuardMiddleware(guard)],
            checkpointer=InMemorySaver(),
        )
        inputs = {"messages": [{"role": "user", "content": "weather?"}]}
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
        if use_async:
            asyncio.run(agent.ainvoke(inputs, config))
        else:
            agent.invoke(inputs, config)
        return observed

    return run


@pytest.mark.parametrize(
    ("use_async", "wait"),
    [(False, 0.0), (False, 0.01), (True, 0.0), (True, 0.01)],
    ids=["sync-tools", "slow-sync-tools", "async-tools", "slow-async-tools"],
)
def test_langchain_turns_of_identical_calls(use_async: bool, wait: float) -> None:
    run = _langchain()
    sequential = run(1, use_async=use_async, wait=wait)
    batched = run(PER_TURN, use_async=use_async, wait=wait)
    assert_recovery_chance(batched, sequential)


# ------------------------------------------------------------------------------- PydanticAI
def _pydantic_ai() -> Any:
    require_module("pydantic_ai", "pydantic-ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from loopwarden.adapters.pydantic_ai import AgentRunLoopStopped, LoopGuardCapability

    def run(per_turn: int) -> Observed:
        observed = Observed()
        guard = LoopGuard(RECOMMENDED)
        observed.watch(guard)

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            observed.turns += 1
            if observed.turns > TURNS:
                return ModelResponse(parts=[TextPart("I give up.")])
            calls = [
                ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id=f"c{next(_ids)}")
                for _ in range(per_turn)
            ]
            return ModelResponse(parts=list(calls))

        agent: Agent[None, str] = Agent(
            FunctionModel(respond), capabilities=[LoopGuardCapability(guard)]
        )

        @agent.tool_plain(retries=0)
        async def get_weather(city: str) -> str:
            """Current weather of a city."""
            observed.executed()
            await asyncio.sleep(0.01)
            return f"It is 21C in {city}."

        with pytest.raises(AgentRunLoopStopped):
            agent.run_sync("weather?")
        return observed

    return run


def test_pydantic_ai_turns_of_identical_calls() -> None:
    run = _pydantic_ai()
    assert_recovery_chance(run(PER_TURN), run(1))


# ------------------------------------------------------------------------ OpenAI Agents SDK
def _openai_agents() -> Any:
    require_module("agents", "openai-agents")
    from agents import Agent, Runner, function_tool, set_tracing_disabled
    from agents.testing import ModelCall, ModelStep, ScriptedModel, function_call

    from loopwarden.adapters.openai_agents import AgentLoopStopped, guard_agent

    set_tracing_disabled(True)

    def run(per_turn: int) -> Observed:
        observed = Observed()
        guard = LoopGuard(RECOMMENDED)
        observed.watch(guard)

        def respond(call: ModelCall) -> list[Any]:
            observed.turns += 1
            return [
                function_call("get_weather", {"city": "Paris"}, call_id=f"c{next(_ids)}")
                for _ in range(per_turn)
            ]

        @function_tool
        async def get_weather(city: str) -> str:
            """Current weather of a city."""
            observed.executed()
            await asyncio.sleep(0.01)
            return f"It is 21C in {city}."

        model = ScriptedModel(ModelStep.respond(respond) for _ in range(TURNS))
        agent = guard_agent(Agent(name="weather", model=model, tools=[get_weather]), guard)
        with pytest.raises(AgentLoopStopped):
            asyncio.run(Runner.run(agent, "weather?", max_turns=TURNS + 1))
        return observed

    return run


def test_openai_agents_turns_of_identical_calls() -> None:
    run = _openai_agents()
    assert_recovery_chance(run(PER_TURN), run(1))

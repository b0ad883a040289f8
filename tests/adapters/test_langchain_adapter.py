"""LangChain v1 adapter, end to end: create_agent + LoopGuardMiddleware + a scripted fake model.

The model is LangChain's own ``GenericFakeChatModel`` playing a script of AIMessages (the same tool
call over and over); the tool counts its real executions. Nothing talks to the network.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Iterator
from typing import Any

import pytest

from _async_only import AsyncOnlyStore

from _support import require_module

try:
    require_module("langchain.agents", "langchain")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver

from loopwarden import LoopGuard
from loopwarden.adapters.langchain import LoopGuardMiddleware
from loopwarden.events import LoopEvent

WARNING, CRITICAL = 2, 4
LOOP_CONFIG = {"enabled": True, "warningThreshold": WARNING, "criticalThreshold": CRITICAL}


class ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel that accepts tools and remembers every prompt it was given."""

    prompts: list[list[BaseMessage]] = []  # noqa: RUF012 - pydantic field, copied per instance

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)

    def tool_results_seen(self) -> list[str]:
        """Text of the newest ToolMessage in each prompt that ended with one."""
        return [p[-1].text for p in self.prompts if p and isinstance(p[-1], ToolMessage)]


_ids = itertools.count()


def call(name: str, **args: Any) -> AIMessage:
    """One AIMessage asking for one tool call (unique call id, as real models give)."""
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c{next(_ids)}"}])


def loop_script(times: int, name: str = "get_weather", **args: Any) -> Iterator[AIMessage]:
    for _ in range(times):
        yield call(name, **(args or {"city": "Paris"}))
    yield AIMessage(content="I give up.")


class CountingTool:
    """A weather tool that counts how often it really ran and always answers the same."""

    def __init__(self) -> None:
        self.executions = 0

        @tool
        def get_weather(city: str) -> str:
            """Current weather of a city."""
            self.executions += 1
            return f"It is 21C in {city}."

        self.tool = get_weather


def make_agent(
    script: Iterator[AIMessage], guard: LoopGuard, **kwargs: Any
) -> tuple[Any, ScriptedModel, CountingTool]:
    model = ScriptedModel(messages=script, prompts=[])
    weather = CountingTool()
    extra = kwargs.pop("middleware", [])
    agent = create_agent(
        model,
        [weather.tool],
        middleware=[LoopGuardMiddleware(guard, **kwargs), *extra],
        checkpointer=InMemorySaver(),
    )
    return agent, model, weather


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def test_loop_is_warned_then_blocked_and_the_tool_runs_only_as_often_as_allowed() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    agent, model, weather = make_agent(loop_script(CRITICAL + 1), guard)

    result = agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))

    # Calls 1..CRITICAL run (identical outcomes); call CRITICAL+1 is blocked before it runs.
    assert weather.executions == CRITICAL
    seen = model.tool_results_seen()
    assert len(seen) == CRITICAL + 1
    warned = [i for i, text in enumerate(seen) if "WARNING: You have called get_weather" in text]
    # The warning is emitted on the call that already has WARNING identical predecessors.
    assert warned == [WARNING]
    assert seen[WARNING].startswith("It is 21C in Paris.")
    assert seen[-1].startswith("CRITICAL: Called get_weather with identical arguments")
    blocked = result["messages"][-2]
    assert isinstance(blocked, ToolMessage) and blocked.status == "error"
    assert blocked.artifact["details"]["deniedReason"] == "tool-loop"
    assert result["messages"][-1].content == "I give up."
    assert [(e.action, e.detector) for e in events] == [
        ("warn", "generic_repeat"),
        ("block", "generic_repeat"),
    ]
    assert {e.session for e in events} == {"t1"}


def test_second_run_on_the_same_thread_starts_clean() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    script = itertools.chain(loop_script(CRITICAL + 1), loop_script(CRITICAL + 1))
    agent, _model, weather = make_agent(script, guard)

    agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))
    agent.invoke({"messages": [HumanMessage("and now?")]}, thread("t1"))

    assert weather.executions == 2 * CRITICAL
    run_ids = [e.run_id for e in events]
    assert len(set(run_ids)) == 2  # a fresh run id per invoke, same thread as session
    assert [e.action for e in events] == ["warn", "block", "warn", "block"]


def test_stop_after_blocks_ends_the_run_with_the_reason() -> None:
    guard = LoopGuard({**LOOP_CONFIG, "stopAfterBlocks": 1})
    agent, model, weather = make_agent(loop_script(CRITICAL + 5), guard)

    result = agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))

    assert weather.executions == CRITICAL
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.content.startswith("CRITICAL: Called get_weather with identical arguments")
    assert final.response_metadata["loopwarden"] == {"action": "stop", "detector": "generic_repeat"}
    # The model was not asked again after the block: CRITICAL + 1 prompts, not more.
    assert len(model.prompts) == CRITICAL + 1


def test_parallel_calls_after_a_stop_are_refused_without_running() -> None:
    guard = LoopGuard({**LOOP_CONFIG, "stopAfterBlocks": 1})
    paris = {"name": "get_weather", "args": {"city": "Paris"}}
    twin_calls = AIMessage(
        content="", tool_calls=[{**paris, "id": "twin-1"}, {**paris, "id": "twin-2"}]
    )
    script = itertools.chain(itertools.islice(loop_script(CRITICAL), CRITICAL), [twin_calls])
    agent, model, weather = make_agent(script, guard)

    result = agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))

    assert weather.executions == CRITICAL
    refused = [m for m in result["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    # One of the twins is the blocked call that stopped the run, the other meets the stopped run.
    assert sorted(m.tool_call_id for m in refused) == ["twin-1", "twin-2"]
    assert all(m.text.startswith("CRITICAL: Called get_weather") for m in refused)
    assert result["messages"][-1].response_metadata["loopwarden"]["action"] == "stop"
    assert len(model.prompts) == CRITICAL + 1


def test_a_tool_failing_the_same_way_is_blocked_like_any_loop() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    attempts = 0

    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        nonlocal attempts
        attempts += 1
        raise ToolException("weather service unavailable")

    get_weather.handle_tool_error = True  # the model gets the error as an error ToolMessage
    model = ScriptedModel(messages=loop_script(CRITICAL + 1), prompts=[])
    agent = create_agent(model, [get_weather], middleware=[LoopGuardMiddleware(guard)])

    agent.invoke({"messages": [HumanMessage("weather?")]})

    assert attempts == CRITICAL  # identical errors are identical outcomes
    seen = model.tool_results_seen()
    assert seen[0] == "weather service unavailable"
    assert seen[-1].startswith("CRITICAL: Called get_weather with identical arguments")
    assert [e.action for e in events] == ["warn", "block"]


def test_healthy_run_is_untouched() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    cities = [f"City{i}" for i in range(3 * CRITICAL)]
    script = itertools.chain((call("get_weather", city=c) for c in cities), [AIMessage("Done.")])
    agent, model, weather = make_agent(script, guard)

    result = agent.invoke({"messages": [HumanMessage("tour")]}, thread("t1"))

    assert weather.executions == len(cities)
    assert model.tool_results_seen() == [f"It is 21C in {c}." for c in cities]
    assert result["messages"][-1].content == "Done."
    assert events == []


def test_unknown_tool_is_still_detected() -> None:
    threshold = 3
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": threshold})
    events = events_of(guard)
    agent, model, weather = make_agent(loop_script(threshold + 1, "get_wether", city="X"), guard)

    agent.invoke({"messages": [HumanMessage("weather?")]}, thread("t1"))

    seen = model.tool_results_seen()
    assert all("is not a valid tool" in text for text in seen[:threshold])
    assert seen[threshold].startswith("CRITICAL: attempted unavailable tool get_wether 3 times")
    assert [e.detector for e in events] == ["unknown_tool_repeat"]
    assert weather.executions == 0


def test_async_invoke_goes_through_the_same_guard() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    agent, model, weather = make_agent(loop_script(CRITICAL + 1), guard)

    asyncio.run(agent.ainvoke({"messages": [HumanMessage("weather?")]}, thread("t1")))

    assert weather.executions == CRITICAL
    seen = model.tool_results_seen()
    assert "WARNING" in seen[WARNING] and seen[-1].startswith("CRITICAL")


def test_async_invoke_awaits_the_guard_and_never_calls_it_synchronously() -> None:
    """Over an async-only store every sync guard call would raise: the run proves none is made."""
    store = AsyncOnlyStore()
    guard = LoopGuard(LOOP_CONFIG, store=store)
    events = events_of(guard)
    agent, model, weather = make_agent(loop_script(CRITICAL + 1), guard)

    asyncio.run(agent.ainvoke({"messages": [HumanMessage("weather?")]}, thread("t1")))

    assert weather.executions == CRITICAL
    seen = model.tool_results_seen()
    assert "WARNING" in seen[WARNING] and seen[-1].startswith("CRITICAL")
    assert [e.action for e in events] == ["warn", "block"]
    # start, CRITICAL+1 befores, CRITICAL afters, end
    assert store.updates == 1 + (CRITICAL + 1) + CRITICAL + 1


@pytest.mark.parametrize("guard_first", [True, False])
def test_loop_surviving_summarisation_aborts_with_compaction_loop_persisted(
    guard_first: bool,
) -> None:
    # Detectors off (enabled absent): only the post-compaction guard acts.
    window, trigger = 3, 8
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})
    events = events_of(guard)
    summariser = GenericFakeChatModel(messages=itertools.repeat(AIMessage("Wants Paris weather.")))
    summarise = SummarizationMiddleware(
        summariser, trigger=("messages", trigger), keep=("messages", 2)
    )
    model = ScriptedModel(messages=loop_script(50), prompts=[])
    weather = CountingTool()
    guard_mw = LoopGuardMiddleware(guard)
    middleware = [guard_mw, summarise] if guard_first else [summarise, guard_mw]
    agent = create_agent(model, [weather.tool], middleware=middleware)

    result = agent.invoke({"messages": [HumanMessage("weather?")]})

    # One human message, then two messages per call: the summary comes before the model call
    # that follows the first call bringing the conversation to `trigger` messages.
    calls_before_summary = math.ceil((trigger - 1) / 2)
    assert weather.executions == calls_before_summary + window
    assert any(
        isinstance(m, HumanMessage) and "summary of the conversation" in m.text
        for m in model.prompts[-1]
    )
    final = result["messages"][-1]
    assert final.content.startswith(f"CRITICAL: tool get_weather repeated {window} times")
    assert final.response_metadata["loopwarden"]["detector"] == "compaction_loop_persisted"
    assert [(e.type, e.detector) for e in events] == [
        ("compaction.loop_persisted", "compaction_loop_persisted")
    ]


def test_summarisation_arms_the_guard_through_the_async_path() -> None:
    window, trigger = 3, 8
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}}, store=AsyncOnlyStore())
    summariser = GenericFakeChatModel(messages=itertools.repeat(AIMessage("Wants Paris weather.")))
    summarise = SummarizationMiddleware(
        summariser, trigger=("messages", trigger), keep=("messages", 2)
    )
    model = ScriptedModel(messages=loop_script(50), prompts=[])
    weather = CountingTool()
    agent = create_agent(model, [weather.tool], middleware=[LoopGuardMiddleware(guard), summarise])

    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("weather?")]}))

    assert weather.executions == math.ceil((trigger - 1) / 2) + window
    final = result["messages"][-1]
    assert final.response_metadata["loopwarden"]["detector"] == "compaction_loop_persisted"


@pytest.mark.parametrize("use_async", [False, True])
def test_no_config_ends_a_loop_after_three_executions(use_async: bool) -> None:
    """``LoopGuardMiddleware()`` alone: the recommended profile stops an endless loop early."""
    model = ScriptedModel(messages=loop_script(1000), prompts=[])
    weather = CountingTool()
    agent = create_agent(model, [weather.tool], middleware=[LoopGuardMiddleware()])
    request = {"messages": [HumanMessage("weather?")]}

    result = asyncio.run(agent.ainvoke(request)) if use_async else agent.invoke(request)

    assert weather.executions == 3
    # Three runs, the block read by the model, its retry blocked again: the run stops.
    assert len(model.prompts) == 5
    final = result["messages"][-1]
    assert final.response_metadata["loopwarden"] == {
        "action": "stop",
        "detector": "consecutive_repeat",
    }
    assert final.content.startswith("CRITICAL: Called get_weather 4 times in a row")


# ---------------------------------------------------------------------------------------------
# Detection v4: a failure (an error ToolMessage) that comes back across varied calls is blocked;
# one acknowledgement for varied calls never is.

CITIES = [f"City-{n}" for n in range(12)]


def city_script(name: str, count: int, key: str = "city") -> Iterator[AIMessage]:
    """One call per model turn with the next city; the n-th call's id is ``call-n``."""
    for n in range(count):
        calls = [{"name": name, "args": {key: CITIES[n]}, "id": f"call-{n + 1}"}]
        yield AIMessage(content="", tool_calls=calls)
    yield AIMessage(content="I give up.")


def at_calls(events: list[LoopEvent]) -> list[tuple[str, int]]:
    """(action, call number) of each event (the scripted call ids carry the number)."""
    return [(e.action, int(str(e.tool_call_id).removeprefix("call-"))) for e in events]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failure_across_distinct_calls_is_blocked_at_the_5th_and_stopped_at_the_7th(
    use_async: bool,
) -> None:
    guard = LoopGuard()  # the recommended profile
    events = events_of(guard)
    attempts = 0

    @tool
    def get_forecast(city: str) -> str:
        """Tomorrow's forecast for a city."""
        nonlocal attempts
        attempts += 1
        raise ToolException(f"No forecast for {city}: upstream answered 503.")

    get_forecast.handle_tool_error = True  # the model gets an error ToolMessage
    model = ScriptedModel(messages=city_script("get_forecast", 10), prompts=[])
    agent = create_agent(model, [get_forecast], middleware=[LoopGuardMiddleware(guard)])
    request = {"messages": [HumanMessage("forecasts?")]}

    result = asyncio.run(agent.ainvoke(request)) if use_async else agent.invoke(request)

    assert at_calls(events) == [("warn", 4), ("block", 5), ("stop", 7)]
    assert attempts == 5  # the 5th was refused, the 7th stopped the run
    assert model.tool_results_seen()[0] == "No forecast for City-0: upstream answered 503."
    assert result["messages"][-1].response_metadata["loopwarden"]["action"] == "stop"


def test_one_acknowledgement_for_distinct_calls_is_never_blocked() -> None:
    guard = LoopGuard()
    events = events_of(guard)
    saved: list[str] = []

    @tool
    def save_note(note: str) -> str:
        """Save a note."""
        saved.append(note)
        return "Saved."

    model = ScriptedModel(messages=city_script("save_note", 12, key="note"), prompts=[])
    agent = create_agent(model, [save_note], middleware=[LoopGuardMiddleware(guard)])

    result = agent.invoke({"messages": [HumanMessage("save them")]})

    assert len(saved) == 12 and events == []
    assert result["messages"][-1].text == "I give up."

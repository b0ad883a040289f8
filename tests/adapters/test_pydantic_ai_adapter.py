"""PydanticAI adapter, end to end: Agent + LoopGuardCapability + FunctionModel / TestModel.

``FunctionModel`` plays a script (the same tool call over and over) and records what the model
was shown; the tool counts its real executions. Nothing talks to the network.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from _async_only import AsyncOnlyStore

from _support import require_module

try:
    require_module("pydantic_ai", "pydantic-ai")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from pydantic_ai import Agent
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from loopwarden import LoopGuard
from loopwarden.adapters import LoopStopped
from loopwarden.adapters.pydantic_ai import AgentRunLoopStopped, LoopGuardCapability
from loopwarden.core.errors import LoopStoppedError
from loopwarden.events import LoopEvent

WARNING, CRITICAL = 2, 4
LOOP_CONFIG = {"enabled": True, "warningThreshold": WARNING, "criticalThreshold": CRITICAL}
_ids = itertools.count()


class Script:
    """A FunctionModel script: ``calls`` tool calls (args from ``args_for``), then a final text.

    ``returns`` collects the tool results shown to the model, ``notes`` any other user-side text.
    """

    def __init__(
        self,
        calls: int,
        args_for: Any = None,
        compact_at: int | None = None,
        tool: str = "get_weather",
    ) -> None:
        self.calls, self.made, self.tool = calls, 0, tool
        self.args_for = args_for or (lambda i: {"city": "Paris"})
        self.compact_at = compact_at
        self.returns: list[tuple[str, str]] = []  # (outcome, text)
        self.notes: list[str] = []
        self.ids: list[str] = []  # the tool-call ids, in call order
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, ToolReturnPart):
                self.returns.append((part.outcome, part.model_response_str()))
            elif isinstance(part, UserPromptPart) and isinstance(part.content, str):
                self.notes.append(part.content)
        if self.made >= self.calls:
            return ModelResponse(parts=[TextPart("I give up.")])
        self.made += 1
        self.ids.append(f"c{next(_ids)}")
        parts: list[Any] = [
            ToolCallPart(self.tool, self.args_for(self.made), tool_call_id=self.ids[-1])
        ]
        if self.made == self.compact_at:  # the provider compacted the conversation here
            parts.insert(0, CompactionPart(content="The user wants the weather in Paris."))
        return ModelResponse(parts=parts)


def make_agent(script: Script, capability: LoopGuardCapability) -> tuple[Agent[None, str], Any]:
    counter = {"executions": 0}
    agent: Agent[None, str] = Agent(script.model, capabilities=[capability])

    # retries=0: a blocked call must not spend the retry budget, or the run would fail here.
    @agent.tool_plain(retries=0)
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        counter["executions"] += 1
        return f"It is 21C in {city}."

    return agent, counter


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def test_loop_is_warned_then_blocked_without_spending_retries() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    blocked_calls = 3
    script = Script(CRITICAL + blocked_calls)
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    result = agent.run_sync("weather?")

    assert counter["executions"] == CRITICAL
    assert result.output == "I give up."
    outcomes = [outcome for outcome, _ in script.returns]
    assert outcomes == ["success"] * CRITICAL + ["failed"] * blocked_calls
    texts = [text for _, text in script.returns]
    warned = [i for i, text in enumerate(texts) if "WARNING: You have called get_weather" in text]
    assert warned == [WARNING]
    assert texts[WARNING].startswith("It is 21C in Paris.\n\nWARNING")
    # A failed tool result reaches the model as {"error": <blocked text>}.
    assert all("CRITICAL: Called get_weather with identical" in t for t in texts[CRITICAL:])
    assert [e.action for e in events] == ["warn"] + ["block"] * blocked_calls
    assert {e.run_id for e in events} == {result.run_id}


def test_second_run_of_the_conversation_starts_clean() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    script = Script(CRITICAL + 1)
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    first = agent.run_sync("weather?")
    script.made = 0  # the model loops again in the follow-up run
    second = agent.run_sync("and now?", message_history=first.all_messages())

    assert counter["executions"] == 2 * CRITICAL
    assert first.run_id != second.run_id
    assert [(e.action, e.run_id) for e in events] == [
        ("warn", first.run_id),
        ("block", first.run_id),
        ("warn", second.run_id),
        ("block", second.run_id),
    ]
    assert len({e.session for e in events}) == 1  # one conversation, one session


def test_stop_after_blocks_raises_a_clear_loopwarden_error() -> None:
    guard = LoopGuard({**LOOP_CONFIG, "stopAfterBlocks": 1})
    script = Script(CRITICAL + 5)
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    with pytest.raises(LoopStoppedError) as caught:
        agent.run_sync("weather?")

    assert counter["executions"] == CRITICAL
    assert script.made == CRITICAL + 1  # the model was not asked again after the stop
    stop = caught.value
    assert isinstance(stop, AgentRunLoopStopped) and isinstance(stop, AgentRunError)
    assert isinstance(stop, LoopStopped) and str(stop) == stop.reason
    assert (stop.count, stop.tool_name) == (CRITICAL, "get_weather")
    assert stop.reason.startswith("CRITICAL: Called get_weather with identical arguments")
    assert stop.detector == "generic_repeat"


def test_loop_surviving_a_compaction_stops_the_run() -> None:
    window, compact_at = 3, 3
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})  # detectors off
    events = events_of(guard)
    script = Script(20, compact_at=compact_at)
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    with pytest.raises(AgentRunLoopStopped) as caught:
        agent.run_sync("weather?")

    # The call that came with the compaction is the first of the window.
    assert counter["executions"] == compact_at - 1 + window
    assert caught.value.detector == "compaction_loop_persisted"
    assert caught.value.reason.startswith(f"CRITICAL: tool get_weather repeated {window} times")
    assert [e.type for e in events] == ["compaction.loop_persisted"]


def test_healthy_run_is_untouched() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    calls = 3 * CRITICAL
    script = Script(calls, args_for=lambda i: {"city": f"City{i}"})
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    result = agent.run_sync("tour")

    assert counter["executions"] == calls
    assert script.returns == [("success", f"It is 21C in City{i}.") for i in range(1, calls + 1)]
    assert result.output == "I give up."
    assert events == []


def test_test_model_run_is_untouched() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    agent: Agent[None, str] = Agent(TestModel(), capabilities=[LoopGuardCapability(guard)])
    executions = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        executions.append(city)
        return f"It is 21C in {city}."

    result = agent.run_sync("weather?")

    assert len(executions) == 1
    assert "It is 21C in" in result.output
    assert events == []


def test_warning_on_a_structured_result_travels_next_to_it() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    script = Script(WARNING + 1)
    agent: Agent[None, str] = Agent(script.model, capabilities=[LoopGuardCapability(guard)])

    @agent.tool_plain
    def get_weather(city: str) -> dict[str, Any]:
        """Current weather of a city."""
        return {"city": city, "celsius": 21}

    agent.run_sync("weather?")

    assert [text for _, text in script.returns][WARNING] == '{"city":"Paris","celsius":21}'
    assert len(script.notes) == 2  # the prompt, then the warning as its own user content
    assert script.notes[-1].startswith("WARNING: You have called get_weather 2 times")


# ---------------------------------------------------------------------------------------------
# Issue #16: repeated calls to a tool that does not exist


def test_repeated_calls_to_a_missing_tool_are_detected_before_the_model_reads_the_answer() -> None:
    threshold = 3
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": threshold})
    events = events_of(guard)
    script = Script(threshold + 1, tool="get_wether")
    agent: Agent[None, str] = Agent(
        script.model, capabilities=[LoopGuardCapability(guard)], retries=10
    )
    executions = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        executions.append(city)
        return f"It is 21C in {city}."

    result = agent.run_sync("weather?")

    texts = [text for _, text in script.returns]
    assert all("Unknown tool name: 'get_wether'" in t for t in texts[:threshold])
    assert texts[threshold] == (
        '{"error":"CRITICAL: attempted unavailable tool get_wether 3 times. '
        'Stop retrying that missing tool and answer without it."}'
    )
    assert [(e.action, e.detector) for e in events] == [("block", "unknown_tool_repeat")]
    assert executions == [] and result.output == "I give up."


def test_a_stop_on_a_missing_tool_ends_the_run() -> None:
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": 2, "stopAfterBlocks": 1})
    script = Script(10, tool="get_wether")
    agent: Agent[None, str] = Agent(
        script.model, capabilities=[LoopGuardCapability(guard)], retries=10
    )

    with pytest.raises(AgentRunLoopStopped) as caught:
        agent.run_sync("weather?")

    assert caught.value.detector == "unknown_tool_repeat"
    assert script.made == 3  # the 3rd call (after 2 unknown) stops; no model call after it


def test_pydantic_ais_own_retry_budget_ends_the_default_run_first() -> None:
    """Why the docs say the detection needs a larger ``retries``: the default is 1."""
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    guard = LoopGuard({"enabled": True, "unknownToolThreshold": 3})
    events = events_of(guard)
    script = Script(10, tool="get_wether")
    agent: Agent[None, str] = Agent(script.model, capabilities=[LoopGuardCapability(guard)])

    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        agent.run_sync("weather?")
    assert script.made == 2 and events == []


def test_guard_calls_are_awaited_on_an_async_only_store() -> None:
    store = AsyncOnlyStore()
    guard = LoopGuard(LOOP_CONFIG, store=store)
    events = events_of(guard)
    script = Script(CRITICAL + 1)
    agent, counter = make_agent(script, LoopGuardCapability(guard))

    agent.run_sync("weather?")

    assert counter["executions"] == CRITICAL
    assert [e.action for e in events] == ["warn", "block"] and store.updates > 0


@pytest.mark.parametrize("use_async", [False, True])
def test_no_config_ends_a_loop_after_three_executions(use_async: bool) -> None:
    """``LoopGuardCapability()`` alone: the recommended profile stops an endless loop early."""
    import asyncio

    script = Script(1000)
    agent, counter = make_agent(script, LoopGuardCapability())

    with pytest.raises(AgentRunLoopStopped) as stopped:
        if use_async:
            asyncio.run(agent.run("weather?"))
        else:
            agent.run_sync("weather?")

    assert counter["executions"] == 3
    assert script.made == 5  # three runs, a block, the retry that stops the run
    assert stopped.value.detector == "consecutive_repeat"


# ---------------------------------------------------------------------------------------------
# Detection v4: a failure (ModelRetry, ToolFailed) that comes back across varied calls is
# blocked; one acknowledgement for varied calls never is.

CITIES = [f"City-{n}" for n in range(12)]


def at_calls(script: Script, events: list[LoopEvent]) -> list[tuple[str, int]]:
    """(action, call number) of each event."""
    return [(e.action, script.ids.index(str(e.tool_call_id)) + 1) for e in events]


@pytest.mark.parametrize("how", ["ModelRetry", "ToolFailed"])
def test_a_failure_across_distinct_calls_is_blocked_at_the_5th_and_stopped_at_the_7th(
    how: str,
) -> None:
    from pydantic_ai import ModelRetry
    from pydantic_ai.exceptions import ToolFailed

    guard = LoopGuard()  # the recommended profile
    events = events_of(guard)
    script = Script(10, args_for=lambda i: {"city": CITIES[i - 1]}, tool="get_forecast")
    agent: Agent[None, str] = Agent(script.model, capabilities=[LoopGuardCapability(guard)])
    attempts: list[str] = []

    @agent.tool_plain(retries=10)  # ModelRetry spends the tool's retry budget
    def get_forecast(city: str) -> str:
        """Tomorrow's forecast for a city."""
        attempts.append(city)
        text = f"No forecast for {city}: upstream answered 503."
        raise ModelRetry(text) if how == "ModelRetry" else ToolFailed(text)

    with pytest.raises(AgentRunLoopStopped):
        agent.run_sync("forecasts?")

    assert at_calls(script, events) == [("warn", 4), ("block", 5), ("stop", 7)]
    assert len(attempts) == 5  # the 5th was refused, the 7th stopped the run
    assert "No forecast for City-0" in script.returns[0][1]


def test_one_acknowledgement_for_distinct_calls_is_never_blocked() -> None:
    guard = LoopGuard()
    events = events_of(guard)
    script = Script(12, args_for=lambda i: {"note": CITIES[i - 1]}, tool="save_note")
    agent: Agent[None, str] = Agent(script.model, capabilities=[LoopGuardCapability(guard)])
    saved: list[str] = []

    @agent.tool_plain
    def save_note(note: str) -> str:
        """Save a note."""
        saved.append(note)
        return "Saved."

    result = agent.run_sync("save them")

    assert result.output == "I give up."
    assert len(saved) == 12 and events == []
    assert script.returns == [("success", "Saved.")] * 12

"""OpenAI Agents SDK adapter, end to end: Runner.run + guard_agent + the SDK's ScriptedModel.

The model is ``agents.testing.ScriptedModel``: each step returns the same function call, and the
script must be consumed exactly (``assert_complete``), which pins how often the model was asked.
The tool counts its real executions. Tracing is disabled, so nothing talks to the network.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import require_module

try:
    require_module("agents", "openai-agents")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from agents import (
    Agent,
    Runner,
    RunResult,
    function_tool,
    handoff,
    set_tracing_disabled,
)
from agents.exceptions import AgentsException
from agents.mcp import MCPServerStdio
from agents.testing import (
    ModelCall,
    ModelStep,
    ScriptedModel,
    assistant_message,
    function_call,
)
from agents.tool_context import ToolContext

from loopwarden import LoopGuard
from loopwarden.adapters import LoopStopped
from loopwarden.adapters.openai_agents import (
    AgentLoopStopped,
    LoopGuardrails,
    guard_agent,
)
from loopwarden.compaction import CompactionLoopPersistedError
from loopwarden.errors import LoopStoppedError
from loopwarden.events import LoopEvent

set_tracing_disabled(True)

MCP_SERVER = Path(__file__).with_name("_weather_mcp_server.py")

WARNING, CRITICAL = 2, 4
LOOP_CONFIG = {"enabled": True, "warningThreshold": WARNING, "criticalThreshold": CRITICAL}
_ids = itertools.count()


class Recorder:
    """Collects the tool outputs the model was shown, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def step(self, name: str = "get_weather", **args: Any) -> ModelStep:
        def respond(call: ModelCall) -> list[Any]:
            self._note(call)
            return [function_call(name, args or {"city": "Paris"}, call_id=f"c{next(_ids)}")]

        return ModelStep.respond(respond)

    def final(self, text: str) -> ModelStep:
        def respond(call: ModelCall) -> list[Any]:
            self._note(call)
            return [assistant_message(text)]

        return ModelStep.respond(respond)

    def _note(self, call: ModelCall) -> None:
        last = call.input[-1] if isinstance(call.input, list) else None
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            self.seen.append(str(last["output"]))


class CountingWeather:
    def __init__(self) -> None:
        self.executions = 0

        @function_tool
        def get_weather(city: str) -> str:
            """Current weather of a city."""
            self.executions += 1
            return f"It is 21C in {city}."

        self.tool = get_weather


def loop_steps(rec: Recorder, times: int) -> Iterator[ModelStep]:
    yield from (rec.step() for _ in range(times))
    yield rec.final("I give up.")


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def run(agent: Agent[Any], text: str = "weather?") -> RunResult:
    return asyncio.run(Runner.run(agent, text, max_turns=50))


def test_loop_is_warned_then_blocked_and_the_tool_runs_only_as_often_as_allowed() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(loop_steps(rec, CRITICAL + 1))
    agent = guard_agent(Agent(name="weather", model=model, tools=[weather.tool]), guard)

    result = run(agent)

    model.assert_complete()
    assert weather.executions == CRITICAL
    assert len(rec.seen) == CRITICAL + 1
    warned = [
        i for i, text in enumerate(rec.seen) if "WARNING: You have called get_weather" in text
    ]
    assert warned == [WARNING]
    assert rec.seen[WARNING].startswith("It is 21C in Paris.\n\nWARNING")
    assert rec.seen[-1].startswith("CRITICAL: Called get_weather with identical arguments")
    assert result.final_output == "I give up."
    assert [(e.action, e.detector) for e in events] == [
        ("warn", "generic_repeat"),
        ("block", "generic_repeat"),
    ]


def test_second_run_on_the_same_agent_starts_clean() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(itertools.chain(loop_steps(rec, CRITICAL + 1), loop_steps(rec, 2)))
    agent = guard_agent(Agent(name="weather", model=model, tools=[weather.tool]), guard)

    run(agent)
    run(agent)

    model.assert_complete()
    assert weather.executions == CRITICAL + 2  # the second run is not blocked by the first
    assert [e.action for e in events] == ["warn", "block"]
    assert not any(text.startswith("CRITICAL") for text in rec.seen[CRITICAL + 1 :])


def test_stop_after_blocks_raises_a_catchable_loopwarden_error_with_the_reason() -> None:
    guard = LoopGuard({**LOOP_CONFIG, "stopAfterBlocks": 1})
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(rec.step() for _ in range(CRITICAL + 1))
    agent = guard_agent(Agent(name="weather", model=model, tools=[weather.tool]), guard)

    with pytest.raises(LoopStoppedError) as caught:
        run(agent)

    model.assert_complete()
    assert weather.executions == CRITICAL
    stop = caught.value
    assert isinstance(stop, AgentLoopStopped) and isinstance(stop, AgentsException)
    assert isinstance(stop, LoopStopped)
    assert stop.reason.startswith("CRITICAL: Called get_weather with identical arguments")
    assert (stop.detector, stop.count, stop.tool_name) == (
        "generic_repeat",
        CRITICAL,
        "get_weather",
    )
    assert stop.decision.action == "stop"


def test_loop_surviving_a_compaction_stops_the_run() -> None:
    window = 3
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})  # detectors off
    guardrails = LoopGuardrails(guard)
    executions = 0

    @function_tool
    def get_weather(ctx: ToolContext[Any], city: str) -> str:
        """Current weather of a city."""
        nonlocal executions
        executions += 1
        if executions == 1:  # the conversation was just compacted (e.g. by a session)
            session, run_id = guardrails.run_of(ctx)
            guard.on_compaction_retry(session, run_id=run_id)
        return f"It is 21C in {city}."

    rec = Recorder()
    model = ScriptedModel(rec.step() for _ in range(window))
    agent = guardrails.attach(Agent(name="weather", model=model, tools=[get_weather]))

    with pytest.raises(AgentLoopStopped) as caught:
        run(agent)

    model.assert_complete()
    assert executions == window
    stop = caught.value
    assert (stop.detector, stop.count, stop.tool_name) == (
        "compaction_loop_persisted",
        window,
        "get_weather",
    )
    assert stop.reason.startswith(f"CRITICAL: tool get_weather repeated {window} times")
    assert isinstance(stop.error, CompactionLoopPersistedError)


def test_healthy_run_is_untouched() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    cities = [f"City{i}" for i in range(3 * CRITICAL)]
    model = ScriptedModel([*(rec.step(city=c) for c in cities), rec.final("Done.")])
    agent = guard_agent(Agent(name="weather", model=model, tools=[weather.tool]), guard)

    result = run(agent)

    assert weather.executions == len(cities)
    assert rec.seen == [f"It is 21C in {c}." for c in cities]
    assert result.final_output == "Done."
    assert events == []


def test_handoff_targets_are_guarded_and_run_record_is_reachable() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(
        [
            [function_call("transfer_to_weather", {}, call_id="h1")],
            *loop_steps(rec, CRITICAL + 1),
        ]
    )
    specialist = Agent(name="weather", model=model, tools=[weather.tool])
    triage = Agent(name="triage", model=model, handoffs=[handoff(specialist)])
    guardrails = LoopGuardrails(guard)
    guardrails.attach(triage)

    result = run(triage)

    assert weather.executions == CRITICAL
    assert result.final_output == "I give up."
    session, run_id = guardrails.run_of(result.context_wrapper)
    assert [e.action for e in guard.run_record(session, run_id)] == ["warn", "block"]


def test_mcp_server_tools_are_guarded(tmp_path: Path) -> None:
    counter = tmp_path / "executions.txt"
    counter.touch()
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec = Recorder()
    model = ScriptedModel(loop_steps(rec, CRITICAL + 1))
    server = MCPServerStdio(
        params={"command": sys.executable, "args": [str(MCP_SERVER), str(counter)]},
        name="weather",
        client_session_timeout_seconds=30,
    )

    async def scenario() -> RunResult:
        async with server:
            agent = guard_agent(Agent(name="weather", model=model, mcp_servers=[server]), guard)
            return await Runner.run(agent, "weather?", max_turns=50)

    result = asyncio.run(scenario())

    model.assert_complete()
    assert counter.read_text().count("get_weather") == CRITICAL
    assert "WARNING: You have called get_weather" in rec.seen[WARNING]
    assert "CRITICAL: Called get_weather" in rec.seen[-1]
    assert result.final_output == "I give up."
    assert [e.action for e in events] == ["warn", "block"]


def test_guarding_twice_keeps_one_guardrail_pair() -> None:
    weather = CountingWeather()
    agent = Agent(name="weather", tools=[weather.tool])
    guard_agent(agent, LoopGuard())
    guard_agent(agent, LoopGuard())
    assert [g.name for g in weather.tool.tool_input_guardrails or []] == ["loopwarden"]
    assert [g.name for g in weather.tool.tool_output_guardrails or []] == ["loopwarden"]


def test_a_bad_session_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="session"):
        guard_agent(Agent(name="a"), LoopGuard(), session=3)  # type: ignore[arg-type]

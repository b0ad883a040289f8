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

from _async_only import AsyncOnlyStore

from _support import require_module

try:
    require_module("agents", "openai-agents")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from agents import (
    Agent,
    AgentHooks,
    Runner,
    RunResult,
    Usage,
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
from loopwarden.core.compaction import CompactionLoopPersistedError
from loopwarden.core.errors import LoopStoppedError
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
    guarded = guardrails.attach(triage)

    result = run(guarded)

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


def test_guarding_twice_keeps_one_guard_the_latest() -> None:
    first, second = LoopGuard(LOOP_CONFIG), LoopGuard(LOOP_CONFIG)
    first_events, second_events = events_of(first), events_of(second)
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(loop_steps(rec, CRITICAL + 1))
    agent = guard_agent(
        guard_agent(Agent(name="w", model=model, tools=[weather.tool]), first), second
    )

    run(agent)

    assert weather.executions == CRITICAL
    assert first_events == [] and [e.action for e in second_events] == ["warn", "block"]


def test_a_bad_session_option_is_rejected() -> None:
    with pytest.raises(TypeError, match="session"):
        guard_agent(Agent(name="a"), LoopGuard(), session=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Issue #16: guarding never mutates what the user shares, and covers tools resolved at run time


SHARED_EXECUTIONS = {"n": 0}


@function_tool
def shared_weather(city: str) -> str:
    """Current weather of a city (one module-level tool, shared by two agents)."""
    SHARED_EXECUTIONS["n"] += 1
    return f"It is 21C in {city}."


def test_guarding_one_agent_leaves_a_shared_tool_and_the_other_agents_guard_alone() -> None:
    """The issue's case: A guarded with recommended made all 30 calls once B was guarded."""
    guard_a, guard_b = LoopGuard({"profile": "recommended"}), LoopGuard(LOOP_CONFIG)
    events_a, events_b = events_of(guard_a), events_of(guard_b)
    rec = Recorder()
    model = ScriptedModel(rec.step("shared_weather") for _ in range(30))
    agent_a = guard_agent(Agent(name="a", model=model, tools=[shared_weather]), guard_a)
    guard_agent(Agent(name="b", tools=[shared_weather]), guard_b)  # after A, on the same tool

    SHARED_EXECUTIONS["n"] = 0
    with pytest.raises(LoopStopped):
        asyncio.run(Runner.run(agent_a, "weather?", max_turns=50))

    assert shared_weather.tool_input_guardrails is None  # the user's tool is untouched
    assert shared_weather.tool_output_guardrails is None
    assert [e.action for e in events_a][:2] == ["warn", "block"]  # A keeps its own guard
    assert events_b == []
    assert SHARED_EXECUTIONS["n"] == 3  # recommended refuses the 4th identical call


def test_tools_added_after_guarding_are_guarded() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    agent = guard_agent(Agent(name="w", model=ScriptedModel(loop_steps(rec, CRITICAL + 1))), guard)
    agent.tools.append(weather.tool)

    run(agent)

    assert weather.executions == CRITICAL
    assert [e.action for e in events] == ["warn", "block"]


def test_a_clone_of_the_guarded_agent_with_other_tools_is_guarded() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    guarded = guard_agent(
        Agent(name="w", model=ScriptedModel(loop_steps(rec, CRITICAL + 1))), guard
    )

    run(guarded.clone(tools=[weather.tool]))

    assert weather.executions == CRITICAL
    assert [e.action for e in events] == ["warn", "block"]


def test_the_agent_passed_in_is_left_as_it_was() -> None:
    weather = CountingWeather()
    specialist = Agent(name="specialist", tools=[weather.tool])
    agent = Agent(name="w", tools=[weather.tool], handoffs=[specialist, handoff(specialist)])
    handoffs_before = list(agent.handoffs)

    guarded = guard_agent(agent, LoopGuard())

    assert guarded is not agent and isinstance(guarded, Agent)
    assert type(agent) is Agent and type(specialist) is Agent
    assert agent.handoffs == handoffs_before and agent.handoffs[1] is handoffs_before[1]
    assert weather.tool.tool_input_guardrails is None
    assert guarded.name == agent.name


# ---------------------------------------------------------------------------------------------
# Issue #16: the SDK's default max_turns and the profiles


def test_the_default_max_turns_ends_a_loop_before_the_openclaw_profile_acts() -> None:
    """Why the docs recommend the recommended profile with max_turns=30."""
    from agents.exceptions import MaxTurnsExceeded

    openclaw = LoopGuard({"enabled": True})  # warns at 10 identical calls, blocks at 20
    events = events_of(openclaw)
    weather = CountingWeather()
    agent = guard_agent(
        Agent(name="w", model=ScriptedModel(loop_steps(Recorder(), 30)), tools=[weather.tool]),
        openclaw,
    )
    with pytest.raises(MaxTurnsExceeded):
        asyncio.run(Runner.run(agent, "weather?"))  # the SDK's default max_turns=10
    assert events == [] and weather.executions == 10

    recommended = LoopGuard({"profile": "recommended"})
    events = events_of(recommended)
    weather = CountingWeather()
    rec = Recorder()
    agent = guard_agent(
        Agent(name="w", model=ScriptedModel(loop_steps(rec, 29)), tools=[weather.tool]), recommended
    )
    with pytest.raises(LoopStopped):
        asyncio.run(Runner.run(agent, "weather?", max_turns=30))
    assert [e.action for e in events][:2] == ["warn", "block"]
    assert weather.executions == 3


# ---------------------------------------------------------------------------------------------
# Issue #16: repeated calls to a tool that does not exist


def test_repeated_calls_to_a_missing_tool_are_seen_through_the_run_config() -> None:
    from agents import RunConfig

    threshold = 3
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": threshold})
    events = events_of(guard)
    rec, weather = Recorder(), CountingWeather()
    missing = [rec.step("get_wether", city="X") for _ in range(threshold + 1)]
    model = ScriptedModel([*missing, rec.final("I give up.")])
    guardrails = LoopGuardrails(guard)
    agent = guardrails.attach(Agent(name="w", model=model, tools=[weather.tool]))
    config = guardrails.run_config(RunConfig(tool_not_found_behavior="return_error_to_model"))

    result = asyncio.run(Runner.run(agent, "weather?", max_turns=50, run_config=config))

    model.assert_complete()
    assert all("not found" in text for text in rec.seen[:threshold])
    assert rec.seen[threshold].startswith("CRITICAL: attempted unavailable tool get_wether 3 times")
    assert [e.detector for e in events] == ["unknown_tool_repeat"]
    assert weather.executions == 0
    assert result.final_output == "I give up."


def test_a_stop_on_a_missing_tool_ends_the_run_and_keeps_the_users_formatter() -> None:
    from agents import RunConfig
    from agents.run_config import ToolErrorFormatterArgs

    guard = LoopGuard({"enabled": True, "unknownToolThreshold": 2, "stopAfterBlocks": 1})
    rec = Recorder()
    model = ScriptedModel([rec.step("get_wether", city="X") for _ in range(5)])
    guardrails = LoopGuardrails(guard)
    agent = guardrails.attach(Agent(name="w", model=model, tools=[CountingWeather().tool]))

    def mine(args: ToolErrorFormatterArgs[Any]) -> str:
        return f"my text for {args.kind}"

    base = RunConfig(tool_not_found_behavior="return_error_to_model", tool_error_formatter=mine)
    with pytest.raises(AgentLoopStopped) as caught:
        asyncio.run(
            Runner.run(agent, "weather?", max_turns=50, run_config=guardrails.run_config(base))
        )

    assert rec.seen[0] == "my text for tool_not_found"
    assert caught.value.detector == "unknown_tool_repeat"
    assert len(rec.seen) == 2  # the stopping answer was read once, then the run ended


def test_guard_calls_are_awaited_on_an_async_only_store() -> None:
    store = AsyncOnlyStore()
    guard = LoopGuard(LOOP_CONFIG, store=store)
    rec, weather = Recorder(), CountingWeather()
    agent = guard_agent(
        Agent(name="w", model=ScriptedModel(loop_steps(rec, CRITICAL + 1)), tools=[weather.tool]),
        guard,
    )

    run(agent)

    assert weather.executions == CRITICAL and store.updates > 0


def test_a_guardrail_the_user_adds_to_a_tool_later_still_runs() -> None:
    from agents import ToolGuardrailFunctionOutput, ToolInputGuardrail

    seen: list[str] = []

    def mine(data: Any) -> ToolGuardrailFunctionOutput:
        seen.append(data.context.tool_name)
        return ToolGuardrailFunctionOutput.allow()

    guard = LoopGuard(LOOP_CONFIG)
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel([rec.step(), rec.step(), rec.final("done")])
    agent = guard_agent(Agent(name="w", model=model, tools=[weather.tool]), guard)
    weather.tool.tool_input_guardrails = []
    run(agent)  # the first runs copy the tool with an empty list of its own

    model = ScriptedModel([rec.step(), rec.final("done")])
    weather.tool.tool_input_guardrails.append(ToolInputGuardrail(guardrail_function=mine))
    run(agent.clone(model=model))

    assert seen == ["get_weather"]


# ---------------------------------------------------------------------------------------------
# The end of a run: a final output, or a stop; the user's own agent hooks keep working


class CountingHooks(AgentHooks[Any]):
    """The user's hooks: counts what the SDK called on them."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def on_start(self, context: Any, agent: Any) -> None:
        self.calls.append("start")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.calls.append("tool_end")

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        self.calls.append(f"end:{output}")


def _run_record(guard: LoopGuard, session: str, run_id: str) -> Any:
    state = guard.store.peek(session)
    assert state is not None
    return state.runs[run_id]


def test_a_run_that_ends_with_its_final_output_is_closed_in_the_guard(tmp_path: Path) -> None:
    guard = LoopGuard(LOOP_CONFIG, record_db=tmp_path / "runs.db")
    rec, weather = Recorder(), CountingWeather()
    hooks = CountingHooks()
    model = ScriptedModel(loop_steps(rec, 1))
    guardrails = LoopGuardrails(guard)
    agent = Agent(name="weather", model=model, tools=[weather.tool], hooks=hooks)
    guarded = guardrails.attach(agent)

    result = run(guarded)

    session, run_id = guardrails.run_of(result.context_wrapper)
    record = _run_record(guard, session, run_id)
    assert record.outcome == "completed" and record.ended_at is not None
    # The user's hooks saw everything, once, and the agent passed in still has them.
    assert hooks.calls == ["start", "tool_end", "end:I give up."]
    assert agent.hooks is hooks
    # The run-records database has the end too.
    assert guard.recorder is not None and guard.recorder.flush()
    import sqlite3

    with sqlite3.connect(tmp_path / "runs.db") as db:
        rows = db.execute("SELECT outcome FROM runs WHERE run_key = ?", (run_id,)).fetchall()
    assert rows == [("completed",)]


def test_a_stopped_run_is_closed_as_stopped_once() -> None:
    guard = LoopGuard({**LOOP_CONFIG, "stopAfterBlocks": 1})
    ended: list[Any] = []
    original = guard.aend_run

    async def counting_end(*args: Any, **kwargs: Any) -> Any:
        ended.append(await original(*args, **kwargs))
        return ended[-1]

    guard.aend_run = counting_end  # type: ignore[method-assign]
    rec, weather = Recorder(), CountingWeather()
    model = ScriptedModel(rec.step() for _ in range(CRITICAL + 1))
    agent = guard_agent(Agent(name="weather", model=model, tools=[weather.tool]), guard)

    with pytest.raises(AgentLoopStopped):
        run(agent)

    assert len(ended) == 1
    assert ended[0].outcome == "stopped" and ended[0].ended_at is not None
    assert ended[0].stop_reason.startswith("CRITICAL: Called get_weather")


def test_guarding_a_guarded_agent_again_keeps_one_run_end() -> None:
    guard = LoopGuard(LOOP_CONFIG)
    hooks = CountingHooks()
    model = ScriptedModel(loop_steps(Recorder(), 0))
    first = guard_agent(Agent(name="w", model=model, hooks=hooks), LoopGuard())
    guardrails = LoopGuardrails(guard)
    again = guardrails.attach(first)

    result = run(again)

    assert hooks.calls == ["start", "end:I give up."]
    session, run_id = guardrails.run_of(result.context_wrapper)
    assert _run_record(guard, session, run_id).outcome == "completed"


# ---------------------------------------------------------------------------------------------
# Issue #25: no config ends a loop; turns are told apart without the model's usage


@pytest.mark.parametrize("usage", [None, Usage()], ids=["usage-counted", "usage-not-reported"])
def test_no_config_ends_a_loop_after_three_executions(usage: Usage | None) -> None:
    """``guard_agent(agent)`` alone, under the SDK's default ``max_turns``, stops the loop.

    A model that reports ``Usage()`` (no requests counted, as when a provider sends no usage)
    must not merge every turn into one batch: the blocks of one batch count as one, so the
    run would never stop.
    """
    weather = CountingWeather()
    model = ScriptedModel(loop_steps(Recorder(), 1000), default_usage=usage)
    agent = guard_agent(Agent(name="w", model=model, tools=[weather.tool]))

    with pytest.raises(AgentLoopStopped) as stopped:
        asyncio.run(Runner.run(agent, "weather?"))  # the SDK's default max_turns=10

    assert weather.executions == 3
    assert len(model.calls) == 5  # three runs, a block, the retry that stops the run
    assert stopped.value.detector == "consecutive_repeat"


# ---------------------------------------------------------------------------------------------
# Detection v4: a tool that raised reaches the guard as a failure (the SDK turns the exception
# into its failure_error_function's text, which alone says nothing of a failure)

CITIES = [f"City-{n}" for n in range(12)]
# Only the repeated-error detector: failures with one outcome, whatever the arguments, block
# the 4th call. It reads the failure flag alone, so it shows what reached the guard.
REPEATED_ERROR = {
    "enabled": True,
    "detectors": {"repeatedError": True},
    "repeatedErrorThreshold": 3,
    "normalizeVolatile": True,
}


class FailingWeather:
    """A weather tool whose upstream is down: every call raises, naming its city."""

    def __init__(self, quoting: bool) -> None:
        self.executions = 0

        def failure_text(ctx: Any, error: Exception) -> str:
            return f"Error: {error}"

        def get_weather(city: str) -> str:
            """Current weather of a city."""
            self.executions += 1
            raise RuntimeError(f"no forecast for {city}: upstream answered 503")

        # quoting: the model reads the error (naming the city); else the SDK's default text
        options = {"failure_error_function": failure_text} if quoting else {}
        self.tool = function_tool(get_weather, **options)


def city_steps(rec: Recorder, name: str, count: int, key: str = "city") -> Iterator[ModelStep]:
    """One call per step with the next city; the n-th call's id is ``call-n``."""
    for n in range(count):

        def respond(call: ModelCall, n: int = n) -> list[Any]:
            rec._note(call)
            return [function_call(name, {key: CITIES[n]}, call_id=f"call-{n + 1}")]

        yield ModelStep.respond(respond)
    yield rec.final("I give up.")


def at_calls(events: list[LoopEvent]) -> list[tuple[str, int]]:
    """(action, call number) of each event (the scripted call ids carry the number)."""
    return [(e.action, int(str(e.tool_call_id).removeprefix("call-"))) for e in events]


@pytest.mark.parametrize("quoting", [True, False], ids=["error-text", "sdk-default-text"])
def test_a_failure_across_distinct_calls_is_blocked_at_the_5th_and_stopped_at_the_7th(
    quoting: bool,
) -> None:
    guard = LoopGuard()  # the recommended profile
    events = events_of(guard)
    rec, weather = Recorder(), FailingWeather(quoting)
    model = ScriptedModel(city_steps(rec, "get_weather", 10))
    agent = guard_agent(Agent(name="w", model=model, tools=[weather.tool]), guard)

    with pytest.raises(AgentLoopStopped):
        run(agent)

    assert at_calls(events) == [("warn", 4), ("block", 5), ("stop", 7)]
    assert weather.executions == 5  # the 5th was refused, the 7th stopped the run
    if quoting:
        assert rec.seen[0] == "Error: no forecast for City-0: upstream answered 503"


def test_one_acknowledgement_for_distinct_calls_is_never_blocked() -> None:
    guard = LoopGuard()
    events = events_of(guard)
    saved: list[str] = []

    @function_tool
    def save_note(note: str) -> str:
        """Save a note."""
        saved.append(note)
        return "Saved."

    rec = Recorder()
    model = ScriptedModel(city_steps(rec, "save_note", 12, key="note"))
    result = run(guard_agent(Agent(name="w", model=model, tools=[save_note]), guard))

    assert result.final_output == "I give up."
    assert len(saved) == 12 and rec.seen == ["Saved."] * 12
    assert [e.action for e in events] == []


def test_a_tool_that_raised_reaches_the_guard_as_a_failure() -> None:
    # The SDK's default text for every failure: one outcome, failing, whatever the city.
    guard = LoopGuard(REPEATED_ERROR)
    events = events_of(guard)
    rec, weather = Recorder(), FailingWeather(quoting=False)
    model = ScriptedModel(city_steps(rec, "get_weather", 5))
    run(guard_agent(Agent(name="w", model=model, tools=[weather.tool]), guard))

    assert at_calls(events) == [("block", 4), ("block", 5)]
    assert {e.detector for e in events} == {"repeated_error"}
    assert weather.executions == 3
    assert rec.seen[0] == "An error occurred while running the tool. Please try again."

"""Google ADK adapter, end to end: Runner + LlmAgent + LoopGuardPlugin + a scripted BaseLlm.

``Scripted`` is an ADK ``BaseLlm`` that plays a script of model turns (each a list of tool
calls) and records every tool response it was shown; the tools count their real executions.
Expected counts come from the resolved config, or from the same calls fed to a bare guard.
Nothing talks to the network.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest

from _async_only import AsyncOnlyStore

from _support import require_module

try:
    require_module("google.adk", "google-adk")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from google.adk.agents import LlmAgent, SequentialAgent
from google.adk.apps import App
from google.adk.apps.app import EventsCompactionConfig
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

from loopwarden import LoopGuard, resolve_config
from loopwarden.adapters.google_adk import WARNING_KEY, LoopGuardPlugin
from loopwarden.events import LoopEvent

RECOMMENDED = {"profile": "recommended"}
_ids = itertools.count()
Call = tuple[str, dict[str, Any]]
PARIS: Call = ("get_weather", {"city": "Paris"})
FINAL = "I give up."


class Scripted(BaseLlm):
    """A scripted model: turn ``i`` makes the calls ``turns[i]``; then it answers ``FINAL``.

    ``shown`` collects the tool responses the model was shown; a request without tools (the
    compaction summarizer's) is answered with a summary. ``big_prompt_at`` reports a prompt
    of ``10**6`` tokens with that turn, so a token-threshold compaction follows.
    """

    model: str = "scripted"
    turns: list[list[Call]] = Field(default_factory=list)
    shown: list[dict[str, Any]] = Field(default_factory=list)
    made: int = 0
    big_prompt_at: int | None = None
    delay: float = 0.0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        if not llm_request.tools_dict:
            yield _text("Summary: the user wants the weather in Paris.")
            return
        for part in llm_request.contents[-1].parts or ():
            if part.function_response is not None:
                self.shown.append(dict(part.function_response.response or {}))
        await asyncio.sleep(self.delay)  # lets concurrent runs interleave
        if self.made >= len(self.turns):
            yield _text(FINAL)
            return
        calls = self.turns[self.made]
        self.made += 1
        parts = [
            types.Part(function_call=types.FunctionCall(name=name, args=args, id=f"c{next(_ids)}"))
            for name, args in calls
        ]
        usage = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=10**6 if self.made == self.big_prompt_at else 100
        )
        yield LlmResponse(content=types.Content(role="model", parts=parts), usage_metadata=usage)


def _text(text: str) -> LlmResponse:
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


class Tools:
    """Tools that count their real executions (``wait``: an async tool that sleeps)."""

    def __init__(self, wait: float | None = None) -> None:
        self.executions = 0
        self.wait = wait

    def all(self) -> list[Callable[..., Any]]:
        if self.wait is None:

            def get_weather(city: str) -> str:
                """Current weather of a city."""
                self.executions += 1
                return f"It is 21C in {city}."

        else:
            wait = self.wait

            async def get_weather(city: str) -> str:  # type: ignore[misc]
                """Current weather of a city."""
                self.executions += 1
                await asyncio.sleep(wait)  # in flight while the turn's other calls start
                return f"It is 21C in {city}."

        def get_time(city: str) -> str:
            """Local time of a city."""
            self.executions += 1
            return f"It is noon in {city}."

        def get_report(city: str) -> dict[str, Any]:
            """A structured weather report."""
            self.executions += 1
            return {"city": city, "celsius": 21}

        return [get_weather, get_time, get_report]


def turns(*calls: Call, repeat: int = 1) -> list[list[Call]]:
    """One call per turn, the sequence ``calls`` repeated ``repeat`` times."""
    return [[call] for call in calls] * repeat


async def run(
    runner: InMemoryRunner, user: str = "u", session_id: str | None = None
) -> tuple[str, list[Event]]:
    """One invocation (a fresh session unless ``session_id``); its session id and events."""
    if session_id is None:
        session = await runner.session_service.create_session(app_name="app", user_id=user)
        session_id = session.id
    message = types.Content(role="user", parts=[types.Part(text="weather?")])
    events = [
        event
        async for event in runner.run_async(
            user_id=user, session_id=session_id, new_message=message
        )
    ]
    return session_id, events


def make(
    guard: LoopGuard, script: list[list[Call]], tools: Tools | None = None, **llm: Any
) -> tuple[InMemoryRunner, Scripted, Tools]:
    tools = tools or Tools()
    model = Scripted(turns=script, **llm)
    agent = LlmAgent(name="weather", model=model, tools=tools.all())
    app = App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)])
    return InMemoryRunner(app=app), model, tools


def repeat_points(raw: dict[str, Any]) -> tuple[int, int, int]:
    """The calls (1-based) of one repeated call with identical results that get the warning,
    the first block and the stop: after ``consecutiveCriticalThreshold`` identical results the
    next call is blocked, the call before it gets the last-chance warning, and the run stops at
    the ``stopAfterBlocks``-th block."""
    config = resolve_config(raw)
    block_at = config.consecutive_critical_threshold + 1
    return block_at - 1, block_at, block_at + config.stop_after_blocks - 1


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def oracle(
    config: dict[str, Any], calls: list[Call], results: dict[str, str]
) -> tuple[list[str], list[tuple[str, str | None]]]:
    """A bare guard's actions and events for ``calls`` made one at a time."""
    guard = LoopGuard(config)
    seen = events_of(guard)
    actions = []
    for name, args in calls:
        decision = guard.before_tool_call("s", name, args, run_id="r")
        actions.append(decision.action)
        if decision.allowed:
            guard.after_tool_call("s", name, args, result=results[name], run_id="r")
    return actions, [(e.action, e.detector) for e in seen]


def final_text(events: list[Event]) -> str:
    last = events[-1]
    assert last.content is not None and last.content.parts
    return last.content.parts[0].text or ""


# ------------------------------------------------------------------------------------ tests
def test_repeated_call_is_warned_then_blocked_then_the_run_stops() -> None:
    warn_at, block_at, stop_at = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    runner, model, tools = make(guard, turns(PARIS, repeat=3 * stop_at))

    _, events = asyncio.run(run(runner))

    assert tools.executions == block_at - 1  # the blocked calls never ran
    assert [e.action for e in seen] == ["warn", "block", "stop"]
    assert model.made == stop_at  # no model request after the stop
    shown = model.shown
    assert shown[: warn_at - 1] == [{"result": "It is 21C in Paris."}] * (warn_at - 1)
    warned = shown[warn_at - 1]["result"]
    assert warned == f"It is 21C in Paris.\n\n{seen[0].message}"
    assert set(shown[block_at - 1]) == {"error"} and "CRITICAL" in shown[block_at - 1]["error"]
    # The run ended with the reason as the model's last word, tagged for the application.
    assert final_text(events) == seen[-1].message
    assert events[-1].custom_metadata == {
        "loopwarden": {"action": "stop", "detector": seen[-1].detector}
    }


def test_guard_calls_are_awaited_on_an_async_only_store() -> None:
    # The plugin's callbacks run on ADK's event loop: a sync guard call there would block it.
    _, block_at, stop_at = repeat_points(RECOMMENDED)
    store = AsyncOnlyStore()
    runner, _, tools = make(LoopGuard(RECOMMENDED, store=store), turns(PARIS, repeat=3 * stop_at))

    asyncio.run(run(runner))

    assert tools.executions == block_at - 1 and store.updates > 0


def test_next_run_of_the_session_starts_clean() -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    runner, model, tools = make(guard, turns(PARIS, repeat=block_at))

    session_id, _ = asyncio.run(run(runner))
    model.made = 0  # the model loops again in the follow-up run
    asyncio.run(run(runner, session_id=session_id))

    assert tools.executions == 2 * (block_at - 1)
    assert [e.action for e in seen] == ["warn", "block"] * 2
    assert len({e.session for e in seen}) == 1  # one ADK session, one guard session
    assert len({e.run_id for e in seen}) == 2  # one run per invocation


def test_ping_pong_is_detected_as_a_bare_guard_would() -> None:
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}
    calls = [PARIS, ("get_time", {"city": "Paris"})] * 6
    results = {"get_weather": "It is 21C in Paris.", "get_time": "It is noon in Paris."}
    expected, expected_events = oracle(config, calls, results)
    assert ("block", "ping_pong") in expected_events  # the scenario reaches a ping-pong block
    guard = LoopGuard(config)
    seen = events_of(guard)
    runner, model, tools = make(guard, [[call] for call in calls])

    asyncio.run(run(runner))

    assert tools.executions == sum(action in ("allow", "warn") for action in expected)
    assert [(e.action, e.detector) for e in seen] == expected_events
    blocked = [shown for shown in model.shown if "error" in shown]
    assert len(blocked) == expected.count("block")


def test_unknown_tool_is_seen_and_blocked() -> None:
    threshold = 3
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": threshold})
    seen = events_of(guard)
    runner, model, _ = make(guard, turns(("get_wether", {"city": "Paris"}), repeat=threshold + 2))

    asyncio.run(run(runner))

    assert [e.detector for e in seen] == ["unknown_tool_repeat"] * 2
    assert [e.action for e in seen] == ["block"] * 2
    # Below the threshold ADK answers as usual (tool not found); then the block text.
    assert "get_wether" in model.shown[0]["error"] and "CRITICAL" not in model.shown[0]["error"]
    assert "get_wether" in model.shown[threshold]["error"]
    assert model.shown[threshold]["error"] == seen[0].message


def test_parallel_calls_of_one_turn_run_as_often_as_one_call_per_turn() -> None:
    per_turn, turns_count = 3, 12

    def run_with(per: int) -> tuple[int, list[tuple[int, str]]]:
        guard = LoopGuard(RECOMMENDED)
        tools = Tools(wait=0.01)
        script = [[PARIS] * per for _ in range(turns_count)]
        runner, model, _ = make(guard, script, tools)
        tagged: list[tuple[int, str]] = []
        guard.subscribe(lambda e: tagged.append((model.made, e.action)))
        asyncio.run(run(runner))
        return tools.executions, tagged

    sequential, _ = run_with(1)
    batched, tagged = run_with(per_turn)

    assert batched == sequential
    first_block = next(turn for turn, action in tagged if action == "block")
    stop = next(turn for turn, action in tagged if action == "stop")
    assert stop > first_block  # the model read the block before the run stopped


def test_loop_surviving_a_compaction_stops_the_run() -> None:
    window, compact_at = 3, 2
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})  # detectors off
    seen = events_of(guard)
    tools = Tools()
    model = Scripted(turns=turns(PARIS, repeat=20), big_prompt_at=compact_at)
    agent = LlmAgent(name="weather", model=model, tools=tools.all())
    compaction = EventsCompactionConfig(token_threshold=1000, event_retention_size=1)
    app = App(
        name="app",
        root_agent=agent,
        plugins=[LoopGuardPlugin(guard)],
        events_compaction_config=compaction,
    )
    runner = InMemoryRunner(app=app)

    _, events = asyncio.run(run(runner))

    assert any(e.actions and e.actions.compaction for e in runner_events(runner))
    assert tools.executions == compact_at + window
    assert [e.type for e in seen] == ["compaction.loop_persisted"]
    assert final_text(events) == seen[0].message
    assert events[-1].custom_metadata is not None
    assert events[-1].custom_metadata["loopwarden"]["detector"] == "compaction_loop_persisted"


def runner_events(runner: InMemoryRunner) -> list[Event]:
    """Every event stored in the runner's sessions (compaction events are stored, not yielded)."""
    sessions = runner.session_service.sessions  # type: ignore[attr-defined]
    return [
        event
        for users in sessions.values()
        for by_id in users.values()
        for session in by_id.values()
        for event in session.events
    ]


def test_two_concurrent_runs_sharing_a_guard_are_kept_apart() -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    runners = [make(guard, turns(PARIS, repeat=block_at), delay=0.005) for _ in range(2)]

    async def both() -> None:
        await asyncio.gather(
            *(run(runner, user=f"user{i}") for i, (runner, _, _) in enumerate(runners))
        )

    asyncio.run(both())

    for _, _, tools in runners:
        assert tools.executions == block_at - 1
    by_session: dict[str, list[str]] = {}
    for event in seen:
        by_session.setdefault(event.session, []).append(event.action)
    assert list(by_session.values()) == [["warn", "block"]] * 2


def test_warning_on_a_dict_result_travels_next_to_its_fields() -> None:
    warn_at, _, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    runner, model, _ = make(guard, turns(("get_report", {"city": "Paris"}), repeat=warn_at))

    asyncio.run(run(runner))

    assert model.shown[0] == {"city": "Paris", "celsius": 21}
    warned = model.shown[warn_at - 1]
    assert {k: warned[k] for k in ("city", "celsius")} == {"city": "Paris", "celsius": 21}
    assert warned[WARNING_KEY] == seen[0].message


def test_healthy_run_is_untouched() -> None:
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    cities = [("get_weather", {"city": f"City{i}"}) for i in range(10)]
    runner, model, tools = make(guard, [[call] for call in cities])

    _, events = asyncio.run(run(runner))

    assert tools.executions == len(cities)
    assert model.shown == [{"result": f"It is 21C in City{i}."} for i in range(10)]
    assert final_text(events) == FINAL
    assert seen == []


def test_a_stop_ends_the_invocation_for_the_agents_after_it_too() -> None:
    _, block_at, stop_at = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    tools = Tools()
    first = Scripted(turns=turns(PARIS, repeat=3 * stop_at))
    second = Scripted(turns=turns(("get_time", {"city": "Paris"}), repeat=3))
    pipeline = SequentialAgent(
        name="pipeline",
        sub_agents=[
            LlmAgent(name="looper", model=first, tools=tools.all()),
            LlmAgent(name="next", model=second, tools=tools.all()),
        ],
    )
    app = App(name="app", root_agent=pipeline, plugins=[LoopGuardPlugin(guard)])

    _, events = asyncio.run(run(InMemoryRunner(app=app)))

    assert tools.executions == block_at - 1
    assert [e.action for e in seen] == ["warn", "block", "stop"]
    assert (first.made, second.made) == (stop_at, 0)  # the next agent's model is not asked
    assert final_text(events) == seen[-1].message


def test_a_tool_that_raises_is_recorded_and_the_error_goes_on() -> None:
    guard = LoopGuard(RECOMMENDED)
    ended: list[Any] = []

    def broken(city: str) -> str:
        """Always fails."""
        raise RuntimeError(f"no station in {city}")

    model = Scripted(turns=turns(("broken", {"city": "Paris"})))
    agent = LlmAgent(name="weather", model=model, tools=[broken])
    plugin = LoopGuardPlugin(guard)
    app = App(name="app", root_agent=agent, plugins=[plugin])
    original_end = guard.aend_run  # the plugin's callbacks are async: it awaits the guard

    async def aend_run(session: str, run_id: str | None = None, **kw: Any) -> Any:
        record = await original_end(session, run_id, **kw)
        ended.append(record)
        return record

    guard.aend_run = aend_run  # type: ignore[method-assign]

    with pytest.raises(RuntimeError, match="no station in Paris"):
        asyncio.run(run(InMemoryRunner(app=app)))

    assert [record.outcome for record in ended] == ["failed"]
    # The failed call was recorded with its error as the outcome.
    state = guard.store.peek(ended[0].session)
    assert state is not None
    [call] = state.state.history
    assert call.tool_name == "broken" and (call.result_hash or "").startswith("error:")


def test_no_config_ends_a_loop_after_three_executions() -> None:
    """``LoopGuardPlugin()`` alone: the recommended profile stops an endless loop early."""
    tools = Tools()
    model = Scripted(turns=turns(PARIS, repeat=500))
    agent = LlmAgent(name="weather", model=model, tools=tools.all())
    runner = InMemoryRunner(app=App(name="app", root_agent=agent, plugins=[LoopGuardPlugin()]))

    _, events = asyncio.run(run(runner))

    assert tools.executions == 3
    assert model.made == 5  # three runs, a block, the retry that stops the run
    assert events[-1].custom_metadata == {
        "loopwarden": {"action": "stop", "detector": "consecutive_repeat"}
    }


def test_a_batch_is_decided_the_same_whatever_order_its_outcomes_come_in() -> None:
    """Two different calls per turn, again and again: ADK runs them concurrently. Sync tools
    report each outcome before the next call starts; tools that await report every outcome
    after both calls started. The decisions must not depend on that (issue #25)."""
    rome: Call = ("get_weather", {"city": "Rome"})
    runs = {}
    for wait in (None, 0.05):
        guard = LoopGuard()
        seen = events_of(guard)
        runner, model, tools = make(guard, [[PARIS, rome]] * 12, Tools(wait=wait))
        asyncio.run(run(runner))
        runs[wait] = (tools.executions, model.made, [(e.action, e.detector) for e in seen])

    assert runs[0.05] == runs[None], runs
    _, turns, events = runs[None]
    assert events[-1][0] == "stop" and turns < 12


# ---------------------------------------------------------------------------------------------
# Detection v4: a tool that reports a failure the ADK way ({"status": "error", ...}; raising
# ends the run) reaches the guard as a failure; "status": "success" as a success.

CITIES = [f"City-{n}" for n in range(12)]
# Only the repeated-error detector: failures with one outcome, whatever the arguments, block
# the 4th call. It reads the failure flag alone, so it shows what reached the guard.
REPEATED_ERROR = {
    "enabled": True,
    "detectors": {"repeatedError": True},
    "repeatedErrorThreshold": 3,
    "normalizeVolatile": True,
}


class Forecasts:
    """A forecast tool whose upstream is down (an ADK-style error answer) and a note tool that
    acknowledges every note alike; both count their real executions."""

    def __init__(self, quoting: bool = True) -> None:
        self.executions = 0

        def get_forecast(city: str) -> dict[str, Any]:
            """Tomorrow's forecast for a city."""
            self.executions += 1
            where = f" for {city}" if quoting else ""
            return {"status": "error", "error_message": f"No forecast{where}: upstream is down."}

        def save_note(note: str) -> dict[str, Any]:
            """Save a note."""
            self.executions += 1
            return {"status": "success", "message": "Saved."}

        self.tools = [get_forecast, save_note]


def at_calls(seen: list[LoopEvent], events: list[Event]) -> list[tuple[str, int]]:
    """(action, call number) of each loop event, numbered by the run's function calls."""
    ids = [call.id for event in events for call in event.get_function_calls()]
    return [(e.action, ids.index(e.tool_call_id) + 1) for e in seen]


def forecast_run(
    guard: LoopGuard, tool: str, key: str, count: int, quoting: bool = True
) -> tuple[Forecasts, list[Event]]:
    forecasts = Forecasts(quoting)
    model = Scripted(turns=[[(tool, {key: CITIES[n]})] for n in range(count)])
    agent = LlmAgent(name="forecaster", model=model, tools=forecasts.tools)
    app = App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)])
    _, events = asyncio.run(run(InMemoryRunner(app=app)))
    return forecasts, events


def test_a_failure_across_distinct_calls_is_blocked_at_the_5th_and_stopped_at_the_7th() -> None:
    guard = LoopGuard()  # the recommended profile
    seen = events_of(guard)
    forecasts, events = forecast_run(guard, "get_forecast", "city", 10)

    assert at_calls(seen, events) == [("warn", 4), ("block", 5), ("stop", 7)]
    assert forecasts.executions == 5  # the 5th was refused, the 7th stopped the run
    assert events[-1].custom_metadata is not None
    assert events[-1].custom_metadata["loopwarden"]["action"] == "stop"


def test_one_acknowledgement_for_distinct_calls_is_never_blocked() -> None:
    guard = LoopGuard()
    seen = events_of(guard)
    forecasts, events = forecast_run(guard, "save_note", "note", 12)

    assert [e.action for e in seen] == []
    assert forecasts.executions == 12
    assert final_text(events) == FINAL


def test_an_error_status_reaches_the_guard_as_a_failure() -> None:
    guard = LoopGuard(REPEATED_ERROR)
    seen = events_of(guard)
    forecasts, events = forecast_run(guard, "get_forecast", "city", 5, quoting=False)

    assert at_calls(seen, events) == [("block", 4), ("block", 5)]
    assert {e.detector for e in seen} == {"repeated_error"}
    assert forecasts.executions == 3

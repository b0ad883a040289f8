"""CrewAI adapter, end to end: Crew + Agent + guard_crew + a scripted BaseLLM.

``Scripted`` is a CrewAI ``BaseLLM`` with native function calling that plays a script of model
turns (each a list of tool calls) and records the tool results it was shown; the tools count
their real executions. Expected counts come from the resolved config, or from the same calls fed
to a bare guard. Nothing talks to the network.

CrewAI cannot be installed next to the ``all`` extras (docs/integrations.md), so this module
runs in its own environment: ``.ci/run`` makes one and sets ``LOOPWARDEN_REQUIRE_CREWAI=1``.
In the main environment it is skipped.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from _support import require_module

if (
    importlib.util.find_spec("crewai") is None
    and os.environ.get("LOOPWARDEN_REQUIRE_CREWAI") != "1"
):
    pytest.skip(
        "crewai not installed (it has its own environment: pip install '.[crewai]')",
        allow_module_level=True,
    )
require_module("crewai", "crewai")

for switch in ("CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED"):
    os.environ.setdefault(switch, "true")  # offline
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.tools import tool  # noqa: E402
from pydantic import Field  # noqa: E402

from loopwarden import LoopGuard, resolve_config  # noqa: E402
from loopwarden.adapters.crewai import CrewLoopStopped, LoopStopped, guard_crew  # noqa: E402
from loopwarden.events import LoopEvent  # noqa: E402
from loopwarden.store import MemoryStore  # noqa: E402

RECOMMENDED = {"profile": "recommended"}
Call = tuple[str, dict[str, Any]]
PARIS: Call = ("get_weather", {"city": "Paris"})
FINAL = "I give up."
_ids = itertools.count()


class Scripted(BaseLLM):
    """A scripted model: turn ``i`` makes the calls ``turns[i]``, then it answers ``FINAL``.

    ``shown`` collects the tool results it was shown (the tool messages since its last turn).
    """

    turns: list[list[Call]] = Field(default_factory=list)
    shown: list[str] = Field(default_factory=list)
    made: int = 0
    compact_at: int | None = None  # after this many turns the context looks full, once
    compactions: int = 0

    def supports_function_calling(self) -> bool:
        return True

    def is_context_window_overflowing_threshold(self, *args: Any, **kwargs: Any) -> bool:
        """The conversation looks too long once, after ``compact_at`` turns."""
        return self.made == self.compact_at and not self.compactions

    async def acall(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        return self.call(messages, *args, **kwargs)  # CrewAI summarises with acall

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("tools"):  # CrewAI's summarisation request
            self.compactions += 1
            return "<summary>The user wants the weather in Paris.</summary>"
        answered = []
        for message in reversed(messages if isinstance(messages, list) else []):
            if message.get("role") != "tool":
                break
            answered.append(str(message.get("content")))
        self.shown.extend(reversed(answered))
        if self.made >= len(self.turns):
            return FINAL
        calls = self.turns[self.made]
        self.made += 1
        return [
            {
                "id": f"c{next(_ids)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
            for name, args in calls
        ]


class Tools:
    """Tools that count their real executions (thread-safe: CrewAI runs a turn's calls in a
    thread pool)."""

    def __init__(self) -> None:
        self.executions = 0
        self._lock = threading.Lock()

        @tool("get_weather")
        def get_weather(city: str) -> str:
            """Current weather of a city."""
            self._count()
            return f"It is 21C in {city}."

        @tool("get_time")
        def get_time(city: str) -> str:
            """Local time of a city."""
            self._count()
            return f"It is noon in {city}."

        self.all = [get_weather, get_time]

    def _count(self) -> None:
        with self._lock:
            self.executions += 1


def make(
    guard: LoopGuard, script: list[list[Call]], *, cache: bool = False, **llm: Any
) -> tuple[Crew, Scripted, Tools]:
    tools = Tools()
    model = Scripted(model="scripted", turns=script, **llm)
    agent = Agent(role="forecaster", goal="weather", backstory="-", llm=model, tools=tools.all)
    task = Task(description="What's the weather in Paris?", expected_output="it", agent=agent)
    crew = guard_crew(Crew(agents=[agent], tasks=[task], cache=cache), guard)
    return crew, model, tools


def kickoff(crew: Crew) -> LoopStopped | None:
    """Run the crew; the loopwarden stop it raised, if any."""
    try:
        crew.kickoff()
    except LoopStopped as stop:
        return stop
    return None


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def repeat_points(raw: dict[str, Any]) -> tuple[int, int, int]:
    """The calls (1-based) of one repeated call with identical results that get the last-chance
    warning, the first block and the stop: after ``consecutiveCriticalThreshold`` identical
    results the next call is blocked, the call before it is warned, and the run stops at the
    ``stopAfterBlocks``-th block."""
    config = resolve_config(raw)
    block_at = config.consecutive_critical_threshold + 1
    return block_at - 1, block_at, block_at + config.stop_after_blocks - 1


def oracle(
    config: dict[str, Any], calls: list[Call], results: dict[str, str]
) -> tuple[int, list[tuple[str, str | None]]]:
    """A bare guard, calls one at a time: how many run, and its events."""
    guard = LoopGuard(config)
    seen = events_of(guard)
    ran = 0
    for name, args in calls:
        decision = guard.before_tool_call("s", name, args, run_id="r")
        if decision.allowed:
            ran += 1
            guard.after_tool_call("s", name, args, result=results[name], run_id="r")
    return ran, [(e.action, e.detector) for e in seen]


# ------------------------------------------------------------------------------------ tests
def test_repeated_call_is_warned_then_blocked_then_the_run_stops() -> None:
    warn_at, block_at, stop_at = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    crew, model, tools = make(guard, [[PARIS]] * (stop_at + 3))

    stop = kickoff(crew)

    assert isinstance(stop, CrewLoopStopped)
    assert stop.reason == seen[-1].message and stop.detector == seen[-1].detector
    assert tools.executions == block_at - 1  # the blocked calls never ran
    assert [e.action for e in seen] == ["warn", "block", "stop"]
    assert model.made == stop_at  # no model call after the stop
    shown = model.shown
    assert shown[: warn_at - 1] == ["It is 21C in Paris."] * (warn_at - 1)
    assert shown[warn_at - 1] == f"It is 21C in Paris.\n\n{seen[0].message}"
    # The model read loopwarden's reason, not CrewAI's fixed "blocked by hook" text.
    assert shown[block_at - 1] == seen[1].message


def test_the_tool_cache_answers_repeats_and_detection_is_unchanged() -> None:
    _, block_at, stop_at = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    crew, model, tools = make(guard, [[PARIS]] * (stop_at + 3), cache=True)

    stop = kickoff(crew)

    assert tools.executions == 1  # CrewAI's cache answered every repeat
    assert isinstance(stop, CrewLoopStopped)
    assert [e.action for e in seen] == ["warn", "block", "stop"]  # as without the cache
    assert model.made == stop_at
    assert model.shown[: block_at - 1] == ["It is 21C in Paris."] * 2 + [model.shown[2]]


def test_next_kickoff_starts_a_clean_run_in_the_same_session() -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    crew, model, tools = make(guard, [[PARIS]] * block_at)

    assert kickoff(crew) is None
    model.made = 0  # the model loops again in the next kickoff
    assert kickoff(crew) is None

    assert tools.executions == 2 * (block_at - 1)
    assert [e.action for e in seen] == ["warn", "block"] * 2
    assert {e.session for e in seen} == {f"crew-{crew.id}"}
    assert len({e.run_id for e in seen}) == 2


def test_ping_pong_is_detected_as_a_bare_guard_would() -> None:
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}
    calls = [PARIS, ("get_time", {"city": "Paris"})] * 6
    results = {"get_weather": "It is 21C in Paris.", "get_time": "It is noon in Paris."}
    ran, expected = oracle(config, calls, results)
    assert ("block", "ping_pong") in expected
    guard = LoopGuard(config)
    seen = events_of(guard)
    crew, _, tools = make(guard, [[call] for call in calls])

    kickoff(crew)

    assert tools.executions == ran
    assert [(e.action, e.detector) for e in seen] == expected


def test_unknown_tool_is_seen_and_blocked() -> None:
    threshold = 3
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": threshold})
    seen = events_of(guard)
    crew, model, _ = make(guard, [[("get_wether", {"city": "Paris"})]] * (threshold + 2))

    kickoff(crew)

    assert [(e.action, e.detector) for e in seen] == [("block", "unknown_tool_repeat")] * 2
    assert model.shown[0] == "Tool not found"  # CrewAI's own answer below the threshold
    assert model.shown[threshold] == seen[0].message


def test_parallel_calls_of_one_turn_run_as_often_as_one_call_per_turn() -> None:
    per_turn, turns = 3, 12

    def run_with(per: int) -> tuple[int, list[tuple[int, str]]]:
        guard = LoopGuard(RECOMMENDED)
        crew, model, tools = make(guard, [[PARIS] * per] * turns)
        tagged: list[tuple[int, str]] = []
        guard.subscribe(lambda e: tagged.append((model.made, e.action)))
        assert isinstance(kickoff(crew), CrewLoopStopped)
        return tools.executions, tagged

    sequential, _ = run_with(1)
    batched, tagged = run_with(per_turn)

    assert batched == sequential
    first_block = next(turn for turn, action in tagged if action == "block")
    stop = next(turn for turn, action in tagged if action == "stop")
    assert stop > first_block  # the model read the block before the run stopped


def test_two_concurrent_crews_sharing_a_guard_are_kept_apart() -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    crews = [make(guard, [[PARIS]] * block_at) for _ in range(2)]

    threads = [threading.Thread(target=kickoff, args=(crew,)) for crew, _, _ in crews]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert [tools.executions for _, _, tools in crews] == [block_at - 1] * 2
    by_session: dict[str, list[str]] = {}
    for event in list(seen):
        by_session.setdefault(event.session, []).append(event.action)
    assert sorted(by_session) == sorted(f"crew-{crew.id}" for crew, _, _ in crews)
    assert list(by_session.values()) == [["warn", "block"]] * 2


def test_an_unguarded_crew_is_left_alone() -> None:
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    make(guard, [[PARIS]] * 8)  # guarded, never run
    tools = Tools()
    # CrewAI stops the 5th identical call with an identical result itself, so 4 at most.
    model = Scripted(model="scripted", turns=[[PARIS]] * 4)
    agent = Agent(role="other", goal="weather", backstory="-", llm=model, tools=tools.all)
    task = Task(description="Weather?", expected_output="it", agent=agent)

    Crew(agents=[agent], tasks=[task]).kickoff()

    assert tools.executions == 4
    assert seen == []


def test_loop_surviving_a_summarisation_stops_the_run() -> None:
    # Four identical calls in all: CrewAI itself stops the fifth identical call.
    window, compact_at = 3, 1
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})  # detectors off
    seen = events_of(guard)
    crew, model, tools = make(guard, [[PARIS]] * 20, compact_at=compact_at)

    stop = kickoff(crew)

    assert model.compactions >= 1
    assert tools.executions == compact_at + window
    assert isinstance(stop, CrewLoopStopped) and stop.detector == "compaction_loop_persisted"
    assert [e.type for e in seen] == ["compaction.loop_persisted"]


def test_the_docs_example_runs_and_the_loop_is_cut() -> None:
    """examples/integrations/crewai_agent.py as written (docs/integrations.md shows it)."""
    example = Path(__file__).resolve().parents[2] / "examples/integrations/crewai_agent.py"
    warning, critical = 3, 5  # the example's thresholds
    proc = subprocess.run(
        [sys.executable, str(example)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=os.environ.copy(),  # with this module's offline switches
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # CrewAI's flow runtime logs an exception leaving its executor; a stop is not an error.
    assert "Error executing listener" not in proc.stderr
    out = proc.stdout
    assert out.count(" tool: It is 21C in Paris.") == critical
    assert out.count(f"WARNING: You have called get_weather {warning} times") == 1
    blocked = f"identical arguments and identical outcomes {critical} times"
    assert f"stopped: CRITICAL: Called get_weather with {blocked}" in out


@pytest.mark.parametrize("how", ["kickoff", "akickoff"])
def test_no_config_ends_a_loop_after_three_executions(
    how: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """``guard_crew(crew)`` alone: the recommended profile stops an endless loop early."""
    import asyncio

    tools = Tools()
    model = Scripted(model="scripted", turns=[[PARIS]] * 500)
    agent = Agent(role="forecaster", goal="weather", backstory="-", llm=model, tools=tools.all)
    task = Task(description="What's the weather in Paris?", expected_output="it", agent=agent)
    crew = guard_crew(Crew(agents=[agent], tasks=[task]))

    with pytest.raises(CrewLoopStopped) as stopped:
        asyncio.run(crew.akickoff()) if how == "akickoff" else crew.kickoff()

    assert tools.executions == 3
    assert model.made == 5  # three runs, a block, the retry that stops the run
    assert stopped.value.detector == "consecutive_repeat"
    assert "Error executing listener" not in capfd.readouterr().err


class _LoopWatchingStore(MemoryStore):
    """A MemoryStore noting, per update, what called it and whether it ran on an event loop."""

    def __init__(self) -> None:
        super().__init__()
        self.on_loop: list[str] = []

    def update(self, key: str, fn: Any) -> Any:
        import asyncio
        import inspect

        try:
            asyncio.get_running_loop()
            self.on_loop.append(inspect.stack()[2].function)
        except RuntimeError:
            pass
        return super().update(key, fn)


def test_akickoff_keeps_every_guard_call_off_the_event_loop() -> None:
    """CrewAI calls its hooks synchronously, on the event loop under ``akickoff``: a guard
    call there blocks the loop for as long as the store takes (a networked store: a round
    trip). Run starts and ends go to a worker thread; tool calls run in CrewAI's threads."""
    import asyncio

    store = _LoopWatchingStore()
    crew, _, tools = make(LoopGuard(store=store), [[PARIS]] * 2)

    asyncio.run(crew.akickoff())

    assert tools.executions == 2
    assert store.on_loop == []

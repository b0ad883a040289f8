"""Claude Agent SDK adapter, end to end: ``query()`` + ``guard_options`` + the real Claude Code.

The SDK drives the Claude Code CLI pinned in tests/coding_agents (npm), which talks to the
offline fake Anthropic API of the coding-agent tests (127.0.0.1) playing a scripted model. The
tools are the SDK's in-process MCP tools and count their real executions. Expected counts come
from the resolved config, or from the same calls fed to a bare guard.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from _async_only import AsyncOnlyStore

from _support import require_cli, require_module

try:
    require_module("claude_agent_sdk", "claude-agent-sdk")
    CLAUDE = require_cli("claude")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "coding_agents"))

from _clis import claude_env
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    HookMatcher,
    ResultMessage,
    create_sdk_mcp_server,
    query,
    tool,
)
from fake_anthropic import (
    FakeAnthropic,
    Reply,
    ToolCall,
    block_text,
    is_compaction_request,
    tool_results,
)

from loopwarden import LoopGuard, resolve_config
from loopwarden.adapters.claude_agent_sdk import guard_options
from loopwarden.events import LoopEvent

RECOMMENDED = {"profile": "recommended"}
WEATHER = "mcp__weather__get_weather"
TIME = "mcp__weather__get_time"
Call = tuple[str, dict[str, Any]]
PARIS: Call = (WEATHER, {"city": "Paris"})
FINAL = "I give up."


@dataclass
class Model:
    """A scripted model: turn ``i`` makes the calls ``turns[i]``, then it answers ``FINAL``.

    Turns are counted from the tool results in the request (the CLI's side requests cannot
    push it off script). ``compact_after``: report a full context once that many results are
    in, so Claude Code compacts; the compaction request gets a summary.
    """

    turns: list[list[Call]]
    compact_after: int | None = None
    seen: set[str] = field(default_factory=set)
    made: int = 0
    compactions: int = 0

    def reply(self, request: dict[str, Any]) -> Reply:
        if is_compaction_request(request):
            self.compactions += 1
            return Reply(text="Summary: the user wants the weather in Paris.")
        if not request.get("tools"):  # a side request (title...)
            return Reply(text="ok")
        self.seen.update(str(b.get("tool_use_id")) for b in tool_results(request))
        turn, answered = 0, 0  # the first turn whose calls have not all been answered
        while turn < len(self.turns) and answered + len(self.turns[turn]) <= len(self.seen):
            answered += len(self.turns[turn])
            turn += 1
        if turn >= len(self.turns):
            return Reply(text=FINAL)
        calls = [ToolCall(name, args) for name, args in self.turns[turn]]
        self.made = max(self.made, turn + 1)
        full = self.compact_after is not None and not self.compactions
        tokens = 99_000 if full and len(self.seen) >= (self.compact_after or 0) else 100
        return Reply(tool_calls=calls, input_tokens=tokens)


class Tools:
    """In-process SDK tools that count their real executions."""

    def __init__(self) -> None:
        self.executions = 0

        @tool("get_weather", "Current weather of a city.", {"city": str})
        async def get_weather(args: dict[str, Any]) -> dict[str, Any]:
            self.executions += 1
            return _text(f"It is 21C in {args['city']}.")

        @tool("get_time", "Local time of a city.", {"city": str})
        async def get_time(args: dict[str, Any]) -> dict[str, Any]:
            self.executions += 1
            return _text(f"It is noon in {args['city']}.")

        self.server = create_sdk_mcp_server("weather", tools=[get_weather, get_time])


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


@dataclass
class Run:
    server: FakeAnthropic
    model: Model
    tools: Tools
    result: ResultMessage | None

    def results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the model saw in its last request."""
        return tool_results(self.server.messages[-1])

    def texts(self) -> list[str]:
        return [block_text(block) for block in self.results()]


async def run(guard: LoopGuard | None, model: Model, home: Path, **options: Any) -> Run:
    """One ``query()`` through the real Claude Code against a fake API playing ``model``
    (``guard`` None: ``guard_options`` given none)."""
    tools = Tools()
    home.mkdir(parents=True, exist_ok=True)
    with FakeAnthropic(model) as server:
        base = ClaudeAgentOptions(
            cli_path=str(CLAUDE),
            cwd=str(home),
            env=claude_env(home) | {"ANTHROPIC_BASE_URL": server.url},
            mcp_servers={"weather": tools.server},
            allowed_tools=[WEATHER, TIME],
            permission_mode="bypassPermissions",
            setting_sources=[],
            **options,
        )
        result = None
        async for message in query(prompt="weather?", options=guard_options(base, guard)):
            if isinstance(message, ResultMessage):
                result = message
        assert not server.errors, server.errors
    return Run(server, model, tools, result)


def events_of(guard: LoopGuard) -> list[LoopEvent]:
    events: list[LoopEvent] = []
    guard.subscribe(events.append)
    return events


def repeat_points(raw: dict[str, Any]) -> tuple[int, int, int]:
    """The calls (1-based) of one repeated call with identical results that get the last-chance
    warning, the first block and the stop (see the Google ADK test for the reasoning)."""
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
            guard.after_tool_call("s", name, args, result=_text(results[name]), run_id="r")
    return ran, [(e.action, e.detector) for e in seen]


# ------------------------------------------------------------------------------------ tests
def test_repeated_call_is_warned_then_blocked_then_every_call_is_refused(tmp_path: Path) -> None:
    warn_at, block_at, stop_at = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    calls = stop_at + 2

    done = asyncio.run(run(guard, Model([[PARIS]] * calls), tmp_path))

    assert done.tools.executions == block_at - 1  # the blocked calls never ran
    assert [e.action for e in seen] == ["warn", "block", "stop"]
    texts = done.texts()
    assert texts[: block_at - 1] == ["It is 21C in Paris."] * (block_at - 1)
    blocked = done.results()[block_at - 1 :]
    assert all(block.get("is_error") for block in blocked)
    assert "CRITICAL" in texts[block_at - 1]
    # After the stop every further call of the turn is refused with the stop's reason.
    assert all(str(seen[2].message) in t for t in texts[stop_at - 1 :])
    assert all("every further tool call" in t for t in texts[stop_at - 1 :])
    # The warning reached the model right after the warned call's result.
    shown = json.dumps(done.server.messages[warn_at])
    assert seen[0].message is not None and json.dumps(seen[0].message)[1:-1] in shown
    assert done.result is not None and done.result.session_id == seen[0].session


def test_guard_calls_are_awaited_on_an_async_only_store(tmp_path: Path) -> None:
    # The SDK's hooks run on its event loop: a sync guard call there would block it.
    _, block_at, stop_at = repeat_points(RECOMMENDED)
    store = AsyncOnlyStore()
    guard = LoopGuard(RECOMMENDED, store=store)

    done = asyncio.run(run(guard, Model([[PARIS]] * (stop_at + 1)), tmp_path))

    assert done.tools.executions == block_at - 1 and store.updates > 0


def test_ping_pong_is_detected_as_a_bare_guard_would(tmp_path: Path) -> None:
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}
    calls = [PARIS, (TIME, {"city": "Paris"})] * 5
    results = {WEATHER: "It is 21C in Paris.", TIME: "It is noon in Paris."}
    ran, expected = oracle(config, calls, results)
    assert ("block", "ping_pong") in expected
    guard = LoopGuard(config)
    seen = events_of(guard)

    done = asyncio.run(run(guard, Model([[call] for call in calls]), tmp_path))

    assert done.tools.executions == ran
    assert [(e.action, e.detector) for e in seen] == expected


def test_parallel_calls_of_one_turn_are_decided_one_at_a_time(tmp_path: Path) -> None:
    per_turn, turns = 3, 3
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}
    calls = [PARIS] * (per_turn * turns)
    ran, expected = oracle(config, calls, {WEATHER: "It is 21C in Paris."})
    guard = LoopGuard(config)
    seen = events_of(guard)

    done = asyncio.run(run(guard, Model([[PARIS] * per_turn] * turns), tmp_path))

    # Claude Code runs these calls one after another (the tool is not marked read-only), so
    # with no batch the guard sees what a bare guard sees.
    assert done.tools.executions == ran
    assert [(e.action, e.detector) for e in seen] == expected


def test_unknown_tool_never_reaches_the_hooks(tmp_path: Path) -> None:
    guard = LoopGuard({"enabled": True, "unknownToolThreshold": 2})
    seen = events_of(guard)
    nowhere: Call = ("get_wether", {"city": "Paris"})

    done = asyncio.run(run(guard, Model([[nowhere]] * 4), tmp_path))

    # Claude Code answers a call to a tool it does not have before any hook runs.
    assert seen == []
    assert all(block.get("is_error") for block in done.results())
    assert len(done.results()) == 4


def test_loop_surviving_a_compaction_ends_the_turn(tmp_path: Path) -> None:
    window, compact_after = 3, 2
    guard = LoopGuard({"postCompactionGuard": {"windowSize": window}})  # detectors off
    seen = events_of(guard)
    model = Model([[PARIS]] * 20, compact_after=compact_after)

    done = asyncio.run(run(guard, model, tmp_path))

    assert model.compactions == 1
    # The reply that reports the full context makes one more call; the CLI compacts after it.
    before = compact_after + 1
    assert done.tools.executions == before + window
    assert [e.type for e in seen] == ["compaction.loop_persisted"]
    assert model.made == before + window  # the turn ended: no model request after the stop
    assert done.result is not None and done.result.terminal_reason == "hook_stopped"


def test_two_concurrent_queries_sharing_a_guard_are_kept_apart(tmp_path: Path) -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)

    async def both() -> list[Run]:
        return await asyncio.gather(
            *(run(guard, Model([[PARIS]] * block_at), tmp_path / f"home{i}") for i in range(2))
        )

    runs = asyncio.run(both())

    assert [r.tools.executions for r in runs] == [block_at - 1] * 2
    by_session: dict[str, list[str]] = {}
    for event in seen:
        by_session.setdefault(event.session, []).append(event.action)
    assert sorted(by_session) == sorted(r.result.session_id for r in runs if r.result)
    assert list(by_session.values()) == [["warn", "block"]] * 2


def test_the_users_own_hooks_are_kept_and_the_options_are_not_changed(tmp_path: Path) -> None:
    calls: list[str] = []

    async def mine(payload: Any, tool_use_id: str | None, context: Any) -> dict[str, Any]:
        calls.append(payload["tool_name"])
        return {}

    hooks = {"PreToolUse": [HookMatcher(hooks=[mine])]}
    guard = LoopGuard(RECOMMENDED)
    options = ClaudeAgentOptions(hooks=hooks)  # type: ignore[arg-type]

    guarded = guard_options(options, guard)

    assert options.hooks == hooks  # the user's object is untouched
    assert guarded.hooks is not None and len(guarded.hooks["PreToolUse"]) == 2
    done = asyncio.run(run(guard, Model([[PARIS]]), tmp_path, hooks=hooks))
    assert calls == [WEATHER] and done.tools.executions == 1


def test_the_docs_example_runs_against_a_looping_model(tmp_path: Path) -> None:
    """examples/integrations/claude_agent_sdk_agent.py as written, with the SDK's own bundled
    CLI, against a model that repeats the call (docs/integrations.md shows this output)."""
    example = (
        Path(__file__).resolve().parents[2] / "examples/integrations/claude_agent_sdk_agent.py"
    )
    critical = 5  # the example's criticalThreshold
    with FakeAnthropic(Model([[PARIS]] * (critical + 2))) as server:
        proc = subprocess.run(
            [sys.executable, str(example)],
            env=claude_env(tmp_path) | {"ANTHROPIC_BASE_URL": server.url},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert out.count(" tool: It is 21C in Paris.") == critical
    assert out.count(f"CRITICAL: Called {WEATHER} with identical arguments") == 2
    assert out.strip().endswith(f"answer: {FINAL}")
    # The warning came as context after the 3rd result, not inside a result.
    assert "WARNING: " in json.dumps(server.messages[-1])


def test_each_prompt_of_a_client_session_is_a_fresh_run(tmp_path: Path) -> None:
    _, block_at, _ = repeat_points(RECOMMENDED)
    guard = LoopGuard(RECOMMENDED)
    seen = events_of(guard)
    tools = Tools()
    prompts = ("weather?", "and again?")

    class PerPrompt:
        """Repeats the call until ``block_at`` results came since the latest prompt."""

        def reply(self, request: dict[str, Any]) -> Reply:
            if not request.get("tools"):
                return Reply(text="ok")
            messages = request.get("messages", [])
            latest = max(i for i, m in enumerate(messages) if _says(m, prompts))
            since = sum(len(tool_results({"messages": [m]})) for m in messages[latest:])
            return Reply(text=FINAL) if since >= block_at else Reply(tool_calls=[ToolCall(*PARIS)])

    model = PerPrompt()

    async def two_prompts() -> list[str]:
        sessions = []
        with FakeAnthropic(model) as server:
            options = ClaudeAgentOptions(
                cli_path=str(CLAUDE),
                cwd=str(tmp_path),
                env=claude_env(tmp_path) | {"ANTHROPIC_BASE_URL": server.url},
                mcp_servers={"weather": tools.server},
                allowed_tools=[WEATHER, TIME],
                permission_mode="bypassPermissions",
                setting_sources=[],
            )
            async with ClaudeSDKClient(guard_options(options, guard)) as client:
                for prompt in prompts:
                    await client.query(prompt)
                    async for message in client.receive_response():
                        if isinstance(message, ResultMessage):
                            sessions.append(message.session_id)
        return sessions

    sessions = asyncio.run(two_prompts())

    assert len(set(sessions)) == 1  # one conversation
    assert tools.executions == 2 * (block_at - 1)
    assert [e.action for e in seen] == ["warn", "block"] * 2
    assert {e.session for e in seen} == set(sessions)
    assert len({e.run_id for e in seen}) == 2  # one run per prompt


def _says(message: dict[str, Any], texts: tuple[str, ...]) -> bool:
    """Whether a user message carries one of ``texts`` (a prompt, not a tool result)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    return any(block.get("type") == "text" and block.get("text") in texts for block in blocks)


def test_no_config_ends_a_loop_after_three_executions(tmp_path: Path) -> None:
    """``guard_options(options)`` alone: the recommended profile stops an endless loop at its
    5th call. Claude Code ignores ``"continue": false`` next to a denial, so a stop before a
    call refuses every later call of the turn; the SDK's ``max_turns`` bounds a model that
    keeps calling (docs/integrations.md)."""
    from claude_agent_sdk import ClaudeSDKError

    model, tools, max_turns = Model([[PARIS]] * 200), Tools(), 8

    async def query_once(server: FakeAnthropic) -> None:
        options = ClaudeAgentOptions(
            cli_path=str(CLAUDE),
            cwd=str(tmp_path),
            env=claude_env(tmp_path) | {"ANTHROPIC_BASE_URL": server.url},
            mcp_servers={"weather": tools.server},
            allowed_tools=[WEATHER, TIME],
            permission_mode="bypassPermissions",
            setting_sources=[],
            max_turns=max_turns,
        )
        async for _ in query(prompt="weather?", options=guard_options(options)):
            pass

    with FakeAnthropic(model) as server, pytest.raises(ClaudeSDKError, match="maximum number"):
        asyncio.run(query_once(server))

    assert tools.executions == 3
    texts = [block_text(block) for block in tool_results(server.messages[-1])]
    assert texts[:3] == ["It is 21C in Paris."] * 3
    assert texts[3].startswith(f"CRITICAL: Called {WEATHER} 3 times in a row")
    assert len(texts) > 4 and all("every further tool call" in t for t in texts[4:])
    assert model.made == max_turns


def test_a_call_refused_after_a_stop_says_which_tool_looped(tmp_path: Path) -> None:
    """After a stop every later call of the turn is refused with the stop's reason, which
    names the looping tool: a refused call to another tool says it is not that one."""
    time_call: Call = (TIME, {"city": "Paris"})
    model = Model([[PARIS]] * 5 + [[time_call]])

    done = asyncio.run(run(None, model, tmp_path))

    assert done.tools.executions == 3
    refused = done.texts()[-1]
    assert f"This call to {TIME} was not run" in refused
    assert f"after a loop on {WEATHER}" in refused
    assert "every further tool call" in refused


# ---------------------------------------------------------------------------------------------
# Detection v4: a failure (a tool result with is_error, which Claude Code reports to
# PostToolUseFailure) that comes back across varied calls is blocked; one acknowledgement for
# varied calls never is.

FORECAST, NOTE = "mcp__forecasts__get_forecast", "mcp__forecasts__save_note"
CITIES = [f"City-{n}" for n in range(12)]


class Forecasts:
    """A forecast tool whose upstream is down and a note tool that acknowledges every note
    alike; both count their real executions."""

    def __init__(self) -> None:
        self.executions = 0

        @tool("get_forecast", "Tomorrow's forecast for a city.", {"city": str})
        async def get_forecast(args: dict[str, Any]) -> dict[str, Any]:
            self.executions += 1
            failure = _text(f"No forecast for {args['city']}: upstream answered 503.")
            return {**failure, "is_error": True}

        @tool("save_note", "Save a note.", {"note": str})
        async def save_note(args: dict[str, Any]) -> dict[str, Any]:
            self.executions += 1
            return _text("Saved.")

        self.server = create_sdk_mcp_server("forecasts", tools=[get_forecast, save_note])


async def forecast_run(guard: LoopGuard, model: Model, home: Path) -> tuple[Forecasts, Run]:
    tools = Forecasts()
    home.mkdir(parents=True, exist_ok=True)
    with FakeAnthropic(model) as server:
        base = ClaudeAgentOptions(
            cli_path=str(CLAUDE),
            cwd=str(home),
            env=claude_env(home) | {"ANTHROPIC_BASE_URL": server.url},
            mcp_servers={"forecasts": tools.server},
            allowed_tools=[FORECAST, NOTE],
            permission_mode="bypassPermissions",
            setting_sources=[],
            max_turns=20,
        )
        result = None
        async for message in query(prompt="forecasts?", options=guard_options(base, guard)):
            if isinstance(message, ResultMessage):
                result = message
        assert not server.errors, server.errors
    return tools, Run(server, model, Tools(), result)


def test_a_failure_across_distinct_calls_is_blocked_at_the_5th_and_stopped_at_the_7th(
    tmp_path: Path,
) -> None:
    guard = LoopGuard()  # the recommended profile
    seen = events_of(guard)
    model = Model([[(FORECAST, {"city": CITIES[n]})] for n in range(8)])

    tools, done = asyncio.run(forecast_run(guard, model, tmp_path))

    assert [e.action for e in seen] == ["warn", "block", "stop"]
    assert tools.executions == 5  # the 5th was refused, the 7th stopped the turn
    texts = done.texts()
    assert [t.startswith("No forecast for City-") for t in texts[:4]] == [True] * 4
    assert "CRITICAL" in texts[4] and texts[5].startswith("No forecast for City-5")
    assert "CRITICAL" in texts[6] and "every further tool call" in texts[6]


def test_one_acknowledgement_for_distinct_calls_is_never_blocked(tmp_path: Path) -> None:
    guard = LoopGuard()
    seen = events_of(guard)
    model = Model([[(NOTE, {"note": CITIES[n]})] for n in range(12)])

    tools, done = asyncio.run(forecast_run(guard, model, tmp_path))

    assert seen == []
    assert tools.executions == 12 and done.texts() == ["Saved."] * 12

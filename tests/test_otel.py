"""OpenTelemetry both ways, with the real SDK: loop events out, exported traces back in.

Out: LoopGuard puts each warning, block and stop on the current span (a log record, or a span of
its own, when none is recording), read back from the SDK's in-memory exporters. In: traces of
real LangChain agent runs (LangChain's fake chat model), exported as OTLP JSON by
OpenTelemetry's own encoder (tests/_otlp.py), read by ``loopwarden analyze``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import require_module

try:
    require_module("opentelemetry.sdk", "test")
    require_module("opentelemetry.exporter.otlp.proto.common", "test")
    require_module("langchain.agents", "langchain")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _otlp import claude_code_loop, write_otlp_file
from loopwarden import LoopGuard
from loopwarden.adapters.langchain import LoopGuardMiddleware
from loopwarden.events import LoopEvent
from loopwarden.otel import EVENT_NAME
from loopwarden.transcripts import read_transcripts

SECRET = "sk-secret-argument-9431"
CONFIG = {"enabled": True, "warningThreshold": 2, "criticalThreshold": 4}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    """The process's SDK tracer provider (set once per process, as OpenTelemetry allows)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    created = TracerProvider()
    trace.set_tracer_provider(created)
    return created


@pytest.fixture
def exporter(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    found = InMemorySpanExporter()
    processor = SimpleSpanProcessor(found)
    provider.add_span_processor(processor)
    yield found
    processor.shutdown()  # later spans are not exported to this test's exporter


def loop_events(spans: tuple[ReadableSpan, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(span name, event attributes) of every loop event on the spans, in time order."""
    found = [
        (event.timestamp or 0, span.name, dict(event.attributes or {}))
        for span in spans
        for event in span.events
        if event.name == EVENT_NAME
    ]
    return [(name, attrs) for _, name, attrs in sorted(found, key=lambda item: item[0])]


def looping(guard: LoopGuard, calls: int) -> list[str]:
    """The same call ``calls`` times, each in a tool span of its own; the guard's actions."""
    tracer = trace.get_tracer("test")
    actions = []
    for index in range(calls):
        with tracer.start_as_current_span("execute_tool read"):
            decision = guard.before_tool_call(
                "sess", "read", {"token": SECRET}, run_id="r1", tool_call_id=f"call-{index}"
            )
            actions.append(decision.action)
            if decision.allowed:
                guard.after_tool_call("sess", "read", {"token": SECRET}, result=SECRET, run_id="r1")
    return actions


def test_each_warning_block_and_stop_is_an_event_on_the_current_span(
    exporter: InMemorySpanExporter,
) -> None:
    guard = LoopGuard({"profile": "recommended"}, agent_id="ops")
    delivered: list[LoopEvent] = []
    guard.subscribe(delivered.append)

    actions = looping(guard, 5)

    events = loop_events(exporter.get_finished_spans())
    assert [a for a in actions if a != "allow"] == [e.action for e in delivered]
    assert len(events) == len(delivered) >= 3
    decided = [index for index, action in enumerate(actions) if action != "allow"]
    for (span_name, attrs), event, index in zip(events, delivered, decided, strict=True):
        assert span_name == "execute_tool read"
        assert attrs["gen_ai.tool.name"] == "read"
        assert attrs["gen_ai.tool.call.id"] == f"call-{index}"
        assert attrs["gen_ai.agent.id"] == "ops"
        assert attrs["gen_ai.conversation.id"] == "sess"
        assert attrs["loopwarden.run_id"] == "r1"
        assert (attrs["loopwarden.action"], attrs["loopwarden.detector"]) == (
            event.action,
            event.detector,
        )
        assert (attrs["loopwarden.level"], attrs["loopwarden.count"]) == (event.level, event.count)
    assert {"warn", "block", "stop"} <= {attrs["loopwarden.action"] for _, attrs in events}
    assert SECRET not in json.dumps([attrs for _, attrs in events])


def test_the_async_path_puts_events_on_the_awaiting_tasks_span(
    exporter: InMemorySpanExporter,
) -> None:
    guard = LoopGuard(CONFIG)
    tracer = trace.get_tracer("test")

    async def call(index: int) -> str:
        with tracer.start_as_current_span(f"tool {index}"):
            decision = await guard.abefore_tool_call("s", "poll", {}, tool_call_id=str(index))
            if decision.allowed:
                await guard.aafter_tool_call("s", "poll", {}, result="pending")
            return decision.action

    async def run() -> list[str]:
        return [await call(index) for index in range(5)]

    actions = asyncio.run(run())

    events = loop_events(exporter.get_finished_spans())
    assert [(name, attrs["loopwarden.action"]) for name, attrs in events] == [
        (f"tool {index}", action) for index, action in enumerate(actions) if action != "allow"
    ]


_NO_SPAN = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
spans = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)
logs = None
if sys.argv[1] == "logs":
    from opentelemetry import _logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    logs = InMemoryLogRecordExporter()
    log_provider = LoggerProvider()
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    _logs.set_logger_provider(log_provider)
import loopwarden as lw
guard = lw.LoopGuard({"profile": "recommended"})
for _ in range(4):
    if guard.before_tool_call("s", "read", {"k": "SECRET"}).allowed:
        guard.after_tool_call("s", "read", {"k": "SECRET"}, result="SECRET")
out = {
    "spans": [
        {"name": s.name, "attributes": dict(s.attributes),
         "events": [[e.name, dict(e.attributes)] for e in s.events]}
        for s in spans.get_finished_spans()
    ],
    "logs": [
        {"body": r.log_record.body, "severity": r.log_record.severity_text,
         "event_name": r.log_record.event_name, "attributes": dict(r.log_record.attributes)}
        for r in (logs.get_finished_logs() if logs else ())
    ],
}
print(json.dumps(out))
"""


def no_span_run(mode: str) -> dict[str, Any]:
    """A process whose guard decides outside any span, with or without a logger provider."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _NO_SPAN, mode],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    assert "SECRET" not in json.dumps(result)
    return result


def test_outside_any_span_events_become_log_records_when_a_logger_provider_is_set() -> None:
    out = no_span_run("logs")
    assert out["spans"] == []
    assert [(r["severity"], r["attributes"]["loopwarden.action"]) for r in out["logs"]] == [
        ("WARN", "warn"),
        ("ERROR", "block"),
    ]
    assert {r["event_name"] for r in out["logs"]} == {EVENT_NAME}
    assert out["logs"][1]["body"].startswith("CRITICAL: Called read 3 times in a row")
    assert out["logs"][1]["attributes"]["gen_ai.tool.name"] == "read"


def test_outside_any_span_with_only_traces_set_each_event_is_a_span_of_its_own() -> None:
    out = no_span_run("traces")
    assert [s["name"] for s in out["spans"]] == ["loopwarden warn read", "loopwarden block read"]
    for span in out["spans"]:
        [[name, attrs]] = span["events"]
        assert name == EVENT_NAME
        assert attrs == span["attributes"]


def test_a_process_that_never_imported_opentelemetry_does_not_load_it(tmp_path: Path) -> None:
    """OpenTelemetry is installed here, and the guard emits events: it stays unloaded."""
    code = textwrap.dedent(
        """
        import sys, loopwarden as lw
        guard = lw.LoopGuard({"profile": "recommended"})
        actions = []
        for _ in range(5):
            decision = guard.before_tool_call("s", "read", {"k": 1})
            actions.append(decision.action)
            if decision.allowed:
                guard.after_tool_call("s", "read", {"k": 1}, result="same")
        assert "block" in actions, actions
        print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]"


# -- exported traces read back by `loopwarden analyze` -----------------------------------------


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, accepting tools (it plays its script whatever it is given)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self


class GenAIToolSpans(AgentMiddleware):  # type: ignore[type-arg]
    """Opens a GenAI ``execute_tool`` span around each tool call the agent makes.

    Placed before LoopGuardMiddleware, its span is current while the guard decides, and it
    covers the calls the guard blocks (their result is the guard's reason).
    """

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        call = request.tool_call
        tracer = trace.get_tracer("genai-test")
        with tracer.start_as_current_span(f"execute_tool {call['name']}") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", call["name"])
            span.set_attribute("gen_ai.tool.call.id", call["id"])
            span.set_attribute("gen_ai.tool.call.arguments", json.dumps(call["args"]))
            response = handler(request)
            if isinstance(response, ToolMessage) and not span.attributes.get(  # type: ignore[attr-defined]
                "gen_ai.tool.call.result"
            ):
                span.set_attribute("gen_ai.tool.call.result", response.text)
            return response


class ToolResult(AgentMiddleware):  # type: ignore[type-arg]
    """Placed after LoopGuardMiddleware: records what the tool itself returned on the span."""

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        response = handler(request)
        if isinstance(response, ToolMessage):
            trace.get_current_span().set_attribute("gen_ai.tool.call.result", response.text)
        return response


def weather_agent(
    script: list[AIMessage], guard: LoopGuard, before: list[Any], after: list[Any]
) -> Any:
    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        return f"It is 21C in {city}."

    @tool
    def get_time(city: str) -> str:
        """Local time of a city."""
        return f"It is noon in {city}."

    return create_agent(
        ScriptedModel(messages=iter(script)),
        [get_weather, get_time],
        middleware=[*before, LoopGuardMiddleware(guard), *after],
        checkpointer=InMemorySaver(),
    )


def script() -> list[AIMessage]:
    """Asks the time once, then the weather of Paris until the guard blocks it."""
    calls = [("get_time", "Rome")] + [("get_weather", "Paris")] * 6
    messages = [
        AIMessage(
            content="",
            tool_calls=[{"name": name, "args": {"city": city}, "id": f"c{i}"}],
            usage_metadata={"input_tokens": 100 + i, "output_tokens": 7, "total_tokens": 107 + i},
        )
        for i, (name, city) in enumerate(calls)
    ]
    return [*messages, AIMessage(content="I give up.")]


def analyze_json(path: Path, *settings: str) -> dict[str, Any]:
    args = [sys.executable, "-m", "loopwarden", "analyze", str(path), "--output", "json"]
    for setting in settings:
        args += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode in (0, 1), done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_run_traced_through_the_adapter_and_exported_is_analysed_to_the_same_decisions(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    guard = LoopGuard(CONFIG)
    live: list[LoopEvent] = []
    guard.subscribe(live.append)
    agent = weather_agent(script(), guard, [GenAIToolSpans()], [ToolResult()])
    with trace.get_tracer("genai-test").start_as_current_span("invoke_agent weather") as span:
        span.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.invoke({"messages": [HumanMessage("weather?")]}, {"configurable": {"thread_id": "t"}})
    spans = exporter.get_finished_spans()
    # Exported as a collector would write it: several batches, in the order spans ended.
    path = write_otlp_file(tmp_path / "traces.jsonl", [spans[:5], spans[5:]])

    [run] = read_transcripts(path)
    assert [call.tool_call_id for call in run.calls] == [f"c{i}" for i in range(7)]
    report = analyze_json(path, "warningThreshold=2", "criticalThreshold=4")

    [replayed] = report["trajectories"]
    assert replayed["format"] == "otlp"
    assert replayed["calls"] == 7
    live_ids = [event.tool_call_id for event in live]
    replayed_ids = [f"c{event['index']}" for event in replayed["events"]]
    assert [(e["action"], e["tool"], e["detector"], e["count"]) for e in replayed["events"]] == [
        (e.action, e.tool_name, e.detector, e.count) for e in live
    ]
    assert replayed_ids == live_ids
    assert {e.action for e in live} >= {"warn", "block"}
    # The guard's own events rode on the same spans, and are not read back as calls.
    on_spans = loop_events(spans)
    assert [attrs["gen_ai.tool.call.id"] for _, attrs in on_spans] == live_ids
    assert {name for name, _ in on_spans} == {"execute_tool get_weather"}


def test_pydantic_ais_own_genai_spans_are_analysed_to_the_same_decisions(
    provider: TracerProvider, tmp_path: Path
) -> None:
    """PydanticAI's own instrumentation (GenAI conventions) records each call as the model saw
    it: a warning appended to the result, a blocked call as an error. loopwarden's events on the
    same spans say which is which, so the replay decides as the live guard did."""
    require_module("pydantic_ai", "pydantic-ai")
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.usage import RequestUsage

    from loopwarden.adapters.pydantic_ai import LoopGuardCapability

    found = InMemorySpanExporter()
    own = TracerProvider()  # the agent's own provider, as PydanticAI lets an application pass
    own.add_span_processor(SimpleSpanProcessor(found))
    made = []

    def respond(messages: Any, info: Any) -> ModelResponse:
        if len(made) == 6:
            return ModelResponse(parts=[TextPart("I give up.")])
        made.append(f"c{len(made)}")
        call = ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id=made[-1])
        return ModelResponse(
            parts=[call], usage=RequestUsage(input_tokens=100 + len(made), output_tokens=7)
        )

    guard = LoopGuard(CONFIG)
    live: list[LoopEvent] = []
    guard.subscribe(live.append)
    agent: Any = Agent(
        FunctionModel(respond, model_name="scripted"),
        capabilities=[
            Instrumentation(InstrumentationSettings(tracer_provider=own)),
            LoopGuardCapability(guard),
        ],
    )

    @agent.tool_plain(retries=0)
    def get_weather(city: str) -> str:
        return f"It is 21C in {city}."

    agent.run_sync("weather?")
    spans = found.get_finished_spans()
    path = write_otlp_file(tmp_path / "pydantic-ai.jsonl", [spans])
    assert {e.action for e in live} >= {"warn", "block"}
    results = [s.attributes.get("gen_ai.tool.call.result") for s in spans]
    assert any("WARNING:" in str(result) for result in results)  # as the model saw it

    [run] = read_transcripts(path)
    assert [call.tool_call_id for call in run.calls] == made
    report = analyze_json(path, "warningThreshold=2", "criticalThreshold=4")
    [replayed] = report["trajectories"]
    assert [
        (e["action"], made[e["index"]], e["detector"], e["count"]) for e in replayed["events"]
    ] == [(e.action, e.tool_call_id, e.detector, e.count) for e in live]
    # Each chat span's token counts go on the call its response issued.
    assert replayed["spend"]["input_tokens"] == sum(100 + i for i in range(1, 7))
    assert replayed["spend"]["model"] == "scripted"


def adk_weather_run(guard: LoopGuard, calls: int) -> None:
    """A Google ADK agent whose scripted model asks the weather of Paris ``calls`` times; ADK's
    own tracing records it on the process's tracer provider."""
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.models.base_llm import BaseLlm
    from google.adk.models.llm_response import LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from loopwarden.adapters.google_adk import LoopGuardPlugin

    class Scripted(BaseLlm):
        model: str = "scripted"
        made: int = 0

        async def generate_content_async(self, llm_request: Any, stream: bool = False) -> Any:
            if self.made == calls:
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text="ok")])
                )
                return
            self.made += 1
            call = types.FunctionCall(
                name="get_weather", args={"city": "Paris"}, id=f"c{self.made}"
            )
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )

    def get_weather(city: str) -> dict[str, str]:
        """Current weather of a city."""
        return {"report": f"It is 21C in {city}."}

    agent = LlmAgent(name="weather", model=Scripted(), tools=[get_weather])
    app = App(name="app", root_agent=agent, plugins=[LoopGuardPlugin(guard)])
    runner = InMemoryRunner(app=app)

    async def run() -> None:
        session = await runner.session_service.create_session(app_name="app", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="weather?")])
        async for _ in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            pass

    asyncio.run(run())


def test_google_adks_own_spans_replay_to_the_same_decisions_when_they_record_content(
    exporter: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Google ADK traces its tool calls itself; with content capture on, its spans hold the
    arguments and the result as the model saw it (the plugin's warning under a key of its own),
    and the replay reaches the live decisions. Without, the report says the calls cannot be
    told apart."""
    require_module("google.adk", "google-adk")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    guard = LoopGuard(CONFIG)
    live: list[LoopEvent] = []
    guard.subscribe(live.append)
    adk_weather_run(guard, 6)
    spans = exporter.get_finished_spans()
    path = write_otlp_file(tmp_path / "adk.jsonl", [spans])
    results = [str(span.attributes.get("gen_ai.tool.call.result")) for span in spans]
    assert any("loopwarden_warning" in result for result in results)

    report = analyze_json(path, "warningThreshold=2", "criticalThreshold=4")
    [replayed] = report["trajectories"]
    assert [(e["action"], f"c{e['index'] + 1}", e["count"]) for e in replayed["events"]] == [
        (e.action, e.tool_call_id, e.count) for e in live
    ]
    assert {e.action for e in live} >= {"warn", "block"} and report["warnings"] == []

    exporter.clear()
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
    adk_weather_run(LoopGuard(CONFIG), 3)
    bare = write_otlp_file(tmp_path / "adk-bare.jsonl", [exporter.get_finished_spans()])
    assert "3 of 3 tool spans record no arguments" in analyze_json(bare)["warnings"][0]


def test_openinference_langchain_tool_spans_are_read_back(
    exporter: InMemorySpanExporter, provider: TracerProvider, tmp_path: Path
) -> None:
    """OpenInference's own LangChain instrumentation: its TOOL spans are the executed calls."""
    instrumentation = require_module("openinference.instrumentation.langchain", "test")
    instrumentor = instrumentation.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        guard = LoopGuard(CONFIG)
        live: list[LoopEvent] = []
        guard.subscribe(live.append)
        agent = weather_agent(script(), guard, [], [])
        agent.invoke({"messages": [HumanMessage("weather?")]}, {"configurable": {"thread_id": "t"}})
    finally:
        instrumentor.uninstrument()
    spans = exporter.get_finished_spans()
    path = write_otlp_file(tmp_path / "openinference.jsonl", [spans])

    [run] = read_transcripts(path)
    blocked = sum(event.action == "block" for event in live)
    # A blocked call never reaches the tool, so OpenInference records no TOOL span for it.
    assert [call.tool for call in run.calls] == ["get_time"] + ["get_weather"] * (6 - blocked)
    assert {call.result for call in run.calls[1:]} == {"It is 21C in Paris."}
    # Each LLM span's token counts (from the messages' usage) go on the call it issued.
    assert [call.usage and call.usage.input_tokens for call in run.calls] == [
        100 + i for i in range(len(run.calls))
    ]
    report = analyze_json(path, "warningThreshold=2", "criticalThreshold=4")
    [replayed] = report["trajectories"]
    assert replayed["spend"]["input_tokens"] == sum(100 + i for i in range(len(run.calls)))
    assert replayed["spend"]["output_tokens"] == 7 * len(run.calls)
    assert [(e["index"], e["action"]) for e in replayed["events"]][:1] == [
        (int(live[0].tool_call_id[1:]), "warn")  # type: ignore[index]
    ]
    # The events sat on the span LangChain had current: the tools node of the same trace.
    on_spans = loop_events(spans)
    assert [attrs["loopwarden.action"] for _, attrs in on_spans] == [e.action for e in live]
    trace_ids = {span.context.trace_id for span in spans if span.events}
    assert len(trace_ids) == 1


def test_a_hook_process_without_an_otlp_endpoint_imports_no_opentelemetry(tmp_path: Path) -> None:
    """Every hook process up to the one that denies a loop, read with ``-X importtime``."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("OTEL_")} | {
        "PYTHONPATH": os.pathsep.join(sys.path),
        "XDG_STATE_HOME": str(tmp_path),
    }
    done = claude_code_loop(env, python=["-X", "importtime"])
    answers = [process.stdout for process in done]
    imported = [
        line.split("|")[-1].strip() for process in done for line in process.stderr.splitlines()
    ]
    assert any("deny" in answer for answer in answers)  # the guard acted, and emitted events
    assert "loopwarden.hooks._runner" in imported
    assert [name for name in imported if "opentelemetry" in name or name.endswith(".otel")] == []

"""Loop events in a real tracing tool: Arize Phoenix, run locally, receiving OTLP over HTTP.

Phoenix cannot share this environment (its own OpenTelemetry pins), so it runs as a server
from a venv of its own: ``LOOPWARDEN_TEST_PHOENIX`` names its ``phoenix`` executable (.ci/run
builds that venv). The guard's events are sent by OpenTelemetry's OTLP/HTTP exporter, from
this process and from a real ``loopwarden hook`` process, then queried back from Phoenix's
REST API.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support import require_module

try:
    require_module("opentelemetry.exporter.otlp.proto.http", "test")
except pytest.skip.Exception as missing:  # skip the whole module (CI fails instead)
    pytest.skip(str(missing), allow_module_level=True)

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from _otlp import claude_code_loop
from loopwarden import LoopGuard
from loopwarden.events import LoopEvent
from loopwarden.otel import EVENT_NAME

PHOENIX = os.environ.get("LOOPWARDEN_TEST_PHOENIX", "")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Phoenix server on 127.0.0.1 with its own working directory; its base URL."""
    if not PHOENIX:
        reason = "LOOPWARDEN_TEST_PHOENIX is not set (a venv's phoenix: pip install arize-phoenix)"
        if os.environ.get("LOOPWARDEN_REQUIRE_PHOENIX") == "1":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(tmp_path_factory.mktemp("phoenix")),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
    }
    log = tmp_path_factory.mktemp("phoenix-log") / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [PHOENIX, "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _up(url):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def spans_of(url: str, project: str, expected: int) -> list[dict[str, Any]]:
    """The project's spans as Phoenix's REST API returns them, once ``expected`` have arrived."""
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/v1/projects/{project}/spans", timeout=10) as r:
                spans: list[dict[str, Any]] = json.load(r)["data"]
        except OSError:
            spans = []  # the project appears with its first span
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def loop_events(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = [
        (event["timestamp"], event["attributes"])
        for span in spans
        for event in span["events"]
        if event["name"] == EVENT_NAME
    ]
    return [attrs for _, attrs in sorted(found, key=lambda item: item[0])]


def test_events_on_an_applications_spans_arrive_in_phoenix(phoenix: str) -> None:
    project = f"app-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": project}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{phoenix}/v1/traces")))
    tracer = provider.get_tracer("agent")
    guard = LoopGuard({"profile": "recommended"})
    delivered: list[LoopEvent] = []
    guard.subscribe(delivered.append)

    with tracer.start_as_current_span("invoke_agent"):
        for index in range(5):
            with tracer.start_as_current_span("execute_tool fetch") as span:
                span.set_attribute("gen_ai.tool.name", "fetch")
                decision = guard.before_tool_call(
                    "s", "fetch", {"url": "https://x"}, tool_call_id=f"call-{index}"
                )
                if decision.allowed:
                    guard.after_tool_call("s", "fetch", {"url": "https://x"}, result="503")
    provider.shutdown()

    spans = spans_of(phoenix, project, 6)
    events = loop_events(spans)
    assert [
        (e["loopwarden.action"], e["loopwarden.detector"], e["loopwarden.count"]) for e in events
    ] == [(e.action, e.detector, e.count) for e in delivered]
    assert [e["gen_ai.tool.call.id"] for e in events] == [e.tool_call_id for e in delivered]
    assert {"warn", "block"} <= {e.action for e in delivered}
    assert "https://x" not in json.dumps(spans)


def test_a_hook_process_exports_its_events_when_told_where(phoenix: str, tmp_path: Path) -> None:
    project = f"hook-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }
    answers = [process.stdout for process in claude_code_loop(env)[::2]]  # the PreToolUse ones

    spans = spans_of(phoenix, project, 2)
    events = loop_events(spans)
    denied = sum("deny" in answer for answer in answers)
    assert denied >= 1
    actions = [e["loopwarden.action"] for e in events]
    assert sum(action in ("block", "stop") for action in actions) == denied
    assert actions[0] == "warn" and "block" in actions
    assert {e["gen_ai.tool.name"] for e in events} == {"Bash"}
    assert {span["name"].split()[0] for span in spans} == {"loopwarden"}
    assert "npm test" not in json.dumps(spans)

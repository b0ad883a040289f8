"""Each transcript reader marks a call failed from the structured signal its format has.

An error flag (OpenClaw ``isError``, Claude Code and Anthropic ``is_error``, OpenHands
``is_error``, Gemini CLI ``status``, an OTLP span's error status) or a shell exit code (Codex,
Gemini CLI, mini-swe-agent, OpenClaw's exec, OpenHands' terminal) says whether a call failed,
and where the format states a success (exit code 0, ``is_error: false``, ``status: success``),
that is carried too: replay hands it to the guard as ``failed=``, so a success whose output
reads like an error is not taken for a failure, and a failure that reads like nothing is one.
SWE-agent, tau-bench and OpenAI chat lists state nothing structured: their calls stay unknown
(None) unless an error text marks them.

The real samples (tests/data) are read where they hold such calls; the decision tests at the
end replay Codex rollouts through ``loopwarden analyze``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from _otlp import write_otlp_file
from loopwarden.transcripts import read_transcripts
from loopwarden.transcripts.model import ToolCall

DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "samples"
AGENTS = DATA / "coding_agents"


def _calls(path: Path, fmt: str = "auto") -> list[ToolCall]:
    return [call for t in read_transcripts(path, fmt=fmt) for call in t.calls]


def _one(pattern: str) -> Path:
    [found] = sorted(AGENTS.glob(pattern))
    return found


def _failures(calls: list[ToolCall]) -> Counter[bool | None]:
    return Counter(call.failure for call in calls)


# -- the real samples ----------------------------------------------------------------------------


def test_openclaw_exec_exit_codes_and_is_error_false() -> None:
    # SOURCES.md: read, exec git status (exit 0), then exec npm test failing (exit 1) 15 times.
    calls = _calls(SAMPLES / "openclaw-session-example.jsonl")
    assert [c.tool for c in calls[:2]] == ["read", "exec"]
    assert calls[0].failure is False  # isError: false, no exit code
    assert calls[1].failure is False  # exitCode 0
    assert [c.failure for c in calls[2:]] == [True] * 15  # exitCode 1, isError false
    assert all(c.error is None for c in calls)  # the outcome compared is still the result


def test_claude_code_is_error_true_and_false() -> None:
    calls = _calls(_one("claude-code/transcripts/failing-loop/*/*.jsonl"))
    assert [c.failure for c in calls] == [False] * 3 + [True] * 8
    assert all(c.error is not None for c in calls[3:])
    # A subagent's answer carries no is_error at all: not stated.
    [agent] = _calls(_one("claude-code/transcripts/subagent-loop/*/*.jsonl"))
    assert agent.tool == "Agent" and agent.failure is None


def test_codex_exit_codes() -> None:
    failing = _calls(_one("codex/rollouts/failing-loop-*.jsonl"))
    assert _failures(failing) == Counter({True: 8})  # "Process exited with code 2"
    turns = _calls(_one("codex/rollouts/two-turns-*.jsonl"))
    assert _failures(turns) == Counter({True: 5, False: 1})
    [ok] = [c for c in turns if c.failure is False]
    assert "Process exited with code 0" in ok.result and ok.error is None
    # write_stdin to a command still running: no exit code yet, nothing stated.
    poll = _calls(_one("codex/rollouts/write-stdin-poll-*.jsonl"))
    assert None in _failures(poll)


def test_gemini_cli_status_and_exit_code() -> None:
    calls = _calls(AGENTS / "gemini-cli" / "chats" / "hooked-session-resumed-compressed.jsonl")
    shell = [c for c in calls if c.tool == "run_shell_command"]
    assert _failures(shell) == Counter({True: 4, False: 1})
    [ok] = [c for c in shell if c.failure is False]
    assert "Exit Code: 0" in ok.result or "Exit Code" not in ok.result
    [read] = [c for c in calls if c.tool == "read_file"]
    assert read.failure is True and read.result is not None  # status "error"


def test_gemini_cli_status_success_without_exit_code(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-12-01T10-00-abc.jsonl"
    records: list[dict[str, Any]] = [
        {"sessionId": "s1", "projectHash": "p", "startTime": "2026-12-01T10:00:00Z"},
        {"id": "u1", "type": "user", "content": [{"text": "read them"}]},
        {
            "id": "g1",
            "type": "gemini",
            "content": "",
            "toolCalls": [
                _gemini_call("c1", "read_file", {"path": "a"}, "success", "Error: it says so"),
                _gemini_call("c2", "read_file", {"path": "b"}, "error", "File not found: b"),
                _gemini_call("c3", "read_file", {"path": "c"}, "weird", "contents"),
            ],
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    calls = _calls(path, "gemini-cli")
    assert [c.failure for c in calls] == [False, True, None]


def _gemini_call(call_id: str, name: str, args: Any, status: str, text: str) -> dict[str, Any]:
    key = "error" if status == "error" else "output"
    response = {"id": call_id, "name": name, "response": {key: text}}
    return {
        "id": call_id,
        "name": name,
        "args": args,
        "status": status,
        "result": [{"functionResponse": response}],
    }


def test_mini_swe_agent_returncode() -> None:
    calls = _calls(SAMPLES / "mini-swe-agent-v1__sympy__sympy-15976.traj.json")
    counts = _failures(calls)
    assert counts[True] == 4 and counts[False] == 37
    for call in calls:
        if call.failure is False:
            assert "<returncode>0</returncode>" in call.result
        elif call.failure is True:
            assert "<returncode>0</returncode>" not in str(call.result)


def test_mini_swe_agent_v2_returncode(tmp_path: Path) -> None:
    path = tmp_path / "run.traj.json"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix it"}]
    for index, code in enumerate([0, 2, 0]):
        call = {"id": f"c{index}", "function": {"name": "bash", "arguments": '{"command": "x"}'}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{index}",
                "content": "Error: looks bad" if code == 0 else "fine",
                "extra": {"returncode": code},
            }
        )
    doc = {"info": {"mini_version": "2.4.6"}, "messages": messages, "trajectory_format": "v2"}
    path.write_text(json.dumps(doc))
    calls = _calls(path, "mini-swe-agent")
    assert [c.failure for c in calls] == [False, True, False]


def test_openhands_error_observation_and_terminal_exit_code() -> None:
    calls = _calls(SAMPLES / "openhands-sdk__goal-fixture-events.jsonl")
    # an observation with is_error: true, and a command that exited 1 (is_error false)
    assert [c.failure for c in calls] == [True, True]
    assert calls[0].error is not None and calls[1].error is None


def test_otlp_span_status(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("agent"):
        for index, status in enumerate([StatusCode.ERROR, StatusCode.OK, StatusCode.UNSET]):
            with tracer.start_as_current_span("execute_tool fetch") as span:
                span.set_attribute("gen_ai.operation.name", "execute_tool")
                span.set_attribute("gen_ai.tool.name", "fetch")
                span.set_attribute("gen_ai.tool.call.arguments", json.dumps({"n": index}))
                span.set_attribute("gen_ai.tool.call.result", "Error: no route")
                span.set_status(Status(status, "boom" if status is StatusCode.ERROR else None))
    path = write_otlp_file(tmp_path / "traces.jsonl", [exporter.get_finished_spans()])
    calls = _calls(path, "otlp")
    # OK is what instrumentations set on any call that did not raise (the adapters' own
    # "no exception"): not a statement about the result, so it stays unknown, as live.
    assert [c.failure for c in calls] == [True, None, None]
    assert calls[0].error == "boom"


def test_formats_without_a_structured_signal_state_nothing() -> None:
    for name in (
        "swe-agent-0x__swe-agent__test-repo-i1.traj",
        "swe-agent-1x-fncall__6e44b9__sweagenttestrepo-1c2844.traj",
    ):
        assert {c.failure for c in _calls(SAMPLES / name)} == {None}
    tau = _calls(SAMPLES / "tau-bench__gpt-4o-airline__first20.json")
    # tau-bench's tools answer failures with an "Error: ..." text: that is the only signal.
    assert set(_failures(tau)) == {None, True}
    assert all(str(c.error).startswith("Error") for c in tau if c.failure)


def test_flat_jsonl_error(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    lines = [
        {"trajectory": "r", "tool": "exec", "args": {"n": 1}, "result": "ok", "error": None},
        {"trajectory": "r", "tool": "exec", "args": {"n": 2}, "result": "x", "error": "exit 1"},
        {"trajectory": "r", "tool": "exec", "args": {"n": 3}, "result": None, "error": "boom"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [c.failure for c in _calls(path, "jsonl")] == [None, True, True]


def test_anthropic_is_error(tmp_path: Path) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for index, flag in enumerate([True, False, None]):
        use = {"type": "tool_use", "id": f"t{index}", "name": "fetch", "input": {"n": index}}
        messages.append({"role": "assistant", "content": [use]})
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": f"t{index}"}
        result["content"] = "Error: nope"
        if flag is not None:
            result["is_error"] = flag
        messages.append({"role": "user", "content": [result]})
    path = tmp_path / "messages.json"
    path.write_text(json.dumps({"messages": messages}))
    assert [c.failure for c in _calls(path, "anthropic")] == [True, False, None]


# -- decisions: replay hands the flag to the guard ------------------------------------------------


def _rollout(path: Path, calls: int, exit_code: int, output: str) -> Path:
    """A Codex rollout: one turn of ``exec_command`` calls with distinct commands, each
    answered with ``output`` (``{url}`` replaced by the command's own URL) and ``exit_code``."""
    lines: list[dict[str, Any]] = [
        {"type": "session_meta", "payload": {"id": "s1", "timestamp": "2026-12-01T10:00:00Z"}},
        {"type": "turn_context", "payload": {"turn_id": "t1", "cwd": "/w"}},
    ]
    for index in range(calls):
        url = f"http://svc.internal/items/{index}"
        arguments = json.dumps({"cmd": f"curl -fsS {url}"})
        call = {"type": "function_call", "name": "exec_command", "arguments": arguments}
        lines.append({"type": "response_item", "payload": {**call, "call_id": f"c{index}"}})
        text = (
            f"Chunk ID: a{index}\nWall time: 0.0{index} seconds\n"
            f"Process exited with code {exit_code}\nOriginal token count: 9\nOutput:\n"
            + output.replace("{url}", url)
            + "\n"
        )
        output_item = {"type": "function_call_output", "call_id": f"c{index}", "output": text}
        lines.append({"type": "response_item", "payload": output_item})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _analyze(path: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "loopwarden", "analyze", str(path), "--format", "codex"]
    argv += ["--set", "profile=recommended", "--output", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    [report] = json.loads(done.stdout)["trajectories"]
    return report


def test_replay_blocks_a_failure_that_quotes_its_arguments(tmp_path: Path) -> None:
    # exit code 22 and an error that names the URL of each call: the same failure, varied calls
    path = _rollout(tmp_path / "fail.jsonl", 7, 22, "curl: (22) {url}: 503 Service Unavailable")
    report = _analyze(path)
    assert report["first_block"]["call"] == 5, report
    assert report["stopped"] and report["stop"]["call"] == 7, report


@pytest.mark.parametrize(
    "output", ["Error: upstream said no", "Error: {url} was not reachable", "queued"]
)
def test_replay_never_blocks_a_success_the_exit_code_states(tmp_path: Path, output: str) -> None:
    # exit code 0 on every call: whatever the output reads like, these calls succeeded
    report = _analyze(_rollout(tmp_path / "ok.jsonl", 12, 0, output))
    assert report["calls"] == 12
    assert report["blocks"] == 0 and not report["stopped"], report

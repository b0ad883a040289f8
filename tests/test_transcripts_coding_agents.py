"""The coding CLIs' session logs (Claude Code, Codex, Gemini CLI): importers on real samples made
by the real CLIs (tests/data/coding_agents), hand-made edge cases, and ``loopwarden analyze`` on
directory trees laid out like ``~/.claude/projects`` and ``~/.codex/sessions``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden import resolve_config
from loopwarden.cli import main
from loopwarden.transcripts import (
    Compaction,
    Trajectory,
    TranscriptError,
    detect,
    read_transcripts,
)

DATA = Path(__file__).resolve().parent / "data" / "coding_agents"
CLAUDE = DATA / "claude-code" / "transcripts"
CODEX = DATA / "codex" / "rollouts"
GEMINI = DATA / "gemini-cli" / "chats"

# The recommended profile blocks the call that follows `critical` identical results in a row.
CRITICAL = resolve_config({"profile": "recommended"}).consecutive_critical_threshold


def _shape(traj: Trajectory) -> str:
    """One letter per item: R a call with a result, E a failed call, C a compaction."""
    return "".join(
        "C" if isinstance(item, Compaction) else ("E" if item.error is not None else "R")
        for item in traj.items
    )


def _only(folder: Path, pattern: str = "*.jsonl") -> Path:
    """The one sample file of a scenario (its name is the session id the CLI chose)."""
    (path,) = sorted(folder.rglob(pattern))
    return path


def _first(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8").splitlines()[0]))


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _analyze(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["analyze", *argv, "--output", "json"])
    return code, json.loads(capsys.readouterr().out)


def _loop_start(report: dict[str, Any]) -> int:
    """Where the recorded trajectory behind an analyze report ends in one call repeated: the
    index of the first call of its last run of calls with one tool and the same arguments."""
    (traj,) = [t for t in read_transcripts(Path(report["source"])) if t.id == report["id"]]
    calls = traj.calls
    start = len(calls) - 1
    while start and (calls[start - 1].tool, calls[start - 1].params) == (
        calls[-1].tool,
        calls[-1].params,
    ):
        start -= 1
    return start


def _assert_blocked_like_recommended(report: dict[str, Any]) -> None:
    """The loop was blocked where the recommended profile blocks it (the call after `CRITICAL`
    identical results), with the last-chance warning on the call before, and the run stopped."""
    blocked = _loop_start(report) + CRITICAL
    assert report["first_block"]["detector"] == "consecutive_repeat"
    assert (report["first_block"]["index"], report["first_block"]["count"]) == (blocked, CRITICAL)
    assert report["first_warning"]["index"] == blocked - 1
    assert report["stopped"] is True
    assert report["calls_saved"] == report["calls"] - blocked


# -- Claude Code: real samples -------------------------------------------------------------------


def test_claude_code_failing_loop_sample() -> None:
    path = _only(CLAUDE / "failing-loop")
    assert detect(path).format == "claude-code"
    session = _first(path)["sessionId"]
    # The second prompt of the session called no tool: only the first turn is a trajectory.
    (traj,) = read_transcripts(path)
    assert traj.id == f"{session}:turn-1" and traj.format == "claude-code"
    assert _shape(traj) == "RRR" + "E" * 8
    loop = traj.calls[3:]
    assert {call.tool for call in traj.calls} == {"Bash"}
    assert all(call.params == loop[0].params for call in loop)
    assert loop[0].params["command"] == "ls build/output.txt"
    assert all(call.result is not None for call in traj.calls[:3])
    assert loop[0].error is not None and loop[0].error.startswith("Exit code 2\n")
    assert {call.error for call in loop} == {loop[0].error}
    assert all(call.tool_call_id and call.tool_call_id.startswith("toolu_") for call in loop)
    assert traj.orphan_results == 0


def test_claude_code_compaction_sample_keeps_one_run_across_the_boundary() -> None:
    path = _only(CLAUDE / "compaction")
    (traj,) = read_transcripts(path)
    # compact_boundary inside the turn; the summary line after it is not a new prompt.
    assert _shape(traj) == "EEEECEEEE"
    compaction = traj.items[4]
    assert isinstance(compaction, Compaction)
    boundary = json.loads(path.read_text().splitlines()[(compaction.line or 0) - 1])
    assert boundary["subtype"] == "compact_boundary"
    assert {call.error for call in traj.calls} == {"Exit code 1\nFAIL: 3 tests failed"}


# -- Claude Code: edge cases ---------------------------------------------------------------------


def _cc(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
    role = "assistant" if kind == "assistant" else "user"
    return {"type": kind, "sessionId": "s1", "uuid": "u", "parentUuid": None,
            "message": {"role": role, "content": content}, **extra}  # fmt: skip


def _use(call_id: str, command: str) -> list[dict[str, Any]]:
    return [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": command}}]


def _res(call_id: str, text: str, error: bool = False) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}]


def test_claude_code_runs_follow_prompt_ids_and_subagents_are_runs_of_their_own(
    tmp_path: Path,
) -> None:
    rows = [
        {"type": "queue-operation", "operation": "enqueue", "sessionId": "s1"},
        _cc("user", "first", promptId="p1"),
        _cc("assistant", _use("t1", "make")),
        _cc("user", _res("t1", "ok"), promptId="p1"),
        _cc("assistant", _use("t1", "make")),  # the same block written twice: one call
        {"type": "system", "subtype": "compact_boundary", "sessionId": "s1", "uuid": "b"},
        _cc("user", "This session is being continued", promptId="p1", isCompactSummary=True),
        _cc("assistant", _use("t2", "make")),
        _cc("user", _res("t2", "boom", error=True), promptId="p1"),
        _cc("user", "look around", isSidechain=True, agentId="a7", promptId="p1"),
        _cc("assistant", _use("t3", "ls"), isSidechain=True, agentId="a7"),
        _cc("user", _res("t3", "x"), isSidechain=True, agentId="a7", promptId="p1"),
        _cc("user", "second", promptId="p2"),
        _cc("assistant", _use("t4", "make")),
        _cc("user", _res("t4", "ok"), promptId="p2"),
        {"type": "summary", "summary": "s", "leafUuid": "u"},
    ]
    trajs = list(read_transcripts(_jsonl(tmp_path / "s1.jsonl", rows)))
    by_id = {traj.id: traj for traj in trajs}
    assert set(by_id) == {"s1:turn-1", "s1:turn-2", "s1:agent-a7:turn-1"}
    assert _shape(by_id["s1:turn-1"]) == "RCE"
    assert by_id["s1:turn-1"].calls[1].error == "boom"
    assert [c.params for c in by_id["s1:agent-a7:turn-1"].calls] == [{"command": "ls"}]
    assert _shape(by_id["s1:turn-2"]) == "R"


def test_claude_code_without_prompt_ids_a_user_text_line_starts_a_run(tmp_path: Path) -> None:
    rows = [
        _cc("user", "first"),
        _cc("assistant", _use("t1", "make")),
        _cc("user", _res("t1", "ok")),
        _cc("user", [{"type": "text", "text": "[Request interrupted by user]"}]),
        _cc("user", "<command-message>init</command-message>", isMeta=True),
        _cc("assistant", _use("t2", "make")),
        _cc("user", _res("t2", "ok")),
        _cc("user", [{"type": "text", "text": "second"}]),
        _cc("assistant", _use("t3", "make")),
        _cc("user", _res("t3", "ok")),
    ]
    trajs = list(read_transcripts(_jsonl(tmp_path / "old.jsonl", rows)))
    assert [(t.id, len(t.calls)) for t in trajs] == [("s1:turn-1", 2), ("s1:turn-2", 1)]


def test_claude_code_stream_json_output(tmp_path: Path) -> None:
    # `claude -p --output-format stream-json --verbose`: session_id, no prompt line, the
    # compaction summary marked isSynthetic, subagent messages under parent_tool_use_id.
    def line(kind: str, content: Any, **extra: Any) -> dict[str, Any]:
        row = _cc(kind, content, session_id="st", uuid="u", **extra)
        del row["sessionId"]
        return row

    rows = [
        {"type": "system", "subtype": "init", "session_id": "st", "uuid": "i", "tools": []},
        line("assistant", _use("t1", "make"), parent_tool_use_id=None),
        line("user", _res("t1", "no", error=True), parent_tool_use_id=None),
        {"type": "system", "subtype": "compact_boundary", "session_id": "st", "uuid": "b"},
        line("user", "This session is being continued", isSynthetic=True),
        line("assistant", _use("t2", "make"), parent_tool_use_id=None),
        line("user", _res("t2", "no", error=True), parent_tool_use_id=None),
        line("assistant", _use("t3", "ls"), parent_tool_use_id="t9"),
        line("user", _res("t3", "a"), parent_tool_use_id="t9"),
        {"type": "result", "subtype": "success", "session_id": "st", "result": "done"},
    ]
    path = _jsonl(tmp_path / "stdout.jsonl", rows)
    assert detect(path).format == "claude-code"
    main_run, agent = read_transcripts(path)
    assert (main_run.id, _shape(main_run)) == ("st:turn-1", "ECE")
    assert (agent.id, _shape(agent)) == ("st:agent-t9:turn-1", "R")


def test_claude_code_malformed_lines_name_file_and_line(tmp_path: Path) -> None:
    good = _cc("user", "first", promptId="p1")
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps(good) + "\n" + '{"type": "assistant", "message": {"content"\n')
    with pytest.raises(TranscriptError) as info:
        list(read_transcripts(path))
    assert info.value.line == 2 and str(path) in str(info.value)
    _jsonl(path, [good, {"type": "assistant", "sessionId": "s1", "uuid": "x"}])
    with pytest.raises(TranscriptError, match=r'broken\.jsonl:2: a "assistant" line without a'):
        list(read_transcripts(path, "claude-code"))


# -- Gemini CLI: real samples --------------------------------------------------------------------


def test_gemini_cli_loop_sample() -> None:
    path = GEMINI / "npm-test-loop.jsonl"
    assert detect(path).format == "gemini-cli"
    (traj,) = read_transcripts(path)
    assert traj.id == f"{_first(path)['sessionId']}:turn-1" and traj.format == "gemini-cli"
    assert _shape(traj) == "E" * 8
    assert all(c.tool == "run_shell_command" and c.params == {"command": "npm test"}
               for c in traj.calls)  # fmt: skip
    for call in traj.calls:
        # The exit code marks the failure; the output (what the model read) is the outcome.
        assert call.error == "Exit Code: 254"
        assert isinstance(call.result, str) and "npm error code ENOENT" in call.result
        assert "PGID" not in call.result
    assert len({c.tool_call_id for c in traj.calls}) == 8


def test_gemini_cli_resumed_and_compressed_session() -> None:
    path = GEMINI / "hooked-session-resumed-compressed.jsonl"
    first, second = read_transcripts(path)
    session = _first(path)["sessionId"]
    assert (first.id, second.id) == (f"{session}:turn-1", f"{session}:turn-2")
    # Turn 1: echo hello, a failing command, read_file of a missing file (a tool error).
    assert _shape(first) == "REE"
    assert [c.tool for c in first.calls] == ["run_shell_command"] * 2 + ["read_file"]
    assert first.calls[2].result is not None and first.calls[2].error is not None
    assert first.calls[2].error.startswith("File not found")
    # Turn 2 (after --resume): the loop, compressed twice; the summaries are not prompts.
    assert _shape(second) == "EECEC"
    for item in second.items:
        if isinstance(item, Compaction):
            record = json.loads(path.read_text().splitlines()[(item.line or 0) - 1])
            assert "messages" in record["$set"]


# -- Gemini CLI: edge cases ----------------------------------------------------------------------


def _gemini_call(call_id: str, output: str, status: str = "success") -> dict[str, Any]:
    response = {"output": output} if status == "success" else {"error": output}
    return {"id": call_id, "name": "run_shell_command", "args": {"command": "make"},
            "status": status, "result": [{"functionResponse": {
                "id": call_id, "name": "run_shell_command", "response": response}}]}  # fmt: skip


def test_gemini_cli_legacy_json_document_and_checkpoint(tmp_path: Path) -> None:
    doc = {"sessionId": "g1", "projectHash": "h", "startTime": "t", "lastUpdated": "t",
           "messages": [
               {"id": "m1", "type": "user", "content": "go"},
               {"id": "m2", "type": "gemini", "content": "",
                "toolCalls": [_gemini_call("c1", "Output: x\nExit Code: 0\nProcess Group PGID: 7"),
                              _gemini_call("c2", "denied", status="error")]},
           ]}  # fmt: skip
    path = tmp_path / "session-2026-01-01T00-00-g1.json"
    path.write_text(json.dumps(doc, indent=2))
    (traj,) = read_transcripts(path)
    assert traj.id == "g1:turn-1" and _shape(traj) == "RE"
    assert traj.calls[0].result == "Output: x\nExit Code: 0\n"
    checkpoint = [
        {"role": "user", "parts": [{"text": "go"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {"p": "."}}}]},
        {"role": "user",
         "parts": [{"functionResponse": {"name": "ls", "response": {"output": "a"}}}]},
        {"role": "model", "parts": [{"text": "done"}]},
    ]  # fmt: skip
    saved = tmp_path / "checkpoint-mytag.json"
    saved.write_text(json.dumps({"history": checkpoint}))
    assert detect(saved).format == "gemini-cli"
    (traj,) = read_transcripts(saved)
    assert traj.id == "checkpoint-mytag:turn-1"
    assert [(c.tool, c.params, c.result) for c in traj.calls] == [("ls", {"p": "."}, "a")]


def test_gemini_cli_rollback_is_not_a_compaction(tmp_path: Path) -> None:
    head = {"sessionId": "g2", "projectHash": "h", "startTime": "t", "kind": "main"}
    prompt = {"id": "m1", "type": "user", "content": [{"text": "go"}]}
    calls = {"id": "m2", "type": "gemini", "content": "", "toolCalls": [_gemini_call("c1", "a")]}
    later = {"id": "m3", "type": "gemini", "content": "", "toolCalls": [_gemini_call("c2", "a")]}
    rows = [head, prompt, calls, later, {"$set": {"messages": [prompt, calls]}},
            {"$rewindTo": "m2"}, {"$set": {"lastUpdated": "t"}}]  # fmt: skip
    (traj,) = read_transcripts(_jsonl(tmp_path / "session-x-g2.jsonl", rows))
    assert _shape(traj) == "RR"  # a dropped tail is not a compaction; executed calls stay


def test_gemini_cli_compression_before_a_prompt_arms_the_guard_in_its_turn(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Gemini CLI compresses before it records the new prompt: the compaction belongs to the
    # new turn, whose first three identical outcomes then stop the run (OpenClaw defaults).
    head = {"sessionId": "g3", "projectHash": "h", "startTime": "t", "kind": "main"}
    prompt = {"id": "m1", "type": "user", "content": [{"text": "go"}]}
    first = {"id": "m2", "type": "gemini", "content": "", "toolCalls": [_gemini_call("c0", "a")]}
    summary = {"id": "s1", "type": "user", "content": [{"text": "<state_snapshot>"}]}
    ack = {"id": "s2", "type": "gemini", "content": [{"text": "Got it."}]}
    again = {"id": "m3", "type": "user", "content": [{"text": "again"}]}
    loop = [{"id": f"n{i}", "type": "gemini", "content": "",
             "toolCalls": [_gemini_call(f"c{i}", "same")]} for i in range(1, 5)]  # fmt: skip
    rows = [head, prompt, first, {"$set": {"messages": [summary, ack]}}, again, *loop]
    path = _jsonl(tmp_path / "session-x-g3.jsonl", rows)
    one, two = read_transcripts(path)
    assert (_shape(one), _shape(two)) == ("R", "CRRRR")
    code, doc = _analyze(capsys, str(path))
    assert code == 1
    stopped = doc["trajectories"][1]
    assert stopped["stop"]["detector"] == "compaction_loop_persisted"
    assert stopped["stop"]["index"] == 2 and stopped["calls_saved"] == 1


def test_gemini_cli_malformed_line(tmp_path: Path) -> None:
    path = tmp_path / "session-x.jsonl"
    path.write_text('{"sessionId": "g", "projectHash": "h"}\n[1, 2]\n')
    with pytest.raises(TranscriptError, match=r"session-x\.jsonl:2: expected a JSON object"):
        list(read_transcripts(path))


# -- Codex: real samples -------------------------------------------------------------------------


def test_codex_failing_loop_rollout() -> None:
    path = _only(CODEX, "failing-loop-*.jsonl")
    assert detect(path).format == "codex"
    (traj,) = read_transcripts(path)
    meta = _first(path)["payload"]
    assert traj.id == f"{meta['id']}:turn-1" and traj.format == "codex"
    assert _shape(traj) == "E" * 8
    assert all(c.tool == "exec_command" and c.params == {"cmd": "ls missing_dir"}
               for c in traj.calls)  # fmt: skip
    assert [c.tool_call_id for c in traj.calls] == [f"call_{n}" for n in range(1, 9)]
    # The chunk id and wall time of each output are dropped: 8 identical outcomes.
    assert len({c.result for c in traj.calls}) == 1
    result = traj.calls[0].result
    assert isinstance(result, str) and result.startswith("Process exited with code 2\n")
    assert "Chunk ID" not in result and "Wall time" not in result
    assert "No such file or directory" in result
    assert {c.error for c in traj.calls} == {"exit code 2"}


def test_codex_compaction_rollout_stays_one_turn() -> None:
    path = _only(CODEX, "compaction-loop-*.jsonl")
    (traj,) = read_transcripts(path)  # turn_context is written again after it, same turn id
    assert _shape(traj) == "EEEEECEEE"
    compaction = traj.items[5]
    assert isinstance(compaction, Compaction)
    line = json.loads(path.read_text().splitlines()[(compaction.line or 0) - 1])
    assert line["type"] == "compacted"


def test_codex_resumed_session_turns_are_separate_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # codex exec (ls x3), then codex exec resume (ls x2, pwd): one rollout file, two turn ids.
    path = _only(CODEX, "two-turns-*.jsonl")
    first, second = read_transcripts(path)
    assert (first.id[-7:], second.id[-7:]) == (":turn-1", ":turn-2")
    assert (_shape(first), _shape(second)) == ("EEE", "EER")
    assert [c.params["cmd"] for c in second.calls] == ["ls missing_dir"] * 2 + ["pwd"]
    # Five identical failing calls in a row across the two turns. The first turn's CRITICAL
    # identical results would get the next call blocked in the same run: the second turn's
    # first call runs only if it does not inherit the first turn's history.
    assert len(first.calls) == CRITICAL
    code, doc = _analyze(capsys, str(path), "--set", "profile=recommended")
    assert code == 0
    assert [t["blocks"] for t in doc["trajectories"]] == [0, 0]
    # The first turn reached its last-chance warning (at its last call); the second none.
    assert [t["warnings"] for t in doc["trajectories"]] == [1, 0]
    assert doc["trajectories"][0]["first_warning"]["index"] == CRITICAL - 1


# -- Codex: edge cases ---------------------------------------------------------------------------


def _cx(kind: str, **payload: Any) -> dict[str, Any]:
    return {"timestamp": "t", "type": kind, "payload": payload}


def test_codex_turns_tools_and_legacy_outputs(tmp_path: Path) -> None:
    shell = json.dumps({"output": "boom", "metadata": {"exit_code": 1, "duration_seconds": 0.5}})
    rows = [
        _cx("session_meta", id="cx1", cwd="/w"),
        _cx("event_msg", type="user_message", message="first"),  # an old rollout: no turn ids
        _cx("response_item", type="function_call", name="shell",
            arguments='{"command": ["make"]}', call_id="a"),
        _cx("response_item", type="function_call_output", call_id="a", output=shell),
        _cx("response_item", type="custom_tool_call", name="apply_patch", input="*** Begin",
            call_id="b"),
        _cx("response_item", type="custom_tool_call_output", call_id="b", output="Done!"),
        _cx("response_item", type="local_shell_call", call_id="c",
            action={"type": "exec", "command": ["ls"]}),
        _cx("response_item", type="function_call_output", call_id="c",
            output={"content": "denied", "success": False}),
        _cx("event_msg", type="user_message", message="second"),
        _cx("response_item", type="function_call", name="shell", arguments="{not json",
            call_id="d"),
        _cx("response_item", type="function_call_output", call_id="zz", output="orphan"),
    ]  # fmt: skip
    first, second = read_transcripts(_jsonl(tmp_path / "rollout-x.jsonl", rows))
    assert (first.id, second.id) == ("cx1:turn-1", "cx1:turn-2")
    shell_call, patch, local = first.calls
    assert (shell_call.params, shell_call.result, shell_call.error) == (
        {"command": ["make"]}, "boom", "exit code 1")  # fmt: skip
    assert (patch.tool, patch.params, patch.result) == ("apply_patch", "*** Begin", "Done!")
    assert (local.tool, local.error) == ("local_shell", "denied")
    assert second.calls[0].params == "{not json" and second.orphan_results == 1


def test_codex_malformed_lines(tmp_path: Path) -> None:
    rows = [_cx("session_meta", id="cx"), {"timestamp": "t", "type": "response_item"}]
    path = _jsonl(tmp_path / "rollout-y.jsonl", rows)
    with pytest.raises(
        TranscriptError, match=r'rollout-y\.jsonl:2: a "response_item" line without'
    ):
        list(read_transcripts(path))


# -- loopwarden analyze on ~/.claude/projects ----------------------------------------------------


def _claude_projects(root: Path) -> Path:
    """A ``~/.claude/projects`` tree: the real project folders (sessions, a subagent's
    transcript and its .meta.json) plus files Claude Code keeps there in long-lived homes."""
    projects = root / "projects"
    for scenario in ("failing-loop", "compaction", "subagent-loop"):
        for project in (CLAUDE / scenario).iterdir():
            shutil.copytree(project, projects / project.name)
    project = next(projects.iterdir())
    (project / "sessions-index.json").write_text(json.dumps({"version": 1, "entries": []}))
    (project / "tool-results").mkdir()
    (project / "tool-results" / "abc.txt").write_text("big output")
    return projects


def test_claude_subagent_sample_is_a_run_of_its_own() -> None:
    main_file = _only(CLAUDE / "subagent-loop", "*-*-*-*-*.jsonl")
    agent_file = _only(CLAUDE / "subagent-loop", "agent-*.jsonl")
    assert agent_file.parent.name == "subagents" and agent_file.parent.parent.name == main_file.stem
    (main_run,) = read_transcripts(main_file)
    assert [c.tool for c in main_run.calls] == ["Agent"]
    (agent,) = read_transcripts(agent_file)
    assert agent.id == f"{main_file.stem}:{agent_file.stem}:turn-1"
    assert _shape(agent) == "E" * 6
    assert {c.params["command"] for c in agent.calls} == {"ls config/build.toml"}


def test_analyze_a_claude_projects_tree(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    projects = _claude_projects(tmp_path)
    code, doc = _analyze(capsys, str(projects), "--set", "profile=recommended")
    assert code == 1 and doc["errors"] == []
    assert sorted(Path(s.split(": ")[0]).name for s in doc["skipped"]) == [
        next(projects.rglob("agent-*.meta.json")).name, "sessions-index.json"]  # fmt: skip
    runs = sorted(t["id"].split(":", 1)[1] for t in doc["trajectories"])
    assert runs[:-3] == [next(projects.rglob("agent-*.jsonl")).stem + ":turn-1"]
    assert runs[-3:] == ["turn-1"] * 3
    loops = [t for t in doc["trajectories"] if t["first_block"]]
    assert len(loops) == 3 and {t["format"] for t in loops} == {"claude-code"}
    for traj in loops:
        # The 2nd block stops the run (recommended): every call from the first block is saved.
        assert traj["first_block"]["tool"] == "Bash"
        _assert_blocked_like_recommended(traj)
    # failing-loop: 3 other calls then the loop (11 calls); compaction and subagent: the loop
    # from the first call (8 and 6 calls).
    assert sorted(_loop_start(t) for t in loops) == [0, 0, 3]
    summary = doc["summary"]
    assert summary["trajectories"] == 4 and summary["with_block_or_stop"] == 3
    assert summary["calls_saved"] == sum(t["calls_saved"] for t in doc["trajectories"])
    assert summary["calls_saved"] == sum(t["calls"] - _loop_start(t) - CRITICAL for t in loops)
    main(["analyze", str(projects), "--set", "profile=recommended"])
    text = capsys.readouterr().out
    for traj in loops:
        assert f"{traj['calls_saved']} calls saved" in text


def test_analyze_claude_compaction_loop_with_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # OpenClaw's defaults block nothing this short, but the post-compaction guard stops the run
    # on the 3rd identical outcome after the boundary: the last recorded call would not run.
    code, doc = _analyze(capsys, str(CLAUDE / "compaction"))
    (traj,) = doc["trajectories"]
    assert code == 1
    assert traj["stop"]["detector"] == "compaction_loop_persisted"
    assert traj["stopped"] is True and traj["blocks"] == 0 and traj["first_block"] is None
    assert traj["stop"]["index"] == 6 and traj["calls"] == 8
    assert traj["calls_saved"] == 1 == doc["summary"]["calls_saved"]


def test_analyze_command_prints_the_report_and_nothing_else(tmp_path: Path) -> None:
    # A real process: in-process, pytest's log handler would hide a guard log line that
    # Python's last-resort handler prints to stderr (one per loop event of a big archive).
    out = tmp_path / "report.json"
    argv = [sys.executable, "-m", "loopwarden", "analyze", str(CLAUDE), str(CODEX), str(GEMINI),
            "--set", "profile=recommended", "--output", "json", "--out", str(out)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    # Only the one line that says where the report went (and what exit 1 means).
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"wrote the json report to {out}; exit 1: the guard would")
    doc = json.loads(out.read_text())
    assert doc["errors"] == []
    assert {t["format"] for t in doc["trajectories"] if t["stopped"]} == {
        "claude-code", "codex", "gemini-cli"}  # fmt: skip
    assert doc["summary"]["calls_saved"] > 0


def test_calls_saved_counts_blocked_calls_not_calls_that_ran(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # OpenClaw defaults: the 21st identical call is blocked; the agent then makes 2 different
    # calls (they would run) and repeats the loop twice (blocked again).
    rows = [{"trajectory": "r", "tool": "exec", "args": {"command": "make"}, "result": "1 failing"}
            for _ in range(21)]  # fmt: skip
    rows += [{"trajectory": "r", "tool": "read", "args": {"path": p}, "result": p} for p in "ab"]
    rows += [{"trajectory": "r", "tool": "exec", "args": {"command": "make"}, "result": "1 failing"}
             for _ in range(2)]  # fmt: skip
    code, doc = _analyze(capsys, str(_jsonl(tmp_path / "loop.jsonl", rows)))
    (traj,) = doc["trajectories"]
    assert code == 1 and traj["blocks"] == 3 and traj["stopped"] is False
    assert traj["calls_after_first_block_or_stop"] == 4
    assert traj["calls_saved"] == 3 == doc["summary"]["calls_saved"]


# -- loopwarden analyze on ~/.codex --------------------------------------------------------------


def test_analyze_a_codex_home(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    home = tmp_path / ".codex"
    day = home / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    for scenario in ("failing-loop", "compaction-loop", "two-turns"):
        src = _only(CODEX, f"{scenario}-rollout-*.jsonl")
        shutil.copy(src, day / src.name[src.name.index("rollout-") :])
    _jsonl(home / "history.jsonl", [{"session_id": "x", "ts": 1, "text": "hi"}] * 2)
    (home / "config.toml").write_text('model = "gpt-5"\n')
    (home / "log").mkdir()
    (home / "log" / "codex-tui.log").write_text("log\n")
    code, doc = _analyze(capsys, str(home))
    assert code == 1 and doc["errors"] == []
    assert [Path(s.split(":")[0]).name for s in doc["skipped"]] == ["history.jsonl"]
    assert doc["summary"]["trajectories"] == 4 and doc["summary"]["stopped"] == 1
    (stopped,) = [t for t in doc["trajectories"] if t["stopped"]]
    assert stopped["stop"]["detector"] == "compaction_loop_persisted"
    assert stopped["stop"]["index"] == 7 == stopped["calls"] - 1
    code, doc = _analyze(capsys, str(home / "sessions"), "--set", "profile=recommended")
    blocked = [t for t in doc["trajectories"] if t["first_block"]]
    loops = ("failing-loop", "compaction-loop")
    ids = {next(read_transcripts(_only(CODEX, f"{s}-rollout-*.jsonl"))).id for s in loops}
    assert {t["id"] for t in blocked} == ids
    for traj in blocked:  # both loop from their first call, 8 calls
        assert (_loop_start(traj), traj["calls"]) == (0, 8)
        _assert_blocked_like_recommended(traj)
    assert doc["summary"]["calls_saved"] == sum(t["calls_saved"] for t in blocked)
    assert doc["summary"]["calls_saved"] == 2 * (8 - CRITICAL)


# -- loopwarden analyze on ~/.gemini/tmp ---------------------------------------------------------


def test_analyze_a_gemini_tmp_tree(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = tmp_path / ".gemini" / "tmp"
    for name in ("loop-project", "project"):
        (root / name / "chats").mkdir(parents=True)
        (root / name / ".project_root").write_text(f"/work/{name}")
    shutil.copy(GEMINI / "npm-test-loop.jsonl", root / "loop-project" / "chats")
    shutil.copy(GEMINI / "hooked-session-resumed-compressed.jsonl", root / "project" / "chats")
    logs = [{"sessionId": "s", "messageId": 0, "type": "user", "message": "hi", "timestamp": "t"}]
    (root / "project" / "logs.json").write_text(json.dumps(logs))
    code, doc = _analyze(capsys, str(root.parent), "--set", "profile=recommended")
    assert code == 1 and doc["errors"] == []
    assert [Path(s.split(": ")[0]).name for s in doc["skipped"]] == ["logs.json"]
    assert [(t["format"], t["calls"]) for t in doc["trajectories"]] == [
        ("gemini-cli", 8), ("gemini-cli", 3), ("gemini-cli", 3)]  # fmt: skip
    # npm names a fresh log file in every output; the volatile masking sees through it.
    npm = doc["trajectories"][0]
    assert _loop_start(npm) == 0
    _assert_blocked_like_recommended(npm)
    assert doc["summary"]["with_block_or_stop"] == 1
    assert doc["summary"]["calls_saved"] == npm["calls_saved"] == npm["calls"] - CRITICAL

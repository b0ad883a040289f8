"""``loopwarden hook``: the coding CLIs' real hook payloads in, their own answer format out.

The payloads are the ones Claude Code 2.1, Codex 0.171 and Gemini CLI 0.61 really sent
(tests/data/coding_agents/*/hook-events/, captured against a local fake model); the end-to-end
tests with the CLIs themselves are in tests/coding_agents/. Here the command runs in-process
(``handler.handle``) for the many-call scenarios, and as a real process where stdin, stdout,
the exit code, concurrency and the state file matter.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from loopwarden.hooks import _codex_exit
from loopwarden.hooks import _handler as handler
from loopwarden.hooks._codex_exit import command_failed
from loopwarden.hooks._protocol import STOPPED_TURN, parse_event
from loopwarden.hooks._state import read_problem

from _support import wait_for_hook_server

DATA = Path(__file__).parent / "data" / "coding_agents"

# Where the hooks' default profile acts on one call repeated with one identical (non-empty)
# result, calls counted from 1: once `critical` identical results are in, the next call is
# blocked; the call one before it gets the last-chance warning; the run stops at the block that
# makes `stopAfterBlocks` (a retried blocked call counts, so it is the next one).
CONFIG = handler.hook_config(None, [])
WARNED = CONFIG.consecutive_critical_threshold
BLOCKED = WARNED + 1
STOPPED = BLOCKED + CONFIG.stop_after_blocks - 1


def payload(agent: str, name: str, **changes: Any) -> dict[str, Any]:
    """A captured payload, in one CLI session (the captures come from several)."""
    data: dict[str, Any] = json.loads((DATA / agent / "hook-events" / f"{name}.json").read_text())
    data["session_id"] = "session-1"
    data.update(changes)
    return data


class Hook:
    """One CLI session talking to ``loopwarden hook AGENT`` with a state file in tmp_path."""

    def __init__(self, agent: str, db: Path, overrides: list[str] | None = None) -> None:
        self.agent, self.db, self.overrides = agent, db, overrides or []

    def send(self, event: dict[str, Any]) -> dict[str, Any] | None:
        text = handler.handle(self.agent, json.dumps(event), None, self.overrides, str(self.db))
        return json.loads(text) if text else None


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runs.db"


def _claude_call(n: int, command: str, prompt: str = "p1") -> tuple[dict[str, Any], ...]:
    pre = payload("claude-code", "PreToolUse", prompt_id=prompt, tool_use_id=f"toolu_{n}")
    pre["tool_input"] = {"command": command, "description": f"attempt {n}"}
    post = payload("claude-code", "PostToolUseFailure", prompt_id=prompt, tool_use_id=f"toolu_{n}")
    post["tool_input"] = dict(pre["tool_input"])
    post["error"] = "Exit code 1\nFAIL: 3 tests failed"
    return pre, post


def test_every_captured_payload_parses() -> None:
    kinds = {}
    for agent in ("claude-code", "codex", "gemini-cli"):
        for path in sorted((DATA / agent / "hook-events").glob("*.json")):
            event = parse_event(agent, json.loads(path.read_text()))
            kinds[f"{agent}/{path.stem}"] = event.kind
    assert kinds["claude-code/PreToolUse"] == "before"
    assert kinds["claude-code/PostToolUseFailure"] == "after"
    assert kinds["claude-code/PostCompact"] == "compaction"
    assert kinds["claude-code/SessionStart-compact"] == "compaction"
    assert kinds["claude-code/SessionStart-startup"] == "ignored"
    assert kinds["codex/PostToolUse-failed-command"] == "after"
    assert kinds["codex/UserPromptSubmit"] == "prompt"
    assert kinds["gemini-cli/BeforeAgent"] == "prompt"
    assert kinds["gemini-cli/AfterTool-failing-command"] == "after"
    # Gemini CLI fires PreCompress before every model request: it must not arm the guard.
    assert kinds["gemini-cli/PreCompress"] == "ignored"


def test_runs_are_the_cli_turns_and_outcomes_are_what_the_model_saw() -> None:
    claude = parse_event("claude-code", payload("claude-code", "PostToolUse"))
    assert claude.run_id == payload("claude-code", "PostToolUse")["prompt_id"]
    assert claude.tool_call_id == "toolu_000000000000000000000001"
    assert claude.params == {"command": "echo checking"}  # the description is not the call
    assert "checking" in claude.result["content"][0]["text"]
    codex = parse_event("codex", payload("codex", "PostToolUse-failed-command"))
    assert codex.run_id == payload("codex", "PostToolUse-failed-command")["turn_id"]
    assert codex.result == {"content": [{"type": "text", "text": "oops\n"}]}
    gemini = parse_event("gemini-cli", payload("gemini-cli", "AfterTool-failing-command"))
    assert gemini.run_id is None and gemini.tool_call_id is None
    assert "PGID" not in gemini.result["content"][0]["text"]  # a new number every call
    assert "Exit Code: 1" in gemini.result["content"][0]["text"]
    error = parse_event("gemini-cli", payload("gemini-cli", "AfterTool-tool-error"))
    assert error.failed is True and "File not found" in error.error


def test_each_cli_payload_says_whether_the_call_failed() -> None:
    """``failed``: Claude Code sends a failed call (a non-zero exit included) as
    PostToolUseFailure, so its PostToolUse is a success; Gemini CLI's shell output has an
    ``Exit Code`` line only for a non-zero exit; Codex's payload does not say."""
    failed = {
        (agent, name): parse_event(agent, payload(agent, name)).failed
        for agent, name in [
            ("claude-code", "PostToolUse"),
            ("claude-code", "PostToolUseFailure"),
            ("gemini-cli", "AfterTool-success"),
            ("gemini-cli", "AfterTool-failing-command"),
            ("gemini-cli", "AfterTool-tool-error"),
            ("codex", "PostToolUse"),
            ("codex", "PostToolUse-failed-command"),
        ]
    }
    assert failed == {
        ("claude-code", "PostToolUse"): False,
        ("claude-code", "PostToolUseFailure"): True,
        ("gemini-cli", "AfterTool-success"): False,
        ("gemini-cli", "AfterTool-failing-command"): True,
        ("gemini-cli", "AfterTool-tool-error"): True,
        ("codex", "PostToolUse"): None,
        ("codex", "PostToolUse-failed-command"): None,
    }


def _gemini_shell(content: str) -> bool | None:
    after = payload("gemini-cli", "AfterTool-success")
    after["tool_response"] = {"llmContent": content, "returnDisplay": ""}
    return parse_event("gemini-cli", after).failed


def test_gemini_cli_exit_code_is_read_after_the_output_only() -> None:
    """The ``Exit Code`` line is one of the lines Gemini CLI puts after a command's output: a
    line of the output that reads the same is not the command's exit code."""
    wrap = "<untrusted_context>\n{}\n</untrusted_context>".format
    assert _gemini_shell(wrap("Output: (empty)\nExit Code: 2\nProcess Group PGID: 7")) is True
    assert _gemini_shell("Output: (empty)\nExit Code: 2") is True  # without the wrapper
    assert _gemini_shell(wrap("Output: ok\nSignal: 15\nProcess Group PGID: 7")) is True
    printed = wrap("Output: Exit Code: 2\nExit Code: 3\nall good\nProcess Group PGID: 7")
    assert _gemini_shell(printed) is False
    long_output = wrap("Output: " + "x\n" * 50_000 + "Exit Code: 1\nProcess Group PGID: 7")
    assert _gemini_shell(long_output) is True
    cancelled = "Command was automatically cancelled because it exceeded the timeout"
    assert _gemini_shell(wrap(cancelled)) is True
    # another tool's text says nothing of the call's success
    read = payload("gemini-cli", "AfterTool-success", tool_name="read_file")
    read["tool_response"] = {"llmContent": "Exit Code: 1", "returnDisplay": ""}
    assert parse_event("gemini-cli", read).failed is None


# The commands of codex/capture_exit_codes.py, and whether each one fails (exits non-zero).
CODEX_EXITS = {
    'python3 -c "print(1"': True,
    "sed -n 1,10p nofile1": True,
    "echo hello": False,
    "exit 3": True,
    "true": False,
}


def _codex_exit_captures(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Path]]:
    """Each PostToolUse payload Codex sent, with the rollout cut back to what it held then."""
    folder = DATA / "codex" / "exit-codes"
    [rollout] = folder.glob("rollout-*.jsonl")
    data = rollout.read_bytes()
    for n, line in enumerate((folder / "PostToolUse.jsonl").read_text().splitlines()):
        capture = json.loads(line)
        then = tmp_path / f"rollout-{n}.jsonl"
        then.write_bytes(data[: capture["rollout_bytes"]])
        yield capture["payload"] | {"transcript_path": str(then)}, then


def test_codex_exit_codes_are_in_the_rollout_when_its_hook_runs(tmp_path: Path) -> None:
    """Codex's PostToolUse payload has no exit code, but its rollout holds the command's
    exit code by then: the hook reads it (from the file's tail) for every captured call."""
    found = {}
    for event, rollout in _codex_exit_captures(tmp_path):
        found[event["tool_input"]["command"]] = command_failed(
            str(rollout), event["tool_use_id"], event["turn_id"]
        )
    assert found == CODEX_EXITS


def test_codex_exit_code_unknown_is_left_to_the_guard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the rollout does not say (not written yet, another turn's call, a line longer than
    the tail read, no file, not a file), the answer is None: the guard judges the output."""
    event, rollout = next(_codex_exit_captures(tmp_path))
    call, turn = event["tool_use_id"], event["turn_id"]
    assert command_failed(str(rollout), call, turn) is True
    assert command_failed(str(rollout), call, "another-turn") is None
    assert command_failed(str(rollout), "call_unknown", turn) is None
    data = rollout.read_bytes()
    written = data[: data.rindex(b'"item_completed"')]  # Codex still writing the event
    rollout.write_bytes(written[: written.rindex(b"\n") + 1])
    assert command_failed(str(rollout), call, turn) is None
    rollout.write_bytes(data)
    monkeypatch.setattr(_codex_exit, "TAIL_BYTES", 300)  # shorter than the event's line
    assert command_failed(str(rollout), call, turn) is None
    monkeypatch.undo()
    assert command_failed(str(tmp_path / "missing.jsonl"), call, turn) is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # opening it for reading must not wait for a writer
    assert command_failed(str(fifo), call, turn) is None
    assert command_failed(str(tmp_path), call, turn) is None


def _codex_command_done(rollout: Path, turn_id: str, call_id: str, exit_code: int) -> None:
    """Append what Codex writes to its rollout when a command ends (before PostToolUse): the
    captured ``item_completed`` line of a command, for this turn, call and exit code."""
    [captured] = (DATA / "codex" / "exit-codes").glob("rollout-*.jsonl")
    line = next(
        json.loads(line)
        for line in captured.read_text().splitlines()
        if '"CommandExecution"' in line and '"item_completed"' in line
    )
    line["payload"]["turn_id"] = turn_id
    item = line["payload"]["item"]
    item.update(id=call_id, exit_code=exit_code, status="failed" if exit_code else "completed")
    with rollout.open("a") as out:
        out.write(json.dumps(line, separators=(",", ":")) + "\n")


@pytest.mark.parametrize("exit_code", [1, 0])
def test_codex_varied_calls_are_judged_by_the_exit_code_in_the_rollout(
    db: Path, tmp_path: Path, exit_code: int
) -> None:
    """Ten different commands with one output that quotes each one's own source: failing (the
    rollout says exit code 1), the 4th is warned, the 5th refused, the 6th runs and the 7th
    stops the turn; the same outputs with exit code 0 are ten successes: none is refused."""
    rollout = tmp_path / "rollout.jsonl"
    hook = Hook("codex", db)
    hook.send(payload("codex", "UserPromptSubmit"))
    answers = []
    for n in range(1, 11):
        call = {"tool_use_id": f"call_{n}", "tool_input": {"command": f'python3 -c "print({n}"'}}
        answer = hook.send(payload("codex", "PreToolUse", **call))
        answers.append(answer)
        if answer is not None and "permissionDecision" in answer["hookSpecificOutput"]:
            continue
        after = payload("codex", "PostToolUse", transcript_path=str(rollout), **call)
        _codex_command_done(rollout, after["turn_id"], f"call_{n}", exit_code)
        after["tool_response"] = f'  File "<string>", line 1\n    print({n}\n{SYNTAX_ERROR}'
        hook.send(after)
    became = [_became(answer) for answer in answers]
    if exit_code:
        assert became[:4] == ["ran"] * 3 + ["warned"], became
        ran = ["ran" if kind == "warned" else kind for kind in became]  # the 6th may be warned
        assert ran == ["ran"] * 4 + ["refused", "ran"] + ["stopped"] * 4, became
    else:
        assert became == ["ran"] * 10, became


SYNTAX_ERROR = "         ^\nSyntaxError: '(' was never closed\n"


def _became(answer: dict[str, Any] | None) -> str:
    """What a PreToolUse answer made of the call: ran, warned (and ran), refused, stopped."""
    if answer is None:
        return "ran"
    said = answer["hookSpecificOutput"]
    if "permissionDecision" not in said:
        return "warned" if said["additionalContext"].startswith("WARNING") else "ran"
    stopped = said["permissionDecisionReason"].endswith(STOPPED_TURN.removesuffix("."))
    return "stopped" if stopped else "refused"


def test_claude_code_failing_loop_warn_block_then_stop(db: Path) -> None:
    hook = Hook("claude-code", db)
    hook.send(payload("claude-code", "UserPromptSubmit", prompt_id="p1"))
    answers = []
    for n in range(1, STOPPED + 3):
        pre, post = _claude_call(n, "npm test")
        answer = hook.send(pre)
        answers.append(answer)
        if answer is None or "permissionDecision" not in answer["hookSpecificOutput"]:
            assert hook.send(post) is None
    assert answers[: WARNED - 1] == [None] * (WARNED - 1)
    # The last chance: the call runs, and the model reads why the next one will not.
    warning = answers[WARNED - 1]["hookSpecificOutput"]
    assert warning["hookEventName"] == "PreToolUse" and "permissionDecision" not in warning
    assert warning["additionalContext"].startswith(
        f"WARNING: You have called Bash {WARNED - 1} times"
    )
    assert "will be blocked" in warning["additionalContext"]
    block = answers[BLOCKED - 1]["hookSpecificOutput"]
    assert block["permissionDecision"] == "deny"
    assert block["permissionDecisionReason"].startswith(
        f"CRITICAL: Called Bash {BLOCKED - 1} times"
    )
    assert not block["permissionDecisionReason"].endswith(STOPPED_TURN)
    # The recommended profile's second block stops the run: every later call is denied.
    assert len(answers[STOPPED - 1 :]) == 3
    for later in answers[STOPPED - 1 :]:
        assert later["hookSpecificOutput"]["permissionDecision"] == "deny"
        assert later["hookSpecificOutput"]["permissionDecisionReason"].endswith(STOPPED_TURN)
    # A new prompt is a new run: the same command may run again.
    hook.send(payload("claude-code", "UserPromptSubmit", prompt_id="p2"))
    assert hook.send(_claude_call(9, "npm test", prompt="p2")[0]) is None


@pytest.mark.parametrize(
    ("file_block", "overrides", "first_denied"),
    [
        ({"enabled": True}, [], 21),  # an OpenClaw config runs exactly as OpenClaw: the 21st
        ({}, [], 21),  # the hooks turn detection on when a file leaves `enabled` out
        ({"profile": "recommended"}, [], BLOCKED),  # a file that names the profile
        (None, ["consecutiveCriticalThreshold=5"], 6),  # --set alone: over the default profile
        (None, ["profile=openclaw"], 21),
    ],
)
def test_a_config_file_means_what_it_says(
    tmp_path: Path, file_block: dict[str, Any] | None, overrides: list[str], first_denied: int
) -> None:
    path = None
    if file_block is not None:
        path = tmp_path / "openclaw.json"
        path.write_text(json.dumps({"tools": {"loopDetection": file_block}}))
    denied = None
    for n in range(1, 23):
        pre, post = _claude_call(n, "npm test")
        text = handler.handle(
            "claude-code", json.dumps(pre), path and str(path), overrides, str(tmp_path / "runs.db")
        )
        if text and json.loads(text)["hookSpecificOutput"].get("permissionDecision") == "deny":
            denied = n
            break
        handler.handle(
            "claude-code",
            json.dumps(post),
            path and str(path),
            overrides,
            str(tmp_path / "runs.db"),
        )
    assert denied == first_denied


def test_claude_code_post_compaction_guard_ends_the_run(db: Path) -> None:
    hook = Hook("claude-code", db, ["profile=openclaw"])
    outcomes = []
    for n in range(1, 4):
        pre, post = _claude_call(n, "npm test")
        assert hook.send(pre) is None
        outcomes.append(hook.send(post))
    hook.send(payload("claude-code", "PostCompact", prompt_id="p1"))
    hook.send(payload("claude-code", "SessionStart-compact", prompt_id="p1"))  # arms again: same
    for n in range(4, 7):
        pre, post = _claude_call(n, "npm test")
        assert hook.send(pre) is None
        outcomes.append(hook.send(post))
    assert outcomes[:5] == [None] * 5
    # After a failed call Claude Code ignores "continue": false: the reason goes in as context,
    # and the next call of the run is denied with it.
    reason = outcomes[5]["hookSpecificOutput"]["additionalContext"]
    assert reason.startswith("CRITICAL: tool Bash repeated 3 times")
    assert reason.endswith(STOPPED_TURN)
    # Any later call of the turn, whatever it is, is refused with the same reason.
    denied = hook.send(_claude_call(7, "git status")[0])
    assert denied["hookSpecificOutput"]["permissionDecisionReason"] == reason


def test_claude_code_stop_after_a_successful_call_ends_the_run(db: Path) -> None:
    hook = Hook("claude-code", db, ["profile=openclaw"])
    hook.send(payload("claude-code", "PostCompact", prompt_id="p1"))
    answers = []
    for n in range(3):
        post = payload("claude-code", "PostToolUse", prompt_id="p1", tool_use_id=f"t{n}")
        hook.send(payload("claude-code", "PreToolUse", prompt_id="p1", tool_use_id=f"t{n}"))
        answers.append(hook.send(post))
    assert answers[:2] == [None, None]
    assert answers[2]["continue"] is False
    # the user is told (Claude Code shows stopReason and systemMessage to the user, not the model)
    assert answers[2]["stopReason"] == answers[2]["systemMessage"]
    assert answers[2]["systemMessage"].startswith(
        "loopwarden stopped the turn at a Bash call: CRITICAL: tool Bash repeated 3 times"
    )


def test_codex_answers_only_with_fields_codex_accepts(db: Path) -> None:
    hook = Hook("codex", db)
    hook.send(payload("codex", "UserPromptSubmit"))
    answers = []
    for n in range(STOPPED + 1):
        pre = payload("codex", "PreToolUse", tool_use_id=f"call_{n}")
        answer = hook.send(pre)
        answers.append(answer)
        if answer is None or "permissionDecision" not in answer["hookSpecificOutput"]:
            post = payload("codex", "PostToolUse-failed-command", tool_use_id=f"call_{n}")
            post["tool_input"] = pre["tool_input"]
            hook.send(post)
    # Codex discards a whole answer that has any other field (a deny next to "continue":
    # false lets the command run): only hookSpecificOutput (and the user's systemMessage with a
    # refusal), and never "allow".
    assert answers[: WARNED - 1] == [None] * (WARNED - 1)
    assert set(answers[WARNED - 1]) == {"hookSpecificOutput"}
    for answer in answers[BLOCKED - 1 :]:
        assert set(answer) == {"hookSpecificOutput", "systemMessage"}
        # Codex writes "<reason>. Command: <cmd>": the reason must not end with a full stop
        assert not answer["hookSpecificOutput"]["permissionDecisionReason"].endswith(".")
    assert set(answers[WARNED - 1]["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
    for denied in answers[BLOCKED - 1 :]:  # the block, the stop and a call after the stop
        assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert answers[STOPPED - 1]["hookSpecificOutput"]["permissionDecisionReason"].endswith(
        STOPPED_TURN.removesuffix(".")
    )


def test_codex_post_compaction_stop_replaces_the_output(db: Path) -> None:
    hook = Hook("codex", db, ["profile=openclaw"])
    hook.send(payload("codex", "PostCompact"))
    answers = [hook.send(payload("codex", "PostToolUse", tool_use_id=f"c{n}")) for n in range(3)]
    assert set(answers[2]) == {"decision", "reason", "systemMessage"}
    assert answers[2]["decision"] == "block"
    assert answers[2]["systemMessage"].startswith("loopwarden stopped the turn at a Bash call")
    assert answers[2]["reason"].startswith("CRITICAL: tool Bash repeated 3 times")
    assert answers[2]["reason"].endswith(STOPPED_TURN)


def test_gemini_cli_warns_after_the_call_and_stops_the_run(db: Path) -> None:
    hook = Hook("gemini-cli", db)
    hook.send(payload("gemini-cli", "BeforeAgent"))
    before = payload("gemini-cli", "BeforeTool", tool_input={"command": "npm test"})
    after = payload("gemini-cli", "AfterTool-failing-command", tool_input={"command": "npm test"})
    seen = []
    for _ in range(STOPPED + 1):
        answer = hook.send(before)
        seen.append(("before", answer))
        if answer is None:
            seen.append(("after", hook.send(after)))
    after_answers = [a for kind, a in seen if kind == "after"]
    # Gemini CLI ignores context given before a tool: the warning comes with the result.
    assert len(after_answers) == BLOCKED - 1  # the calls that ran
    assert after_answers[: WARNED - 1] == [None] * (WARNED - 1)
    assert after_answers[WARNED - 1]["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert after_answers[WARNED - 1]["hookSpecificOutput"]["additionalContext"].startswith(
        "WARNING"
    )
    # Every call that did not run was denied before it, and nothing else was denied.
    denials = [kind for kind, a in seen if a and a.get("decision") == "deny"]
    assert denials == ["before"] * (STOPPED + 1 - len(after_answers))
    blocks = [a for kind, a in seen if kind == "before" and a]
    assert "continue" not in blocks[0]
    assert set(blocks[0]) == {"decision", "reason", "systemMessage"}
    assert blocks[0]["systemMessage"].startswith("loopwarden refused a run_shell_command call: ")
    assert blocks[1]["decision"] == "deny" and blocks[1]["continue"] is False
    assert blocks[1]["stopReason"] == blocks[1]["reason"]
    # Gemini CLI gives no turn id: a new BeforeAgent is a new run.
    hook.send(payload("gemini-cli", "BeforeAgent"))
    assert hook.send(before) is None


def test_duplicate_hook_processes_count_a_call_once(db: Path) -> None:
    hook = Hook("claude-code", db)
    for n in range(1, WARNED):
        pre, post = _claude_call(n, "npm test")
        # The same event twice (loopwarden installed in two settings files): one call.
        assert hook.send(pre) is None and hook.send(pre) is None
        hook.send(post)
        hook.send(post)
    last_chance, post = _claude_call(WARNED, "npm test")
    warning = hook.send(last_chance)
    assert warning["hookSpecificOutput"]["additionalContext"].startswith(
        f"WARNING: You have called Bash {WARNED - 1} times"
    )
    assert hook.send(last_chance) is None  # the model is warned once, not once per copy
    hook.send(post)
    hook.send(post)
    blocked = _claude_call(BLOCKED, "npm test")[0]
    block = hook.send(blocked)
    assert block["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert not block["hookSpecificOutput"]["permissionDecisionReason"].endswith(STOPPED_TURN)
    assert hook.send(blocked) == block  # every copy refuses the call
    # One record per call: the ones that ran and the refused one (countBlockedCalls).
    (data,) = sqlite3.connect(db).execute("SELECT data FROM sessions").fetchone()
    assert len(json.loads(data)["history"]) == BLOCKED


def test_a_subagent_is_a_run_of_its_own(db: Path) -> None:
    hook = Hook("claude-code", db)
    captured = payload("claude-code", "PreToolUse-subagent", prompt_id="p1")
    assert captured["agent_id"] and parse_event("claude-code", captured).subagent
    for n in range(1, WARNED + 1):  # the main thread, up to its last-chance warning
        pre, post = _claude_call(n, "npm test")
        answer = hook.send(pre)
        hook.send(post)
    assert "additionalContext" in answer["hookSpecificOutput"]
    # The subagent's first identical call is its own first, in its own run.
    sub_pre, sub_post = _claude_call(10, "npm test")
    sub_pre["agent_id"] = sub_post["agent_id"] = captured["agent_id"]
    assert hook.send(sub_pre) is None
    hook.send(sub_post)
    hook.send({**payload("claude-code", "SubagentStop", prompt_id="p1"), "agent_id": "x"})
    # The main thread's history is untouched by the subagent: its next call is blocked.
    block = hook.send(_claude_call(BLOCKED, "npm test")[0])
    assert block["hookSpecificOutput"]["permissionDecision"] == "deny"


# -- as a real process ----------------------------------------------------------------------


def run_hook(
    agent: str, stdin: str, env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwarden", "hook", agent, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def state_bytes(folder: Path) -> bytes:
    """Every byte of the state folder's files (not of the hook server's socket)."""
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    yield {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def test_process_answers_on_stdout_and_keeps_state_in_xdg_state_home(
    tmp_path: Path, env: dict[str, str]
) -> None:
    for n in range(1, WARNED + 1):
        pre, post = _claude_call(n, "npm test")
        done = run_hook("claude-code", json.dumps(pre), env)
        assert done.returncode == 0 and done.stderr == ""
        if n < WARNED:
            assert done.stdout == ""
        run_hook("claude-code", json.dumps(post), env)
    assert "WARNING" in json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    state = tmp_path / "state" / "loopwarden" / "runs.db"
    assert state.is_file()
    # Privacy: the state file keeps names, hashes and counts, never the command or its output.
    raw = state_bytes(state.parent)
    assert b"npm test" not in raw and b"FAIL: 3 tests" not in raw


def test_concurrent_processes_lose_no_call(tmp_path: Path, env: dict[str, str]) -> None:
    calls = [_claude_call(n, f"echo {n}")[0] for n in range(12)]
    with ThreadPoolExecutor(max_workers=12) as pool:
        done = list(pool.map(lambda c: run_hook("claude-code", json.dumps(c), env), calls))
    assert [d.returncode for d in done] == [0] * 12
    assert [d.stderr for d in done] == [""] * 12
    conn = sqlite3.connect(tmp_path / "state" / "loopwarden" / "runs.db")
    (data,) = conn.execute("SELECT data FROM sessions").fetchone()
    history = json.loads(data)["history"]
    assert len(history) == 12
    assert len({record["args_hash"] for record in history}) == 12  # every signature once


@pytest.mark.parametrize(
    ("stdin", "says"),
    [
        ("{not json", "is not JSON"),
        ('["a list"]', "must be a JSON object"),
        ('{"hook_event_name": "PreToolUse"}', "'session_id' must be a non-empty string"),
        ('{"hook_event_name": "Notification", "session_id": "s"}', "'Notification'"),
    ],
)
def test_bad_events_fail_open_with_one_line(stdin: str, says: str, env: dict[str, str]) -> None:
    done = run_hook("claude-code", stdin, env)
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and says in done.stderr
    assert done.stderr.startswith("loopwarden hook claude-code: ")


def test_corrupt_state_file_fails_open_tells_the_user_once_and_hooks_status_can_see_it(
    tmp_path: Path, env: dict[str, str]
) -> None:
    state = tmp_path / "state" / "loopwarden" / "runs.db"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"this is not a database" * 100)
    before = state.read_bytes()
    done = run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env)
    assert done.returncode == 0
    assert done.stderr.count("\n") == 1 and "not a" in done.stderr
    # The user is told where Claude Code shows it, once per session; the call proceeds.
    told = json.loads(done.stdout)
    assert (
        set(told) == {"systemMessage"} and "not a usable SQLite database" in told["systemMessage"]
    )
    again = run_hook("claude-code", json.dumps(_claude_call(2, "ls")[0]), env)
    assert again.returncode == 0 and again.stdout == "" and "not a" in again.stderr
    other = _claude_call(3, "ls")[0] | {"session_id": "session-2"}
    assert "systemMessage" in json.loads(run_hook("claude-code", json.dumps(other), env).stdout)
    assert state.read_bytes() == before
    # What `hooks status` reads: the problem, the file, and who was told.
    problem = read_problem(state)
    assert problem is not None and "not a usable SQLite database" in problem["problem"]
    assert problem["db"] == str(state) and problem["count"] == 3
    assert problem["told"] == ["claude-code:session-1", "claude-code:session-2"]
    # Moved away: the next event starts a fresh file and the problem is gone.
    state.rename(state.with_name("broken.db"))
    fixed = run_hook("claude-code", json.dumps(_claude_call(4, "ls")[0]), env)
    assert fixed.returncode == 0 and fixed.stdout == "" and fixed.stderr == ""
    assert read_problem(state) is None


def test_locked_state_file_fails_open(tmp_path: Path, env: dict[str, str]) -> None:
    first = run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env)
    assert first.returncode == 0
    state = tmp_path / "state" / "loopwarden" / "runs.db"
    holder = sqlite3.connect(state, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        done = run_hook("claude-code", json.dumps(_claude_call(2, "ls")[0]), env)
    finally:
        holder.execute("ROLLBACK")
    # A lock held too long is one call's problem, not a broken state: nothing to tell.
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "locked" in done.stderr
    assert read_problem(state) is None
    # What was recorded before is still there.
    data = sqlite3.connect(state).execute("SELECT data FROM sessions").fetchone()[0]
    assert len(json.loads(data)["history"]) == 1


def test_unreadable_config_fails_open(tmp_path: Path, env: dict[str, str]) -> None:
    done = run_hook(
        "codex", json.dumps(payload("codex", "PreToolUse")), env, "--config", "/nonexistent.json"
    )
    assert done.returncode == 0 and done.stdout == ""
    assert "config" in done.stderr and done.stderr.count("\n") == 1


def test_runs_list_shows_why_a_call_was_blocked(tmp_path: Path, env: dict[str, str]) -> None:
    for n in range(1, 6):
        pre, post = _claude_call(n, "npm test")
        answer = run_hook("claude-code", json.dumps(pre), env).stdout
        if "deny" not in answer:
            run_hook("claude-code", json.dumps(post), env)
    listing = subprocess.run(
        [sys.executable, "-m", "loopwarden", "runs", "list", "--blocked"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    assert "claude-code:" in listing and "p1" in listing


def test_sessions_unused_for_a_week_are_forgotten_at_a_new_turn(db: Path) -> None:
    old = Hook("claude-code", db)
    old.send(payload("claude-code", "UserPromptSubmit", session_id="old", prompt_id="p0"))
    old.send(_claude_call(1, "ls")[0] | {"session_id": "old"})
    conn = sqlite3.connect(db, isolation_level=None)
    week_ago = 8 * 24 * 3600
    for table in ("sessions", "hook_sessions"):
        conn.execute(f"UPDATE {table} SET updated_at = updated_at - ?", (week_ago,))
    Hook("claude-code", db).send(payload("claude-code", "UserPromptSubmit", prompt_id="p1"))
    keys = {
        table: [k for (k,) in conn.execute(f"SELECT key FROM {table}")]
        for table in ("sessions", "hook_sessions")
    }
    assert keys == {
        "sessions": ["claude-code:session-1"],
        "hook_sessions": ["claude-code:session-1"],
    }


# -- hostile input: the call always proceeds, nothing is lost -------------------------------


def test_deeply_nested_stdin_fails_open_without_a_traceback(env: dict[str, str]) -> None:
    done = run_hook("claude-code", "[" * 100_000, env)
    assert done.returncode == 0 and done.stdout == ""
    assert (
        done.stderr == "loopwarden hook claude-code: the hook event on stdin is nested too "
        "deeply to read; the call proceeds\n"
    )


def test_invalid_utf8_under_a_strict_locale_is_still_guarded(env: dict[str, str]) -> None:
    strict = {**env, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    strict.pop("PYTHONIOENCODING", None)
    answers = []
    for n in range(1, BLOCKED + 1):
        pre, post = _claude_call(n, "npm test")
        raw = json.dumps(pre).replace("npm test", "npm t\\u00e9st").encode()
        raw = raw.replace(
            b'"session-1"', b'"session-\\xff"'.decode("unicode_escape").encode("latin-1")
        )
        done = subprocess.run(
            [sys.executable, "-m", "loopwarden", "hook", "claude-code"],
            input=raw,
            capture_output=True,
            env=strict,
            timeout=60,
        )
        assert done.returncode == 0 and done.stderr == b"", done.stderr
        answers.append(done.stdout)
        post_raw = json.dumps(post).replace("npm test", "npm t\\u00e9st").encode()
        post_raw = post_raw.replace(b'"session-1"', b'"session-\xff"')
        subprocess.run(
            [sys.executable, "-m", "loopwarden", "hook", "claude-code"],
            input=post_raw,
            capture_output=True,
            env=strict,
            timeout=60,
            check=True,
        )
    # The same session (its id read with U+FFFD for the bad byte) and the same command each time.
    assert answers[: WARNED - 1] == [b""] * (WARNED - 1)
    block = json.loads(answers[BLOCKED - 1])["hookSpecificOutput"]
    assert block["permissionDecision"] == "deny"


def test_a_lone_surrogate_in_a_tool_name_is_answered_and_warnings_are_kept(
    env: dict[str, str],
) -> None:
    answers = []
    for n in range(1, BLOCKED + 1):
        pre, post = (
            json.dumps(e | {"tool_name": "Ba\ud800sh", "tool_input": {"command": "npm test"}})
            for e in _claude_call(n, "npm test")
        )
        assert "\\ud800" in pre  # what the CLI sends: an escape, valid JSON
        done = run_hook("claude-code", pre, env)
        assert done.returncode == 0 and done.stderr == ""
        answers.append(done.stdout)
        assert run_hook("claude-code", post, env).returncode == 0
    warning = json.loads(answers[WARNED - 1])["hookSpecificOutput"]["additionalContext"]
    assert warning.startswith(f"WARNING: You have called Ba\ufffdsh {WARNED - 1} times")
    block = json.loads(answers[BLOCKED - 1])["hookSpecificOutput"]
    assert (
        block["permissionDecision"] == "deny" and "Ba\ufffdsh" in block["permissionDecisionReason"]
    )


def test_a_huge_tool_output_is_hashed_in_time_and_compared_exactly(db: Path) -> None:
    hook = Hook("claude-code", db)
    big = "x" * (handler.MAX_TEXT_CHARS * 8)
    answers = []
    for n, output in enumerate([big, big, big + "y", big + "y"], start=1):
        pre = payload("claude-code", "PreToolUse", tool_use_id=f"t{n}")
        answers.append(hook.send(pre))
        post = payload("claude-code", "PostToolUse", tool_use_id=f"t{n}")
        post["tool_response"] = {"stdout": output, "stderr": ""}
        hook.send(post)
    (data,) = sqlite3.connect(db).execute("SELECT data FROM sessions").fetchone()
    results = [record["result_hash"] for record in json.loads(data)["history"]]
    # Equal outputs compare equal, a change past the part kept compares different.
    assert results[0] == results[1] and results[2] == results[3] and results[1] != results[2]


def test_an_event_over_the_size_cap_is_drained_and_the_call_proceeds(
    env: dict[str, str],
) -> None:
    post = payload("claude-code", "PostToolUse")
    post["tool_response"] = {"stdout": "x" * (handler.MAX_EVENT_BYTES + 10), "stderr": ""}
    done = run_hook("claude-code", json.dumps(post), env)
    assert done.returncode == 0 and done.stdout == ""
    assert "larger than 16 MiB" in done.stderr and done.stderr.count("\n") == 1


# -- batches: the calls of one model response ---------------------------------------------------


def _parallel(hook: Hook, n: int, turn: str, command: str = "npm test") -> list[Any]:
    """n identical calls of one model response: every PreToolUse, then every outcome."""
    pres = [_claude_call(i, command, prompt=turn) for i in range(n)]
    pres = [
        (pre | {"tool_use_id": f"{turn}-{i}"}, post | {"tool_use_id": f"{turn}-{i}"})
        for i, (pre, post) in enumerate(pres)
    ]
    answers = [hook.send(pre) for pre, _ in pres]
    for (_, post), answer in zip(pres, answers, strict=True):
        if answer is None or "permissionDecision" not in answer["hookSpecificOutput"]:
            hook.send(post)
    return answers


def _denied(answer: Any) -> bool:
    return answer is not None and answer["hookSpecificOutput"].get("permissionDecision") == "deny"


def test_identical_parallel_calls_are_judged_as_if_one_after_another(db: Path) -> None:
    hook = Hook("claude-code", db)
    answers = _parallel(hook, 8, "p1")
    ran = [a for a in answers if not _denied(a)]
    # As many run as one at a time (the block comes at the same count), the rest are refused,
    # and the blocks of one response count as one: none of them stops the run.
    assert len(ran) == BLOCKED - 1
    assert all(_denied(a) for a in answers[BLOCKED - 1 :])
    assert not any(
        a["hookSpecificOutput"]["permissionDecisionReason"].endswith(STOPPED_TURN)
        for a in answers[BLOCKED - 1 :]
    )
    # The model read the refusals; its next response asks again: that is the second block.
    again = hook.send(_claude_call(99, "npm test")[0])
    assert again["hookSpecificOutput"]["permissionDecisionReason"].endswith(STOPPED_TURN)


def test_parallel_hook_processes_of_one_response_are_one_batch(
    tmp_path: Path, env: dict[str, str]
) -> None:
    calls = [_claude_call(n, "npm test")[0] for n in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        done = list(pool.map(lambda c: run_hook("claude-code", json.dumps(c), env), calls))
    assert all(d.returncode == 0 and d.stderr == "" for d in done)
    denied = [d for d in done if "deny" in d.stdout]
    assert len(done) - len(denied) == BLOCKED - 1


def test_a_reused_tool_call_id_never_gets_an_old_answer(db: Path) -> None:
    hook = Hook("codex", db)
    hook.send(payload("codex", "UserPromptSubmit", turn_id="t1"))
    first = []
    for n in range(1, BLOCKED + 1):  # Codex numbers the calls of each turn call_1, call_2, ...
        pre = payload("codex", "PreToolUse", turn_id="t1", tool_use_id=f"call_{n}")
        first.append(hook.send(pre))
        post = payload("codex", "PostToolUse-failed-command", turn_id="t1", tool_use_id=f"call_{n}")
        post["tool_input"] = pre["tool_input"]
        hook.send(post)
    assert _denied(first[BLOCKED - 1])
    # The next turn reuses the id of the refused call for another command: it runs.
    hook.send(payload("codex", "UserPromptSubmit", turn_id="t2"))
    other = payload("codex", "PreToolUse", turn_id="t2", tool_use_id=f"call_{BLOCKED}")
    other["tool_input"] = {"command": "ls dir4"}
    assert hook.send(other) is None
    # Within a turn too: the same id for a different call is a different call.
    same_id = payload("codex", "PreToolUse", turn_id="t2", tool_use_id=f"call_{BLOCKED}")
    same_id["tool_input"] = {"command": "ls dir5"}
    assert hook.send(same_id) is None


# -- privacy on a shared machine -----------------------------------------------------------------


def test_state_is_private_and_its_signatures_cannot_be_confirmed_by_guessing(
    tmp_path: Path, env: dict[str, str]
) -> None:
    from loopwarden.core.canonical import _hash_keyed, hash_tool_call

    command = 'curl -H "Authorization: Bearer s3cret"'
    for n in range(1, 3):
        pre, post = _claude_call(n, command)
        assert run_hook("claude-code", json.dumps(pre), env).returncode == 0
        assert run_hook("claude-code", json.dumps(post), env).returncode == 0
    folder = tmp_path / "state" / "loopwarden"
    assert folder.stat().st_mode & 0o777 == 0o700
    modes = {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()}
    assert set(modes.values()) == {0o600}, modes
    assert "hook.key" in modes
    # The stored signature is keyed: hashing the guessed command does not find it.
    guess = hash_tool_call("Bash", {"command": command})
    raw = state_bytes(folder)
    assert guess.split(":")[1].encode() not in raw
    (data,) = sqlite3.connect(folder / "runs.db").execute("SELECT data FROM sessions").fetchone()
    stored = {r["args_hash"] for r in json.loads(data)["history"]}
    assert len(stored) == 1 and stored != {guess}
    assert not _hash_keyed()  # this process (the library) still hashes plainly


def test_keyed_signatures_change_no_decision(db: Path) -> None:
    # The same loop through the hook (keyed) and through the library (plain SHA-256).
    from loopwarden.guard import LoopGuard

    hook = Hook("claude-code", db)
    guard = LoopGuard(CONFIG)
    for n in range(1, STOPPED + 1):
        pre, post = _claude_call(n, "npm test")
        answer = hook.send(pre)
        decision = guard.before_tool_call("s", "Bash", {"command": "npm test"}, run_id="p1")
        expected = {"allow": None, "warn": "additionalContext"}.get(decision.action, "deny")
        got = None if answer is None else ("deny" if _denied(answer) else "additionalContext")
        assert got == expected, (n, decision.action, answer)
        if decision.allowed:
            hook.send(post)
            guard.after_tool_call(
                "s", "Bash", {"command": "npm test"}, error=post["error"], failed=True, run_id="p1"
            )


def test_old_world_readable_state_is_made_private(tmp_path: Path, env: dict[str, str]) -> None:
    folder = tmp_path / "state" / "loopwarden"
    folder.mkdir(parents=True)
    assert run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env).stderr == ""
    # As an older loopwarden left it, with a reader holding the -wal and -shm files open.
    reader = sqlite3.connect(folder / "runs.db")
    reader.execute("SELECT count(*) FROM sessions").fetchone()
    files = [folder / name for name in ("runs.db", "runs.db-wal", "runs.db-shm")]
    for path in files:
        path.chmod(0o644)
    folder.chmod(0o755)
    try:
        assert run_hook("claude-code", json.dumps(_claude_call(2, "ls")[0]), env).stderr == ""
        assert folder.stat().st_mode & 0o777 == 0o700
        assert [path.stat().st_mode & 0o777 for path in files] == [0o600] * 3
    finally:
        reader.close()


def test_a_symlinked_state_folder_is_refused_and_the_call_proceeds(
    tmp_path: Path, env: dict[str, str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "loopwarden").symlink_to(elsewhere)
    prompt = payload("claude-code", "UserPromptSubmit", prompt_id="p1")
    told = run_hook("claude-code", json.dumps(prompt), env)
    assert told.returncode == 0 and "symbolic link" in told.stderr
    assert "symbolic link" in json.loads(told.stdout)["systemMessage"]
    done = run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env)
    assert done.returncode == 0 and done.stdout == "" and "symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == []  # nothing written through the link


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder another user's needs root")
def test_a_state_folder_of_another_user_is_not_adopted(tmp_path: Path, env: dict[str, str]) -> None:
    folder = tmp_path / "state" / "loopwarden"
    folder.mkdir(parents=True)
    os.chown(folder, 4242, 4242)
    done = run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env)
    assert done.returncode == 0 and "belongs to another user (uid 4242)" in done.stderr
    assert list(folder.iterdir()) == []


# -- the resident hook server ---------------------------------------------------------------------


def _loop_through(env: dict[str, str], started: Path | None = None) -> list[tuple[str, str]]:
    """A failing loop to its stop, as processes; (stdout, stderr) of every event."""
    seen = []
    for n in range(1, STOPPED + 2):
        pre, post = _claude_call(n, "npm test")
        for event in (pre, post):
            done = run_hook("claude-code", json.dumps(event), env)
            assert done.returncode == 0
            seen.append((done.stdout, done.stderr))
            if started is not None and n == 1:
                wait_for_hook_server(started)  # every later event goes through it
                started = None
    return seen


def test_the_server_answers_exactly_as_the_hook_alone(tmp_path: Path) -> None:
    served = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "a"), "LOOPWARDEN_HOOK_SERVER": "1"}
    alone = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "b"), "LOOPWARDEN_HOOK_SERVER": "0"}
    through_server = _loop_through(served, started=tmp_path / "a")
    assert _loop_through(alone) == through_server
    assert any("deny" in out for out, _ in through_server)
    assert not list((tmp_path / "b" / "loopwarden").glob("hookd-*"))


def test_a_dead_server_is_replaced_and_the_hook_works_alone_meanwhile(tmp_path: Path) -> None:
    import signal
    import socket

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "LOOPWARDEN_HOOK_SERVER": "1"}
    assert run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env).stderr == ""
    path = wait_for_hook_server(tmp_path / "state")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(path))
        pid = int.from_bytes(
            probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)[:4], sys.byteorder
        )
    os.kill(pid, signal.SIGKILL)  # its socket stays behind, with nobody listening
    answers = []
    for n in range(2, 2 + WARNED):
        pre, post = _claude_call(n, "npm test")
        done = run_hook("claude-code", json.dumps(pre), env)
        assert done.returncode == 0 and done.stderr == ""
        answers.append(done.stdout)
        run_hook("claude-code", json.dumps(post), env)
    assert "WARNING" in answers[-1] and answers[:-1] == [""] * (WARNED - 1)
    wait_for_hook_server(tmp_path / "state")  # a new one took the socket over


def test_the_server_applies_each_hook_s_own_settings(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "LOOPWARDEN_HOOK_SERVER": "1"}
    run_hook("claude-code", json.dumps(_claude_call(1, "ls")[0]), env)
    wait_for_hook_server(tmp_path / "state")
    # A relative --db and --config are the hook's own working folder's, not the server's.
    work = tmp_path / "project"
    work.mkdir()
    block = {"profile": "recommended", "consecutiveCriticalThreshold": BLOCKED + 2}
    (work / "lw.json").write_text(json.dumps({"tools": {"loopDetection": block}}))
    args = ["--config", "lw.json", "--db", "own.db"]
    answers = []
    for n in range(2, 8):
        pre, post = _claude_call(n, "npm test")
        done = run_hook("claude-code", json.dumps(pre), env, *args, cwd=work)
        assert done.returncode == 0 and done.stderr == ""
        answers.append(done.stdout)
        run_hook("claude-code", json.dumps(post), env, *args, cwd=work)
    assert (work / "own.db").is_file()
    # The config's threshold, not the default one: the call the default blocks runs.
    assert not any("deny" in a for a in answers)
    assert any("WARNING" in a for a in answers), answers


def test_keyed_signatures_keep_the_grace_of_a_silent_result(db: Path) -> None:
    # A command that succeeds without output gets one more try than one that prints the same
    # text each time: the silent result is recognised by its (keyed) hash.
    def allowed_before_the_block(output: str, session: str) -> int:
        hook = Hook("codex", db)
        for n in range(1, 10):
            pre = payload("codex", "PreToolUse", session_id=session, tool_use_id=f"c{n}")
            if _denied(hook.send(pre)):
                return n - 1
            post = payload("codex", "PostToolUse", session_id=session, tool_use_id=f"c{n}")
            hook.send(post | {"tool_input": pre["tool_input"], "tool_response": output})
        raise AssertionError("never blocked")

    silent = allowed_before_the_block("", "silent")
    loud = allowed_before_the_block("FAIL\n", "loud")
    assert silent == CONFIG.consecutive_silent_threshold
    assert loud == CONFIG.consecutive_critical_threshold < silent


def test_a_side_file_that_vanishes_while_checked_is_not_a_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's rollback journal comes and goes while another hook process writes (seen in CI).

    The race is made certain here: the journal is found, then gone when its mode is tightened.
    """
    from loopwarden.hooks import _state

    db = tmp_path / "state" / "runs.db"
    db.parent.mkdir(mode=0o700)
    db.write_bytes(b"")
    journal = db.with_name("runs.db-journal")
    journal.write_bytes(b"")
    journal.chmod(0o644)
    real_chmod = os.chmod

    def chmod(path: object, *args: object, **kwargs: object) -> None:
        if Path(str(path)) == journal:
            journal.unlink()  # another process ended its transaction
        real_chmod(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_state.os, "chmod", chmod)
    with _state.private_files():
        key = _state.prepare(db, own_folder=True)
    assert len(key) == 32


def _server_pid(path: Path) -> int:
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(path))
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    return int.from_bytes(raw[:4], sys.byteorder)


def _gone(pid: int, within: float) -> bool:
    """Whether process ``pid`` (not our child: the server is detached) ends within ``within`` s."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _timed_hook(event: dict[str, Any], env: dict[str, str]) -> tuple[str, float]:
    import time

    start = time.monotonic()
    done = run_hook("claude-code", json.dumps(event), env)
    took = time.monotonic() - start
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout, took


# A bound on a behaviour, not a speed goal: an event normally takes ~20 ms through the server
# (plus the process start); one that meets a hung server waits _client.TAKE_SECONDS, then works
# alone. A hook kept waiting on a hung server (25 s before) fails it.
HANG_BOUND = 3.0 + 2.0  # the 3 s the client allows itself, and room for the process start


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and /proc")
def test_a_stopped_server_is_bypassed_and_replaced_and_loops_are_still_refused(
    tmp_path: Path,
) -> None:
    import signal

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "LOOPWARDEN_HOOK_SERVER": "1"}
    pre, post = _claude_call(1, "npm test")
    _timed_hook(pre, env)
    pid = _server_pid(wait_for_hook_server(tmp_path / "state"))
    _timed_hook(post, env)
    os.kill(pid, signal.SIGSTOP)  # stalled between two events: connect() still succeeds
    try:
        answers = []
        for n in range(2, BLOCKED + 1):
            pre, post = _claude_call(n, "npm test")
            out, took = _timed_hook(pre, env)
            assert took < HANG_BOUND, f"call {n} waited {took:.1f} s"
            answers.append(out)
            _, took = _timed_hook(post, env)
            assert took < HANG_BOUND
        # The same decisions as ever: warned at WARNED, refused at BLOCKED (same state).
        assert "WARNING" in answers[WARNED - 2] and _denied(json.loads(answers[-1]))
        # Another server took the socket over, and serves.
        fresh = _server_pid(wait_for_hook_server(tmp_path / "state"))
        assert fresh != pid
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _gone(pid, 10.0), "the stopped server did not step aside once it ran again"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and /proc")
def test_a_server_busy_with_a_slow_request_is_bypassed(tmp_path: Path) -> None:
    import socket

    from loopwarden.hooks._client import TAKEN

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "LOOPWARDEN_HOOK_SERVER": "1"}
    _timed_hook(_claude_call(1, "ls")[0], env)
    path = wait_for_hook_server(tmp_path / "state")
    pid = _server_pid(path)
    # A request that never ends: the server, which serves one connection at a time, waits on it.
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        slow.connect(str(path))
        assert slow.recv(1) == TAKEN
        slow.sendall(b"17:loopwarden-hook-2")
        answers = []
        for n in range(2, 2 + WARNED):
            pre, post = _claude_call(n, "npm test")
            out, took = _timed_hook(pre, env)
            assert took < HANG_BOUND, f"call {n} waited {took:.1f} s"
            answers.append(out)
            _timed_hook(post, env)
        assert "WARNING" in answers[-1] and answers[:-1] == [""] * (WARNED - 1)
        assert _server_pid(wait_for_hook_server(tmp_path / "state")) != pid
    finally:
        slow.close()
    assert _gone(pid, 10.0), "the replaced server did not leave after its slow request"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and /proc")
def test_a_server_whose_socket_is_gone_steps_aside_at_once(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "LOOPWARDEN_HOOK_SERVER": "1",
        "LOOPWARDEN_HOOK_IDLE": "600",
    }
    _timed_hook(_claude_call(1, "ls")[0], env)
    path = wait_for_hook_server(tmp_path / "state")
    pid = _server_pid(path)
    _timed_hook(_claude_call(2, "ls")[0], env)  # answered: the server waits for the next one
    path.unlink()
    # Not after its 600 s idle time: within a look or two (LOOK_SECONDS, 0.5 s).
    assert _gone(pid, 5.0), "the server kept running without its socket"
    _timed_hook(_claude_call(3, "ls")[0], env)  # alone; it starts a new server
    assert _server_pid(wait_for_hook_server(tmp_path / "state")) != pid

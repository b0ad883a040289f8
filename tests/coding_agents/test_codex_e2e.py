"""End to end: the real Codex CLI, a scripted model behind a fake OpenAI Responses API, and the
real ``loopwarden hook codex`` installed in ``$CODEX_HOME`` by ``loopwarden hooks install``.

Each test makes the model run a shell command whose side effect (a line appended to a count
file) counts its real executions, then asserts on that count and on what the model was shown
(the recorded ``/v1/responses`` requests). The runs are ``codex exec`` (headless) and offline:
the server binds to 127.0.0.1, the provider is a custom one with its own key, and update
checks, analytics, feedback and the plugin sync (which reaches out to github.com) are off.

What Codex 0.171 does with the hook's answers (checked with the real CLI): a ``PreToolUse`` deny
becomes the call's output ``Command blocked by PreToolUse hook: <reason>. Command: <cmd>``;
``additionalContext`` becomes a developer message placed before the call's output; a
``PostToolUse`` ``decision: block`` replaces the call's output with the reason; no answer ends
a ``codex exec`` run.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _clis import (
    EMAIL_SENT,
    SAME_FAILURE,
    SAME_FAILURE_RUNS,
    SAME_FAILURE_WARNED,
    SAME_FAILURES,
    bulk_emails,
    codex_argv,
    codex_config,
    codex_env,
    same_failure_outcome,
)
from fake_openai import (
    FakeOpenAI,
    ParallelCalls,
    RepeatCommand,
    messages,
    output_text,
    tool_outputs,
)

from loopwarden.cli.hook_cmd import hook_config

import _support

RUN_TIMEOUT = 120  # seconds per CLI run; a healthy run takes one to three seconds

# What loopwarden's messages say (patterns.py / compaction.py): the tests look for these
# phrases in what the model saw, not for the whole text, so wording around them may change.
BLOCKED = "This is a loop, so the"  # "... call was blocked" or, at a stop, "... run was stopped"
WARNED = "WARNING: You have called Bash"
COMPACTION_STOP = "after auto-compaction"
# How Codex itself words a PreToolUse deny in the call's output.
CODEX_DENIED = "Command blocked by PreToolUse hook: "

# Where the installed hook (its default profile) acts on one failing call repeated, counted
# from 1: the call after `critical` identical results is refused, the one before it runs with
# the last-chance warning; calls before the refused one run.
LAST_CHANCE_CALL = hook_config(None, []).consecutive_critical_threshold
BLOCKED_CALL = LAST_CHANCE_CALL + 1
RAN = BLOCKED_CALL - 1


@dataclass
class Run:
    """One finished CLI run: what the model saw, what ran, what the CLI printed."""

    server: FakeOpenAI
    model: RepeatCommand | ParallelCalls
    executions: int
    returncode: int
    stdout: str
    stderr: str

    def outputs(self) -> list[str]:
        """The call outputs of the last request (everything since the last compaction)."""
        return [output_text(item) for item in tool_outputs(self.server.responses[-1])]

    def request_with(self, outputs: int) -> dict[str, Any]:
        """The first request that shows the model exactly this many call outputs."""
        return next(r for r in self.server.responses if len(tool_outputs(r)) == outputs)

    def seen_text(self) -> str:
        """Everything the model was shown in any request, as one string."""
        return json.dumps([r.get("input") for r in self.server.responses])

    @property
    def thread_id(self) -> str:
        """Codex's session id (``thread.started`` in the ``--json`` output), for ``resume``."""
        for line in self.stdout.splitlines():
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("type") == "thread.started":
                return str(event["thread_id"])
        raise AssertionError(f"no thread.started event\n{self.explain()}")

    def explain(self) -> str:
        """Context for a failed assertion."""
        return (
            f"rc={self.returncode} executions={self.executions} "
            f"outputs={json.dumps(self.outputs())[:3000]}\n"
            f"stderr:\n{self.stderr[-3000:]}\nstdout:\n{self.stdout[-3000:]}"
        )


def _bounded(argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run argv in its own process group; on timeout kill the whole group (node + codex)."""
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"{argv[0]} ran over {RUN_TIMEOUT}s\n{err[-3000:]}\n{out[-3000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


@pytest.fixture
def codex_run(tmp_path: Path) -> Callable[..., Run]:
    """Run ``codex exec`` in a fresh ``CODEX_HOME`` with loopwarden's hooks installed there.

    HOME, CODEX_HOME, the work folder and ``XDG_STATE_HOME`` (loopwarden's state) all live
    under tmp_path. ``hook_args`` go to ``loopwarden hooks install codex --user`` (e.g.
    ``--set profile=openclaw``); ``None`` installs no hook at all (the control run).
    """
    codex = _support.require_cli("codex")
    loopwarden = shutil.which("loopwarden")
    assert loopwarden, "loopwarden is not on PATH (pip install -e .)"
    home, codex_home = tmp_path / "home", tmp_path / "codex-home"
    work, state = tmp_path / "work", tmp_path / "state"
    for folder in (home, codex_home, work, state):
        folder.mkdir()
    env = codex_env(home, codex_home) | {"XDG_STATE_HOME": str(state)}

    def run(
        model: RepeatCommand | ParallelCalls,
        count_file: Path,
        hook_args: list[str] | None,
        codex_args: Sequence[str] = (),
        copies: int = 1,
    ) -> Run:
        with FakeOpenAI(model) as server:
            # The provider first: the installer merges its entries into what is there.
            (codex_home / "config.toml").write_text(codex_config(server.base_url))
            if hook_args is not None and copies == 1:
                install = [loopwarden, "hooks", "install", "codex", "--user", *hook_args]
                done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=30)
                assert done.returncode == 0, done.stderr
            elif hook_args is not None:
                _write_hooks(codex_home / "hooks.json", [loopwarden, *hook_args], copies)
            argv = codex_argv(codex, *codex_args, "Run the checks until they pass.")
            proc = _bounded(argv, cwd=work, env=env)
        executions = len(count_file.read_text().splitlines()) if count_file.exists() else 0
        outcome = Run(server, model, executions, proc.returncode, proc.stdout, proc.stderr)
        assert not server.errors, server.errors
        assert proc.returncode == 0, outcome.explain()
        return outcome

    return run


def _write_hooks(path: Path, loopwarden_and_args: list[str], copies: int) -> None:
    """A hooks.json running ``copies`` identical ``loopwarden hook codex`` for every event."""
    loopwarden, *args = loopwarden_and_args
    command = " ".join(shlex.quote(a) for a in [loopwarden, "hook", "codex", *args])
    handlers = [{"type": "command", "command": command, "timeout": 30}] * copies
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostCompact"]
    events += ["Stop", "SessionEnd"]
    path.write_text(json.dumps({"hooks": {e: [{"hooks": handlers}] for e in events}}))


def failing(count_file: Path) -> str:
    """A failing check whose every real execution appends one line to count_file."""
    return f"echo run >> {count_file}; echo 'FAIL: 3 tests failed' >&2; exit 1"


def test_without_loopwarden_the_loop_runs_to_the_end(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """The control: with no hook, every one of the model's 8 identical calls really runs."""
    count = tmp_path / "count"
    run = codex_run(RepeatCommand(commands=[failing(count)] * 8), count, None)
    assert run.executions == 8, run.explain()
    assert all("FAIL: 3 tests failed" in out for out in run.outputs())
    assert BLOCKED not in run.seen_text()


def test_failing_command_loop_is_blocked_at_its_fourth_call(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """Recommended profile: the loop's 3rd call runs with the last-chance warning, its 4th is
    refused with loopwarden's reason as the call's output; every later call is refused too."""
    count = tmp_path / "count"
    model = RepeatCommand(commands=[failing(count)] * 10, final_text="Giving up.")
    run = codex_run(model, count, [])
    assert run.executions == RAN, run.explain()
    outputs = run.outputs()
    assert len(outputs) == 10, run.explain()  # the model kept trying: every later call refused
    assert all("FAIL: 3 tests failed" in out for out in outputs[:RAN])
    assert [BLOCKED in out for out in outputs[:BLOCKED_CALL]] == [False] * RAN + [True], (
        run.explain()
    )
    assert all(out.startswith(CODEX_DENIED) for out in outputs[RAN:]), run.explain()
    # Codex appends ". Command: <cmd>" to the reason: one full stop, not two
    assert not any(".. Command:" in out for out in outputs), run.explain()
    # codex exec shows the person at the keyboard each refusal, with loopwarden's reason
    assert run.stderr.count(f"{CODEX_DENIED}CRITICAL") == 10 - RAN, run.explain()
    # The last-chance call ran with the warning: a developer message right before its output.
    last_chance = run.request_with(LAST_CHANCE_CALL)
    assert WARNED in _developer_text(last_chance), run.explain()
    assert WARNED not in _developer_text(run.request_with(LAST_CHANCE_CALL - 1)), run.explain()
    # Why it was blocked, afterwards: the run is Codex's turn, in loopwarden's run records.
    turn_id = str(run.server.responses[0]["client_metadata"]["turn_id"])
    listed = _loopwarden_runs(tmp_path, "list", "--blocked")
    assert run.thread_id in listed and turn_id in listed, listed
    assert BLOCKED in _loopwarden_runs(tmp_path, "show", turn_id)
    # The state keeps hashes and counts only: neither the command nor its output is in it.
    state = b"".join(f.read_bytes() for f in (tmp_path / "state").rglob("*") if f.is_file())
    assert state and b"FAIL: 3 tests failed" not in state and str(count).encode() not in state


def _loopwarden_runs(tmp_path: Path, *args: str) -> str:
    """``loopwarden runs ARGS`` over the state the fixture's hooks wrote (tmp_path/state)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    argv = [shutil.which("loopwarden") or "loopwarden", "runs", *args]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _developer_text(request: dict[str, Any]) -> str:
    return "\n".join(messages(request, "developer"))


def test_twenty_five_different_commands_all_run(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """A healthy run of 25 distinct commands is neither blocked nor warned."""
    count = tmp_path / "count"
    commands = [f"echo step-{i} >> {count} && echo step {i} done" for i in range(25)]
    run = codex_run(RepeatCommand(commands=commands), count, [])
    assert run.executions == 25, run.explain()
    outputs = run.outputs()
    assert len(outputs) == 25
    assert all(f"step {i} done" in out for i, out in enumerate(outputs)), run.explain()
    seen = run.seen_text()
    assert CODEX_DENIED not in seen and "CRITICAL" not in seen and "WARNING: You have" not in seen


@pytest.mark.parametrize("scenario", list(SAME_FAILURES))
def test_varied_calls_failing_the_same_way_are_warned_blocked_then_stopped(
    codex_run: Callable[..., Run], tmp_path: Path, scenario: str
) -> None:
    """Ten different commands, each failing with the same error but for the words it quotes
    from its own command (Codex's hook payload has no exit code: the hook reads it from the
    rollout): the 4th runs with a warning, the 5th is refused, the 6th runs, the 7th is refused
    and stops the turn, and every later call is refused with the stop's reason."""
    count = tmp_path / "count"
    commands, failure = SAME_FAILURES[scenario]
    run = codex_run(RepeatCommand(commands=commands(count), final_text="Giving up."), count, [])
    assert run.executions == SAME_FAILURE_RUNS, run.explain()
    outcomes = [same_failure_outcome(out, failure) for out in run.outputs()]
    assert outcomes == SAME_FAILURE, run.explain()  # the model kept trying: 10 outputs
    refused = [out for out in run.outputs() if "CRITICAL" in out]
    assert all(out.startswith(CODEX_DENIED) for out in refused), run.explain()
    # the warning: a developer message with the 4th call's output, none before it
    assert "WARNING:" in _developer_text(run.request_with(SAME_FAILURE_WARNED)), run.explain()
    before = run.request_with(SAME_FAILURE_WARNED - 1)
    assert "WARNING:" not in _developer_text(before), run.explain()


def test_thirty_emails_acknowledged_alike_all_run(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """A bulk job: 30 different calls that all succeed with the same one-line acknowledgement
    run to the end, with no warning and no refusal."""
    count = tmp_path / "count"
    commands = bulk_emails(tmp_path / "work", count)
    run = codex_run(RepeatCommand(commands=commands), count, [])
    assert run.executions == 30, run.explain()
    outputs = run.outputs()
    assert len(outputs) == 30 and all(EMAIL_SENT in out for out in outputs), run.explain()
    seen = run.seen_text()
    assert CODEX_DENIED not in seen and "CRITICAL" not in seen and "WARNING:" not in seen


def test_loop_that_survives_auto_compaction_is_stopped_by_the_post_compaction_guard(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """OpenClaw's thresholds (no rolling detector fires within 12 calls): the loop goes on after
    an automatic compaction, and the post-compaction guard stops it at the 3rd identical
    outcome of its window; every later call is refused with the stop reason."""
    count = tmp_path / "count"
    model = RepeatCommand(commands=[failing(count)] * 12, compact_after=3)
    compact = ["-c", "model_auto_compact_token_limit=50000"]
    run = codex_run(model, count, ["--set", "profile=openclaw"], compact)
    assert model.compactions == 1, "Codex did not compact"
    # 4 calls ran before the compaction (the 4th reported the full context), 3 after it.
    assert run.executions == 4 + 3, run.explain()
    after = run.outputs()  # the last request only holds what came after the compaction
    assert len(after) == 12 - 4, run.explain()
    assert all("FAIL: 3 tests failed" in out for out in after[:2]), run.explain()
    # The 3rd ran, and its output was replaced by the stop reason; the rest were refused.
    assert [COMPACTION_STOP in out for out in after] == [False] * 2 + [True] * 6, run.explain()
    assert all(out.startswith(CODEX_DENIED) for out in after[3:]), run.explain()
    assert "CRITICAL: Called" not in run.seen_text() and "WARNING" not in run.seen_text()


def test_concurrent_copies_of_the_hook_decide_as_one(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """Codex starts every matching hook of an event at once: with loopwarden configured three
    times, three hook processes see each event together, and the loop is still refused at
    exactly its 4th call (no call lost or counted twice)."""
    count = tmp_path / "count"
    run = codex_run(RepeatCommand(commands=[failing(count)] * 8), count, [], copies=3)
    assert run.executions == RAN, run.explain()
    outputs = run.outputs()
    assert [BLOCKED in out for out in outputs] == [False] * RAN + [True] * (8 - RAN), run.explain()
    # The last-chance warning reaches the model once: the other copies repeat refusals only.
    request = run.request_with(LAST_CHANCE_CALL)
    warnings = [m for m in messages(request, "developer") if WARNED in m]
    assert len(warnings) == 1, run.explain()


def test_a_new_turn_does_not_inherit_the_previous_turns_history(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """A run is one user turn (Codex's turn_id): 3 identical calls in one turn and 3 more after
    ``codex exec resume`` in the same session all run, where 6 in one turn stop at 3."""
    count = tmp_path / "count"
    per_turn = LAST_CHANCE_CALL  # as many as one turn may run: the last one is warned
    first = codex_run(RepeatCommand(commands=[failing(count)] * per_turn), count, [])
    assert first.executions == per_turn, first.explain()
    # The resumed turn's requests hold the first turn's results, so the model goes on from there.
    both = 2 * per_turn
    second = codex_run(
        RepeatCommand(commands=[failing(count)] * both), count, [], ["resume", first.thread_id]
    )
    assert second.executions == both, second.explain()
    assert CODEX_DENIED not in second.seen_text() and BLOCKED not in second.seen_text()
    # Each turn's last call was warned on its own count (the earlier calls of that turn).
    warnings = [m for m in messages(second.request_with(both), "developer") if WARNED in m]
    assert len(warnings) == 2, second.explain()
    assert f"called Bash {per_turn - 1} times" in warnings[1], second.explain()


def test_with_loopwarden_uninstalled_every_call_runs(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """``pip uninstall loopwarden`` with the hook still in hooks.json: the hook's command finds
    no program and answers nothing, so every call runs (Codex ran them before the command's
    guard too, as a failed hook does not block there; this keeps it so)."""
    count = tmp_path / "count"
    env = codex_env(tmp_path / "home", tmp_path / "codex-home")
    from _clis import install_then_remove_loopwarden

    install_then_remove_loopwarden("codex", ["--user"], env, tmp_path / "gone")
    run = codex_run(RepeatCommand(commands=[failing(count)] * 6), count, None)
    assert run.executions == 6, run.explain()
    assert all("FAIL: 3 tests failed" in out for out in run.outputs()), run.explain()


def _hooks_codex_lists(codex: Path, env: dict[str, str], cwd: Path) -> list[dict[str, Any]]:
    """Codex's own list of hooks and their trust (``codex app-server``, ``hooks/list``)."""
    requests = [
        {"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}},
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}},
    ]
    argv = [str(codex), "app-server"]
    with subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=cwd
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        for request in requests:
            server.stdin.write(json.dumps({"jsonrpc": "2.0", **request}) + "\n")
        server.stdin.flush()
        for line in server.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                server.kill()
                return [h for entry in message["result"]["data"] for h in entry["hooks"]]
    raise AssertionError("codex app-server did not answer hooks/list")


def test_hooks_status_says_when_codex_does_not_trust_loopwardens_hooks(tmp_path: Path) -> None:
    """Codex runs a hook only once the user trusted its exact definition, and skips it without
    a word otherwise: ``hooks status`` asks Codex, and says so until the entries are trusted
    (also from Codex's trust records alone, when codex is not on PATH)."""
    codex = _support.require_cli("codex")
    home, codex_home, work = tmp_path / "home", tmp_path / "codex-home", tmp_path / "work"
    for folder in (home, codex_home, work):
        folder.mkdir()
    env = codex_env(home, codex_home) | {"XDG_STATE_HOME": str(tmp_path / "state")}
    with_codex = env | {"PATH": f"{codex.parent}{os.pathsep}{env['PATH']}"}
    without_codex = env | {
        "PATH": os.pathsep.join(
            p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "codex").exists()
        )
    }
    loopwarden = shutil.which("loopwarden") or "loopwarden"

    def status(environment: dict[str, str]) -> tuple[int, str]:
        argv = [loopwarden, "hooks", "status", "codex", "--project", str(work)]
        done = subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout

    install = [loopwarden, "hooks", "install", "codex", "--user"]
    assert subprocess.run(install, env=env, capture_output=True, timeout=60).returncode == 0
    for environment in (with_codex, without_codex):
        code, out = status(environment)
        assert code == 1 and "not trusted, so Codex does not run them" in out, out
        assert "PreToolUse" in out and "/hooks" in out, out
    # Trust them as Codex's /hooks screen does: the hook's current hash, under its key.
    listed = _hooks_codex_lists(codex, with_codex, work)
    assert {h["trustStatus"] for h in listed} == {"untrusted"}
    records = "".join(
        f'[hooks.state."{h["key"]}"]\ntrusted_hash = "{h["currentHash"]}"\n' for h in listed
    )
    (codex_home / "config.toml").write_text(records)
    assert {h["trustStatus"] for h in _hooks_codex_lists(codex, with_codex, work)} == {"trusted"}
    for environment in (with_codex, without_codex):
        code, out = status(environment)
        assert code == 0 and "not trusted" not in out, out


def test_install_keeps_the_users_own_hooks_and_uninstall_removes_only_loopwarden(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """The user's own PreToolUse hook runs next to loopwarden's on every call; after
    ``hooks uninstall`` it still runs, and the loop is no longer stopped."""
    count, audit = tmp_path / "count", tmp_path / "audit"
    users_hook = {"type": "command", "command": f"echo seen >> {shlex.quote(str(audit))}"}
    users_hooks = {"hooks": {"PreToolUse": [{"hooks": [users_hook]}]}}
    hooks_json = tmp_path / "codex-home" / "hooks.json"
    hooks_json.write_text(json.dumps(users_hooks))
    run = codex_run(RepeatCommand(commands=[failing(count)] * 6), count, [])
    assert run.executions == RAN, run.explain()
    assert len(audit.read_text().splitlines()) == 6  # the refused calls reached it too
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex-home")}
    argv = [shutil.which("loopwarden") or "loopwarden", "hooks", "uninstall", "codex", "--user"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(hooks_json.read_text()) == users_hooks
    count.unlink()
    again = codex_run(RepeatCommand(commands=[failing(count)] * 6), count, None)
    assert again.executions == 6, again.explain()
    assert len(audit.read_text().splitlines()) == 12


def test_identical_parallel_calls_run_only_as_often_as_one_after_another(
    codex_run: Callable[..., Run], tmp_path: Path
) -> None:
    """Eight identical commands in one model response: as many run as would one after another
    (the hook judges the calls of one response as a batch), the rest are refused."""
    count = tmp_path / "count"
    run = codex_run(ParallelCalls(failing(count), times=8), count, [])
    assert run.executions == RAN, run.explain()
    outputs = run.outputs()
    assert len(outputs) == 8 and sum(BLOCKED in o for o in outputs) == 8 - RAN, run.explain()

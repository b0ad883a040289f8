"""End to end: the real Claude Code, a scripted model behind a fake Anthropic API, and the real
``loopwarden hook claude-code`` installed in the project's ``.claude/settings.json``.

Each test makes the model run a Bash command whose side effect (a line appended to a count
file) counts its real executions, then asserts on that count and on what the model was shown
(the recorded ``/v1/messages`` requests). The runs are headless (``claude -p``) and offline: the
server binds to 127.0.0.1 and every nonessential-traffic switch is set.
"""

from __future__ import annotations

import json
import shutil
import subprocess
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
    claude_argv,
    claude_env,
    same_failure_outcome,
)
from fake_anthropic import (
    FakeAnthropic,
    ParallelCalls,
    RepeatCommand,
    block_text,
    tool_results,
)

from loopwarden.cli.hook_cmd import hook_config
from loopwarden.hooks._state import read_problem

import _support

RUN_TIMEOUT = 120  # seconds per CLI run; a healthy run takes a few seconds

# What loopwarden's messages say (patterns.py / compaction.py): the tests look for these
# phrases in what the model saw, not for the whole text, so wording around them may change.
BLOCKED = "This is a loop, so the"  # "... call was blocked" or, at a stop, "... run was stopped"
WARNED = "WARNING: You have called Bash"
COMPACTION_STOP = "after auto-compaction"

# Where the installed hook (its default profile) acts on one failing call repeated, counted
# from 1: the call after `critical` identical results is refused, the one before it runs with
# the last-chance warning.
LAST_CHANCE_CALL = hook_config(None, []).consecutive_critical_threshold
BLOCKED_CALL = LAST_CHANCE_CALL + 1


@dataclass
class Run:
    """One finished CLI run: what the model saw, what really ran, what the CLI printed."""

    server: FakeAnthropic
    model: RepeatCommand | ParallelCalls
    executions: int
    returncode: int
    stdout: str
    stderr: str

    def results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last request (the whole conversation the model saw)."""
        return tool_results(self.server.messages[-1])

    def request_with(self, results: int) -> dict[str, Any]:
        """The first request that shows the model exactly this many tool results."""
        return next(m for m in self.server.messages if len(tool_results(m)) == results)

    def seen_text(self) -> str:
        """Everything the model was shown in any request, as one string."""
        return json.dumps(self.server.messages)

    def session_id(self) -> str:
        """Claude Code's session id, from its stream-json output."""
        return str(json.loads(self.stdout.splitlines()[0])["session_id"])

    def explain(self) -> str:
        """Context for a failed assertion."""
        tail = f"stderr:\n{self.stderr[-3000:]}\nstdout:\n{self.stdout[-3000:]}"
        return f"rc={self.returncode}, {self.executions} executions\n{tail}"


class Project:
    """A fresh project, HOME and loopwarden state under one tmp folder."""

    def __init__(self, root: Path) -> None:
        self.claude = _support.require_cli("claude")
        found = shutil.which("loopwarden")
        assert found, "loopwarden is not on PATH (pip install -e .)"
        self.loopwarden = found
        self.work = root / "project"
        for folder in (root / "home", self.work, root / "state"):
            folder.mkdir()
        self.state = root / "state"
        self.env = claude_env(root / "home") | {"XDG_STATE_HOME": str(self.state)}

    def lw(self, *args: str) -> str:
        """Run a ``loopwarden`` command as the user would; its stdout."""
        argv = [self.loopwarden, *args]
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def shown_to_user(self, session_id: str) -> list[str]:
        """The hooks' messages to the user (``systemMessage``) in the session's transcript."""
        projects = Path(self.env["HOME"]) / ".claude" / "projects"
        [transcript] = projects.rglob(f"{session_id}.jsonl")
        lines = [json.loads(line) for line in transcript.read_text().splitlines() if line]
        attachments = [line.get("attachment") or {} for line in lines]
        return [a["content"] for a in attachments if a.get("type") == "hook_system_message"]

    def install(self, *options: str) -> None:
        """``loopwarden hooks install claude-code --project DIR`` with extra options."""
        self.lw("hooks", "install", "claude-code", "--project", str(self.work), *options)

    def run(self, model: RepeatCommand | ParallelCalls, count_file: Path, *options: str) -> Run:
        """``claude -p`` against a fake API playing ``model``; count_file counts executions."""
        with FakeAnthropic(model) as server:
            proc = subprocess.run(
                claude_argv(self.claude, "Run the checks until they pass.", *options),
                cwd=self.work,
                env=self.env | {"ANTHROPIC_BASE_URL": server.url},
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
            )
        executions = len(count_file.read_text().splitlines()) if count_file.exists() else 0
        run = Run(server, model, executions, proc.returncode, proc.stdout, proc.stderr)
        assert not server.errors, server.errors
        assert proc.returncode == 0, run.explain()
        return run


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A fresh project with no hooks yet."""
    return Project(tmp_path)


def failing(count_file: Path) -> str:
    """A failing check whose every real execution appends one line to count_file."""
    return f"echo run >> {count_file}; echo 'FAIL: 3 tests failed' >&2; exit 1"


def test_without_loopwarden_the_loop_runs_to_the_end(project: Project, tmp_path: Path) -> None:
    """The control: with no hook, every one of the model's 8 identical calls really runs."""
    count = tmp_path / "count"
    run = project.run(RepeatCommand(commands=[failing(count)] * 8), count)
    assert run.executions == 8, run.explain()
    assert BLOCKED not in run.seen_text()


def test_failing_command_loop_is_blocked_at_its_fourth_call(
    project: Project, tmp_path: Path
) -> None:
    """Recommended profile: the 3rd call runs with the last-chance warning, the 4th is refused
    with the reason, the 5th stops the run."""
    count = tmp_path / "count"
    model = RepeatCommand(commands=[failing(count)] * 10, final_text="Giving up.")
    project.install()
    run = project.run(model, count)
    ran = BLOCKED_CALL - 1
    assert run.executions == ran, run.explain()
    results = run.results()
    assert len(results) == 10  # the model kept trying: every later call was refused
    assert all(r.get("is_error") for r in results)
    assert [BLOCKED in block_text(r) for r in results] == [False] * ran + [True] * (10 - ran)
    assert all("FAIL: 3 tests failed" in block_text(r) for r in results[:ran])
    # the warning reached the model together with the last-chance call's real result, and
    # not before it
    last_chance = run.request_with(LAST_CHANCE_CALL)["messages"][-1]
    assert WARNED in json.dumps(last_chance)
    assert WARNED not in json.dumps(run.request_with(LAST_CHANCE_CALL - 1))
    # afterwards, the user can find the run: blocked, then stopped (the second block)
    listed = project.lw("runs", "list", "--blocked")
    assert f"claude-code:{run.session_id()}" in listed and "stopped" in listed
    # the person at the keyboard was told of the block and of the stop: the messages Claude Code
    # shows to the user (systemMessage), as its session transcript records them
    shown = project.shown_to_user(run.session_id())
    assert [m.split(":")[0] for m in shown] == [
        "loopwarden refused a Bash call",
        *["loopwarden stopped the turn at a Bash call"] * (10 - BLOCKED_CALL),
    ], shown


def test_twenty_five_different_commands_all_run(project: Project, tmp_path: Path) -> None:
    """A healthy run of 25 distinct commands is neither blocked nor warned."""
    count = tmp_path / "count"
    commands = [f"echo step-{i} >> {count} && echo step {i} done" for i in range(25)]
    project.install()
    run = project.run(RepeatCommand(commands=commands), count)
    assert run.executions == 25, run.explain()
    results = run.results()
    assert [block_text(r) for r in results] == [f"step {i} done" for i in range(25)]
    assert not any(r.get("is_error") for r in results)
    assert "CRITICAL" not in run.seen_text() and "WARNING: You have called" not in run.seen_text()
    assert run.session_id() not in project.lw("runs", "list", "--blocked")


@pytest.mark.parametrize("scenario", list(SAME_FAILURES))
def test_varied_calls_failing_the_same_way_are_warned_blocked_then_stopped(
    project: Project, tmp_path: Path, scenario: str
) -> None:
    """Ten different commands, each failing with the same error but for the words it quotes
    from its own command: the 4th runs with a warning, the 5th is refused, the 6th runs, the
    7th is refused and stops the turn (Claude Code is told every later call will be refused),
    and no call after it runs."""
    count = tmp_path / "count"
    commands, failure = SAME_FAILURES[scenario]
    project.install()
    run = project.run(RepeatCommand(commands=commands(count), final_text="Giving up."), count)
    assert run.executions == SAME_FAILURE_RUNS, run.explain()
    outcomes = [same_failure_outcome(block_text(r), failure) for r in run.results()]
    assert outcomes == SAME_FAILURE, run.explain()  # the model kept trying: 10 results
    # the warning came with the 4th call's result, and with no result before it
    warned = run.request_with(SAME_FAILURE_WARNED)["messages"][-1]
    assert "WARNING:" in json.dumps(warned), run.explain()
    before = run.request_with(SAME_FAILURE_WARNED - 1)["messages"]
    assert "WARNING:" not in json.dumps(before), run.explain()
    # the person at the keyboard was told of the block, then of the stop at each later call
    shown = [m.split(":")[0] for m in project.shown_to_user(run.session_id())]
    assert shown == [
        "loopwarden refused a Bash call",
        *["loopwarden stopped the turn at a Bash call"] * SAME_FAILURE.count("stopped"),
    ], shown


def test_thirty_emails_acknowledged_alike_all_run(project: Project, tmp_path: Path) -> None:
    """A bulk job: 30 different calls that all succeed with the same one-line acknowledgement
    run to the end, with no warning and no refusal."""
    count = tmp_path / "count"
    commands = bulk_emails(project.work, count)
    project.install()
    run = project.run(RepeatCommand(commands=commands), count)
    assert run.executions == 30, run.explain()
    results = run.results()
    assert [block_text(r) for r in results] == [EMAIL_SENT] * 30, run.explain()
    assert not any(r.get("is_error") for r in results)
    assert "CRITICAL" not in run.seen_text() and "WARNING:" not in run.seen_text()
    assert project.shown_to_user(run.session_id()) == []


def test_with_loopwarden_uninstalled_every_call_runs(project: Project, tmp_path: Path) -> None:
    """``pip uninstall loopwarden`` with the hook still in the settings: the hook's command
    finds no program and answers nothing, so every call runs, with no hook error."""
    count = tmp_path / "count"
    scope = ["--project", str(project.work)]
    from _clis import install_then_remove_loopwarden

    install_then_remove_loopwarden("claude-code", scope, project.env, tmp_path / "gone")
    run = project.run(RepeatCommand(commands=[failing(count)] * 6), count)
    assert run.executions == 6, run.explain()
    assert all("FAIL: 3 tests failed" in block_text(r) for r in run.results())
    assert "hook error" not in run.stdout.lower() and "not found" not in run.stdout, run.explain()


def test_user_and_project_installs_count_each_call_once_with_the_projects_settings(
    project: Project, tmp_path: Path
) -> None:
    """loopwarden in the user's settings (OpenClaw's thresholds: nothing fires within 8 calls)
    and in the project's (the recommended profile): Claude Code runs both hooks, the user's
    stands aside, and the loop is refused at its 4th call exactly as the project's settings
    say (with both deciding, the counts mixed: neither profile's behaviour)."""
    count, user_db = tmp_path / "count", tmp_path / "user-install.db"
    user = ["--user", "--set", "profile=openclaw", "--db", str(user_db)]
    project.lw("hooks", "install", "claude-code", *user)
    project.install()
    model = RepeatCommand(commands=[failing(count)] * 8, final_text="Giving up.")
    run = project.run(model, count)
    assert run.executions == BLOCKED_CALL - 1, run.explain()
    results = run.results()
    assert [BLOCKED in block_text(r) for r in results][:BLOCKED_CALL] == [False] * (
        BLOCKED_CALL - 1
    ) + [True], run.explain()
    # one refusal shown to the user per refused call: the user-level hook said nothing
    shown = project.shown_to_user(run.session_id())
    assert len(shown) == 8 - (BLOCKED_CALL - 1), shown
    # and it kept no state of its own: it never handled an event
    assert not user_db.exists()


def test_loopwarden_disable_switches_the_guard_off_for_one_session(
    project: Project, tmp_path: Path
) -> None:
    """``LOOPWARDEN_DISABLE=1`` in the CLI's environment: the installed hook lets every call
    through, with no message, and records nothing."""
    count = tmp_path / "count"
    project.install()
    project.env["LOOPWARDEN_DISABLE"] = "1"
    run = project.run(RepeatCommand(commands=[failing(count)] * 8), count)
    assert run.executions == 8, run.explain()
    assert BLOCKED not in run.seen_text() and "WARNING" not in run.seen_text()
    assert project.shown_to_user(run.session_id()) == []
    assert not list((tmp_path / "state").rglob("*.db"))


def test_loop_that_survives_auto_compaction_is_stopped_by_the_post_compaction_guard(
    project: Project, tmp_path: Path
) -> None:
    """OpenClaw's thresholds (no rolling detector fires within 12 calls): the loop goes on after
    an automatic compaction, and the post-compaction guard stops it at the 3rd identical
    outcome of its window; every later call is refused with the stop reason."""
    count = tmp_path / "count"
    model = RepeatCommand(commands=[failing(count)] * 12, compact_after=3)
    project.install("--set", "profile=openclaw")
    run = project.run(model, count)
    assert model.compactions == 1, "the CLI did not compact"
    # 4 calls ran before the compaction (the 4th reported the full context), 3 after it
    assert run.executions == 4 + 3, run.explain()
    # after the compaction the model sees the kept 4th call, 3 more real failures, then refusals
    after = [COMPACTION_STOP in block_text(r) for r in run.results()]
    assert after == [False] * 4 + [True] * 5, run.explain()
    # the user was told why the run ended (headless, Claude Code's result is "" all the same)
    shown = project.shown_to_user(run.session_id())
    assert shown and shown[0].startswith("loopwarden stopped the turn at a Bash call: "), shown
    assert COMPACTION_STOP in shown[0], shown
    assert "CRITICAL: Called" not in run.seen_text() and "WARNING" not in run.seen_text()
    assert f"claude-code:{run.session_id()}" in project.lw("runs", "list", "--blocked")


def test_identical_parallel_calls_run_only_as_often_as_one_after_another(
    project: Project, tmp_path: Path
) -> None:
    """Eight identical reads in one model message, which Claude Code runs concurrently (every
    PreToolUse before any result): as many run as would one after another, the rest are
    refused with the reason, and none of those refusals stops the run (one batch, one block)."""
    missing = tmp_path / "missing.txt"
    project.install()
    run = project.run(ParallelCalls("Read", {"file_path": str(missing)}, times=8), missing)
    results = run.results()
    assert len(results) == 8, run.explain()
    blocked = [BLOCKED in block_text(r) for r in results]
    assert sum(blocked) == 8 - (BLOCKED_CALL - 1), run.explain()
    assert "every further tool call" not in run.seen_text()


def test_hostile_events_never_break_a_call_nor_the_guard(project: Project, tmp_path: Path) -> None:
    """A 20 MB tool output (over the hook's event cap), bytes that are not UTF-8 and a lone
    surrogate in a command: every call runs, no problem is recorded for ``hooks status``, and
    the loop that follows is still refused at its usual call."""
    count = tmp_path / "count"
    hostile = [
        f"echo run >> {count}; head -c 20000000 /dev/zero | tr '\\0' x",
        f"echo run >> {count}; printf 'bad \\377\\376 bytes'",
        f"echo run >> {count}; echo '\ud800'",
    ]
    project.install()
    run = project.run(RepeatCommand(commands=[*hostile, *[failing(count)] * 6]), count)
    assert run.executions == len(hostile) + BLOCKED_CALL - 1, run.explain()
    assert sum(BLOCKED in block_text(r) for r in run.results()) == 6 - (BLOCKED_CALL - 1)
    assert read_problem(project.state / "loopwarden" / "runs.db") is None


def test_an_unusable_state_file_is_shown_to_the_user_once(project: Project, tmp_path: Path) -> None:
    """A corrupt state file: every call runs (fail open), and the hook hands Claude Code a
    ``systemMessage`` (what Claude Code shows the user) saying why, once for the session."""
    count = tmp_path / "count"
    project.install()
    (project.state / "loopwarden").mkdir(parents=True)
    (project.state / "loopwarden" / "runs.db").write_text("not a database\n")
    run = project.run(RepeatCommand(commands=[failing(count)] * 6), count, "--include-hook-events")
    assert run.executions == 6, run.explain()
    answers = [
        json.loads(event["stdout"])
        for event in map(json.loads, run.stdout.splitlines())
        if event.get("subtype") == "hook_response" and event.get("stdout", "").strip()
    ]
    assert len(answers) == 1, run.explain()
    assert answers[0]["systemMessage"].startswith("loopwarden cannot use its state")
    assert "loopwarden cannot use its state" not in run.seen_text()  # for the user, not the model

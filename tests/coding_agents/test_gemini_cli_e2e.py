"""End to end: the real Gemini CLI, a scripted model behind a fake Gemini API, and the real
``loopwarden hook gemini-cli`` installed in the project's ``.gemini/settings.json``.

Each test makes the model run a shell command whose side effect (a line appended to a count
file) counts its real executions, then asserts on that count and on what the model was shown
(the recorded ``streamGenerateContent`` requests). The runs are headless (``gemini -p``) and
offline: ``GOOGLE_GEMINI_BASE_URL`` points at the fake on 127.0.0.1, an explicit model skips the
routing classifier, and usage statistics, telemetry, auto-update and the IDE link are off.
Gemini CLI's own loop detection is switched off, so that what stops a loop is loopwarden
(one test runs next to it, as users have it by default).
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
    GEMINI_USER_SETTINGS,
    SAME_FAILURE,
    SAME_FAILURE_RUNS,
    SAME_FAILURE_WARNED,
    SAME_FAILURES,
    bulk_emails,
    gemini_argv,
    gemini_env,
    same_failure_outcome,
)
from fake_gemini import (
    FakeGemini,
    RepeatCommand,
    ScriptedModel,
    all_function_responses,
    function_responses,
    shell_commands,
)

from loopwarden.cli.hook_cmd import hook_config

import _support

RUN_TIMEOUT = 120  # seconds per CLI run; a healthy run takes a few seconds

# What loopwarden's messages say (patterns.py): the tests look for these phrases in what the
# model saw, not for the whole text, so the wording around them may change.
BLOCKED = "This is a loop, so the"  # "... call was blocked" or, at a stop, "... run was stopped"
WARNED = "WARNING: You have called run_shell_command"
# How Gemini CLI 0.61 hands a BeforeTool deny to the model: the call's result is
# {"error": "Tool execution blocked: <reason>"}.
DENIED = "Tool execution blocked: "
# What Gemini CLI prints (stderr) when a hook's {"continue": false} ends the run.
STOPPED = "Agent execution stopped by hook: "

# Where the installed hook (its default profile) acts on one failing call repeated, counted
# from 1: the call after `critical` identical results is refused, the one before it runs with
# the last-chance warning; calls before the refused one run.
LAST_CHANCE_CALL = hook_config(None, []).consecutive_critical_threshold
BLOCKED_CALL = LAST_CHANCE_CALL + 1
RAN = BLOCKED_CALL - 1


def output(response: dict[str, Any]) -> str:
    """The text of one ``functionResponse``: its output, or its error."""
    body = response.get("response") or {}
    return str(body.get("output", body.get("error", "")))


@dataclass
class Run:
    """One finished CLI run: what the model saw, what ran, what the CLI printed."""

    server: FakeGemini
    executions: int
    returncode: int
    stdout: str
    stderr: str

    def results(self) -> list[dict[str, Any]]:
        """The function responses of the current turn in the last agent request, oldest first."""
        return function_responses(self.server.agent_requests()[-1])

    def saw(self, phrase: str) -> bool:
        """Whether any tool result the model was shown, in any request, contains ``phrase``.

        A bool on purpose: ``assert phrase not in <every request>`` would make pytest diff
        megabytes of text (and the CLI's system prompt says "CRITICAL" itself).
        """
        return any(
            phrase in output(r)
            for body in self.server.agent_requests()
            for r in all_function_responses(body)
        )

    def explain(self) -> str:
        """Context for a failed assertion."""
        return (
            f"rc={self.returncode}\nstderr:\n{self.stderr[-3000:]}\nstdout:\n{self.stdout[-3000:]}"
        )


@dataclass
class Project:
    """A fresh HOME and project folder; ``run`` starts one headless turn in the project."""

    home: Path
    work: Path
    env: dict[str, str]

    def install(self, hook_args: list[str], *, user: bool = False) -> None:
        """``loopwarden hooks install gemini-cli`` for the project (or ``--user``: HOME)."""
        self._hooks("install", hook_args, user)

    def uninstall(self) -> None:
        """``loopwarden hooks uninstall gemini-cli --project <work>``."""
        self._hooks("uninstall", [], False)

    def _hooks(self, action: str, hook_args: list[str], user: bool) -> None:
        loopwarden = shutil.which("loopwarden")
        assert loopwarden, "loopwarden is not on PATH (pip install -e .)"
        scope = ["--user"] if user else ["--project", str(self.work)]
        argv = [loopwarden, "hooks", action, "gemini-cli", *scope]
        done = subprocess.run(
            [*argv, *hook_args], env=self.env, capture_output=True, text=True, timeout=30
        )
        assert done.returncode == 0, done.stderr

    def blocked_runs(self) -> list[dict[str, Any]]:
        """``loopwarden runs list --blocked`` as JSON, read from the state the hooks wrote."""
        loopwarden = shutil.which("loopwarden")
        assert loopwarden, "loopwarden is not on PATH (pip install -e .)"
        argv = [loopwarden, "runs", "list", "--blocked", "--output", "json"]
        done = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        runs: list[dict[str, Any]] = json.loads(done.stdout)
        return runs

    def run(self, model: ScriptedModel, count_file: Path, *, resume: bool = False) -> Run:
        """One ``gemini -p`` turn against a fake server playing ``model``."""
        gemini = _support.require_cli("gemini")
        argv = gemini_argv(gemini, "Run the checks until they pass.", resume=resume)
        with FakeGemini(model) as server:
            try:
                proc = subprocess.run(
                    argv,
                    cwd=self.work,
                    env=self.env | {"GOOGLE_GEMINI_BASE_URL": server.base_url},
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=RUN_TIMEOUT,
                )
            except subprocess.TimeoutExpired as exc:
                pytest.fail(f"gemini did not finish in {RUN_TIMEOUT} s: {exc.stderr!r}")
        executions = len(count_file.read_text().splitlines()) if count_file.exists() else 0
        outcome = Run(server, executions, proc.returncode, proc.stdout, proc.stderr)
        assert not server.errors, server.errors
        assert proc.returncode == 0, outcome.explain()
        return outcome


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A project whose HOME, settings and loopwarden state all live under tmp_path (the state
    under HOME: see :func:`_clis.gemini_env`)."""
    home, work = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_USER_SETTINGS))
    return Project(home, work, gemini_env(home))


def failing(count_file: Path) -> str:
    """A failing check whose every real execution appends one line to count_file."""
    return f"echo run >> {count_file}; echo 'FAIL: 3 tests failed' >&2; exit 1"


def test_without_loopwarden_the_loop_runs_to_the_end(project: Project, tmp_path: Path) -> None:
    """The control: with no hook, every one of the model's 8 identical calls really runs."""
    count = tmp_path / "count"
    run = project.run(RepeatCommand(failing(count), times=8), count)
    assert run.executions == 8, run.explain()
    assert all("Exit Code: 1" in output(r) for r in run.results())
    assert not run.saw(BLOCKED)


@pytest.mark.parametrize("user", [False, True], ids=["project", "user"])
def test_failing_command_loop_is_blocked_at_its_fourth_call(
    project: Project, tmp_path: Path, user: bool
) -> None:
    """Recommended profile: the 3rd call runs with the last-chance warning, the 4th is refused
    with the reason, and the model's next identical call ends the run (Gemini CLI honours a
    hook's stop).

    Installed in the user's settings too, which already hold the run's other settings: the
    install merges into them (else the CLI would not even reach the fake server)."""
    count = tmp_path / "count"
    project.install([], user=user)
    run = project.run(RepeatCommand(failing(count), times=10, final_text="Giving up."), count)
    assert run.executions == RAN, run.explain()
    results = run.results()
    assert all("FAIL: 3 tests failed" in output(r) for r in results[:RAN])
    # the warning reached the model appended to the last-chance call's real result (AfterTool
    # context)
    warned = [WARNED in output(r) for r in results[:RAN]]
    assert warned == [False] * (LAST_CHANCE_CALL - 1) + [True], run.explain()
    # the call after the refused one was answered by ending the run
    assert len(results) == BLOCKED_CALL, run.explain()
    assert output(results[RAN]).startswith(DENIED) and BLOCKED in output(results[RAN])
    assert STOPPED in run.stderr, run.explain()
    # and the person at the keyboard was told of the block and of the stop (systemMessage)
    shown = "Hook system message: loopwarden {} a run_shell_command call: CRITICAL"
    assert shown.format("refused") in run.stderr, run.explain()
    assert shown.format("stopped the turn at") in run.stderr, run.explain()
    # `loopwarden runs` explains it, under the CLI's own session id
    [record] = project.blocked_runs()
    assert record["session"] == f"gemini-cli:{json.loads(run.stdout)['session_id']}"
    assert (record["warnings"], record["blocks"], record["stops"]) == (1, 1, 1)


def test_twenty_five_different_commands_all_run(project: Project, tmp_path: Path) -> None:
    """A healthy run of 25 distinct commands is neither blocked nor warned."""
    count = tmp_path / "count"
    project.install([])
    commands = [f"echo step-{i} >> {count} && echo step {i} done" for i in range(25)]
    run = project.run(shell_commands(commands), count)
    assert run.executions == 25, run.explain()
    results = run.results()
    assert [f"step {i} done" in output(r) for i, r in enumerate(results)] == [True] * 25, [
        output(r) for r in results
    ]
    assert not run.saw("CRITICAL") and not run.saw("WARNING")


@pytest.mark.parametrize("scenario", list(SAME_FAILURES))
def test_varied_calls_failing_the_same_way_are_warned_blocked_then_stopped(
    project: Project, tmp_path: Path, scenario: str
) -> None:
    """Ten different commands, each failing with the same error but for the words it quotes
    from its own command: the 4th runs with the warning appended to its result, the 5th is
    refused, the 6th runs, the 7th is refused and ends the run (Gemini CLI honours a hook's
    stop), so no later call is even asked for."""
    count = tmp_path / "count"
    commands, failure = SAME_FAILURES[scenario]
    project.install([])
    run = project.run(shell_commands(commands(count)), count)
    assert run.executions == SAME_FAILURE_RUNS, run.explain()
    stop = SAME_FAILURE.index("stopped")  # the calls before the one that ends the run
    results = [output(r) for r in run.results()]
    outcomes = [same_failure_outcome(text, failure) for text in results]
    assert outcomes == SAME_FAILURE[:stop], run.explain()
    assert all(text.startswith(DENIED) for text in results if "CRITICAL" in text), results
    assert STOPPED in run.stderr, run.explain()
    assert "Hook system message: loopwarden stopped the turn at" in run.stderr, run.explain()
    warned = ["WARNING:" in text for text in results[:SAME_FAILURE_WARNED]]
    assert warned == [False] * (SAME_FAILURE_WARNED - 1) + [True], results
    [record] = project.blocked_runs()
    assert (record["blocks"], record["stops"]) == (1, 1), record


def test_thirty_emails_acknowledged_alike_all_run(project: Project, tmp_path: Path) -> None:
    """A bulk job: 30 different calls that all succeed with the same one-line acknowledgement
    run to the end, with no warning and no refusal."""
    count = tmp_path / "count"
    commands = bulk_emails(project.work, count)
    project.install([])
    run = project.run(shell_commands(commands), count)
    assert run.executions == 30, run.explain()
    results = [output(r) for r in run.results()]
    assert len(results) == 30 and all(EMAIL_SENT in text for text in results), results
    assert not run.saw("CRITICAL") and not run.saw("WARNING")
    assert project.blocked_runs() == []


def test_concurrent_hooks_lose_no_call(project: Project, tmp_path: Path) -> None:
    """Identical calls in batches as large as the loop may run (3): Gemini CLI runs a batch's
    BeforeTool hooks (and then its AfterTool hooks) at the same time. The second batch is
    refused whole only if none of the first batch's outcomes was lost between the concurrent
    hook processes (with one lost, the loop would be one identical result short of its block,
    and one more call would run)."""
    count = tmp_path / "count"
    project.install([])
    run = project.run(RepeatCommand(failing(count), times=8, batch=RAN), count)
    assert run.executions == RAN, run.explain()
    # the first batch's results reached the model; which call of the second batch is refused
    # and which ends the run depends on the order their hooks took the state lock: none runs
    results = run.results()
    assert len(results) == RAN and not any(output(r).startswith(DENIED) for r in results)
    assert DENIED in run.stderr and STOPPED in run.stderr, run.explain()


def test_each_prompt_is_a_new_run(project: Project, tmp_path: Path) -> None:
    """Gemini CLI's hook payloads carry no turn id: a new prompt (BeforeAgent) starts a new run,
    so a resumed session's next turn does not inherit the previous turn's repeats."""
    count = tmp_path / "count"
    project.install([])
    per_turn = LAST_CHANCE_CALL  # as many as one turn may run: the last one is warned
    first = project.run(RepeatCommand(failing(count), times=per_turn), count)
    assert first.executions == per_turn, first.explain()
    second = project.run(RepeatCommand(failing(count), times=per_turn), count, resume=True)
    assert second.executions == 2 * per_turn, second.explain()
    # the count starts again: no call refused, the warning comes at this turn's own last call
    assert not any(output(r).startswith(DENIED) for r in second.results())
    warned = [WARNED in output(r) for r in second.results()]
    assert warned == [False] * (per_turn - 1) + [True], second.explain()


def _users_own_hook(project: Project, seen: Path) -> dict[str, Any]:
    """Give the project a hook of the user's own (it appends each AfterTool payload to seen)."""
    own_hook = {"type": "command", "command": f"cat >> {seen}; echo >> {seen}", "name": "mine"}
    settings = {"hooks": {"AfterTool": [{"matcher": "run_shell_command", "hooks": [own_hook]}]}}
    (project.work / ".gemini").mkdir()
    (project.work / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return settings


def _own_hook_calls(seen: Path) -> list[str]:
    return [json.loads(line)["hook_event_name"] for line in seen.read_text().splitlines() if line]


def test_install_keeps_the_users_own_hooks(project: Project, tmp_path: Path) -> None:
    """A hook the user had in .gemini/settings.json still runs next to loopwarden's."""
    count, seen = tmp_path / "count", tmp_path / "user-hook"
    _users_own_hook(project, seen)
    project.install([])
    run = project.run(RepeatCommand(failing(count), times=6), count)
    assert run.executions == RAN, run.explain()  # loopwarden is active
    assert _own_hook_calls(seen) == ["AfterTool"] * RAN  # and so is the user's


def test_uninstall_gives_back_the_users_settings(project: Project, tmp_path: Path) -> None:
    """After install and uninstall the settings are the user's again, and the loop runs free."""
    count, seen = tmp_path / "count", tmp_path / "user-hook"
    settings = _users_own_hook(project, seen)
    project.install([])
    project.uninstall()
    assert json.loads((project.work / ".gemini" / "settings.json").read_text()) == settings
    run = project.run(RepeatCommand(failing(count), times=6), count)
    assert run.executions == 6, run.explain()
    assert _own_hook_calls(seen) == ["AfterTool"] * 6


def test_with_loopwarden_uninstalled_every_call_runs(project: Project, tmp_path: Path) -> None:
    """``pip uninstall loopwarden`` with the hook still in the settings: the hook's command
    finds no program and answers nothing, so every call runs (a command that cannot start is a
    refusal to Gemini CLI: it refused every prompt before it reached the model)."""
    count = tmp_path / "count"
    scope = ["--project", str(project.work)]
    from _clis import install_then_remove_loopwarden

    install_then_remove_loopwarden("gemini-cli", scope, project.env, tmp_path / "gone")
    run = project.run(RepeatCommand(failing(count), times=6, final_text="Done."), count)
    assert run.executions == 6, run.explain()
    assert len(run.results()) == 6 and not any(output(r).startswith(DENIED) for r in run.results())
    assert json.loads(run.stdout)["response"] == "Done.", run.explain()


def test_a_corrupted_state_file_fails_open(project: Project, tmp_path: Path) -> None:
    """An unusable state file: every call runs (Gemini CLI would deny a call on most non-zero
    exits), and the hook's one line reaches the user as a hook message."""
    count = tmp_path / "count"
    project.install([])
    state = project.home / ".local" / "state" / "loopwarden"
    state.mkdir(parents=True)
    (state / "runs.db").write_text("not a database\n")
    run = project.run(RepeatCommand(failing(count), times=6), count)
    assert run.executions == 6, run.explain()
    assert not any(output(r).startswith(DENIED) for r in run.results())
    assert "Hook system message: loopwarden" in run.stderr, run.explain()


def test_next_to_the_clis_own_loop_detection(project: Project, tmp_path: Path) -> None:
    """With Gemini CLI's default settings its own detector drops the model's 5th identical call
    before any hook sees it and ends the turn. loopwarden acts before it: its last-chance
    warning reaches the model with the 3rd result, and it refuses the 4th call; the CLI's
    detector then ends the turn before loopwarden's stop."""
    assert BLOCKED_CALL < 5, "the CLI's own detector would act first"
    count = tmp_path / "count"
    settings = GEMINI_USER_SETTINGS | {"model": {"disableLoopDetection": False}}
    (project.home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    project.install([])
    run = project.run(RepeatCommand(failing(count), times=10), count)
    assert run.executions == RAN, run.explain()
    last = run.server.agent_requests()[-1]
    # all_function_responses: the CLI's feedback is a user message, which starts a new turn
    # for the fake's function_responses
    responses = all_function_responses(last)
    warned = [WARNED in output(r) for r in responses[:RAN]]
    assert warned == [False] * (LAST_CHANCE_CALL - 1) + [True], run.explain()
    assert len(responses) == BLOCKED_CALL, run.explain()
    assert output(responses[RAN]).startswith(DENIED) and BLOCKED in output(responses[RAN])
    assert "Potential loop detected" in json.dumps(last["contents"])
    # the hook never saw the call the CLI dropped: a block, no stop
    [record] = project.blocked_runs()
    assert (record["warnings"], record["blocks"], record["stops"]) == (1, 1, 0)


def test_identical_parallel_calls_run_only_as_often_as_one_after_another(
    project: Project, tmp_path: Path
) -> None:
    """Eight identical calls in one model response (their BeforeTool hooks run at the same
    time, before any AfterTool): as many run as would one after another, the rest are refused,
    and the refusals of that one response do not stop the run."""
    count = tmp_path / "count"
    project.install([])
    run = project.run(RepeatCommand(failing(count), times=8, batch=8), count)
    assert run.executions == RAN, run.explain()
    results = run.results()
    assert sum(output(r).startswith(DENIED) for r in results) == 8 - RAN, run.explain()
    assert STOPPED not in run.stderr, run.explain()

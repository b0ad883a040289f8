"""A broken loopwarden install never costs the user a working CLI: each real CLI, its hook's
program broken under it (its interpreter deleted, or its site-packages without loopwarden),
still runs every tool call of a turn, and the hook's one line says what happened.

Before the installed command failed open, Gemini CLI refused every prompt with a deleted
interpreter (``Agent execution blocked: ... cannot execute: required file not found``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import test_claude_code_e2e as claude
import test_codex_e2e as codex
import test_gemini_cli_e2e as gemini
from _clis import break_the_installed_hook, codex_env

codex_run = codex.codex_run  # the Codex tests' fixture, for this module too

HOW = ["interpreter gone", "damaged"]
CALLS = 6  # a loop loopwarden would refuse at its 4th call, were it running


@pytest.mark.parametrize("how", HOW)
def test_claude_code_runs_every_call_with_a_broken_install(tmp_path: Path, how: str) -> None:
    project = claude.Project(tmp_path)
    project.install()
    settings = project.work / ".claude" / "settings.json"
    break_the_installed_hook(settings, how, tmp_path / "broken")
    count = tmp_path / "count"
    run = project.run(claude.RepeatCommand(commands=[claude.failing(count)] * CALLS), count)
    assert run.executions == CALLS, run.explain()
    assert all("FAIL: 3 tests failed" in claude.block_text(r) for r in run.results())


@pytest.mark.parametrize("how", HOW)
def test_codex_runs_every_call_with_a_broken_install(
    codex_run: Callable[..., codex.Run], tmp_path: Path, how: str
) -> None:
    import shutil
    import subprocess

    env = codex_env(tmp_path / "home", tmp_path / "codex-home")
    loopwarden = shutil.which("loopwarden")
    assert loopwarden
    install = [loopwarden, "hooks", "install", "codex", "--user"]
    done = subprocess.run(install, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    break_the_installed_hook(tmp_path / "codex-home" / "hooks.json", how, tmp_path / "broken")
    count = tmp_path / "count"
    run = codex_run(codex.RepeatCommand(commands=[codex.failing(count)] * CALLS), count, None)
    assert run.executions == CALLS, run.explain()
    assert all("FAIL: 3 tests failed" in out for out in run.outputs()), run.explain()


@pytest.mark.parametrize("how", HOW)
def test_gemini_cli_runs_every_call_with_a_broken_install(tmp_path: Path, how: str) -> None:
    import json

    home, work = tmp_path / "home", tmp_path / "project"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(gemini.GEMINI_USER_SETTINGS))
    project = gemini.Project(home, work, gemini.gemini_env(home))
    project.install([])
    settings = work / ".gemini" / "settings.json"
    break_the_installed_hook(settings, how, tmp_path / "broken")
    count = tmp_path / "count"
    model = gemini.RepeatCommand(gemini.failing(count), times=CALLS, final_text="Done.")
    run = project.run(model, count)
    assert run.executions == CALLS, run.explain()
    assert not any(gemini.output(r).startswith(gemini.DENIED) for r in run.results())
    assert json.loads(run.stdout)["response"] == "Done.", run.explain()
    # The hook's one line, where Gemini CLI shows a hook's stderr (if it shows it at all).
    assert "Traceback" not in run.stderr and "required file not found" not in run.stderr

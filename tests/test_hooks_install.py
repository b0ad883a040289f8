"""``loopwarden hooks install|uninstall|status`` on the CLIs' real settings files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import main

DATA = Path(__file__).parent / "data" / "coding_agents"

USER_SETTINGS = {
    "permissions": {"allow": ["Bash(ls)"]},
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./audit.sh"}]}
        ],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}],
    },
    "model": "sonnet",
}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return home


def read(path: Path) -> Any:
    return json.loads(path.read_text())


def test_install_merges_is_idempotent_and_uninstall_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "proj" / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps(USER_SETTINGS))
    project = str(tmp_path / "proj")
    assert main(["hooks", "install", "claude-code", "--project", project]) == 0
    once = read(settings)
    assert main(["hooks", "install", "claude-code", "--project", project]) == 0
    assert read(settings) == once  # no second copy
    assert once["permissions"] == USER_SETTINGS["permissions"] and once["model"] == "sonnet"
    pre = once["hooks"]["PreToolUse"]
    assert pre[0] == USER_SETTINGS["hooks"]["PreToolUse"][0]  # the user's own hook, untouched
    assert pre[1]["matcher"] == "*"
    command = pre[1]["hooks"][0]["command"]
    assert os.path.isabs(command.split()[0]) and command.endswith("hook claude-code")
    assert once["hooks"]["SessionStart"] == [
        {"matcher": "compact", "hooks": [{"type": "command", "command": command, "timeout": 30}]}
    ]
    out = capsys.readouterr().out
    assert "Installed loopwarden's hooks for Claude Code" in out and "runs list" in out
    assert main(["hooks", "uninstall", "claude-code", "--project", project]) == 0
    assert read(settings) == USER_SETTINGS


def test_user_scope_files_of_each_cli(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codex_home = home / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    for agent in ("claude-code", "codex", "gemini-cli"):
        assert main(["hooks", "install", agent, "--set", "profile=openclaw"]) == 0
    claude = read(home / ".claude" / "settings.json")["hooks"]
    codex = read(codex_home / "hooks.json")["hooks"]
    gemini = read(home / ".gemini" / "settings.json")["hooks"]
    assert set(claude) >= {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PostCompact"}
    assert set(codex) >= {"PreToolUse", "PostToolUse", "PostCompact", "UserPromptSubmit"}
    assert set(gemini) == {"BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent", "SessionEnd"}
    entry = gemini["BeforeTool"][0]["hooks"][0]
    assert entry["timeout"] == 30_000 and entry["name"] == "loopwarden"  # milliseconds there
    assert entry["command"].endswith("hook gemini-cli --set profile=openclaw")
    # Codex caps SessionEnd hooks at 3 s (and warns on every run when asked for more).
    assert codex["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert gemini["SessionEnd"][0]["hooks"][0]["timeout"] == 3_000


def test_the_installed_command_runs_whatever_the_path(tmp_path: Path, home: Path) -> None:
    assert main(["hooks", "install", "codex"]) == 0
    command = read(home / ".codex" / "hooks.json")["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    event = json.loads((DATA / "codex" / "hook-events" / "UserPromptSubmit.json").read_text())
    done = subprocess.run(
        command,
        shell=True,
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env={"PATH": "/nonexistent", "HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "s")},
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == ""
    assert (tmp_path / "s" / "loopwarden" / "runs.db").is_file()


def test_a_settings_file_with_comments_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / ".gemini" / "settings.json"
    settings.parent.mkdir()
    text = '{\n  // my theme\n  "ui": {"theme": "dark"}\n}\n'
    settings.write_text(text)
    assert main(["hooks", "install", "gemini-cli", "--project", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert str(settings) in error and "not plain JSON" in error and "--print" in error
    assert settings.read_text() == text


def test_install_checks_the_config_strictly_and_writes_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooks", "install", "claude-code", "--set", "criticalTreshold=3"]) == 2
    assert "criticalTreshold" in capsys.readouterr().err
    assert not (home / ".claude" / "settings.json").exists()


def test_status_reports_problems_with_exit_code_1(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert main(["hooks", "status", "--project", str(project)]) == 0
    assert main(["hooks", "install", "claude-code"]) == 0
    assert main(["hooks", "status", "claude-code", "--project", str(project)]) == 0
    # A second install with another command, in the project: every call would count twice.
    assert main(["hooks", "install", "claude-code", "--project", str(project), "--set", "x=1"]) == 2
    assert main(["hooks", "install", "claude-code", "--project", str(project), "--db", "o.db"]) == 0
    capsys.readouterr()
    assert main(["hooks", "status", "claude-code", "--project", str(project)]) == 1
    assert "counted more than once" in capsys.readouterr().out
    # A moved loopwarden: the CLI could not run the hook.
    assert main(["hooks", "uninstall", "claude-code", "--project", str(project)]) == 0
    settings = home / ".claude" / "settings.json"
    program = read(settings)["hooks"]["Stop"][0]["hooks"][0]["command"].split()[0]
    settings.write_text(settings.read_text().replace(program, "/gone/python"))
    capsys.readouterr()
    args = ["hooks", "status", "claude-code", "--project", str(project), "--output", "json"]
    assert main(args) == 1
    report = json.loads(capsys.readouterr().out)
    user = next(t for t in report["targets"] if t["scope"] == "user")
    assert user["installed"] and any("'/gone/python' is missing" in p for p in user["problems"])

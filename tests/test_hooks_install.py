"""``loopwarden hooks install|uninstall|status`` on the CLIs' real settings files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import main
from loopwarden.hooks._install import parse_command

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
    parsed = parse_command(command)
    assert parsed is not None and os.path.isabs(parsed.program[0])
    assert (parsed.agent, parsed.options) == ("claude-code", [])
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
    parsed = parse_command(entry["command"])
    assert parsed is not None and parsed.agent == "gemini-cli"
    assert parsed.options == ["--set", "profile=openclaw", "--scope", "user"]
    # Codex caps SessionEnd hooks at 3 s (and warns on every run when asked for more).
    assert codex["SessionEnd"][0]["hooks"][0]["timeout"] == 3
    assert gemini["SessionEnd"][0]["hooks"][0]["timeout"] == 3_000


def _run_installed(
    command: str,
    event: object,
    home: Path,
    state: Path,
    cwd: Path | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """The installed hook ``command`` as the CLI runs it: a shell, the event on stdin, and
    nothing on PATH, so that only the program the command names can run."""
    return subprocess.run(
        command,
        shell=True,
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env={"PATH": "/nonexistent", "HOME": str(home), "XDG_STATE_HOME": str(state), **env},
        cwd=cwd,
        timeout=60,
    )


def test_the_installed_command_runs_whatever_the_path(tmp_path: Path, home: Path) -> None:
    assert main(["hooks", "install", "codex"]) == 0
    command = read(home / ".codex" / "hooks.json")["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    event = json.loads((DATA / "codex" / "hook-events" / "UserPromptSubmit.json").read_text())
    done = _run_installed(
        command, event, home, tmp_path / "s", PYTHONPATH=os.environ.get("PYTHONPATH", "")
    )
    assert done.returncode == 0 and done.stderr == ""
    assert (tmp_path / "s" / "loopwarden" / "runs.db").is_file()


def test_installed_from_a_venv_python_the_command_runs_that_venv(
    tmp_path: Path, home: Path
) -> None:
    # A venv's bin/python is a link to the base interpreter; only through the link does it see
    # the venv's packages. Here loopwarden is importable in the new venv alone (a .pth file), so
    # a command naming the link's target could not run it (or would run another loopwarden).
    import venv

    folder = tmp_path / "venv"
    venv.EnvBuilder(symlinks=True, with_pip=False).create(folder)
    python = folder / "bin" / "python"
    assert python.is_symlink()
    (site,) = folder.glob("lib/python*/site-packages")
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    (site / "loopwarden-test.pth").write_text("\n".join(paths) + "\n")
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": ""}
    done = subprocess.run(
        [str(python), "-m", "loopwarden", "hooks", "install", "gemini-cli"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    settings = read(home / ".gemini" / "settings.json")
    command = settings["hooks"]["BeforeAgent"][0]["hooks"][0]["command"]
    parsed = parse_command(command)
    assert parsed is not None and parsed.program == [str(python), "-m", "loopwarden"]
    event = json.loads((DATA / "gemini-cli" / "hook-events" / "BeforeAgent.json").read_text())
    ran = _run_installed(command, event, home, tmp_path / "s", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stderr == ""
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
    # A second install in the project, with other settings: the project's decides, and the
    # user's stands aside there (so every call is counted once).
    assert main(["hooks", "install", "claude-code", "--project", str(project), "--set", "x=1"]) == 2
    assert main(["hooks", "install", "claude-code", "--project", str(project), "--db", "o.db"]) == 0
    assert "the project's install" in capsys.readouterr().out
    assert main(["hooks", "status", "claude-code", "--project", str(project)]) == 0
    assert "stands aside in this project" in capsys.readouterr().out
    # A user-level command from before scopes existed would not stand aside: counted twice.
    settings = home / ".claude" / "settings.json"
    settings.write_text(settings.read_text().replace(" --scope user", ""))
    assert main(["hooks", "status", "claude-code", "--project", str(project)]) == 1
    assert "counted by both" in capsys.readouterr().out
    assert main(["hooks", "install", "claude-code"]) == 0
    # A moved loopwarden: the CLI could not run the hook.
    assert main(["hooks", "uninstall", "claude-code", "--project", str(project)]) == 0
    settings = home / ".claude" / "settings.json"
    parsed = parse_command(read(settings)["hooks"]["Stop"][0]["hooks"][0]["command"])
    assert parsed is not None
    program = parsed.program[0]
    settings.write_text(settings.read_text().replace(program, "/gone/python"))
    capsys.readouterr()
    args = ["hooks", "status", "claude-code", "--project", str(project), "--output", "json"]
    assert main(args) == 1
    report = json.loads(capsys.readouterr().out)
    user = next(t for t in report["targets"] if t["scope"] == "user")
    assert user["installed"] and any(
        "interpreter /gone/python is missing" in p for p in user["problems"]
    )


# -- the settings files are the user's ---------------------------------------------------------


def _project_settings(tmp_path: Path, text: str, agent: str = "claude-code") -> Path:
    folder = {"claude-code": ".claude", "codex": ".codex", "gemini-cli": ".gemini"}[agent]
    name = "hooks.json" if agent == "codex" else "settings.json"
    settings = tmp_path / "proj" / folder / name
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(text, encoding="utf-8")
    return settings


def _cycle(tmp_path: Path, agent: str = "claude-code") -> tuple[int, int]:
    project = str(tmp_path / "proj")
    return (
        main(["hooks", "install", agent, "--project", project]),
        main(["hooks", "uninstall", agent, "--project", project]),
    )


def test_a_symlinked_settings_file_is_edited_through_the_link(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "sonnet"}\n')
    link = tmp_path / "proj" / ".claude" / "settings.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    assert link.is_symlink() and link.resolve() == dotfiles
    assert "loopwarden" in dotfiles.read_text() and read(dotfiles)["model"] == "sonnet"


def test_a_read_only_settings_file_is_not_rewritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _project_settings(tmp_path, '{"model": "sonnet"}\n')
    settings.chmod(0o444)
    for action in ("install", "uninstall"):
        args = ["hooks", action, "claude-code", "--project", str(tmp_path / "proj")]
        assert main(args) == (2 if action == "install" else 0)
    assert settings.read_text() == '{"model": "sonnet"}\n'
    assert (settings.stat().st_mode & 0o777) == 0o444
    error = capsys.readouterr().err
    assert str(settings) in error and "read-only" in error and "Traceback" not in error


def test_a_backup_of_the_original_bytes_is_made_before_changing(tmp_path: Path) -> None:
    original = '{\n    "model": "sonnet"\n}'
    settings = _project_settings(tmp_path, original)
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    backup = settings.with_name("settings.json.loopwarden-backup")
    assert backup.read_text() == original


def test_numbers_are_written_back_exactly_as_they_were(tmp_path: Path) -> None:
    text = (
        '{"huge": 1e400, "exact": 0.1000000000000000000000001,'
        ' "big": 123456789012345678901234567890, "neg": -1E-400, "plain": 1.50}'
    )
    settings = _project_settings(tmp_path, text)
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    written = settings.read_text()
    for number in ("1e400", "0.1000000000000000000000001", "123456789012345678901234567890"):
        assert f": {number}" in written, written
    assert "-1E-400" in written and "1.50" in written and "Infinity" not in written


def test_duplicate_keys_are_refused_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = '{"hooks": {}, "model": "sonnet", "model": "opus"}\n'
    settings = _project_settings(tmp_path, text)
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 2
    assert settings.read_text() == text
    error = capsys.readouterr().err
    assert "'model'" in error and "twice" in error


def test_a_lone_surrogate_round_trips_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    text = '{"title": "a\\ud800b"}'
    settings = _project_settings(tmp_path, text)
    assert _cycle(tmp_path) == (0, 0)
    assert settings.read_text() == text
    assert sorted(p.name for p in settings.parent.iterdir() if ".tmp" in p.name) == []


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A project whose .claude folder cannot be written to (root included: immutable)."""
    folder = tmp_path / "proj" / ".claude"
    folder.mkdir(parents=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    if shutil.which("chattr") is None:
        pytest.skip("root writes into a 0555 folder, and chattr is missing to prevent it")
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("this file system does not support chattr +i")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_folder_gives_a_clear_error(
    read_only_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = read_only_folder.parent
    assert main(["hooks", "install", "claude-code", "--project", str(project)]) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and "not writable" in error, error
    assert str(read_only_folder) in error
    assert list(read_only_folder.iterdir()) == []


def test_a_users_own_wrapper_is_not_taken_for_loopwardens(tmp_path: Path) -> None:
    own = {"type": "command", "command": "log-call.sh && loopwarden hook claude-code"}
    settings = _project_settings(
        tmp_path, json.dumps({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [own]}]}})
    )
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    assert own in read(settings)["hooks"]["PreToolUse"][0]["hooks"]
    assert main(["hooks", "uninstall", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    assert read(settings) == {"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [own]}]}}


@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_install_then_uninstall_without_settings_leaves_no_file(tmp_path: Path, agent: str) -> None:
    (tmp_path / "proj").mkdir()
    assert _cycle(tmp_path, agent) == (0, 0)
    assert [p for p in (tmp_path / "proj").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize(
    "text",
    [
        '{\n    "model": "sonnet",\n    "env": {"A": "1"}\n}\n',
        '{\n\t"model": "sonnet"\n}',
        '{"model":"sonnet","hooks":{"Stop":[]}}',
        '{\n  "model": "sonnet", "x": [1,2]\n}\n',
    ],
    ids=["four-spaces", "tabs", "compact", "mixed"],
)
def test_uninstall_restores_the_bytes(tmp_path: Path, text: str) -> None:
    settings = _project_settings(tmp_path, text)
    assert _cycle(tmp_path) == (0, 0)
    assert settings.read_bytes() == text.encode()


def test_install_keeps_the_files_own_indentation(tmp_path: Path) -> None:
    settings = _project_settings(tmp_path, '{\n    "model": "sonnet"\n}\n')
    assert main(["hooks", "install", "claude-code", "--project", str(tmp_path / "proj")]) == 0
    assert settings.read_text().startswith('{\n    "model": "sonnet",\n    "hooks": {\n        "')


# -- the installed command fails open whatever breaks ------------------------------------------


def _run_command(command: str, stdin: str = "{}") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command], input=stdin, capture_output=True, text=True, timeout=60
    )


def _venv(folder: Path, pth: list[str] | None = None) -> Path:
    """A new venv's python (a link to the base interpreter), with only ``pth`` on its path."""
    import venv

    venv.EnvBuilder(symlinks=True, with_pip=False).create(folder)
    if pth is not None:
        (site,) = folder.glob("lib/python*/site-packages")
        (site / "extra.pth").write_text("\n".join(pth) + "\n")
    return folder / "bin" / "python"


def _broken(case: str, tmp_path: Path) -> list[str]:
    """A hook program broken as ``case`` says."""
    if case == "program missing":
        return [str(tmp_path / "gone" / "loopwarden")]
    if case == "interpreter gone":  # a console script whose venv's python was deleted
        python = _venv(tmp_path / "old")
        script = tmp_path / "bin" / "loopwarden"
        script.parent.mkdir()
        script.write_text(f"#!{python}\nfrom loopwarden.cli import main\nmain()\n")
        script.chmod(0o755)
        python.unlink()
        return [str(script)]
    if case == "not executable":
        script = tmp_path / "bin" / "loopwarden"
        script.parent.mkdir()
        script.write_text(f"#!{sys.executable}\n")
        return [str(script)]
    if case == "loopwarden not importable":  # site-packages without it
        return [str(_venv(tmp_path / "empty", [])), "-m", "loopwarden"]
    assert case == "import error inside"
    package = tmp_path / "damaged" / "loopwarden"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import loopwarden.hooks._client\n")
    (package / "hooks").mkdir()
    (package / "hooks" / "__init__.py").write_text("")
    (package / "hooks" / "_client.py").write_text("raise ImportError('half an upgrade')\n")
    return [str(_venv(tmp_path / "dmg", [str(package.parent)])), "-m", "loopwarden"]


BROKEN = [
    "program missing",
    "interpreter gone",
    "not executable",
    "loopwarden not importable",
    "import error inside",
]


@pytest.mark.parametrize("case", BROKEN)
@pytest.mark.parametrize("agent", ["claude-code", "codex", "gemini-cli"])
def test_the_command_fails_open_with_one_line_whatever_breaks(
    tmp_path: Path, agent: str, case: str
) -> None:
    from loopwarden.hooks._install import hook_command

    command = hook_command(agent, [], _broken(case, tmp_path))
    event = (DATA / agent / "hook-events").glob("*.json").__next__().read_text()
    for shell in ("/bin/sh", "/bin/bash", "/usr/bin/zsh"):
        if not os.access(shell, os.X_OK):
            continue
        done = subprocess.run(
            [shell, "-c", command], input=event, capture_output=True, text=True, timeout=60
        )
        assert (done.returncode, done.stdout) == (0, ""), (shell, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"loopwarden hook {agent} could not run")
        assert "hooks status" in lines[0]


@pytest.mark.parametrize("case", BROKEN)
def test_status_runs_the_installed_program_and_says_what_broke_and_the_fix(
    tmp_path: Path, home: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["hooks", "install", "gemini-cli", "--set", "historySize=40"]) == 0
    assert main(["hooks", "status", "gemini-cli", "--project", str(tmp_path)]) == 0
    settings = home / ".gemini" / "settings.json"
    text = settings.read_text()
    parsed = parse_command(read(settings)["hooks"]["BeforeTool"][0]["hooks"][0]["command"])
    assert parsed is not None
    broken = " ".join(_broken(case, tmp_path))
    settings.write_text(text.replace(" ".join(parsed.program), broken))
    capsys.readouterr()
    args = ["hooks", "status", "gemini-cli", "--project", str(tmp_path), "--output", "json"]
    assert main(args) == 1
    report = json.loads(capsys.readouterr().out)
    (user,) = [t for t in report["targets"] if t["scope"] == "user"]
    (problem,) = user["problems"]
    said = {
        "program missing": "is missing",
        "interpreter gone": "its interpreter",
        "not executable": "cannot start",
        "loopwarden not importable": "loopwarden cannot be imported",
        "import error inside": "half an upgrade",
    }[case]
    assert said in problem, problem
    # The fix: this loopwarden installs the hook again, with the same settings.
    fix = problem.split("fix: ", 1)[1]
    assert "hooks install gemini-cli --set historySize=40" in fix


def test_the_command_passes_the_hooks_answer_and_its_lines_through(tmp_path: Path) -> None:
    from loopwarden.hooks._install import hook_command

    program = tmp_path / "bin" / "loopwarden"
    program.parent.mkdir()
    program.write_text('#!/bin/sh\ncat >/dev/null\necho "{\\"args\\": \\"$*\\"}"\necho oops >&2\n')
    program.chmod(0o755)
    done = _run_command(hook_command("gemini-cli", ["--set", "a b=1"], [str(program)]))
    assert done.returncode == 0 and done.stderr == "oops\n"
    assert json.loads(done.stdout) == {"args": "hook gemini-cli --set a b=1"}
    # A program that exits otherwise than 0 is broken (the hook always exits 0): one line.
    program.write_text("#!/bin/sh\ncat >/dev/null\necho '{}'\necho Traceback >&2\nexit 2\n")
    done = _run_command(hook_command("gemini-cli", [], [str(program)]))
    assert done.returncode == 0 and "could not run (exit 2)" in done.stderr
    assert "Traceback" not in done.stderr


# -- switching off, and the user-level hook standing aside --------------------------------------


def _hook(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    event = (DATA / "claude-code" / "hook-events" / "PreToolUse.json").read_text()
    argv = [sys.executable, "-m", "loopwarden", "hook", "claude-code", *args]
    full = {**os.environ, **env}
    return subprocess.run(argv, input=event, capture_output=True, text=True, env=full, cwd=cwd)


def test_loopwarden_disable_switches_the_hook_off(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    done = _hook(["--db", str(db)], {"LOOPWARDEN_DISABLE": "1"}, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not db.exists()
    done = _hook(["--db", str(db)], {"LOOPWARDEN_DISABLE": "0"}, tmp_path)
    assert done.returncode == 0 and db.exists()


def test_the_user_level_hook_stands_aside_where_the_project_has_its_own(
    tmp_path: Path, home: Path
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    db = tmp_path / "user.db"
    env = {"CLAUDE_PROJECT_DIR": str(project), "HOME": str(home)}
    # no project install: the user's hook decides
    assert _hook(["--db", str(db), "--scope", "user"], env, project).returncode == 0
    assert db.exists()
    db.unlink()
    assert main(["hooks", "install", "claude-code", "--project", str(project)]) == 0
    done = _hook(["--db", str(db), "--scope", "user"], env, project)
    assert (done.returncode, done.stdout, done.stderr, db.exists()) == (0, "", "", False)
    # the project's own hook is not affected by its own file
    assert _hook(["--db", str(db)], env, project).returncode == 0 and db.exists()


def test_status_reports_a_protection_problem_the_hook_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hook fails open on an unusable state file and records why next to it (the shape of
    the hook's hook-status.json); status says so with exit code 1 until the file is gone."""
    assert main(["hooks", "install", "claude-code"]) == 0
    state = tmp_path / "state" / "loopwarden"
    state.mkdir(parents=True)
    record = {
        "problem": "the state file is not a database: move it away",
        "db": str(state / "runs.db"),
        "agent": "claude-code",
        "since": 1_796_000_000.0,
        "last": 1_796_000_100.0,
        "count": 12,
        "told": ["claude-code:s1"],
    }
    (state / "hook-status.json").write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["hooks", "status", "claude-code", "--project", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "Protection problem: the state file is not a database: move it away" in out
    assert "12 events ran unprotected" in out
    (state / "hook-status.json").unlink()
    assert main(["hooks", "status", "claude-code", "--project", str(tmp_path)]) == 0


@pytest.mark.parametrize(
    ("options", "line"),
    [
        ([], "profile: recommended (the hooks' default: no config file given)"),
        (["--set", "profile=recommended"], "profile: recommended (--set)"),
        (["--set", "historySize=50"], "profile: recommended (the hooks' default, with --set)"),
        (["--set", "profile=openclaw"], "profile: openclaw (--set)"),
        (["--set", "tools.loopDetection.profile=openclaw"], "profile: openclaw (--set)"),
    ],
)
def test_install_names_the_profile_the_hook_runs_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], line: str
) -> None:
    project = str(tmp_path / "proj")
    assert main(["hooks", "install", "claude-code", "--project", project, *options]) == 0
    assert f"  {line}\n" in capsys.readouterr().out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and /proc")
def test_uninstall_ends_the_resident_hook_server(
    tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from _support import wait_for_hook_server

    assert main(["hooks", "install", "claude-code"]) == 0
    event = (DATA / "claude-code" / "hook-events" / "PreToolUse.json").read_text()
    env = {**os.environ, "LOOPWARDEN_HOOK_SERVER": "1", "LOOPWARDEN_HOOK_IDLE": "600"}
    argv = [sys.executable, "-m", "loopwarden", "hook", "claude-code"]
    subprocess.run(
        argv, input=event, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    path = wait_for_hook_server(tmp_path / "state")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(path))
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid = int.from_bytes(raw[:4], sys.byteorder)
    capsys.readouterr()
    assert main(["hooks", "uninstall", "claude-code"]) == 0
    assert "hook server was stopped" in capsys.readouterr().out
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if stat == "Z":
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{pid}").exists(), "the server outlived hooks uninstall"

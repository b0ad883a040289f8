"""How the end-to-end tests and the capture scripts of tests/data start the real coding CLIs.

One place for each CLI's offline environment, headless command line and settings, so the
captured samples come from the same set-up as the tests. Every telemetry, update check and
nonessential-traffic switch the CLI has is set; the model server is the caller's fake on
127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Where `npm ci --prefix tests/coding_agents` puts the pinned CLIs.
BIN = Path(__file__).resolve().parent / "node_modules" / ".bin"


def _python_env() -> dict[str, str]:
    """What the hook's Python must keep from the tests' environment: the loopwarden under test
    (``PYTHONPATH`` in a checkout) and loopwarden's own settings (``LOOPWARDEN_*``)."""
    return {
        key: value
        for key, value in os.environ.items()
        if key == "PYTHONPATH" or key.startswith("LOOPWARDEN_")
    }


def claude_env(home: Path) -> dict[str, str]:
    """Claude Code's environment: HOME, a test key, offline; add ``ANTHROPIC_BASE_URL``."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "IS_SANDBOX": "1",  # --dangerously-skip-permissions is refused as root otherwise
        "ANTHROPIC_API_KEY": "sk-test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
    } | _python_env()


def claude_argv(claude: Path, prompt: str, *options: str) -> list[str]:
    """One headless ``claude -p`` turn that may run every tool, printing stream-json."""
    argv = [str(claude), "-p", prompt, *options, "--dangerously-skip-permissions"]
    return [*argv, "--output-format", "stream-json", "--verbose"]


_CODEX_CONFIG = """\
model = "gpt-5.1-codex"
model_provider = "fake"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false  # else Codex syncs curated plugins from github.com at start-up

[model_providers.fake]
name = "fake"
base_url = "{base_url}"
wire_api = "responses"
env_key = "FAKE_OPENAI_KEY"
"""


def codex_config(base_url: str) -> str:
    """``$CODEX_HOME/config.toml``: a custom provider at ``base_url`` (``…/v1``), offline."""
    return _CODEX_CONFIG.format(base_url=base_url)


def codex_env(home: Path, codex_home: Path) -> dict[str, str]:
    """Codex's environment: HOME, CODEX_HOME and the fake provider's key."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "FAKE_OPENAI_KEY": "sk-test",
    } | _python_env()


def codex_argv(codex: Path, *args: str) -> list[str]:
    """``codex exec`` (headless, JSON events) with ``args`` (``resume ID``…, the prompt last)."""
    argv = [str(codex), "exec", "--skip-git-repo-check", "--json"]
    # Hooks the user has not reviewed are skipped silently without the trust bypass.
    argv += ["--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust"]
    return [*argv, *args]


# Gemini CLI's user settings ($HOME/.gemini/settings.json): offline, and the CLI's own loop
# detection off (it would stop the 5th identical call itself). "gemini-api-key" is needed
# because GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth, which headless mode rejects.
GEMINI_USER_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "ide": {"enabled": False},
    "model": {"disableLoopDetection": True},
}
GEMINI_MODEL = "gemini-2.5-flash"  # an explicit model: no routing-classifier request


def gemini_env(home: Path) -> dict[str, str]:
    """Gemini CLI's environment; add ``GOOGLE_GEMINI_BASE_URL``.

    XDG_STATE_HOME is set to its default under HOME on purpose: on GitHub Actions Gemini CLI
    hands hooks a strictly filtered environment (HOME survives, XDG_STATE_HOME does not), and
    loopwarden must find the same state file either way.
    """
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "GEMINI_API_KEY": "test-key",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",  # headless mode refuses untrusted folders
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_COLOR": "1",
    } | _python_env()


def gemini_argv(gemini: Path, prompt: str, *, resume: bool = False) -> list[str]:
    """One headless ``gemini -p`` turn that may run every tool, printing JSON."""
    argv = [str(gemini), "-p", prompt, "-m", GEMINI_MODEL, "--yolo", "--output-format", "json"]
    return argv + (["--resume", "latest"] if resume else [])


def install_then_remove_loopwarden(
    agent: str, scope: list[str], env: dict[str, str], folder: Path
) -> None:
    """``loopwarden hooks install AGENT SCOPE`` run from a copy of the ``loopwarden`` command,
    which is then deleted: the settings keep the hook of a loopwarden that is gone, as after
    ``pip uninstall loopwarden``."""
    found = shutil.which("loopwarden")
    assert found, "loopwarden is not on PATH (pip install -e .)"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "loopwarden"
    shutil.copy2(found, copy)
    argv = [str(copy), "hooks", "install", agent, *scope]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert str(copy) in done.stdout, done.stdout  # the command names the copy
    copy.unlink()


# -- scenarios shared by the three CLIs' end-to-end tests ----------------------------------------
#
# Varied calls that fail the same way, and varied calls that succeed the same way. Each command
# starts by appending a line to a count file, so a test counts the real executions; the rest is
# the command the scenario is about.

SAME_FAILURE_CALLS = 10  # what the model tries
SAME_FAILURE = ["ran"] * 4 + ["refused", "ran"] + ["stopped"] * 4
"""What becomes of each of 10 varied calls failing the same way under the recommended profile:
the 4th runs with a warning (:data:`SAME_FAILURE_WARNED`), the 5th is refused, the 6th runs (the
recovery chance of ``stopAfterBlocks: 2``), the 7th is refused and ends the run (the turn), and
nothing after it runs."""
SAME_FAILURE_WARNED = 4
SAME_FAILURE_RUNS = SAME_FAILURE.count("ran")
STOPPED_PHRASE = "loopwarden stopped this turn"  # the reason a later call of the turn gets


def same_failure_outcome(text: str, failure: str) -> str:
    """What one call's result says became of it: "ran" (the command's real ``failure``),
    "refused" (loopwarden's block), "stopped" (refused because the turn was stopped); else
    the text itself, for the assertion's message."""
    if STOPPED_PHRASE in text:
        return "stopped"
    if "CRITICAL" in text:
        return "refused"
    return "ran" if failure in text else text


WORDS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliett",
]


def unclosed_prints(count_file: Path, names: list[str]) -> list[str]:
    """``python3 -c "print(NAME"``: a SyntaxError that quotes the call's own source, per name."""
    return [f'echo run >> {count_file}; python3 -c "print({name}"' for name in names]


def missing_files(count_file: Path, calls: int = SAME_FAILURE_CALLS) -> list[str]:
    """``sed -n 1,10p nofileN``: ``sed: can't read nofileN: No such file or directory``."""
    return [f"echo run >> {count_file}; sed -n 1,10p nofile{n}" for n in range(1, calls + 1)]


SAME_FAILURES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "numbers": (
        lambda count: unclosed_prints(count, [str(n) for n in range(1, 11)]),
        "SyntaxError",
    ),
    "words": (lambda count: unclosed_prints(count, WORDS), "SyntaxError"),  # no digit to mask
    "missing-files": (missing_files, "No such file or directory"),
}
"""The scenarios of varied calls failing the same way: name → (the commands, given the count
file; what each one's real output says)."""

EMAIL_SENT = "Email sent."


def bulk_emails(project: Path, count_file: Path, calls: int = 30) -> list[str]:
    """``./send_email.sh userN@example.com``: a script in the project that acknowledges every
    address with the same line (each execution also counted in count_file)."""
    script = project / "send_email.sh"
    script.write_text(f'#!/bin/sh\necho "$1" >> {count_file}\necho "{EMAIL_SENT}"\n')
    script.chmod(0o755)
    return [f"./send_email.sh user{n}@example.com" for n in range(1, calls + 1)]


def break_the_installed_hook(settings: Path, how: str, folder: Path) -> str:
    """Rewrite loopwarden's installed hook command in ``settings`` to run a broken loopwarden:
    ``interpreter gone`` (a console script whose venv's python was deleted) or ``damaged``
    (a venv's python whose site-packages hold no loopwarden). Returns the broken program."""
    import json
    import shlex
    import venv

    from loopwarden.hooks._install import parse_command

    folder.mkdir(parents=True, exist_ok=True)
    venv.EnvBuilder(symlinks=True, with_pip=False).create(folder / "venv")
    python = folder / "venv" / "bin" / "python"
    if how == "interpreter gone":
        script = folder / "loopwarden"
        script.write_text(f"#!{python}\nfrom loopwarden.cli import main\nmain()\n")
        script.chmod(0o755)
        python.unlink()
        broken = [str(script)]
    else:
        assert how == "damaged", how
        broken = [str(python), "-m", "loopwarden"]
    text = settings.read_text()
    commands = {
        entry["command"]
        for groups in json.loads(text)["hooks"].values()
        for group in groups
        for entry in group["hooks"]
        if parse_command(entry["command"]) is not None
    }
    assert len(commands) == 1, commands
    parsed = parse_command(next(iter(commands)))
    assert parsed is not None
    old, new = shlex.join(parsed.program), shlex.join(broken)
    assert old in text
    settings.write_text(text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]))
    return new

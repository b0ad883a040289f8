"""Regenerate this folder's samples from the real Gemini CLI (tests/coding_agents, `npm ci`).

    python tests/data/coding_agents/gemini-cli/capture.py [SCENARIO ...]

Scenarios (all when none is named): ``hooked`` (hook-events/ and
chats/hooked-session-resumed-compressed.jsonl), ``npm-loop`` (chats/npm-test-loop.jsonl),
``cli-loop-detection`` (chats/npm-test-loop-cli-loop-detection.jsonl), ``loopwarden``
(chats/loop-refused-by-loopwarden.jsonl: needs ``loopwarden`` on PATH). Each run is headless
against tests/coding_agents/fake_gemini.py on 127.0.0.1; the model and commands are scripted,
everything else (payloads, chat records, paths under /tmp/gemini-capture) is the CLI's own.
Regenerating changes ids and timestamps: the importer tests read these files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
AGENTS = HERE.parents[2] / "coding_agents"
sys.path.insert(0, str(AGENTS))

from _clis import BIN, GEMINI_USER_SETTINGS, gemini_argv, gemini_env  # noqa: E402
from fake_gemini import (  # noqa: E402
    FakeGemini,
    RepeatCommand,
    ScriptedModel,
    ToolCalls,
    function_responses,
)

ROOT = Path("/tmp/gemini-capture")
HOME = ROOT / "home"
EVENTS = [
    "SessionStart",
    "SessionEnd",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "BeforeTool",
    "AfterTool",
    "PreCompress",
    "Notification",
]
# The capture hook: keeps each payload as <CAPDIR>/<nnnn>-<event>.json and allows everything.
CAPTURE_HOOK = """#!/usr/bin/env python3
import json, os, pathlib, sys
raw = sys.stdin.read()
folder = pathlib.Path(os.environ["CAPDIR"])
folder.mkdir(parents=True, exist_ok=True)
n = len(list(folder.glob("*.json")))
(folder / f"{n:04d}-{json.loads(raw)['hook_event_name']}.json").write_text(raw)
print("{}")
"""
FAILING = "echo x >> count.txt; exit 1"


def _project(name: str, settings: dict[str, Any]) -> Path:
    work = ROOT / name
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(HOME / ".gemini" / "tmp" / name, ignore_errors=True)  # its earlier chats
    (work / ".gemini").mkdir(parents=True)
    (work / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2))
    return work


def _run(
    work: Path,
    model: ScriptedModel,
    prompt: str,
    *,
    resume: bool = False,
    tokens: int | Callable[[dict[str, Any]], int] = 1000,
    capdir: Path | None = None,
) -> None:
    argv = gemini_argv(BIN / "gemini", prompt, resume=resume)
    with FakeGemini(model, prompt_tokens=tokens) as fake:
        env = gemini_env(HOME) | {
            "GOOGLE_GEMINI_BASE_URL": fake.base_url,
            "CAPDIR": str(capdir or ROOT / "unused"),
        }
        done = subprocess.run(
            argv,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode != 0 or fake.errors:
        sys.exit(f"gemini failed in {work}: {done.stderr[-2000:]} {fake.errors}")


def _chat(work: Path, name: str) -> None:
    [chat] = (HOME / ".gemini" / "tmp" / work.name / "chats").glob("session-*.jsonl")
    shutil.copy(chat, HERE / "chats" / name)


def hooked() -> None:
    """Every hook payload of two sessions, and their chat: 3 calls, then a compressed resume."""
    hook = ROOT / "capture-hook.py"
    hook.write_text(CAPTURE_HOOK)
    hook.chmod(0o755)
    entry = {"type": "command", "command": str(hook), "name": "capture"}
    settings = {
        "hooks": {
            event: [{"matcher": "*" if "Tool" in event else "", "hooks": [entry]}]
            for event in EVENTS
        }
    }
    work = _project("project", settings)
    caps = ROOT / "cap"
    shutil.rmtree(caps, ignore_errors=True)
    calls = [
        ("run_shell_command", {"command": "echo hello"}),
        ("run_shell_command", {"command": FAILING}),
        ("read_file", {"file_path": "missing.txt"}),
    ]
    _run(work, ToolCalls(calls), "run the checks", capdir=caps / "a")
    # 600,000 reported prompt tokens (over half the window) make the CLI compress the history
    big = lambda body: 600_000 if function_responses(body) else 1000  # noqa: E731
    _run(work, RepeatCommand(FAILING, 3), "try again", resume=True, tokens=big, capdir=caps / "b")
    _save_events(caps)
    _chat(work, "hooked-session-resumed-compressed.jsonl")


def _save_events(caps: Path) -> None:
    out = HERE / "hook-events"
    names = {
        "a/0000-SessionStart": "SessionStart",
        "b/0000-SessionStart": "SessionStart-resume",
        "a/0001-BeforeAgent": "BeforeAgent",
        "a/0002-PreCompress": "PreCompress",
        "a/0003-BeforeModel": "BeforeModel",
        "a/0004-BeforeToolSelection": "BeforeToolSelection",
        "a/0005-AfterModel": "AfterModel",
        "a/0006-BeforeTool": "BeforeTool",
        "a/0007-AfterTool": "AfterTool-success",
        "a/0013-AfterTool": "AfterTool-failing-command",
        "a/0018-BeforeTool": "BeforeTool-read_file",
        "a/0019-AfterTool": "AfterTool-tool-error",
        "a/0024-AfterAgent": "AfterAgent",
        "a/0025-SessionEnd": "SessionEnd",
    }
    for source, name in names.items():
        shutil.copy(caps / f"{source}.json", out / f"{name}.json")
    for part, name in (("a", "session-startup"), ("b", "session-resume-compressed")):
        lines = [json.dumps(json.loads(f.read_text())) for f in sorted((caps / part).glob("*"))]
        (out / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def npm_loop() -> None:
    """`npm test` failing 8 times in a row (no package.json), with no hook."""
    work = _project("loop-project", {})
    _run(work, RepeatCommand("npm test", 8, final_text="The tests keep failing."), "make it pass")
    _chat(work, "npm-test-loop.jsonl")


def cli_loop_detection() -> None:
    """The same loop with Gemini CLI's own loop detection on."""
    work = _project("loopdetect-project", {"model": {"disableLoopDetection": False}})
    _run(work, RepeatCommand("npm test", 8, final_text="The tests keep failing."), "make it pass")
    _chat(work, "npm-test-loop-cli-loop-detection.jsonl")


def loopwarden() -> None:
    """A failing loop under `loopwarden hook gemini-cli`: refused at the 5th call, stopped at
    the 6th."""
    work = _project("protected-project", {})
    shutil.rmtree(HOME / ".local" / "state" / "loopwarden", ignore_errors=True)
    installer = shutil.which("loopwarden")
    assert installer, "loopwarden is not on PATH"
    subprocess.run(
        [installer, "hooks", "install", "gemini-cli", "--project", str(work)],
        env={"PATH": os.environ["PATH"], "HOME": str(HOME)},
        check=True,
        capture_output=True,
    )
    _run(work, RepeatCommand(FAILING, 10, final_text="Giving up."), "run the checks")
    _chat(work, "loop-refused-by-loopwarden.jsonl")


SCENARIOS: dict[str, Callable[[], None]] = {
    "hooked": hooked,
    "npm-loop": npm_loop,
    "cli-loop-detection": cli_loop_detection,
    "loopwarden": loopwarden,
}


def main(names: list[str]) -> None:
    """Run the named scenarios (all by default) in one shared HOME."""
    (HOME / ".gemini").mkdir(parents=True, exist_ok=True)
    (HOME / ".gemini" / "settings.json").write_text(json.dumps(GEMINI_USER_SETTINGS, indent=2))
    for name in names or list(SCENARIOS):
        SCENARIOS[name]()
        print("captured", name)


if __name__ == "__main__":
    main(sys.argv[1:])

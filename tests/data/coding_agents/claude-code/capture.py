"""Regenerate the captured Claude Code data in this folder (real CLI, fake model server).

    python tests/data/coding_agents/claude-code/capture.py

Runs the pinned Claude Code (tests/coding_agents/node_modules/.bin/claude) headless against
tests/coding_agents/fake_anthropic.py with a hook that saves every event it receives, then keeps:

* hook-events/<Event>[-<source>].json: the first payload of each event name;
* transcripts/<scenario>/<project>/<session>.jsonl: the session transcripts
  (``$HOME/.claude/projects/<project>/``), copied unchanged, for the importer tests.

Scenarios: ``failing-loop`` (a few healthy calls, then one failing command repeated 8 times; then a
second, resumed turn in the same session that calls no tool) and
``compaction`` (a failing command repeated 4 times, an automatic compaction, 4 more times). The
files hold the temporary paths of the run that made them; nothing else is edited.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "tests" / "coding_agents"))

from _clis import BIN, claude_argv, claude_env  # noqa: E402
from fake_anthropic import FakeAnthropic, RepeatCommand  # noqa: E402

EVENTS = [
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
    "PreCompact", "PostCompact", "SubagentStop", "Stop", "StopFailure", "SessionEnd",
    "Notification", "PermissionRequest", "PermissionDenied",
]  # fmt: skip
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
               "PermissionDenied"}  # fmt: skip
SAVE_HOOK = (
    "import json,sys,pathlib,os;d=pathlib.Path(os.environ['CAPTURE_DIR']);"
    "d.mkdir(exist_ok=True);n=len(list(d.iterdir()));"
    "(d/f'{n:03d}.json').write_text(sys.stdin.read())"
)


def settings(capture_dir: Path) -> dict[str, object]:
    """Project settings: every event goes to the saving hook."""
    command = f'CAPTURE_DIR={capture_dir} {sys.executable} -c "{SAVE_HOOK}"'
    hook = {"hooks": [{"type": "command", "command": command}]}
    return {"hooks": {e: [{"matcher": "", **hook} if e in TOOL_EVENTS else hook] for e in EVENTS}}


def run_claude(root: Path, model: RepeatCommand, extra: list[str] | None = None) -> None:
    """One headless run in root/project with HOME=root/home."""
    work = root / "project"
    (work / ".claude").mkdir(parents=True, exist_ok=True)
    (work / ".claude" / "settings.json").write_text(json.dumps(settings(root / "events")))
    with FakeAnthropic(model) as server:
        env = claude_env(root / "home") | {"ANTHROPIC_BASE_URL": server.url}
        argv = claude_argv(BIN / "claude", "Run the checks until they pass.", *(extra or []))
        subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True, timeout=120)


def events(root: Path) -> list[dict[str, object]]:
    """The saved hook payloads, in the order they fired."""
    return [json.loads(p.read_text()) for p in sorted((root / "events").glob("*.json"))]


def keep_transcripts(root: Path, scenario: str) -> None:
    """Copy the run's project folder (session .jsonl and subagent transcripts) unchanged."""
    projects = root / "home" / ".claude" / "projects"
    target = HERE / "transcripts" / scenario
    shutil.rmtree(target, ignore_errors=True)
    for project in projects.iterdir():
        shutil.copytree(project, target / project.name, ignore=shutil.ignore_patterns("memory"))


def main() -> None:
    """Run both scenarios and a resumed turn; write hook-events/ and transcripts/."""
    failing = "ls build/output.txt"
    seen: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="claude-capture-") as tmp:
        root = Path(tmp) / "failing-loop"
        healthy = ["echo checking", "pwd", "printf 'a\\nb\\n' | wc -l"]
        run_claude(root, RepeatCommand(commands=healthy + [failing] * 8, final_text="Giving up."))
        session = next(e for e in events(root))["session_id"]
        run_claude(root, RepeatCommand(commands=[], final_text="ok"), ["--resume", str(session)])
        keep_transcripts(root, "failing-loop")  # both turns: the loop and a resumed one
        all_events = events(root)
        root = Path(tmp) / "compaction"
        loop = "echo attempt >> attempts.log; echo 'FAIL: 3 tests failed' >&2; exit 1"
        run_claude(root, RepeatCommand(commands=[loop] * 8, compact_after=3))
        keep_transcripts(root, "compaction")
        all_events += events(root)
    for event in all_events:
        name = str(event["hook_event_name"])
        if name == "SessionStart":
            name += f"-{event['source']}"
        seen.setdefault(name, event)
    out = HERE / "hook-events"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    for name, event in seen.items():
        (out / f"{name}.json").write_text(json.dumps(event, indent=2) + "\n")
    print("events:", ", ".join(sorted(seen)))


if __name__ == "__main__":
    main()

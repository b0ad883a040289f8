"""Regenerate exit-codes/ (real Codex, fake model server): what a PostToolUse hook can know of
a shell command's exit code.

    python tests/data/coding_agents/codex/capture_exit_codes.py

Codex's ``PostToolUse`` payload carries the command's output but no exit code. Its rollout
file (``transcript_path``) holds the command's ``item_completed`` event, with ``exit_code``,
by the time the hook runs. A hook of our own records each ``PostToolUse`` payload together with
the rollout's size at that moment (``rollout_bytes``); the rollout is copied as it ended, so a
test can cut it back to what the hook could read.
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

from _clis import BIN, codex_argv, codex_config, codex_env  # noqa: E402
from fake_openai import FakeOpenAI, RepeatCommand  # noqa: E402

# Exit codes 1, 2, 0, 3 (no output), 0 (no output).
COMMANDS = ['python3 -c "print(1"', "sed -n 1,10p nofile1", "echo hello", "exit 3", "true"]

# The recording hook: the payload and the rollout's size when the hook ran.
HOOK = """\
import json, os, sys
event = json.load(sys.stdin)
size = os.path.getsize(event["transcript_path"])
with open(sys.argv[1], "a") as out:
    out.write(json.dumps({"payload": event, "rollout_bytes": size}) + "\\n")
"""


def main() -> None:
    """Run the commands once each and keep the payloads and the rollout."""
    with tempfile.TemporaryDirectory(prefix="codex-exit-codes-") as tmp:
        root = Path(tmp)
        home, work = root / "home", root / "work"
        for folder in (home, work):
            folder.mkdir()
        (root / "hook.py").write_text(HOOK)
        events = root / "events.jsonl"
        command = f"{sys.executable} {root / 'hook.py'} {events}"
        hook = {"type": "command", "command": command, "timeout": 30}
        hooks = {"hooks": {"PostToolUse": [{"hooks": [hook]}]}}
        (home / "hooks.json").write_text(json.dumps(hooks))
        model = RepeatCommand(list(COMMANDS), final_text="done")
        with FakeOpenAI(model) as server:
            (home / "config.toml").write_text(codex_config(server.base_url))
            argv = codex_argv(BIN / "codex", "Run the checks.")
            subprocess.run(argv, cwd=work, env=codex_env(root, home), stdin=subprocess.DEVNULL,
                           check=True, capture_output=True, timeout=120)  # fmt: skip
        (rollout,) = (home / "sessions").rglob("rollout-*.jsonl")
        out = HERE / "exit-codes"
        for old in out.glob("*"):
            old.unlink()
        shutil.copy(rollout, out / rollout.name)
        shutil.copy(events, out / "PostToolUse.jsonl")
        print(rollout.name)


if __name__ == "__main__":
    main()

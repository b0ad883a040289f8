"""The README's command-line examples, run as written: they cannot quietly stop being true."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _commands(heading: str) -> list[str]:
    """The `loopwarden ...` lines of the first ```bash block after ``heading``."""
    section = README[README.index(heading) :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, heading
    lines = [line.split("  #")[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line.startswith("loopwarden ")]


TRY_NEXT = _commands("Try next:")


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "loopwarden", *shlex.split(command)[1:]]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    return tmp_path


def test_the_try_next_block_has_the_commands() -> None:
    assert len(TRY_NEXT) >= 5 and any("--sweep" in c for c in TRY_NEXT)


@pytest.mark.parametrize("command", TRY_NEXT)
def test_each_readme_command_runs_and_says_what_ran(command: str, workdir: Path) -> None:
    done = _run(command, workdir)
    assert done.returncode in (0, 1), done.stderr
    assert "error" not in done.stderr.lower()
    if command.startswith("loopwarden analyze"):
        # No setting of an example is clamped to another value: what it says is what ran.
        assert "runs as" not in done.stdout and "runtime uses" not in done.stderr


def test_the_sweep_example_rows_differ_as_their_labels_say(workdir: Path) -> None:
    sweep = next(c for c in TRY_NEXT if "--sweep" in c)
    done = _run(sweep + " --output json", workdir)
    rows = json.loads(done.stdout)["sweep"]
    assert [row["settings"] for row in rows] == [row["effective"] for row in rows]


def test_the_quick_start_result_is_as_described(workdir: Path) -> None:
    done = _run("loopwarden analyze examples/transcripts", workdir)
    assert done.returncode == 1
    assert "25 trajectories, 183 tool calls" in done.stdout
    assert "warned at call 13" in done.stdout and "stopped the run at call 17" in done.stdout
    assert "25 runs, 183 tool calls" in README and "warning at call 13" in README

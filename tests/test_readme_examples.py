"""The README's examples, commands and Python, run as written: they cannot quietly go stale."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import loopwarden as lw

from _support import require_binary

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


# -- the README's Python examples, run as written ----------------------------------------------


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


def _loop_namespace(executions: list[str]) -> dict[str, Any]:
    """What the examples leave to the reader: the tool and the note, plus a session to name."""

    def execute(tool: str, params: dict[str, Any]) -> dict[str, Any]:
        executions.append(tool)
        return {"content": [{"type": "text", "text": "Tests: 3 failed"}]}

    async def execute_async(tool: str, params: dict[str, Any]) -> dict[str, Any]:
        return execute(tool, params)

    def append_note(result: dict[str, Any], note: str) -> dict[str, Any]:
        return {**result, "note": note}

    return {
        "execute": execute,
        "execute_async": execute_async,
        "append_note": append_note,
        "session_id": "s1",
        "run_id": "r1",
    }


def test_the_readme_has_its_two_python_examples() -> None:
    blocks = _python_blocks()
    assert len(blocks) == 2
    assert "def run_tool(" in blocks[0] and "async def run_tool_async(" in blocks[1]


def test_the_agent_loop_example_warns_then_blocks_a_loop() -> None:
    from loopwarden import LoopStoppedError

    executions: list[str] = []
    namespace = _loop_namespace(executions)
    exec(compile(_python_blocks()[0], "README.md python block 1", "exec"), namespace)
    answers = []
    # No config, the recommended profile: the 3rd identical call warns, the 4th is blocked,
    # and the 5th (a blocked call retried) stops the run.
    with pytest.raises(LoopStoppedError):
        for i in range(25):
            call = ("s2", "r", "exec", {"command": "npm test"}, f"c{i}")
            answers.append(namespace["run_tool"](*call))
    notes = [i for i, answer in enumerate(answers, 1) if "note" in answer]
    assert notes == [3]
    assert "WARNING" in answers[2]["note"]
    assert len(executions) == 3 and len(answers) == 4
    assert "CRITICAL" in json.dumps(answers[3])


def test_the_async_example_runs_on_redis_as_written(tmp_path: Path) -> None:
    pytest.importorskip("redis", reason="pip install '.[redis]'")
    binary = require_binary("redis-server", "apt-get install redis-server")
    from test_redis_store import RedisServer, _free_port

    server = RedisServer(binary, _free_port(), tmp_path)
    server.start()
    try:
        block = _python_blocks()[1]
        assert '"redis://host:6379/0"' in block
        executions: list[str] = []
        namespace = _loop_namespace(executions)
        namespace["lw"] = lw
        source = block.replace('"redis://host:6379/0"', repr(server.url))
        exec(compile(source, "README.md python block 2", "exec"), namespace)

        async def loop() -> list[Any]:
            call = namespace["run_tool_async"]
            return [await call("s3", "exec", {"command": "npm test"}) for _ in range(6)]

        answers = asyncio.run(loop())
    finally:
        server.stop()
    # The recommended profile: the 4th identical call with an identical result is blocked.
    assert len(executions) == 3
    assert all("CRITICAL" in json.dumps(answer) for answer in answers[3:])


# -- the hooks block: each command writes the settings file its comment names -------------------


def _hook_lines() -> list[tuple[str, str]]:
    section = README[README.index("## Protect Claude Code") :]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None
    lines = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition("#")
        lines.append((command.strip(), comment.split(";")[0].strip()))
    return lines


@pytest.mark.parametrize(("command", "settings"), _hook_lines())
def test_each_hooks_install_line_writes_the_file_its_comment_names(
    command: str, settings: str, tmp_path: Path
) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    args = [sys.executable, "-m", "loopwarden", *shlex.split(command)[1:]]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    written = tmp_path / settings.removeprefix("~/")
    assert written.is_file(), f"{command!r} did not write {settings}: {done.stdout}{done.stderr}"
    assert "loopwarden" in written.read_text(encoding="utf-8")

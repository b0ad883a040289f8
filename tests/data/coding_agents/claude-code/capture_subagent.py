"""Regenerate transcripts/subagent-loop/ (real Claude Code, fake model server): a subagent loops.

    python tests/data/coding_agents/claude-code/capture_subagent.py

The main conversation delegates a search to a subagent (the ``Agent`` tool); the subagent runs
one failing command six times, gives up, and the main conversation answers. Claude Code writes
the session transcript and the subagent's own transcript
(``<project>/<session>/subagents/agent-<id>.jsonl``); the project folder is copied unchanged,
for the importer tests (tests/test_transcripts_coding_agents.py).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
sys.path.insert(0, str(REPO / "tests" / "coding_agents"))

from _clis import BIN, claude_argv, claude_env  # noqa: E402
from fake_anthropic import FakeAnthropic, Reply, ToolCall, tool_results, user_texts  # noqa: E402

TASK = "SUBAGENT TASK: find the build configuration file."
LOOP = "ls config/build.toml"


@dataclass
class DelegateThenLoop:
    """Main thread: call the subagent tool once, then answer. Subagent: repeat LOOP, give up."""

    repeats: int = 6

    def reply(self, request: dict[str, Any]) -> Reply:
        """The next step, decided from the request (main thread or subagent)."""
        tools = [str(t.get("name")) for t in request.get("tools") or [] if isinstance(t, dict)]
        if not tools:
            return Reply(text="ok")  # a side request (title...)
        results = tool_results(request)
        if any(TASK in text for text in user_texts(request)):  # the subagent's conversation
            if len(results) >= self.repeats:
                return Reply(text="I could not find it.")
            return Reply(tool_calls=[ToolCall("Bash", {"command": LOOP, "description": "look"})])
        if results:
            return Reply(text="The subagent could not find the configuration.")
        agent_tool = "Agent" if "Agent" in tools else "Task"
        call = {"description": "find config", "prompt": TASK, "subagent_type": "general-purpose"}
        return Reply(tool_calls=[ToolCall(agent_tool, call)])


def main() -> None:
    """Run the scenario and copy the project folder to transcripts/subagent-loop/."""
    with tempfile.TemporaryDirectory(prefix="claude-subagent-") as tmp:
        root = Path(tmp)
        work = root / "project"
        work.mkdir()
        with FakeAnthropic(DelegateThenLoop()) as server:
            env = claude_env(root / "home") | {"ANTHROPIC_BASE_URL": server.url}
            argv = claude_argv(BIN / "claude", "Where is the build configuration?")
            subprocess.run(argv, cwd=work, env=env, check=True, capture_output=True, timeout=120)
        target = HERE / "transcripts" / "subagent-loop"
        shutil.rmtree(target, ignore_errors=True)
        for project in (root / "home" / ".claude" / "projects").iterdir():
            shutil.copytree(project, target / project.name, ignore=shutil.ignore_patterns("memory"))
    for path in sorted(target.rglob("*")):
        print(path.relative_to(target))


if __name__ == "__main__":
    main()

"""Session logs recorded with loopwarden's hook on: the calls it refused never ran.

The three logs were recorded by the real CLIs (Claude Code 2.1.197, Codex 0.171.0, Gemini CLI
0.61.0) in the end-to-end loop test: one failing command repeated, three runs, the 4th call
refused by the hook (and, for Claude Code and Codex, every later call of the turn).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopwarden.transcripts import read_transcripts

LOGS = Path(__file__).parent / "data" / "coding_agents" / "with-hook"
FILES = {
    "claude-code": "claude-code-session.jsonl",
    "codex": "codex-rollout.jsonl",
    "gemini-cli": "gemini-cli-session.jsonl",
}
RAN = 3  # the calls that really ran in each recorded session


@pytest.mark.parametrize("agent", list(FILES))
def test_the_calls_the_hook_refused_are_recognised(agent: str) -> None:
    [trajectory] = [t for t in read_transcripts(LOGS / FILES[agent]) if t.calls]
    calls = trajectory.calls
    assert [c.refused for c in calls] == [False] * RAN + [True] * (len(calls) - RAN)
    assert all(not c.has_outcome for c in calls[RAN:])  # refused: no outcome of their own
    # a warning loopwarden added to a result is not part of the tool's output
    assert all("loopwarden" not in str(c.result) and "WARNING" not in str(c.result) for c in calls)
    assert len({str(c.result) for c in calls[:RAN]}) == 1  # three identical failures


@pytest.mark.parametrize("agent", list(FILES))
def test_analyze_counts_no_refused_call_as_saved_and_still_finds_the_loop(agent: str) -> None:
    argv = [sys.executable, "-m", "loopwarden", "analyze", str(LOGS / FILES[agent])]
    argv += ["--set", "profile=recommended", "--output", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr  # the guard intervenes
    [report] = [t for t in json.loads(done.stdout)["trajectories"] if t["calls"]]
    assert report["calls_saved"] == 0  # the hook had already refused them: none ran
    assert report["warnings"] >= 1 and report["blocks"] >= 1, report
    assert report["first_block"]["call"] == RAN + 1, report

"""A library writes nothing to stderr unless the application configured logging."""

from __future__ import annotations

import subprocess
import sys

LOOP = """
import loopwarden as lw
{setup}
guard = lw.LoopGuard({{"profile": "recommended"}})
for _ in range(6):
    d = guard.before_tool_call("s", "search", {{"q": "x"}}, run_id="r")
    if d.action == "allow" or d.action == "warn":
        guard.after_tool_call("s", "search", {{"q": "x"}}, result="same", run_id="r")
print(d.action)
"""


def _run(setup: str) -> subprocess.CompletedProcess[str]:
    code = LOOP.format(setup=setup)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_warnings_blocks_and_stops_are_silent_without_logging_configured() -> None:
    done = _run("")
    assert done.returncode == 0 and done.stdout.strip() == "stop"
    assert done.stderr == ""


def test_they_reach_the_handlers_the_application_configures() -> None:
    done = _run("import logging; logging.basicConfig(level=logging.WARNING)")
    assert done.stdout.strip() == "stop"
    for action in ("warn", "block", "stop"):
        assert f"loop {action}: search" in done.stderr

"""The integration examples run as written, and docs/integrations.md shows them verbatim.

Each example drives its framework with a scripted stand-in model that repeats one tool call; the
run must show the warning once, then the block, and never more tool executions than allowed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from _support import require_module

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "integrations"
DOC = ROOT / "docs" / "integrations.md"

# (example file, module it needs, extra that provides it). All examples use warning 3 / critical 5.
CASES = [
    ("langchain_agent.py", "langchain.agents", "langchain"),
    ("openai_agents_agent.py", "agents", "openai-agents"),
    ("pydantic_ai_agent.py", "pydantic_ai", "pydantic-ai"),
    ("google_adk_agent.py", "google.adk", "google-adk"),
]
# Shown in the doc but run by their adapter's test (they need a model server or a CLI).
DOC_ONLY = ["claude_agent_sdk_agent.py", "crewai_agent.py"]
WARNING, CRITICAL = 3, 5
TOOL_OUTPUT = "It is 21C in Paris."


def _code_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


@pytest.mark.parametrize(("name", "module", "extra"), CASES)
def test_example_runs_and_the_loop_is_cut(name: str, module: str, extra: str) -> None:
    require_module(module, extra)
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count(TOOL_OUTPUT) == CRITICAL  # the tool ran until the critical threshold
    assert out.count(f"WARNING: You have called get_weather {WARNING} times") == 1
    assert (
        f"CRITICAL: Called get_weather with identical arguments and identical outcomes "
        f"{CRITICAL} times" in out
    )


@pytest.mark.parametrize("name", [case[0] for case in CASES] + DOC_ONLY)
def test_docs_show_the_example_as_written(name: str) -> None:
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    assert source in _code_blocks(DOC.read_text(encoding="utf-8")), (
        f"docs/integrations.md must contain examples/integrations/{name} verbatim in a "
        "```python block; copy the file into the doc after changing it"
    )


def test_every_python_block_in_the_doc_compiles() -> None:
    blocks = _code_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= len(CASES)
    for number, block in enumerate(blocks, 1):
        compile(block, f"docs/integrations.md python block {number}", "exec")

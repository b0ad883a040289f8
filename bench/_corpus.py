"""The development corpus as the benchmarks read it (tests/data/eval, flat JSONL).

Run the benchmarks from the repository root as modules (``python -m bench.bench_engine``), so
this shared loader imports as ``bench._corpus``.
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MINI_SWE = "minisweagent_gemini3pro_verified.jsonl.gz"
TAU_BENCH = "taubench_airline_gpt4o.jsonl.gz"


# The corpus that ships with the repository (tests/data/eval/README.md says what it holds).
DEFAULT_CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "eval"
CORPUS_HELP = (
    "folder holding the development corpus files "
    f"({MINI_SWE} and {TAU_BENCH}); default: tests/data/eval of this repository"
)


def corpus_dir(explicit: str | None) -> Path:
    """The corpus folder: ``--corpus`` when given, else the repository's tests/data/eval."""
    folder = Path(explicit) if explicit else DEFAULT_CORPUS
    missing = [name for name in (MINI_SWE, TAU_BENCH) if not (folder / name).is_file()]
    if missing:
        sys.exit(f"corpus not found: {folder} has no {' or '.join(missing)} (pass --corpus DIR)")
    return folder


def rows(path: Path) -> Iterator[dict[str, Any]]:
    """The lines of one gzipped flat-JSONL corpus file."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def text_of(row: dict[str, Any]) -> str:
    """A row's result as text (structured results as their JSON)."""
    return row["result"] if isinstance(row["result"], str) else json.dumps(row["result"])


def exec_result(row: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A mini-swe-agent bash row shaped as an OpenClaw exec result, with the runtime metadata
    (duration, pid) that varies between runs and that outcome hashing must ignore."""
    output = text_of(row)
    label = row["error"] or ""
    code = int(label.split("=")[1]) if label.startswith("returncode=") else 0
    details = {
        "status": "failed" if code else "completed",
        "exitCode": code,
        "durationMs": rng.randint(5, 30_000),
        "aggregated": output,
        "cwd": "/testbed",
        "pid": rng.randint(100, 60_000),
        "timedOut": label == "timeout",
    }
    return {"content": [{"type": "text", "text": output}], "details": details}


SWE_AGENT_FILES = 448


def write_swe_agent_corpus(source: Path, folder: Path, count: int = SWE_AGENT_FILES) -> int:
    """Write the first ``count`` runs of the mini-swe-agent corpus file ``source`` as SWE-agent
    1.x ``.traj`` files (function-calling layout, as SWE-agent writes them: ``indent=2``) into
    ``folder``; returns the number of tool calls written.

    The commands and their outputs are the corpus's own; the thoughts are one fixed sentence
    (the corpus keeps none), the ids and costs are made up. Deterministic: the same files on
    every run.
    """
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in rows(source):
        if row["trajectory"] not in runs and len(runs) == count:
            break
        runs.setdefault(row["trajectory"], []).append(row)
    calls = 0
    for number, (name, steps) in enumerate(runs.items()):
        doc = _swe_agent_doc(number, steps)
        stem = name.rsplit("/", 1)[-1]
        (folder / f"{stem}.traj").write_text(json.dumps(doc, indent=2), encoding="utf-8")
        calls += len(steps)
    return calls


_THOUGHT = "I will run the next command to look into the issue."


def _swe_agent_doc(number: int, steps: list[dict[str, Any]]) -> dict[str, Any]:
    trajectory: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": "You are a helpful assistant.",
            "agent": "main",
            "message_type": "system_prompt",
        },
        {
            "role": "user",
            "content": "Solve the issue.",
            "agent": "main",
            "message_type": "observation",
        },
    ]
    for index, row in enumerate(steps):
        command = row["args"]["command"]
        output = text_of(row)
        call_id = f"call_{number:04d}_{index:04d}"
        trajectory.append(
            {
                "action": command,
                "observation": output,
                "response": _THOUGHT,
                "thought": _THOUGHT,
                "execution_time": 0.25 + index % 7 / 10,
                "state": {"working_dir": "/testbed"},
            }
        )
        history.append(
            {
                "role": "assistant",
                "content": _THOUGHT,
                "thought": _THOUGHT,
                "action": command,
                "agent": "main",
                "message_type": "action",
                "tool_calls": [
                    {
                        "function": {"arguments": json.dumps({"command": command}), "name": "bash"},
                        "id": call_id,
                        "type": "function",
                    }
                ],
            }
        )
        history.append(
            {
                "role": "tool",
                "content": output,
                "agent": "main",
                "tool_call_ids": [call_id],
                "message_type": "observation",
            }
        )
    model = {"agent": {"model": {"name": "gemini/gemini-3-pro-preview"}}}
    info = {
        "exit_status": "submitted",
        "submission": "",
        "model_stats": {
            "instance_cost": 0.01 * len(steps),
            "tokens_sent": 5000 * len(steps),
            "tokens_received": 200 * len(steps),
            "api_calls": len(steps),
        },
    }
    return {
        "environment": "main",
        "trajectory": trajectory,
        "history": history,
        "info": info,
        "replay_config": json.dumps(model),
    }

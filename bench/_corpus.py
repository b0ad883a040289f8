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

"""The development corpus as the benchmarks read it (shared/eval, flat JSONL).

Run the benchmarks from the repository root as modules (``python -m bench.bench_engine``), so
this shared loader imports as ``bench._corpus``.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MINI_SWE = "minisweagent_gemini3pro_verified.jsonl.gz"
TAU_BENCH = "taubench_airline_gpt4o.jsonl.gz"


def shared_dir(explicit: str | None) -> Path:
    """The shared/ folder: ``--shared``, ``$LOOPWARDEN_SHARED``, or next to the repository."""
    candidates = [explicit, os.environ.get("LOOPWARDEN_SHARED")]
    candidates.append(str(Path(__file__).resolve().parents[2] / "shared"))
    for candidate in candidates:
        if candidate and (Path(candidate) / "eval").is_dir():
            return Path(candidate)
    sys.exit("shared/eval not found: pass --shared DIR or set LOOPWARDEN_SHARED")


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

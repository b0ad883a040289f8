"""Benchmark ``loopwarden analyze``: its CPU time against reading the files, and ``--jobs 2``.

Two rows of docs/performance.md, each measured next to its baseline in the same run:

1. **Against the floor.** 448 SWE-agent ``.traj`` files (written from the development corpus's
   mini-swe-agent runs, see ``bench/_corpus.py``): the CPU time of the command
   ``python -m loopwarden analyze DIR --output json`` against that of a program that only reads
   every file and parses it with orjson (the least any analysis must do). Both are whole
   processes (interpreter start-up included), so the figures are CPU time of the child
   (user + sys), steadier than wall time on a shared machine; best of ``--rounds``.
2. **``--jobs 2`` against ``--jobs 1``.** The wall time of the same command with each, on the
   same 448 files and on a few large flat-JSONL files (the example transcripts repeated into
   ``--flat-trajectories`` runs over ``--flat-files`` files). Rounds are interleaved; the
   ratio is given per round (wall time on a busy machine mostly measures the neighbours: read
   the range, and rerun on a quiet machine).

Run from the repository root, with the interpreter whose loopwarden you measure (the first
line says which build it is)::

    python -m bench.bench_analyze                  # both rows, 5 rounds
    python -m bench.bench_analyze --rounds 3 --no-flat
    /tmp/lw/bin/python -m bench.bench_analyze      # the compiled build installed in a venv
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench._corpus import CORPUS_HELP, MINI_SWE, SWE_AGENT_FILES, corpus_dir, write_swe_agent_corpus

from loopwarden.cli import engine_build
from loopwarden.transcripts import MISSING, Compaction, Trajectory, iter_sources, read_transcripts

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"

# The floor: read every file and parse it, nothing else.
_FLOOR = """
import sys, orjson
from pathlib import Path
for path in sorted(Path(sys.argv[1]).glob("*.traj")):
    orjson.loads(path.read_bytes())
"""


def _rows(traj: Trajectory, new_id: str) -> list[str]:
    rows: list[str] = []
    step = 0
    for item in traj.items:
        if isinstance(item, Compaction):
            rows.append(json.dumps({"trajectory": new_id, "compaction": True}))
            continue
        row: dict[str, Any] = {"trajectory": new_id, "step": step, "tool": item.tool,
                               "args": item.params, "error": item.error}  # fmt: skip
        if item.result is not MISSING:
            row["result"] = item.result
        rows.append(json.dumps(row))
        step += 1
    return rows


def build_flat_corpus(folder: Path, trajectories: int, files: int) -> int:
    """The example transcripts repeated into ``trajectories`` runs over ``files`` flat-JSONL
    files; returns the number of tool calls written."""
    # Flat JSONL has no line for a run without tool calls, so such runs are not seeds.
    seeds = [t for p in iter_sources([EXAMPLES]) for t in read_transcripts(p) if t.calls]
    per_file = -(-trajectories // files)
    calls = 0
    written = 0
    for number in range(files):
        lines: list[str] = []
        for _ in range(min(per_file, trajectories - written)):
            seed = seeds[written % len(seeds)]
            lines.extend(_rows(seed, f"{seed.id}#{written}"))
            calls += len(seed.calls)
            written += 1
        (folder / f"part-{number:03d}.jsonl").write_text("\n".join(lines) + "\n")
    return calls


def _run(command: Sequence[str]) -> tuple[float, float]:
    """Run a child to completion: (wall seconds, CPU seconds of the child, user + sys)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):  # 1: loops found
        raise SystemExit(f"{' '.join(command)} exited with {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _analyze(folder: Path, out: Path, jobs: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "loopwarden",
        "analyze",
        str(folder),
        "--jobs",
        str(jobs),
        "--output",
        "json",
        "--out",
        str(out),
    ]


def _span(values: list[float]) -> str:
    return f"{min(values):.3f}–{max(values):.3f}" if len(values) > 1 else f"{values[0]:.3f}"


def floor_row(folder: Path, out: Path, rounds: int) -> None:
    """Row 1: CPU time of the command against reading + parsing the files with orjson."""
    floor: list[float] = []
    analyze: list[float] = []
    bare: list[float] = []
    for _ in range(rounds):
        bare.append(_run([sys.executable, "-c", "pass"])[1])
        floor.append(_run([sys.executable, "-c", _FLOOR, str(folder)])[1])
        analyze.append(_run(_analyze(folder, out, 1))[1])
    ratios = [a / f for a, f in zip(analyze, floor, strict=True)]
    print(f"  python -c pass                          CPU {min(bare):.3f} s (range {_span(bare)})")
    print(
        f"  read + orjson.loads every file (floor)  CPU {min(floor):.3f} s (range {_span(floor)})"
    )
    print(
        f"  loopwarden analyze --output json        CPU {min(analyze):.3f} s "
        f"(range {_span(analyze)})"
    )
    print(
        f"  analyze ÷ floor: {min(analyze) / min(floor):.2f}× (best against best; "
        f"per round {_span(ratios)}×)"
    )


def jobs_row(label: str, folder: Path, out: Path, rounds: int) -> None:
    """Row 2: wall time of --jobs 1 and --jobs 2, interleaved, with the ratio per round."""
    walls: dict[int, list[float]] = {1: [], 2: []}
    cpus: dict[int, list[float]] = {1: [], 2: []}
    ratios: list[float] = []
    for number in range(rounds):
        for jobs in (1, 2) if number % 2 == 0 else (2, 1):  # neither always goes first
            wall, cpu = _run(_analyze(folder, out, jobs))
            walls[jobs].append(wall)
            cpus[jobs].append(cpu)
        ratios.append(walls[1][-1] / walls[2][-1])
    print(f"  {label}")
    for jobs in (1, 2):
        print(
            f"    --jobs {jobs}: wall median {statistics.median(walls[jobs]):.2f} s "
            f"(range {_span(walls[jobs])}), CPU median {statistics.median(cpus[jobs]):.2f} s"
        )
    print(
        f"    --jobs 1 ÷ --jobs 2 wall: median {statistics.median(ratios):.2f}× "
        f"(per round {_span(ratios)}×)"
    )


def main() -> None:
    """Build the corpora, then measure both rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help=CORPUS_HELP)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--files",
        type=int,
        default=SWE_AGENT_FILES,
        help=f"SWE-agent .traj files to write (default {SWE_AGENT_FILES})",
    )
    parser.add_argument("--flat-trajectories", type=int, default=10_000)
    parser.add_argument("--flat-files", type=int, default=20)
    parser.add_argument("--no-flat", action="store_true", help="skip the flat-JSONL jobs row")
    args = parser.parse_args()
    print(f"build: {engine_build()}; {sys.executable}")
    with tempfile.TemporaryDirectory() as tmp:
        trajs = Path(tmp, "traj")
        trajs.mkdir()
        calls = write_swe_agent_corpus(corpus_dir(args.corpus) / MINI_SWE, trajs, args.files)
        size = sum(p.stat().st_size for p in trajs.iterdir()) / 1e6
        out = Path(tmp, "report.json")
        print(f"corpus: {args.files} SWE-agent .traj files, {calls:,} tool calls, {size:.1f} MB")
        print(f"load average {os.getloadavg()[0]:.1f}")
        print("row 1: analyze against reading + parsing the files")
        floor_row(trajs, out, args.rounds)
        print("row 2: --jobs 2 against --jobs 1, wall time")
        jobs_row(f"{args.files} .traj files", trajs, out, args.rounds)
        if not args.no_flat:
            flat = Path(tmp, "flat")
            flat.mkdir()
            flat_calls = build_flat_corpus(flat, args.flat_trajectories, args.flat_files)
            jobs_row(
                f"{args.flat_files} flat-JSONL files, {args.flat_trajectories:,} "
                f"trajectories, {flat_calls:,} tool calls",
                flat,
                out,
                args.rounds,
            )
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

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
    /tmp/lw/bin/python -m bench.bench_analyze --baseline /tmp/lw-before/bin/python

``--baseline PYTHON`` measures a second interpreter's loopwarden (another build or version,
installed in its own venv) in the same rounds, interleaved, and prints its figures beside.

Bytecode: the children run without ``PYTHONDONTWRITEBYTECODE``, so that an editable install
runs from cached ``.pyc`` files as an installed one does (with it, every run would compile
every loopwarden module again); the first round writes the caches.
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


# The children's environment: with the bytecode cache (see the module's docstring). The
# baseline's runs also without PYTHONPATH: its own loopwarden, not this one's source.
_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
_BASELINE_ENV = {name: value for name, value in _ENV.items() if name != "PYTHONPATH"}


def _run(command: Sequence[str], env: dict[str, str] = _ENV) -> tuple[float, float]:
    """Run a child to completion: (wall seconds, CPU seconds of the child and of its waited-for
    children, user + sys)."""
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode not in (0, 1):  # 1: loops found
        raise SystemExit(f"{' '.join(command)} exited with {child.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def _analyze(python: str, folder: Path, out: Path, jobs: int) -> list[str]:
    return [
        python,
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


def floor_row(builds: dict[str, str], folder: Path, out: Path, rounds: int) -> None:
    """Row 1: CPU time of the command against reading + parsing the files with orjson."""
    floor: list[float] = []
    bare: list[float] = []
    analyze: dict[str, list[float]] = {label: [] for label in builds}
    for _ in range(rounds):
        bare.append(_run([sys.executable, "-c", "pass"])[1])
        floor.append(_run([sys.executable, "-c", _FLOOR, str(folder)])[1])
        for label, python in builds.items():
            analyze[label].append(_run(_analyze(python, folder, out, 1), _env(label))[1])
    print(f"  python -c pass                          CPU {min(bare):.3f} s (range {_span(bare)})")
    print(
        f"  read + orjson.loads every file (floor)  CPU {min(floor):.3f} s (range {_span(floor)})"
    )
    for label, times in analyze.items():
        ratios = [a / f for a, f in zip(times, floor, strict=True)]
        print(
            f"  {label}: loopwarden analyze --output json  CPU {min(times):.3f} s "
            f"(range {_span(times)}); ÷ floor {min(times) / min(floor):.2f}× (best against "
            f"best; per round {_span(ratios)}×)"
        )


def jobs_row(builds: dict[str, str], label: str, folder: Path, out: Path, rounds: int) -> None:
    """Row 2: wall time of --jobs 1 and --jobs 2, interleaved, with the ratio per round."""
    walls: dict[tuple[str, int], list[float]] = {(b, jobs): [] for b in builds for jobs in (1, 2)}
    cpus: dict[tuple[str, int], list[float]] = {key: [] for key in walls}
    ratios: dict[str, list[float]] = {build: [] for build in builds}
    for number in range(rounds):
        for build, python in builds.items():
            for jobs in (1, 2) if number % 2 == 0 else (2, 1):  # neither always goes first
                wall, cpu = _run(_analyze(python, folder, out, jobs), _env(build))
                walls[build, jobs].append(wall)
                cpus[build, jobs].append(cpu)
            ratios[build].append(walls[build, 1][-1] / walls[build, 2][-1])
    print(f"  {label}")
    for build in builds:
        for jobs in (1, 2):
            print(
                f"    {build}, --jobs {jobs}: wall median "
                f"{statistics.median(walls[build, jobs]):.2f} s (range "
                f"{_span(walls[build, jobs])}), CPU median "
                f"{statistics.median(cpus[build, jobs]):.2f} s"
            )
        print(
            f"    {build}, --jobs 1 ÷ --jobs 2 wall: median "
            f"{statistics.median(ratios[build]):.2f}× (per round {_span(ratios[build])}×)"
        )


def _env(build: str) -> dict[str, str]:
    return _BASELINE_ENV if build == "baseline" else _ENV


def _build(label: str, python: str) -> str:
    """What ``python`` runs: its loopwarden's version, build and place."""
    probe = "import loopwarden; from loopwarden.cli import engine_build; "
    probe += "print(loopwarden.__version__, engine_build(), loopwarden.__file__)"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=_env(label))
    return done.stdout.strip() or f"cannot run: {done.stderr.strip()[-200:]}"


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
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also measure this interpreter's loopwarden in the same rounds (e.g. a venv with "
        "the build before a change)",
    )
    args = parser.parse_args()
    print(f"build: {engine_build()}; {sys.executable}")
    builds = {"this": sys.executable}
    if args.baseline:
        builds["baseline"] = args.baseline
    for label, python in builds.items():
        print(f"  {label}: {python}: {_build(label, python)}")
    with tempfile.TemporaryDirectory() as tmp:
        trajs = Path(tmp, "traj")
        trajs.mkdir()
        calls = write_swe_agent_corpus(corpus_dir(args.corpus) / MINI_SWE, trajs, args.files)
        size = sum(p.stat().st_size for p in trajs.iterdir()) / 1e6
        out = Path(tmp, "report.json")
        print(f"corpus: {args.files} SWE-agent .traj files, {calls:,} tool calls, {size:.1f} MB")
        print(f"load average {os.getloadavg()[0]:.1f}")
        print("row 1: analyze against reading + parsing the files")
        floor_row(builds, trajs, out, args.rounds)
        print("row 2: --jobs 2 against --jobs 1, wall time")
        jobs_row(builds, f"{args.files} .traj files", trajs, out, args.rounds)
        if not args.no_flat:
            flat = Path(tmp, "flat")
            flat.mkdir()
            flat_calls = build_flat_corpus(flat, args.flat_trajectories, args.flat_files)
            jobs_row(
                builds,
                f"{args.flat_files} flat-JSONL files, {args.flat_trajectories:,} "
                f"trajectories, {flat_calls:,} tool calls",
                flat,
                out,
                args.rounds,
            )
        print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

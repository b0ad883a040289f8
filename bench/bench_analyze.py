"""Benchmark ``loopwarden analyze``: replay speed on the shipped examples scaled up.

The example transcripts (every format in examples/transcripts) are imported once, written out as
loopwarden flat JSONL (results, errors and compaction markers kept), and repeated until there are
``--trajectories`` runs spread over ``--files`` files. Then the real pipeline runs on them —
streamed import, replay through LoopGuard, per-trajectory reports — and the script prints tool
calls per second for import alone and for the whole analysis at each ``--jobs`` value.

    python bench/bench_analyze.py                      # 10,000 trajectories, jobs 1 and 2
    python bench/bench_analyze.py --trajectories 2000 --jobs 1
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from loopwarden import resolve_config
from loopwarden.analyze.runner import Source, run_analysis
from loopwarden.transcripts import MISSING, Compaction, Trajectory, iter_sources, read_transcripts

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"


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


def build_corpus(folder: Path, trajectories: int, files: int) -> int:
    """Write the scaled-up corpus; returns the number of tool calls in it."""
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


def _loops(report: Any) -> bool:
    return bool(report.events)  # what the text report keeps


def _time(label: str, calls: int, func: Any) -> Any:
    start = time.perf_counter()
    result = func()
    seconds = time.perf_counter() - start
    print(f"{label:<28} {seconds:8.2f} s   {calls / seconds:>12,.0f} calls/s")
    return result


def main() -> None:
    """Build the corpus, then time import-only and full analysis."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        calls = build_corpus(folder, args.trajectories, args.files)
        sources = [Source(str(p), True) for p in sorted(folder.glob("*.jsonl"))]
        size = sum(p.stat().st_size for p in folder.glob("*.jsonl")) / 1e6
        print(f"corpus: {args.trajectories:,} trajectories, {calls:,} tool calls, "
              f"{len(sources)} files, {size:.1f} MB")  # fmt: skip
        _time("import only (streamed)", calls, lambda: [
            t for s in sources for t in read_transcripts(Path(s.path), "jsonl")
        ])  # fmt: skip
        config = resolve_config({"enabled": True})
        baseline = None
        for jobs in args.jobs:
            analysis = _time(
                f"analyze, --jobs {jobs}",
                calls,
                lambda jobs=jobs: run_analysis(sources, "jsonl", [config], jobs=jobs, keep=_loops),
            )
            totals = analysis.totals[0].as_dict()
            assert totals["calls"] == calls and not analysis.errors
            if baseline is None:
                baseline = totals
                print(f"  summary: {totals}")
            assert totals == baseline, "jobs changed the result"


if __name__ == "__main__":
    main()

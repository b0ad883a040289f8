"""Benchmark: each layer a tool call climbs through, beside the layer it is measured against.

Run from the repository root (with the build you want to measure: see docs/performance.md):

    python -m bench.bench_layers                  # full workload, best of 5 interleaved rounds
    python -m bench.bench_layers --calls 5000 --repeat 3    # a quicker look
    python -m bench.bench_layers --history-size 1000        # another historySize
    valgrind --tool=callgrind python -m bench.bench_layers --only "guard openclaw" --calls 1000 \\
        --workload-cache /tmp/workload.pickle    # built once, then loaded in a fraction of a second

One run measures, over the workload of ``bench_engine`` (every call of the development corpus
plus synthetic loops, one long session, many runs), CPU µs per call of:

- the floor: orjson (sorted keys) + sha256 of each call's params and of its result;
- the engine alone: ``detect`` → ``record_call`` → ``record_outcome`` (``{"enabled": true}``);
- ``LoopGuard`` with an in-memory store, ``openclaw`` profile (``{"enabled": true}``):
  ``before_tool_call`` → (the tool, only when allowed) → ``after_tool_call``;
- ``LoopGuard``, ``recommended`` profile;
- ``LoopGuard``, ``recommended``, the workload's calls issued in batches of 4 (every decision
  of a batch before any of its outcomes, as a runtime running one model turn's calls at once
  reports them): the calls in flight are presumed to return what the same call last returned.

and prints each layer against its baseline, with the goal. The rounds interleave the layers, so
a burst of load elsewhere on a shared machine hits them alike; each cell keeps its best round.
The batch row is also measured at historySize 1,000 and 10,000: its cost must not grow with
the history.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import logging
import os
import pickle
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._corpus import CORPUS_HELP, MINI_SWE, TAU_BENCH, corpus_dir
from bench.bench_engine import (
    ENGINES,
    Call,
    _cpu_us,
    baseline_orjson,
    build_workload,
    replay,
    replay_guard,
)

from loopwarden.cli import engine_build
from loopwarden.core.config import resolve_config
from loopwarden.guard import LoopGuard

OPENCLAW = {"enabled": True}
RECOMMENDED = {"profile": "recommended"}
BATCH = 4
BATCH_SIZES = (1_000, 10_000)  # historySize of the extra batch rows (beside --history-size)

# (row, measured, baseline, goal: measured / baseline at most)
ROWS = (
    ("engine alone vs its floor (orjson + sha256)", "engine", "floor", 1.5),
    ("LoopGuard openclaw vs the engine alone", "guard openclaw", "engine", 1.5),
    ("LoopGuard recommended vs openclaw", "guard recommended", "guard openclaw", 2.0),
    ("recommended, batches of 4, vs one at a time", "batches", "guard recommended", None),
)


def replay_batches(block: dict[str, Any], size: int, workload: list[Call]) -> dict[str, int]:
    """``LoopGuard`` with the calls of each run issued ``BATCH`` at a time.

    Every call of a batch is decided before any outcome of it is reported (the most
    concurrent order); the outcomes then come in the order the calls were made.
    """
    guard = LoopGuard({**block, "historySize": size})
    before, after = guard.before_tool_call, guard.after_tool_call
    actions: dict[str, int] = {}
    for start in range(0, len(workload), BATCH):
        chunk = workload[start : start + BATCH]
        allowed = []
        for c in chunk:
            batch = f"{c.run_id}/{start}"
            decision = before(
                "bench", c.tool, c.params, run_id=c.run_id, tool_call_id=c.call_id, batch=batch
            )
            actions[decision.action] = actions.get(decision.action, 0) + 1
            if decision.allowed:
                allowed.append((c, batch))
        for c, batch in allowed:
            after(
                "bench",
                c.tool,
                c.params,
                result=c.result,
                error=c.error,
                run_id=c.run_id,
                tool_call_id=c.call_id,
                batch=batch,
            )
    return actions


def _corpus_key(corpus: Path) -> str:
    """What the workload is built from: the corpus files' contents (not their folder, so
    checkouts of the repository in different places share one cache)."""
    digest = hashlib.sha256()
    for name in (MINI_SWE, TAU_BENCH):
        digest.update((corpus / name).read_bytes())
    return digest.hexdigest()


def load_workload(corpus: Path, calls: int, cache: Path | None) -> list[Call]:
    """``build_workload``, or its copy in ``cache`` when that was built from the same corpus.

    Building the workload costs far more than measuring one layer (billions of instructions
    under callgrind, several seconds on the CPU): a cache makes repeated runs cheap.
    """
    if cache is None:
        return build_workload(corpus, calls)
    key = _corpus_key(corpus)  # the whole workload is kept: --calls takes its first calls
    saved = _read_cache(cache)
    if saved is not None and saved[0] == key:
        return list(saved[1][:calls])
    workload = build_workload(corpus, 10**9)
    # Written beside the cache, then renamed over it: a run stopped mid-write (or two runs
    # writing at once) never leaves a half-written cache for the next run to read.
    fd, temporary = tempfile.mkstemp(dir=cache.parent, prefix=f".{cache.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            pickle.dump((key, workload), file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, cache)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return workload[:calls]


def _read_cache(cache: Path) -> tuple[str, list[Call]] | None:
    """The cache's (corpus key, workload), or None when there is none or it cannot be read
    (then it is built again and replaced)."""
    try:
        with cache.open("rb") as file:
            key, workload = pickle.load(file)
    except FileNotFoundError:
        return None
    except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError) as error:
        print(f"workload cache {cache} unreadable ({error}); building it again", file=sys.stderr)
        return None
    return key, workload


def layers(workload: list[Call], size: int) -> dict[str, Callable[[], Any]]:
    """Each measured layer as a function of no arguments running the whole workload once."""
    floor = baseline_orjson(workload)
    if floor is None:
        raise SystemExit("orjson is not installed: the floor cannot be measured")
    config = resolve_config({**OPENCLAW, "historySize": size})
    out: dict[str, Callable[[], Any]] = {
        "floor": floor,
        "engine": functools.partial(replay, ENGINES["loopwarden"], workload, config),
        "guard openclaw": functools.partial(replay_guard, OPENCLAW, size, workload),
        "guard recommended": functools.partial(replay_guard, RECOMMENDED, size, workload),
        "batches": functools.partial(replay_batches, RECOMMENDED, size, workload),
    }
    for extra in BATCH_SIZES:
        if extra != size:
            out[f"batches @{extra:,}"] = functools.partial(
                replay_batches, RECOMMENDED, extra, workload
            )
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help=CORPUS_HELP)
    parser.add_argument("--calls", type=int, default=10**9, help="use only the first N calls")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (best is kept)")
    parser.add_argument("--history-size", type=int, default=30, help="historySize (default 30)")
    parser.add_argument(
        "--only",
        metavar="LAYER",
        help="run this one layer once, untimed (for callgrind: run it at two --calls, subtract)",
    )
    parser.add_argument(
        "--workload-cache",
        type=Path,
        metavar="FILE",
        help="keep the built workload in FILE and load it from there next time (same corpus)",
    )
    args = parser.parse_args(argv)

    quiet = logging.getLogger("loopwarden")  # the guard logs every warn, block and stop
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    print(f"build: {engine_build()}")
    workload = load_workload(corpus_dir(args.corpus), args.calls, args.workload_cache)
    gc.collect()
    gc.freeze()  # the workload is input: keep the collector from walking it in every layer
    n = len(workload)
    print(
        f"workload: {n} calls in {len({c.run_id for c in workload})} runs, one session, "
        f"historySize {args.history_size:,}; python {platform.python_version()}, "
        f"{platform.machine()}; CPU time, best of {args.repeat} interleaved rounds\n"
    )
    measured = layers(workload, args.history_size)
    if args.only is not None:
        if args.only not in measured:
            raise SystemExit(f"--only {args.only!r}: the layers are {', '.join(measured)}")
        measured[args.only]()
        return
    times: dict[str, list[float]] = {name: [] for name in measured}
    for _ in range(args.repeat):
        for name, run in measured.items():
            times[name].append(_cpu_us(run, n))
    best = {name: min(values) for name, values in times.items()}

    print(f"{'layer':<20} | {'µs/call':>8} | {'worst':>8}")
    for name, values in times.items():
        print(f"{name:<20} | {min(values):>8.2f} | {max(values):>8.2f}")
    print(f"\n{'row':<46} | {'ratio':>6} | {'goal':>6} | met")
    for title, layer, baseline, goal in ROWS:
        ratio = best[layer] / best[baseline]
        met = "" if goal is None else ("yes" if ratio <= goal else "NO")
        shown = "" if goal is None else f"≤ {goal}×"
        print(f"{title:<46} | {ratio:>5.2f}× | {shown:>6} | {met}")
    for extra in BATCH_SIZES:
        if extra != args.history_size:
            ratio = best[f"batches @{extra:,}"] / best["batches"]
            title = f"batches at historySize {extra:,} vs {args.history_size:,}"
            print(f"{title:<46} | {ratio:>5.2f}× | {'':>6} |")


if __name__ == "__main__":
    main()

"""Benchmark: hashing hostile values grows linearly with their size.

Run from the repository root (in each build):

    python -m bench.bench_hostile_hashing
    python -m bench.bench_hostile_hashing --sizes 1000 4000 16000 --repeat 5

For each shape (nested sets, dicts whose keys collide after str(), nested lists, the three mixed,
wide sets, and a guard's before_tool_call + after_tool_call on nested sets) it times one call at
growing sizes and prints microseconds per call and per node. It then checks that the time grows
linearly, up to the log factor of sorting: from the smallest to the largest size, time per node
may grow by at most --slack (default 3x) times log(largest) / log(smallest). A quadratic writer's
time per node grows by the size ratio (64x from 500 to 32000), an exponential one never
finishes. Machine load and the garbage collector (a deep value is many live objects) account
for the rest. Exit status 1 when a shape fails the check.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from loopwarden import LoopGuard
from loopwarden.cli import engine_compiled
from loopwarden.core.canonical import digest_stable, hash_tool_call
from loopwarden.core.outcome import hash_tool_outcome


def nested_sets(n: int) -> Any:
    value: Any = frozenset({0})
    for level in range(n):
        value = frozenset({f"s{level}", value})
    return value


def colliding_keys(n: int) -> Any:
    value: Any = {"x": 0}
    for level in range(n):
        value = {1: value, "1": level}
    return value


def nested_lists(n: int) -> Any:
    value: Any = 0
    for level in range(n):
        value = [level, value]
    return value


def mixed(n: int) -> Any:
    """Tuples, sets and sets with numbers in turn: all hashable, so every level nests."""
    value: Any = 0
    for level in range(n):
        kind = level % 3
        if kind == 0:
            value = (level, value)
        elif kind == 1:
            value = frozenset({"a", value})
        else:
            value = frozenset({level, 2.5, value})
    return value


def wide_sets(n: int) -> Any:
    return {"s": {f"item{i}" for i in range(n)} | set(range(n)), "k": {i: i for i in range(n)}}


def _digest(make: Callable[[int], Any]) -> Callable[[int], Callable[[], object]]:
    def prepare(n: int) -> Callable[[], object]:
        value = make(n)
        return lambda: (hash_tool_call("t", value), hash_tool_outcome("t", {}, {"details": value}))

    return prepare


def _guard(n: int) -> Callable[[], object]:
    value = {"q": nested_sets(n), "k": colliding_keys(n)}
    guard = LoopGuard({"enabled": True})

    def call() -> object:
        guard.before_tool_call("s", "lookup", value)
        return guard.after_tool_call("s", "lookup", value, result={"details": value})

    return call


SHAPES: dict[str, Callable[[int], Callable[[], object]]] = {
    "nested sets": _digest(nested_sets),
    "colliding keys": _digest(colliding_keys),
    "nested lists": _digest(nested_lists),
    "mixed": _digest(mixed),
    "wide sets/dicts": _digest(wide_sets),
    "guard before+after": _guard,
}


def best_time(call: Callable[[], object], repeat: int) -> float:
    """Seconds of the fastest of `repeat` calls (the least disturbed by other processes)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 8000, 32000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--slack", type=float, default=3.0)
    args = parser.parse_args(argv)
    sizes: list[int] = sorted(args.sizes)
    build = "compiled (mypyc)" if engine_compiled() else "pure Python"
    digest_stable(nested_sets(10))  # warm up: the fast encoder is chosen on first use
    print(f"loopwarden hostile hashing, {build}; best of {args.repeat}; µs per call (µs per node)")
    print(f"{'shape':<20}" + "".join(f"{'n=' + str(n):>18}" for n in sizes) + "   growth")
    failed = []
    allowed = args.slack * math.log(sizes[-1]) / math.log(sizes[0])
    for name, prepare in SHAPES.items():
        per_node = []
        cells = []
        for n in sizes:
            seconds = best_time(prepare(n), args.repeat)
            per_node.append(seconds / n)
            cells.append(f"{seconds * 1e6:>10.0f} ({seconds / n * 1e6:4.2f})")
        growth = per_node[-1] / per_node[0]
        ok = growth <= allowed
        if not ok:
            failed.append(name)
        print(f"{name:<20}" + "".join(f"{c:>18}" for c in cells) + f"   {growth:4.2f}x")
    ratio = sizes[-1] / sizes[0]
    print(
        f"growth = time per node at n={sizes[-1]} / at n={sizes[0]}: linear ~1x, "
        f"n log n ~{math.log(sizes[-1]) / math.log(sizes[0]):.1f}x, quadratic ~{ratio:.0f}x; "
        f"allowed <= {allowed:.1f}x"
    )
    if failed:
        print("NOT LINEAR: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

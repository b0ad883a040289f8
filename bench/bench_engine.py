"""Benchmark: cost per tool call of the detection engine, and memory per session.

Run from the repository root:

    python -m bench.bench_engine                 # full workload, about 31,000 calls
    python -m bench.bench_engine --calls 5000    # quicker, fewer calls
    python -m bench.bench_engine --corpus /path/to/corpus --repeat 5

One long session with many runs, every call going through detect → record_call →
record_outcome, as OpenClaw's own replay does. The workload: every call of the development corpus
(tests/data/eval/*.jsonl.gz, or the folder given with --corpus; one run per recorded trajectory:
mini-swe-agent bash commands shaped as exec results, tau-bench airline function calls), plus
synthetic runs the corpus lacks (process polls with moving and with stuck output, message sends,
file reads of 1 to 20 kB, web searches, exec loops, ping-pong, unknown-tool retries), with a
heartbeat run interleaved into the session.

For historySize 30, 1,000 and 10,000 it prints µs per call of the incremental engine
(``loopwarden``) and of the plain reference engine (``loopwarden.core.reference``), the share
of that spent hashing (3 × ``hash_tool_call`` + ``hash_tool_outcome``, the same for both
engines), and the memory one session holds at the end and at its peak (tracemalloc, separate
pass).

The first line names the build measured: the pure-Python .py files (an editable install) or the
mypyc-compiled engine (a regular wheel, ``pip install .``), with the module's path. Measure the
build you report: to measure the compiled one, install it into a venv and run this module from
the repository root with that venv's python. The "engine alone" columns swap the hash functions
the engines look up in their module globals; compiled code calls them directly and does not see
the swap, so with the compiled build loopwarden's column shows "n/a (compiled)" (the reference
engine is never compiled: its columns stay valid).

The ``LoopGuard`` rows run the same workload through the facade a runtime calls:
``before_tool_call`` → (the tool runs only when allowed) → ``after_tool_call``, one
``MemoryStore`` session, with the default profile (``{"enabled": true}``) and with
``{"profile": "recommended"}`` (and that profile without ``normalizeVolatile``, to show the rest
of its cost). µs per call counts every call offered, blocked ones included; a last table gives
each profile's cost as a multiple of the default profile's, from the same interleaved rounds.
``--compare SRC`` loads a second loopwarden source tree side by side (e.g. an older commit:
``git archive REV src | tar -x -C /tmp/old``, then ``--compare /tmp/old/src``) and interleaves
its rounds with this tree's, so both see the same load on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import hashlib
import importlib
import json
import logging
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from bench._corpus import (
    CORPUS_HELP,
    MINI_SWE,
    TAU_BENCH,
    corpus_dir,
    exec_result,
    rows,
    text_of,
)

from loopwarden.cli import engine_build, engine_compiled
from loopwarden.core import _engine as engine_module
from loopwarden.core import detectors as detectors_module
from loopwarden.core import history as history_module
from loopwarden.core import reference
from loopwarden.core.canonical import UNDEFINED, hash_tool_call
from loopwarden.core.config import ResolvedConfig
from loopwarden.core.detectors import detect
from loopwarden.core.history import SessionState, record_call, record_outcome
from loopwarden.core.outcome import hash_tool_outcome
from loopwarden.guard import LoopGuard

HISTORY_SIZES = (30, 1_000, 10_000)
# OpenClaw's own TypeScript engine on Node.js 20, replaying the same kind of workload on the
# project's reference machine (quoted, not measured here: this benchmark runs no Node.js).
OPENCLAW_US = {30: 15.9, 1_000: 27.4, 10_000: 126.0}
GUARD_PROFILES: dict[str, dict[str, Any]] = {
    "default": {"enabled": True},
    "recommended": {"profile": "recommended"},
    # The same without volatile normalisation: the rest of the profile's cost.
    "rec-no-vol": {"profile": "recommended", "normalizeVolatile": False},
}


class Call(NamedTuple):
    """One step of the workload."""

    tool: str
    params: Any
    result: Any
    error: Any
    run_id: str
    call_id: str


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


Step = tuple[str, Any, Any, Any]  # tool, params, result, error
Run = tuple[str, list[Step]]


def corpus_runs(corpus: Path, rng: random.Random) -> list[Run]:
    """One run per recorded trajectory, real calls and real results (cut at 20 kB)."""
    runs: dict[str, list[Step]] = {}
    for row in rows(corpus / MINI_SWE):
        step: Step = ("exec", {"command": row["args"]["command"]}, exec_result(row, rng), UNDEFINED)
        runs.setdefault(row["trajectory"], []).append(step)
    for row in rows(corpus / TAU_BENCH):
        if row["error"]:
            step = (row["tool"], row["args"], UNDEFINED, row["error"])
        else:
            step = (
                row["tool"],
                row["args"],
                {"content": [{"type": "text", "text": text_of(row)}]},
                None,
            )
        runs.setdefault(row["trajectory"], []).append(step)
    return list(runs.items())


def _text(rng: random.Random, size: int) -> str:
    words = ["def", "return", "self", "import", "value", "error", "test", "=", "(", ")", "\n"]
    out = " ".join(rng.choice(words) for _ in range(size // 4 + 1))
    return out[:size]


def _poll(rng: random.Random, i: int, log: str) -> Step:
    details = {"status": "running", "aggregated": log, "totalLines": log.count("\n"), "pid": i}
    result = {"content": [{"type": "text", "text": log[-500:]}], "details": details}
    return ("process", {"action": "poll", "sessionId": f"s{i % 7}"}, result, UNDEFINED)


def _send(rng: random.Random, i: int) -> Step:
    mid = f"m{rng.randrange(10**9)}"
    details = {
        "ok": True,
        "messageId": mid,
        "ts": 1_700_000_000 + i,
        "message": {"id": mid, "text": "build is green", "direction": "outbound"},
        "route": {"channel": "slack", "id": "C042"},
    }
    result = {"content": [{"type": "text", "text": json.dumps(details)}], "details": details}
    return ("message", {"action": "send", "target": "#builds", "text": "ok"}, result, UNDEFINED)


def _read(rng: random.Random, i: int, body: str | None = None) -> Step:
    body = body or _text(rng, rng.choice([200, 1_000, 5_000, 20_000]))
    result = {"content": [{"type": "text", "text": body}], "details": {"path": f"/w/f{i}.py"}}
    return ("read", {"path": f"/w/f{i % 40}.py", "limit": 2_000}, result, UNDEFINED)


def _search(rng: random.Random, i: int) -> Step:
    hits = [{"title": f"hit {k}", "url": f"https://x.test/{i}/{k}"} for k in range(5)]
    result = {"content": [{"type": "text", "text": json.dumps(hits)}], "details": {"hits": hits}}
    return ("web_search", {"query": f"python error {i % 30}", "count": 5}, result, UNDEFINED)


def _exec(command: str, output: str, code: int = 0) -> Step:
    details = {"status": "failed" if code else "completed", "exitCode": code, "aggregated": output}
    result = {"content": [{"type": "text", "text": output}], "details": details}
    return ("exec", {"command": command}, result, UNDEFINED)


def synthetic_run(rng: random.Random, i: int) -> list[Step]:
    """A healthy stretch of mixed calls, then (in most runs) one kind of loop."""
    steps: list[Step] = []
    log = ""
    for k in range(rng.randint(10, 40)):
        kind = rng.randrange(5)
        if kind == 0:
            log += _text(rng, rng.choice([40, 400, 2_000]))  # output that moves: progress
            steps.append(_poll(rng, i, log[-8_000:]))
        elif kind == 1:
            steps.append(_send(rng, k))
        elif kind == 2:
            steps.append(_read(rng, k))
        elif kind == 3:
            steps.append(_search(rng, i * 100 + k))
        else:
            steps.append(_exec(f"pytest tests/t{k}.py", _text(rng, rng.choice([50, 3_000]))))
    loop = rng.randrange(5)
    if loop == 0:  # a stuck poll: identical output
        steps += [_poll(rng, i, "waiting for lock\n")] * rng.randint(5, 25)
    elif loop == 1:  # the same failing command, identical result
        steps += [_exec("cd fastjson/", "bash: cd: fastjson/: No such file", 1)] * 25
    elif loop == 2:  # ping-pong between two reads with unchanged content
        a, b = _read(rng, 1, "A" * 3_000), _read(rng, 2, "B" * 300)
        steps += [a, b] * rng.randint(3, 12)
    elif loop == 3:  # retrying a tool that does not exist
        steps += [("weather", {"city": "Oslo"}, UNDEFINED, "Unknown tool: weather")] * 12
    return steps


def build_workload(corpus: Path, calls: int, seed: int = 7) -> list[Call]:
    """Corpus and synthetic runs shuffled into one session, a heartbeat run interleaved."""
    rng = random.Random(seed)
    runs = corpus_runs(corpus, rng)
    runs += [(f"synthetic/{i}", synthetic_run(rng, i)) for i in range(320)]
    rng.shuffle(runs)
    out: list[Call] = []
    for run_number, (name, steps) in enumerate(runs):
        for step in steps:
            out.append(Call(*step, run_id=name, call_id=f"call_{len(out)}"))
            if len(out) % 50 == 0:  # the gateway's heartbeat run shares the session
                beat: Step = (
                    "session_status",
                    {},
                    {"content": [{"type": "text", "text": "ok"}]},
                    None,
                )
                out.append(Call(*beat, run_id=f"heartbeat/{run_number}", call_id=f"hb_{len(out)}"))
    return out[:calls]


# --------------------------------------------------------------------------------------------
# Measurement
# --------------------------------------------------------------------------------------------

Engine = tuple[Callable[[], Any], Callable[..., Any], Callable[..., Any], Callable[..., Any]]
ENGINES: dict[str, Engine] = {
    "loopwarden": (SessionState, detect, record_call, record_outcome),
    "reference": (
        reference.ReferenceState,
        reference.detect,
        reference.record_call,
        reference.record_outcome,
    ),
}


def replay(engine: Engine, workload: list[Call], config: ResolvedConfig) -> Any:
    """One session: every call through detect → record_call → record_outcome."""
    new_state, detect_fn, call_fn, outcome_fn = engine
    state = new_state()
    for c in workload:
        detect_fn(state, c.tool, c.params, config, c.run_id)
        call_fn(state, c.tool, c.params, c.call_id, config, c.run_id)
        outcome_fn(state, c.tool, c.params, c.call_id, c.result, c.error, config, c.run_id)
    return state


def replay_guard(
    block: dict[str, Any], size: int, workload: list[Call], guard_class: type[Any] = LoopGuard
) -> dict[str, int]:
    """One session through ``LoopGuard``: before → the tool (only when allowed) → after.

    Returns how many calls got each action, so a run can show what the guard did.
    """
    guard = guard_class({**block, "historySize": size})
    before, after = guard.before_tool_call, guard.after_tool_call
    actions: dict[str, int] = {}
    for c in workload:
        decision = before("bench", c.tool, c.params, run_id=c.run_id, tool_call_id=c.call_id)
        actions[decision.action] = actions.get(decision.action, 0) + 1
        if decision.allowed:
            after(
                "bench",
                c.tool,
                c.params,
                result=c.result,
                error=c.error,
                run_id=c.run_id,
                tool_call_id=c.call_id,
            )
    return actions


def _raw(call: Call) -> Any:
    """The call's result (or error) as plain JSON data, for the calibration baselines."""
    value = call.error if call.result is UNDEFINED else call.result
    return None if value is UNDEFINED else value


def baseline_stdlib(workload: list[Call]) -> None:
    """A yardstick: json.dumps(sort_keys=True) + sha256 of params and of result."""
    for c in workload:
        hashlib.sha256(json.dumps(c.params, sort_keys=True).encode()).hexdigest()
        hashlib.sha256(json.dumps(_raw(c), sort_keys=True).encode()).hexdigest()


def baseline_orjson(workload: list[Call]) -> Callable[[], None] | None:
    """The same with orjson (16.5 and 3.9 µs for the two on the reference machine)."""
    try:
        import orjson
    except ImportError:
        return None
    dumps, option = orjson.dumps, orjson.OPT_SORT_KEYS

    def run() -> None:
        for c in workload:
            hashlib.sha256(dumps(c.params, option=option)).hexdigest()
            hashlib.sha256(dumps(_raw(c), option=option)).hexdigest()

    return run


def hashing_only(workload: list[Call]) -> None:
    """Hashing each call's params and outcome once, without any history: the floor."""
    for c in workload:
        hash_tool_call(c.tool, c.params)
        hash_tool_outcome(c.tool, c.params, c.result, c.error)


@contextlib.contextmanager
def hashing_precomputed(workload: list[Call]) -> Iterator[None]:
    """Swap the hash functions the engines call for lookups of precomputed hashes.

    Isolates the engines' own bookkeeping: what remains is recording, detection and trimming
    (plus one dict lookup per hash, which both engines pay alike).
    """
    calls = {id(c.params): hash_tool_call(c.tool, c.params) for c in workload}
    outcomes = {
        (id(c.params), id(c.result), id(c.error)): hash_tool_outcome(
            c.tool, c.params, c.result, UNDEFINED if c.error is None else c.error
        )
        for c in workload
    }

    def call_hash(tool: str, params: Any) -> str:
        return calls[id(params)]

    def outcome_hash(tool: str, params: Any, result: Any, error: Any, **_: Any) -> Any:
        return outcomes[(id(params), id(result), id(error))]

    modules = [engine_module, history_module, detectors_module, reference]
    saved = [
        (m, m.__dict__.get("hash_tool_call"), m.__dict__.get("hash_tool_outcome")) for m in modules
    ]
    try:
        for module in modules:
            if "hash_tool_call" in module.__dict__:
                module.hash_tool_call = call_hash  # type: ignore[attr-defined]
            if "hash_tool_outcome" in module.__dict__:
                module.hash_tool_outcome = outcome_hash  # type: ignore[attr-defined]
        yield
    finally:
        for module, call_fn, outcome_fn in saved:
            if call_fn is not None:
                module.hash_tool_call = call_fn  # type: ignore[attr-defined]
            if outcome_fn is not None:
                module.hash_tool_outcome = outcome_fn  # type: ignore[attr-defined]


def _cpu_us(fn: Callable[[], Any], calls: int) -> float:
    """CPU µs per call of one run of ``fn``.

    CPU time of this process, not wall time: on a shared machine wall time mostly measures the
    other processes. The collector stays on (it is part of the real cost).
    """
    gc.collect()
    start = time.process_time()
    fn()
    return (time.process_time() - start) / calls * 1e6


def _best_us(fn: Callable[[], Any], calls: int, repeat: int) -> tuple[float, float]:
    """(best, worst) CPU µs per call over ``repeat`` runs."""
    times = [_cpu_us(fn, calls) for _ in range(repeat)]
    return min(times), max(times)


def _memory(engine: Engine, workload: list[Call], config: ResolvedConfig) -> tuple[int, int, int]:
    """(bytes the session holds at the end, peak bytes during the replay, records kept)."""
    gc.collect()
    tracemalloc.start()
    state = replay(engine, workload, config)
    gc.collect()
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return current, peak, len(state.history)


def _engine_table(workload: list[Call], args: argparse.Namespace) -> None:
    """µs per call of the incremental and the reference engine, with and without hashing."""
    n = len(workload)
    # Compiled code does not see hashing_precomputed's swapped globals: no "alone" number.
    compiled = engine_compiled()
    alone_width = 14 if compiled else 12
    header = (
        f"{'historySize':>11} | {'loopwarden µs/call':>22} | {'engine alone':>{alone_width}} | "
        f"{'reference µs/call':>17} | {'engine alone':>12} | {'OpenClaw':>8}"
    )
    # Rounds interleave the sizes and engines, so a burst of load elsewhere on the machine hits
    # them alike; each cell keeps its best round (and loopwarden's worst, for the spread).
    times: dict[tuple[int, str], list[float]] = {}
    for round_number in range(max(args.repeat, args.reference_repeat)):
        for size in HISTORY_SIZES:
            config = ResolvedConfig(enabled=True, history_size=size)
            for name in ENGINES:
                if name == "reference" and round_number >= args.reference_repeat:
                    continue
                if name == "loopwarden" and round_number >= args.repeat:
                    continue
                engine = ENGINES[name]
                run = functools.partial(replay, engine, workload, config)
                times.setdefault((size, name), []).append(_cpu_us(run, n))
                if name == "loopwarden" and compiled:
                    continue
                with hashing_precomputed(workload):
                    times.setdefault((size, name + " alone"), []).append(_cpu_us(run, n))
    print(header)
    print("-" * len(header))
    for size in HISTORY_SIZES:
        fast = times[size, "loopwarden"]
        alone = "n/a (compiled)" if compiled else f"{min(times[size, 'loopwarden alone']):>12.2f}"
        print(
            f"{size:>11,} | {min(fast):>8.2f} (worst {max(fast):>6.2f}) | {alone} | "
            f"{min(times[size, 'reference']):>17.2f} | "
            f"{min(times[size, 'reference alone']):>12.2f} | {OPENCLAW_US[size]:>8}"
        )


def load_other_guard(src: Path, workload: list[Call]) -> tuple[type[Any], list[Call]]:
    """``LoopGuard`` of another loopwarden source tree, loaded next to this one.

    Its modules are imported under the same names with the other tree first on the path, then
    taken out of ``sys.modules`` again: each module keeps the functions it imported, so the two
    guards run side by side without touching each other. Returns the class and the workload
    with the other tree's ``UNDEFINED`` sentinel in place of this one's.
    """
    if not (src / "loopwarden" / "guard.py").is_file():
        sys.exit(f"--compare {src}: no loopwarden/guard.py there (give the tree's src folder)")

    def ours() -> dict[str, Any]:
        return {k: m for k, m in sys.modules.items() if k.split(".")[0] == "loopwarden"}

    saved = ours()
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(src))
    try:
        module = importlib.import_module("loopwarden.guard")
        undefined = importlib.import_module("loopwarden").UNDEFINED  # public in every tree
    finally:
        sys.path.remove(str(src))
        for name in ours():
            del sys.modules[name]
        sys.modules.update(saved)
    if not Path(module.__file__ or "").resolve().is_relative_to(src.resolve()):
        sys.exit(f"--compare {src}: loopwarden was imported from {module.__file__} instead")
    other: type[Any] = module.LoopGuard

    def swap(value: Any) -> Any:
        return undefined if value is UNDEFINED else value

    return other, [c._replace(result=swap(c.result), error=swap(c.error)) for c in workload]


def _guard_table(workload: list[Call], repeat: int, compare: Path | None) -> None:
    """µs per call through LoopGuard (before → after), per profile and historySize."""
    n = len(workload)
    # The guard logs every warn/block/stop; with no handler configured Python would print them.
    quiet = logging.getLogger("loopwarden")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    trees: dict[str, tuple[type[Any], list[Call]]] = {"this": (LoopGuard, workload)}
    if compare is not None:
        trees["other"] = load_other_guard(compare, workload)
    times: dict[tuple[str, str, int], list[float]] = {}
    for _ in range(repeat):  # interleaved rounds, as for the engine table
        for profile, block in GUARD_PROFILES.items():
            for size in HISTORY_SIZES:
                for tree, (guard_class, calls) in trees.items():
                    run = functools.partial(replay_guard, block, size, calls, guard_class)
                    times.setdefault((tree, profile, size), []).append(_cpu_us(run, n))
    header = f"{'tree':>5} | {'LoopGuard':>11} | {'historySize':>11} | {'µs/call':>22} | actions"
    print(header)
    print("-" * len(header))
    for profile in GUARD_PROFILES:
        for size in HISTORY_SIZES:
            for tree, (guard_class, calls) in trees.items():
                cell = times[tree, profile, size]
                actions = replay_guard(GUARD_PROFILES[profile], size, calls, guard_class)
                shown = ", ".join(f"{k} {v}" for k, v in sorted(actions.items()))
                print(
                    f"{tree:>5} | {profile:>11} | {size:>11,} | "
                    f"{min(cell):>8.2f} (worst {max(cell):>6.2f}) | {shown}"
                )
    _ratio_table(times, trees)


def _ratio_table(times: dict[tuple[str, str, int], list[float]], trees: dict[str, Any]) -> None:
    """Each profile's best µs per call over the default profile's, from the same rounds."""
    print("\nper call, relative to the default profile (best of each; goal for recommended: ≤ 2×)")
    profiles = [p for p in GUARD_PROFILES if p != "default"]
    print(f"{'tree':>5} | {'historySize':>11} | {'default µs':>10} | " + " | ".join(profiles))
    for size in HISTORY_SIZES:
        for tree in trees:
            base = min(times[tree, "default", size])
            cells = [
                f"{min(times[tree, p, size]):.2f} ({min(times[tree, p, size]) / base:.2f}×)"
                for p in profiles
            ]
            print(f"{tree:>5} | {size:>11,} | {base:>10.2f} | " + " | ".join(cells))


def _memory_table(workload: list[Call]) -> None:
    print("\nmemory of one session (tracemalloc; end = held after the replay, peak = during it)")
    print(
        f"{'historySize':>11} | {'engine':>10} | {'records':>7} | {'end bytes':>11} | "
        f"{'bytes/record':>12} | {'peak bytes':>11}"
    )
    for size in HISTORY_SIZES:
        config = ResolvedConfig(enabled=True, history_size=size)
        for name, engine in ENGINES.items():
            current, peak, records = _memory(engine, workload, config)
            print(
                f"{size:>11,} | {name:>10} | {records:>7,} | {current:>11,} | "
                f"{current / max(records, 1):>12.0f} | {peak:>11,}"
            )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help=CORPUS_HELP)
    parser.add_argument("--calls", type=int, default=10**9, help="use only the first N calls")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of loopwarden per size")
    parser.add_argument(
        "--reference-repeat", type=int, default=1, help="timed runs of the reference per size"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc pass")
    parser.add_argument("--no-guard", action="store_true", help="skip the LoopGuard rows")
    parser.add_argument(
        "--guard-only", action="store_true", help="only the LoopGuard rows (and calibration)"
    )
    parser.add_argument(
        "--compare", type=Path, help="another tree's src folder: its LoopGuard rows side by side"
    )
    args = parser.parse_args(argv)

    history_file = history_module.__file__
    print(f"build: {engine_build()}; loopwarden.core.history from {history_file}")
    if args.compare is not None and engine_compiled():
        print(f"  (--compare {args.compare} runs that tree's .py files: pure Python)")
    workload = build_workload(corpus_dir(args.corpus), args.calls)
    # The workload's few hundred thousand objects are input, not engine state: keep the
    # collector from walking them on every full collection (it would bill both engines for it).
    gc.collect()
    gc.freeze()
    n = len(workload)
    runs = len({c.run_id for c in workload})
    print(f"workload: {n} calls in {runs} runs, one session")
    print(
        f"python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.machine()}; best of {args.repeat} (reference: {args.reference_repeat})"
    )
    stdlib, _ = _best_us(lambda: baseline_stdlib(workload), n, args.repeat)
    orjson_run = baseline_orjson(workload)
    fast_json = f"{_best_us(orjson_run, n, args.repeat)[0]:.2f}" if orjson_run else "n/a"
    print(
        f"calibration (reference machine: 16.5 / 3.9): json.dumps+sha256 {stdlib:.2f} µs/call, "
        f"orjson+sha256 {fast_json} µs/call"
    )
    hash_best, _ = _best_us(lambda: hashing_only(workload), n, args.repeat)
    print(f"hashing alone (each call's signature and outcome once): {hash_best:.2f} µs/call\n")
    if not args.guard_only:
        _engine_table(workload, args)
        print()
    if not args.no_guard:
        _guard_table(workload, args.repeat, args.compare)
    if not (args.no_memory or args.guard_only):
        _memory_table(workload)


if __name__ == "__main__":
    main()

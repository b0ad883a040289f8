"""Benchmark: cost of hashing one tool call (params signature + outcome hash).

Run from the repository root:

    python -m bench.bench_hashing
    python -m bench.bench_hashing --repeat 5 --corpus /path/to/corpus

The workload is every call of the development corpus (tests/data/eval/*.jsonl.gz, or the
folder given with --corpus: mini-swe-agent bash calls shaped as OpenClaw exec results,
tau-bench airline function calls) plus synthetic exec/process/message/read/search/update_plan
calls with results from a few bytes to 20 kB. It prints microseconds per call for
`hash_tool_call` + `hash_tool_outcome` with each canonical writer, next to two baselines that
hash params and raw result without OpenClaw's rules (JavaScript key order and number text,
the outcome's tool-specific fields):
stdlib ``json.dumps(sort_keys=True)`` + sha256, and orjson + sha256.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import random
import statistics
import sys
import time
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

from loopwarden.cli import engine_compiled
from loopwarden.core import canonical
from loopwarden.core.canonical import UNDEFINED, hash_tool_call
from loopwarden.core.outcome import hash_tool_outcome


class Call(NamedTuple):
    tool: str
    params: Any
    result: Any
    error: Any


# --------------------------------------------------------------------------------------------
# Workload
# --------------------------------------------------------------------------------------------


def corpus_calls(corpus: Path, rng: random.Random) -> list[Call]:
    """Real calls: bash commands as exec results, tau-bench tools as text results or errors."""
    calls = []
    for row in rows(corpus / MINI_SWE):
        result = exec_result(row, rng)
        calls.append(Call("exec", {"command": row["args"]["command"]}, result, UNDEFINED))
    for row in rows(corpus / TAU_BENCH):
        if row["error"]:
            calls.append(Call(row["tool"], row["args"], UNDEFINED, row["error"]))
            continue
        result = {"content": [{"type": "text", "text": text_of(row)}], "details": {}}
        calls.append(Call(row["tool"], row["args"], result, UNDEFINED))
    return calls


def _text(rng: random.Random, size: int) -> str:
    words = ["def", "return", "self", "import", "value", "error", "test", "=", "(", ")", "\n"]
    parts: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(words)
        parts.append(word)
        length += len(word) + 1
    return " ".join(parts)[:size]


def synthetic_calls(rng: random.Random, count: int) -> list[Call]:
    """Shapes the corpus lacks: polls, logs, sends, large reads, searches, plans."""
    makers: list[Callable[[random.Random, int], Call]] = [
        _process_poll,
        _process_log,
        _message_send,
        _read_file,
        _web_search,
        _update_plan,
        _exec_running,
    ]
    return [makers[i % len(makers)](rng, i) for i in range(count)]


def _process_poll(rng: random.Random, i: int) -> Call:
    log = _text(rng, rng.choice([200, 2_000, 8_000]))
    details = {"status": "running", "aggregated": log, "totalLines": log.count("\n"), "pid": i}
    result = {"content": [{"type": "text", "text": log[-500:]}], "details": details}
    return Call("process", {"action": "poll", "sessionId": f"s{i % 7}"}, result, UNDEFINED)


def _process_log(rng: random.Random, i: int) -> Call:
    log = _text(rng, rng.choice([500, 4_000]))
    details = {"status": "exited", "totalLines": 80, "totalChars": len(log), "exitCode": 0}
    result = {"content": [{"type": "text", "text": log}], "details": details}
    return Call("process", {"action": "log", "sessionId": f"s{i % 7}"}, result, UNDEFINED)


def _message_send(rng: random.Random, i: int) -> Call:
    mid = f"m{rng.randrange(10**9)}"
    details = {
        "ok": True,
        "messageId": mid,
        "runId": f"r{i}",
        "receipt": {"platformMessageId": mid},
        "ts": 1_700_000_000 + i,
        "message": {"id": mid, "text": "build is green", "direction": "outbound"},
        "route": {"channel": "slack", "id": "C042"},
    }
    result = {"content": [{"type": "text", "text": json.dumps(details)}], "details": details}
    params = {"action": "send", "target": "#builds", "text": "build is green"}
    return Call("message", params, result, UNDEFINED)


def _read_file(rng: random.Random, i: int) -> Call:
    body = _text(rng, rng.choice([1_000, 5_000, 20_000]))
    result = {"content": [{"type": "text", "text": body}], "details": {"path": f"/w/f{i}.py"}}
    return Call("read", {"path": f"/w/f{i % 40}.py", "limit": 2_000}, result, UNDEFINED)


def _web_search(rng: random.Random, i: int) -> Call:
    # Relevance scores include integral floats (1.0), which the fast path leaves to the walker.
    hits = [
        {"title": f"hit {k}", "url": f"https://x.test/{k}", "score": round(rng.random(), 3)}
        for k in range(5)
    ]
    hits[0]["score"] = 1.0
    result = {"content": [{"type": "text", "text": json.dumps(hits)}], "details": {"hits": hits}}
    return Call("web_search", {"query": f"python error {i % 30}", "count": 5}, result, UNDEFINED)


def _update_plan(rng: random.Random, i: int) -> Call:
    plan = [{"step": f"step {k}", "status": rng.choice(["pending", "done"])} for k in range(4)]
    params = {"plan": plan, "explanation": "progress"}
    result = {"content": [{"type": "text", "text": "Plan updated"}], "details": {"plan": plan}}
    return Call("update_plan", params, result, UNDEFINED)


def _exec_running(rng: random.Random, i: int) -> Call:
    details = {"status": "running", "tail": _text(rng, 400), "sessionId": f"s{i}", "pid": i}
    result = {"content": [{"type": "text", "text": "still running"}], "details": details}
    return Call("exec", {"command": "pytest -x", "background": True}, result, UNDEFINED)


# --------------------------------------------------------------------------------------------
# Measured options
# --------------------------------------------------------------------------------------------


def _loopwarden(call: Call) -> None:
    hash_tool_call(call.tool, call.params)
    hash_tool_outcome(call.tool, call.params, call.result, call.error)


def _baseline_stdlib(call: Call) -> None:
    hashlib.sha256(json.dumps(call.params, sort_keys=True).encode()).hexdigest()
    payload = call.error if call.result is UNDEFINED else call.result
    hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _baseline_orjson(call: Call) -> None:
    import orjson

    hashlib.sha256(orjson.dumps(call.params, option=orjson.OPT_SORT_KEYS)).hexdigest()
    payload = call.error if call.result is UNDEFINED else call.result
    hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


@contextlib.contextmanager
def _canonical_writer(mode: str) -> Iterator[None]:
    """Force one writer: "exact" (fast path off), "stdlib" or "orjson" (fast path on)."""
    saved_form, saved_encoder, saved_dumps = (
        canonical._plain_form,
        canonical._encoder,
        canonical._orjson_dumps,
    )
    try:
        if mode == "exact":  # the fast path's type walk refuses everything
            canonical._plain_form = lambda value, depth: canonical._REFUSED
        else:
            canonical._set_fast_encoder(mode)
        yield
    finally:
        canonical._plain_form = saved_form
        canonical._encoder, canonical._orjson_dumps = saved_encoder, saved_dumps


def _digest_inputs(calls: list[Call]) -> tuple[list[object], list[bytes], float]:
    """The values loopwarden digests for the workload, their canonical bytes, the fast share."""
    values: list[object] = []
    real_form = canonical._plain_form

    def recording(value: object, depth: int) -> object:
        if depth == 0:  # digest_stable's own call, not the walk's recursion
            values.append(value)
        return real_form(value, depth)

    canonical._plain_form = recording
    try:
        for call in calls:
            _loopwarden(call)
    finally:
        canonical._plain_form = real_form
    inputs: list[bytes] = []
    taken = 0
    for value in values:
        data = canonical._stringify_fast(value)
        taken += data is not None
        inputs.append(data if data is not None else canonical._stringify_exact(value).encode())
    return values, inputs, taken / len(inputs)


def _options(calls: list[Call], values: list[object], blobs: list[bytes]) -> list[Option]:
    """Every measured option as one pass over the workload."""
    import orjson

    def over_calls(fn: Callable[[Call], None], mode: str | None = None) -> Callable[[], None]:
        def run() -> None:
            with _canonical_writer(mode) if mode else contextlib.nullcontext():
                for call in calls:
                    fn(call)

        return run

    def sha_only() -> None:
        for blob in blobs:
            hashlib.sha256(blob).hexdigest()

    def encode_and_sha() -> None:
        for value in values:
            hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()

    return [
        Option("baseline: json.dumps(sort_keys) + sha256 (inexact)", over_calls(_baseline_stdlib)),
        Option("baseline: orjson + sha256 (inexact)", over_calls(_baseline_orjson)),
        Option("loopwarden, exact walker only", over_calls(_loopwarden, "exact")),
        Option("loopwarden, fast path = stdlib C json encoder", over_calls(_loopwarden, "stdlib")),
        Option("loopwarden, fast path = orjson (default)", over_calls(_loopwarden, "orjson")),
        # What any exact option pays: sha256 of the bytes loopwarden hashes; and orjson + sha256
        # of the values it digests, i.e. everything but the outcome rules and the type check.
        Option("floor: sha256 alone of the bytes loopwarden hashes", sha_only),
        Option("floor: orjson + sha256 of the values it digests", encode_and_sha),
    ]


class Option(NamedTuple):
    label: str
    run: Callable[[], None]  # one pass over the whole workload


def _measure(options: list[Option], calls: int, repeat: int) -> dict[str, list[float]]:
    """CPU microseconds per call of each pass. Options take turns, pass after pass, so that a
    burst of load from other processes on a shared machine hits them all alike."""
    micros: dict[str, list[float]] = {option.label: [] for option in options}
    for _ in range(repeat):
        for option in options:
            start = time.process_time()
            option.run()
            micros[option.label].append((time.process_time() - start) / calls * 1e6)
    return micros


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help=CORPUS_HELP)
    parser.add_argument("--repeat", type=int, default=5, help="timed passes per option")
    parser.add_argument("--synthetic", type=int, default=7_000, help="synthetic calls to add")
    args = parser.parse_args(argv)
    if engine_compiled():
        # The rows below swap canonical.py's functions, which compiled code does not see.
        sys.exit(
            f"bench_hashing compares the interpreted writers, but loopwarden.core.canonical is the "
            f"compiled build ({canonical.__file__}): run it from an editable install "
            "(pip install -e .); bench.bench_engine measures either build."
        )

    rng = random.Random(20260101)
    calls = corpus_calls(corpus_dir(args.corpus), rng) + synthetic_calls(rng, args.synthetic)
    rng.shuffle(calls)
    sizes = [len(json.dumps(c.result if c.result is not UNDEFINED else c.error)) for c in calls]
    print(f"workload: {len(calls):,} calls; result JSON bytes: mean {statistics.mean(sizes):,.0f},")
    print(f"  median {statistics.median(sizes):,.0f}, max {max(sizes):,}")
    values, blobs, share = _digest_inputs(calls)
    hashed = statistics.mean(len(blob) for blob in blobs)
    print(f"fast path serves {share:.1%} of digests; mean canonical bytes hashed {hashed:,.0f}\n")

    micros = _measure(_options(calls, values, blobs), len(calls), args.repeat)
    print(f"{'µs per call (CPU time)':<52} {'best':>7} {'median':>7}")
    for label, runs in micros.items():
        print(f"{label:<52} {min(runs):7.2f} {statistics.median(runs):7.2f}")
    _print_by_shape(calls, args.repeat)


def _print_by_shape(calls: list[Call], repeat: int) -> None:
    """Per call shape: which outcome-hashing rules cost what, next to the orjson baseline."""
    groups: dict[str, list[Call]] = {}
    for call in calls:
        shape = call.tool if call.tool in _SHAPES else "tau-bench function"
        groups.setdefault(shape, []).append(call)
    print(
        f"\n{'by call shape (best µs per call)':<32} {'calls':>7} {'loopwarden':>11} {'orjson':>7}"
    )
    with _canonical_writer("orjson"):
        for shape, members in sorted(groups.items(), key=lambda item: -len(item[1])):
            options = [
                Option("loopwarden", functools.partial(_each, _loopwarden, members)),
                Option("orjson", functools.partial(_each, _baseline_orjson, members)),
            ]
            runs = _measure(options, len(members), repeat)
            ours, theirs = min(runs["loopwarden"]), min(runs["orjson"])
            print(f"{shape:<32} {len(members):7,} {ours:11.2f} {theirs:7.2f}")


_SHAPES = {"exec", "process", "message", "read", "web_search", "update_plan"}


def _each(fn: Callable[[Call], None], calls: list[Call]) -> None:
    for call in calls:
        fn(call)


if __name__ == "__main__":
    main()

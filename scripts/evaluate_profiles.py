"""Evaluate the loop-detection profiles on real and synthetic agent runs; write docs/evaluation.md.

    python scripts/evaluate_profiles.py [--corpus tests/data/eval] [--out docs/evaluation.md]

What it replays (each trajectory through a real LoopGuard, exactly as `loopwarden analyze`):
- the development corpus in tests/data/eval (real mini-swe-agent and tau-bench runs, outcome
  labels; --corpus reads another folder of the same files);
- the same real runs with a loop injected: one of their calls repeated 5 to 40 times in a row,
  its result identical or differing only in bash line numbers, timestamps, durations or pids;
- the same-edit loop rebuilt from real runs: a real file (as a real run printed it with
  `nl -ba`/`cat -n`) edited again and again by one SWE-agent `edit` command that inserts
  lines, each result rendered as SWE-agent shows it (`[File: X (N lines total)]`, a 100-line
  window), so the results differ only in numbers once the window is full of copies;
- synthetic runs for what the corpus lacks: SWE-agent `cd`/`javac` loops, a stuck poll, a
  rephrased doomed call, an A-B-C cycle (loops); slow but moving polls, paging, re-running tests
  between edits (healthy).

- varied calls with one outcome, rebuilt from real runs: prose with a quote in it (real
  comment lines of real files) pasted into a real command, each getting bash's real
  `unexpected EOF while looking for matching` error with its own line counter; SWE-agent `edit`
  given the file before the range, reworded with real lines, each getting its usage text
  (5 to 28 calls each);
- `goto` around a real short file, each showing the same window: successful calls with one
  outcome, measured (warned, blocked) but not scored as a loop to catch;
- the development scenarios of scripts/detection_scenarios.py: healthy bulk work (distinct
  calls answered by one acknowledgement; a block or stop anywhere is a miss), stuck agents
  (10 distinct calls failing alike, each failure quoting the call's varied argument; scored
  by the positions of the first block and of the stop from the stretch's first call), and
  surveys (distinct items queued or not found; counted among the healthy runs).

A run "loops" when it holds 5 or more consecutive identical calls whose results are identical
after volatile normalisation (for edit calls, once every number is masked too). It is "caught"
when the first block (or stop) falls inside that loop. The position of the block is the
blocked call's place in the loop: the loop's first call is 1, so blocking the 4th identical
call is position 4 (three of the loop's calls ran, the fourth did not).

A run is "stuck on one outcome" when it holds 5 or more consecutive calls, not all the same
call, whose outcomes are equal and say something: compared after volatile normalisation, a
failure's position counters masked (bash's `line N`, dash's `sh: N:`, `column N`, `char N`),
an edit's numbers masked; an output that is empty (a silent success, a search with no match,
`[]`) never is. It is caught when the first block falls inside that stretch, at the position
counted the same way; "blocked before" counts runs whose first block came before the stretch.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import detection_scenarios as scenarios

from loopwarden import LoopGuard, hash_tool_call, resolve_config
from loopwarden.analyze.replay import Replayer, TrajectoryReport, quiet_guard_logs
from loopwarden.core.canonical import digest_stable
from loopwarden.core.patterns import is_edit_call, mask_counters, mask_numbers
from loopwarden.core.volatile import VolatileNormalizer
from loopwarden.transcripts import read_transcripts
from loopwarden.transcripts.model import Compaction, ToolCall, Trajectory

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- end of the generated part; what follows is written by hand -->"
PROFILES: dict[str, dict[str, Any]] = {
    "openclaw (defaults, enabled)": {"enabled": True},
    "recommended": {"profile": "recommended"},
}
_NORMALIZER = VolatileNormalizer.build()


@dataclass
class Case:
    """One trajectory to replay, with what we know about it."""

    trajectory: Trajectory
    family: str  # corpus, injected, synthetic-loop, synthetic-healthy
    success: bool | None = None  # resolved / reward 1 (None: unknown)
    loop_kind: str | None = None  # for synthetic loops that are not consecutive repeats
    shape: str = ""  # the run's shape, for the per-shape tables
    start: int = 0  # bulk, stuck and survey runs: the index of the shape's first call


@dataclass
class ProfileResult:
    """Everything measured for one profile."""

    name: str
    looped: int = 0
    caught: int = 0
    positions: list[int] = field(default_factory=list)
    by_shape: dict[str, list[int | None]] = field(default_factory=dict)  # position or None
    same_outcome: dict[str, list[int | None]] = field(default_factory=dict)  # position or None
    same_outcome_early: int = 0  # stuck on one outcome, first block before the stretch
    # Successful calls showing one unchanged window: per run (first warning, first block),
    # positions in the stretch or None.
    same_window: list[tuple[int | None, int | None]] = field(default_factory=list)
    # Healthy bulk work, per shape: per run (warned, blocked or stopped).
    bulk: dict[str, list[tuple[bool, bool]]] = field(default_factory=dict)
    # Stuck on a failure quoting the varied argument, per shape: per run (position of the
    # first block or stop, position of the stop), None when there was none.
    stuck: dict[str, list[tuple[int | None, int | None]]] = field(default_factory=dict)
    other_loops: int = 0
    other_caught: int = 0
    healthy_success: int = 0
    false_blocks_success: int = 0
    warned_success: int = 0
    warned: int = 0
    healthy: int = 0
    false_blocks: int = 0
    false_block_ids: list[str] = field(default_factory=list)
    missed_ids: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Ground truth


def _key(call: ToolCall) -> str:
    return hash_tool_call(call.tool, call.params)


def _outcome_key(call: ToolCall) -> str:
    value = call.result if call.has_outcome and call.error is None else call.error
    value = _NORMALIZER.normalize(value)
    if call.error is None and is_edit_call(call.tool, call.params):
        value = mask_numbers(value)  # the same edit again: only the line counts move
    return digest_stable(value)


def loop_span(trajectory: Trajectory, minimum: int = 5) -> tuple[int, int] | None:
    """The first run of >= `minimum` consecutive identical calls with identical normalised
    results, as (start index, end index exclusive), or None."""
    calls = trajectory.calls
    i = 0
    while i < len(calls):
        j = i + 1
        while (
            j < len(calls)
            and _key(calls[j]) == _key(calls[i])
            and (_outcome_key(calls[j]) == _outcome_key(calls[i]))
        ):
            j += 1
        if j - i >= minimum:
            return i, j
        i = j
    return None


_WRAPPER = re.compile(r"<returncode>[^<]*</returncode>|</?(?:output|warning)>")


def _stretch_outcome(call: ToolCall) -> str | None:
    """A call's outcome as a same-outcome stretch compares it, or None when it says nothing."""
    value = call.result if call.has_outcome else call.error
    if value in (None, "", [], {}) or (
        isinstance(value, str) and not _WRAPPER.sub("", value).strip()
    ):
        return None
    value = _NORMALIZER.normalize(value)
    if is_edit_call(call.tool, call.params):
        value = mask_numbers(value)
    elif call.error is not None or (isinstance(value, str) and value.startswith("<returncode>")):
        value = mask_counters(value)
    return digest_stable(value)


def same_outcome_span(trajectory: Trajectory, minimum: int = 5) -> tuple[int, int] | None:
    """The first run of >= `minimum` consecutive calls, not all the same call, whose outcomes
    are equal and say something, as (start, end exclusive), or None."""
    calls = trajectory.calls
    outcomes = [_stretch_outcome(c) for c in calls]
    i = 0
    while i < len(calls):
        j = i + 1
        while j < len(calls) and outcomes[i] is not None and outcomes[j] == outcomes[i]:
            j += 1
        if j - i >= minimum and len({_key(c) for c in calls[i:j]}) > 1:
            return i, j
        i = j
    return None


# ---------------------------------------------------------------------------------------------
# Data


def _meta(path: Path) -> dict[str, dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {row["trajectory"]: row for row in rows}


def corpus_cases(corpus: Path) -> list[Case]:
    """The real runs of the corpus folder, with their success labels."""
    cases = []
    for data in sorted(corpus.glob("*.jsonl.gz")):
        if data.name.endswith(".meta.jsonl.gz"):
            continue
        meta = _meta(data.with_name(data.name.replace(".jsonl.gz", ".meta.jsonl.gz")))
        for trajectory in read_transcripts(data, "jsonl"):
            row = meta.get(trajectory.id, {})
            success = row.get("resolved") is True or row.get("reward") == 1
            cases.append(Case(trajectory, "corpus", success))
    return cases


def _vary(result: Any, rng: random.Random, step: int) -> Any:
    """The same outcome with volatile details changed, as real reruns produce."""
    if not isinstance(result, str):
        return result
    stamp = f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{step % 60:02d}:07Z"
    return (
        f"/bin/bash: line {rng.randint(100, 90000)}: {result[:300]}\n"
        f"[{stamp}] finished in {rng.randint(1, 900)}ms (pid {rng.randint(100, 60000)})"
    )


def injected_cases(corpus: Sequence[Case], rng: random.Random, count: int) -> list[Case]:
    """Real runs with one call repeated 5-40 times in a row (the loop that real agents fall in)."""
    pool = [c for c in corpus if len(c.trajectory.calls) >= 3]
    cases = []
    for n, base in enumerate(rng.sample(pool, min(count, len(pool)))):
        calls = base.trajectory.calls
        at = rng.randrange(len(calls))
        repeats = rng.randint(5, 40)
        volatile = n % 2 == 1
        loop = [
            ToolCall(
                calls[at].tool,
                calls[at].params,
                result=_vary(calls[at].result, rng, k) if volatile else calls[at].result,
                error=calls[at].error,
            )
            for k in range(repeats)
        ]
        if volatile:  # the loop's first call already has the volatile shape
            loop[0] = ToolCall(
                loop[0].tool, loop[0].params, result=_vary(calls[at].result, rng, 99)
            )
        items = [*calls[:at], *loop, *calls[at + 1 :]]
        kind = "volatile" if volatile else "identical"
        trajectory = Trajectory(
            f"injected-{kind}/{base.trajectory.id}", "synthetic", "jsonl", items
        )
        cases.append(Case(trajectory, "injected", None))
    return cases


def _call(tool: str, params: Any, result: Any = None, error: str | None = None) -> ToolCall:
    return ToolCall(tool, params, result=result, error=error)


def _bash(command: str, output: str) -> ToolCall:
    return _call("bash", {"command": command}, output)


def _healthy_prefix(rng: random.Random) -> list[ToolCall]:
    files = ["src/app.py", "README.md", "setup.py", "tests/test_app.py"]
    return [
        _call("open", {"path": f}, f"contents of {f} ({rng.randint(10, 400)} lines)") for f in files
    ]


# SWE-agent 0.x shows an edited file as a 100-line window around the edit's first line.
_WINDOW = 100
_VIEW_LINE = re.compile(r"^\s*(\d+)\t(.*)$")
_EDIT_FOOTER = (
    "File updated. Please review the changes and make sure they are correct (correct "
    "indentation, no duplicate lines, etc). Edit the file again if necessary."
)


def _real_file_views(corpus: Sequence[Case], minimum: int = 40) -> list[tuple[str, list[str]]]:
    """(path, lines) of real source files as real runs printed them with `nl -ba` / `cat -n`."""
    views = []
    for case in corpus:
        for call in case.trajectory.calls:
            command = call.params.get("command") if isinstance(call.params, dict) else None
            if not isinstance(command, str) or not isinstance(call.result, str):
                continue
            match = re.match(r"(?:nl -ba|cat -n) (\S+\.py)", command)
            lines = [m.group(2) for m in map(_VIEW_LINE.match, call.result.splitlines()) if m]
            if match and len(lines) >= minimum:
                views.append((match.group(1), lines))
                break  # one file per run
    return views


def _swe_agent_window(path: str, lines: Sequence[str], current: int) -> str:
    """What SWE-agent 0.x prints after an edit: the header, a window, the footer."""
    total = len(lines)
    above = max(0, current - _WINDOW // 2)
    below = max(0, total - current - _WINDOW // 2)
    last = max(current + _WINDOW // 2, _WINDOW // 2)
    first = max(0, last - _WINDOW)
    shown = [f"{n + 1}:{lines[n]}" for n in range(first, min(last, total))]
    parts = [f"[File: /repo/{path} ({total} lines total)]"]
    parts += [f"({above} more lines above)"] if above else []
    parts += shown
    parts += [f"({below} more lines below)"] if below else []
    return "\n".join([*parts, _EDIT_FOOTER])


def same_edit_cases(corpus: Sequence[Case], rng: random.Random, count: int = 16) -> list[Case]:
    """The same SWE-agent `edit` applied 15-28 times to a real file, inserting lines each time."""
    cases = []
    views = _real_file_views(corpus)
    for path, original in rng.sample(views, min(count, len(views))):
        lines = list(original)
        at = rng.randrange(5, len(lines) - 5)  # 1-based line the edit rewrites
        added = [f"    {line.strip()}" for line in rng.sample(original, rng.randint(3, 13))]
        replacement = [lines[at - 1], *added]
        command = "\n".join([f"edit {at}:{at}", *replacement, "end_of_edit"])
        loop = []
        for _ in range(rng.randint(15, 28)):
            lines[at - 1 : at] = replacement
            loop.append(_call("edit", {"command": command}, _swe_agent_window(path, lines, at)))
        opened = _swe_agent_window(path, original, at).replace(_EDIT_FOOTER, "").rstrip()
        items: list[Any] = [_call("open", {"command": f"open {path} {at}"}, opened), *loop]
        trajectory = Trajectory(f"same-edit/{path}", "synthetic", "jsonl", items)
        cases.append(Case(trajectory, "same-edit", None, shape="same edit, growing output"))
    return cases


# bash's own words for a quote left open (mini-swe-agent django__django-15037, call 13).
_EOF_ERROR = (
    "<returncode>2</returncode>\n<output>\n"
    "bash: -c: line {0}: unexpected EOF while looking for matching `'\"\n"
    "bash: -c: line {1}: syntax error: unexpected end of file\n</output>"
)
_USAGE = "Usage: edit <start_line>:<end_line>\n"


def same_outcome_cases(corpus: Sequence[Case], rng: random.Random, count: int = 8) -> list[Case]:
    """Real runs with a stretch of varied calls getting one outcome spliced in (5-28 calls)."""
    views = _real_file_views(corpus)
    prose = [
        line.strip().lstrip("#").strip()
        for _, lines in views
        for line in lines
        if "'" in line and line.strip().startswith("#") and line.count("'") % 2 == 1
    ]
    runs = [
        c for c in corpus if c.trajectory.id.startswith("mini-") and len(c.trajectory.calls) > 6
    ]
    cases = []
    for n in range(count):
        base = rng.choice(runs).trajectory.calls
        at = rng.randrange(1, len(base) - 1)
        command = str(base[at].params.get("command", "ls")).splitlines()[0]
        stretch = []
        for sentence in rng.sample(prose, rng.randint(5, min(28, len(prose)))):
            lines = [command, *["# next"] * rng.randint(0, 6), f"echo {sentence}"]
            error = _EOF_ERROR.format(len(lines), len(lines) + 1)
            stretch.append(_call("bash", {"command": "\n".join(lines)}, error, "returncode=2"))
        items = [*base[:at], *stretch, *base[at:]]
        trajectory = Trajectory(f"same-outcome/prose-{n}", "synthetic", "jsonl", items)
        cases.append(Case(trajectory, "same-outcome", None, shape="pasted prose, bash EOF"))
    for n, (path, lines) in enumerate(rng.sample(views, min(count, len(views)))):
        at = rng.randrange(5, len(lines) - 5)
        edits = [
            _call("edit", {"command": f"edit {path} {at}:{at}\n{text}\nend_of_edit"}, _USAGE)
            for text in rng.sample(lines, rng.randint(5, min(28, len(lines))))
        ]
        opened = _swe_agent_window(path, lines, at).replace(_EDIT_FOOTER, "").rstrip()
        items = [_call("open", {"command": f"open {path} {at}"}, opened), *edits]
        trajectory = Trajectory(f"same-outcome/usage-{n}", "synthetic", "jsonl", items)
        cases.append(Case(trajectory, "same-outcome", None, shape="editor usage text"))
    for n, (path, lines) in enumerate(rng.sample(views, min(count, len(views)))):
        short = lines[: rng.randint(20, 60)]  # a short real file: every view shows all of it
        window = _swe_agent_window(path, short, 1).replace(_EDIT_FOOTER, "").rstrip()
        targets = [rng.randint(1, len(short)) for _ in range(rng.randint(5, 28))]
        moves = [_call("goto", {"command": f"goto {k}"}, window) for k in targets]
        moves[0] = _call("open", {"command": f"open {path}"}, window)
        if len({_key(c) for c in moves}) == 1:
            continue
        trajectory = Trajectory(f"same-outcome/window-{n}", "synthetic", "jsonl", moves)
        cases.append(Case(trajectory, "same-window", None, shape="unchanged file window"))
    return cases


# What each kind of development scenario is in the evaluation.
_SCENARIO_FAMILIES = {
    scenarios.BULK: "bulk",
    scenarios.STUCK: "stuck-quoting",
    scenarios.SURVEY: "survey",
}


def scenario_cases(seed: int = 37) -> list[Case]:
    """The development scenarios of scripts/detection_scenarios.py: healthy bulk work, stuck
    failures quoting the varied argument, and surveys (healthy)."""
    cases = []
    for found in scenarios.scenarios(seed):
        family = _SCENARIO_FAMILIES[found.kind]
        items: list[ToolCall | Compaction] = [*found.calls]
        trajectory = Trajectory(f"{family}/{found.name}", "synthetic", "jsonl", items)
        healthy = True if found.kind != scenarios.STUCK else None
        cases.append(Case(trajectory, family, healthy, shape=found.shape, start=found.start))
    return cases


def synthetic_cases(rng: random.Random) -> list[Case]:
    """Hand-shaped loops and healthy runs the corpus lacks (8 variants each)."""
    cases: list[Case] = []

    def add(name: str, items: list[ToolCall], family: str, kind: str | None = None) -> None:
        trajectory = Trajectory(f"synthetic/{name}", "synthetic", "jsonl", list(items))
        cases.append(
            Case(trajectory, family, True if family == "synthetic-healthy" else None, kind)
        )

    for v in range(8):
        n = rng.randint(15, 50)
        cd = [
            _bash(
                "cd fastjson/",
                f"/bin/bash: line {rng.randint(60000, 70000)}: cd: fastjson/: "
                "No such file or directory",
            )
            for _ in range(n)
        ]
        add(f"cd-loop-{v}", _healthy_prefix(rng) + cd, "synthetic-loop")
        javac = [
            _bash(
                "javac -d out Main.java",
                f"/bin/bash: line {rng.randint(60000, 70000)}: javac: command not found",
            )
            for _ in range(n)
        ]
        add(f"javac-loop-{v}", _healthy_prefix(rng) + javac, "synthetic-loop")
        poll = [
            _call(
                "process",
                {"action": "poll", "sessionId": "build"},
                {
                    "content": [{"type": "text", "text": "(no new output)"}],
                    "details": {"status": "running", "aggregated": "compiling..."},
                },
            )
            for _ in range(40)
        ]
        add(f"stuck-poll-{v}", _healthy_prefix(rng) + poll, "synthetic-loop")
        flags = ["", "-g", "-O", "-cp .", "-d build", "-source 17", "-Xlint", "-nowarn", "-verbose"]
        doomed = [
            _bash(
                f"javac {flags[k % len(flags)]} Main.java".replace("  ", " "),
                f"/bin/bash: line {rng.randint(100, 900)}: javac: command not found",
            )
            for k in range(12)
        ]
        add(
            f"rephrased-doomed-{v}",
            _healthy_prefix(rng) + doomed,
            "synthetic-loop",
            "repeated_error",
        )
        cyc = []
        for _ in range(10):
            cyc += [
                _call("read", {"path": "config.yaml"}, "port: 80"),
                _call(
                    "edit",
                    {"path": "config.yaml", "old": "80", "new": "8080"},
                    "Error: old text not found",
                ),
                _call("bash", {"command": "make deploy"}, "deploy failed: port 80 in use"),
            ]
        add(f"abc-cycle-{v}", _healthy_prefix(rng) + cyc, "synthetic-loop", "cycle")

        progress = []
        pct = 0
        for k in range(45):
            if k % 3 == 0:
                pct += 2
            progress.append(
                _call(
                    "process",
                    {"action": "poll", "sessionId": "train"},
                    {
                        "content": [{"type": "text", "text": f"epoch progress {pct}%"}],
                        "details": {"status": "running", "aggregated": f"progress {pct}%"},
                    },
                )
            )
        add(f"slow-poll-{v}", _healthy_prefix(rng) + progress, "synthetic-healthy")
        pages = [
            _call(
                "scroll_down",
                {},
                f"[File: big.py ({100 * (k + 1)} of 4000 lines)]\n"
                + "\n".join(f"{100 * k + i}: code line {rng.random():.6f}" for i in range(5)),
            )
            for k in range(rng.randint(20, 45))
        ]
        add(f"paging-{v}", _healthy_prefix(rng) + pages, "synthetic-healthy")
        reruns: list[ToolCall] = []
        failure = "FAILED tests/test_app.py::test_parse - AssertionError: 3 != 4\n1 failed in 0.42s"
        for k in range(14):
            reruns.append(_call("edit", {"path": "src/app.py", "attempt": k}, "File updated."))
            if k in (6, 9):  # some edits move the failure, others change nothing (up to 6 runs)
                failure = failure.replace(f"{k - 3} != 4", f"{k} != 4").replace("3 != 4", "6 != 4")
            if k == 12:
                failure = "1 passed in 0.40s"
            out = failure.replace("0.42s", f"0.{rng.randint(10, 99)}s")
            reruns.append(_bash("python -m pytest tests/test_app.py -x -q", out))
        add(f"test-reruns-{v}", _healthy_prefix(rng) + reruns, "synthetic-healthy")
    return cases


# ---------------------------------------------------------------------------------------------
# Measurement


def _first_block(report: TrajectoryReport) -> int | None:
    marks = [m.index for m in report.marks if m.action in ("block", "stop")]
    return min(marks) if marks else None


def measure(name: str, config: dict[str, Any], cases: Sequence[Case]) -> ProfileResult:
    """Replay every case under one profile and score it."""
    result = ProfileResult(name)
    resolved = resolve_config(config)
    with quiet_guard_logs():
        for case in cases:
            report = Replayer(LoopGuard(resolved)).replay(case.trajectory)
            _score(result, case, report)
    return result


_SHAPES = {
    "injected-identical": "a real call repeated, identical results",
    "injected-volatile": "a real call repeated, volatile details vary",
    "cd-loop": "SWE-agent `cd` into a missing folder",
    "javac-loop": "SWE-agent `javac: command not found`",
    "stuck-poll": "a poll that never moves",
    "rephrased-doomed": "SWE-agent `javac` reworded, `command not found`",
}


def _shape(case: Case) -> str:
    if case.shape:
        return case.shape
    family, _, name = case.trajectory.id.partition("/")
    key = family if family.startswith("injected") else name.rsplit("-", 1)[0]
    return _SHAPES.get(key, key)


def _first(report: TrajectoryReport, actions: tuple[str, ...], start: int) -> int | None:
    """1-based position, counted from the call at `start`, of the first mark with one of
    `actions` at or after it (None: there is none)."""
    marks = [m.index for m in report.marks if m.action in actions and m.index >= start]
    return min(marks) - start + 1 if marks else None


def _score_scenario(result: ProfileResult, case: Case, report: TrajectoryReport) -> bool:
    """Score a development scenario or a same-window run; False for any other case."""
    if case.family == "bulk":
        blocked = _first_block(report) is not None  # anywhere in the run, prefix included
        result.bulk.setdefault(case.shape, []).append((report.warnings > 0, blocked))
        return True
    if case.family == "stuck-quoting":
        block = _first(report, ("block", "stop"), case.start)
        stop = _first(report, ("stop",), case.start)
        first = _first_block(report)
        if first is not None and first < case.start:  # blocked before the stretch: not caught
            block = stop = None
        result.stuck.setdefault(case.shape, []).append((block, stop))
        return True
    if case.family == "same-window":
        stretch = same_outcome_span(case.trajectory)
        start = 0 if stretch is None else stretch[0]
        warn_at = _first(report, ("warn",), start)
        block_at = _first(report, ("block", "stop"), start)
        result.same_window.append((warn_at, block_at))
        return True
    return False


def _score(result: ProfileResult, case: Case, report: TrajectoryReport) -> None:
    if _score_scenario(result, case, report):
        return
    span = None if case.family == "survey" else loop_span(case.trajectory)
    block = _first_block(report)
    stretch = None
    if span is None and case.family != "survey":  # a survey is healthy, whatever repeats
        stretch = same_outcome_span(case.trajectory)
    if stretch is not None:
        shape = "a real run (development corpus)" if case.family == "corpus" else _shape(case)
        position = None
        if block is not None and stretch[0] <= block < stretch[1]:
            position = block - stretch[0] + 1
        result.same_outcome_early += block is not None and block < stretch[0]
        result.same_outcome.setdefault(shape, []).append(position)
        return
    if span is not None:
        result.looped += 1
        position = None
        if block is not None and span[0] <= block < span[1]:
            result.caught += 1
            position = block - span[0] + 1
            result.positions.append(position)
        else:
            result.missed_ids.append(case.trajectory.id)
        result.by_shape.setdefault(_shape(case), []).append(position)
        return
    if case.loop_kind is not None:
        result.other_loops += 1
        result.other_caught += block is not None
        return
    result.healthy += 1
    result.warned += report.warnings > 0
    if block is not None:
        result.false_blocks += 1
        result.false_block_ids.append(case.trajectory.id)
    if case.success:
        result.healthy_success += 1
        result.false_blocks_success += block is not None
        result.warned_success += report.warnings > 0


def build_cases(corpus_folder: Path, seed: int = 7) -> list[Case]:
    """Every case of the evaluation, deterministically."""
    rng = random.Random(seed)
    corpus = corpus_cases(corpus_folder)
    injected = injected_cases(corpus, rng, 200)
    cases = corpus + injected + synthetic_cases(rng) + same_edit_cases(corpus, rng)
    # Last, each with its own generator: the cases above stay exactly as they were.
    cases += same_outcome_cases(corpus, random.Random(seed + 22))
    return cases + scenario_cases(seed + 30)


# ---------------------------------------------------------------------------------------------
# Report


def _median(values: Sequence[int]) -> str:
    return f"{statistics.median(values):g}" if values else "—"


def _pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.1f}%)" if d else "0/0"


# What each family of cases is, for the page's table of inputs (a family without an entry is
# listed by its name alone).
_FAMILIES = {
    "corpus": "real mini-swe-agent (SWE-bench Verified) and tau-bench (airline) runs from "
    "tests/data/eval, with their outcome labels; almost all healthy",
    "injected": "the same real runs with one of their calls repeated 5 to 40 times in a row; in "
    "half of them the repeats differ only in volatile details (bash line numbers, timestamps, "
    "durations, pids)",
    "synthetic-loop": "loops the corpus lacks: SWE-agent `cd` into a missing folder and "
    "`javac: command not found`, a poll that never moves, a doomed call rephrased each time, "
    "an A-B-C cycle",
    "synthetic-healthy": "healthy runs that look repetitive: a slow poll that moves, paging "
    "through a file, re-running the tests between edits",
    "same-edit": "one SWE-agent `edit` applied again and again to a real source file, each "
    "result a window of the growing file (rebuilt from real runs)",
    "same-outcome": "varied calls failing one way, spliced into real runs or rebuilt from them: "
    "prose pasted into a command (bash's unexpected EOF), SWE-agent `edit` reworded (its usage "
    "text)",
    "same-window": "SWE-agent `open`/`goto` around a real short file, every result the same "
    "window (successful calls)",
    "bulk": "healthy bulk work: 10 to 40 distinct calls to one tool answered by one constant "
    "acknowledgement (scripts/detection_scenarios.py)",
    "stuck-quoting": "stuck agents: 10 distinct calls failing the same way, each failure quoting "
    "that call's varied argument (scripts/detection_scenarios.py)",
    "survey": "healthy surveys: distinct items each queued or not found, at most 3 not-found in "
    "a row (scripts/detection_scenarios.py)",
}


def _inputs(cases: Sequence[Case]) -> list[str]:
    families: dict[str, int] = {}
    for case in cases:
        families[case.family] = families.get(case.family, 0) + 1
    calls = sum(len(c.trajectory.calls) for c in cases)
    lines = ["| set | trajectories | what |", "|---|---|---|"]
    lines += [f"| {name} | {n} | {_FAMILIES.get(name, '')} |" for name, n in families.items()]
    lines.append(f"| all | {len(cases)} | {calls} tool calls |")
    return lines


def render(results: Sequence[ProfileResult], cases: Sequence[Case]) -> str:
    """The evaluation page (Markdown)."""
    lines = [
        "# Evaluation: the `openclaw` and `recommended` profiles",
        "",
        "How often each profile catches an agent's loop, how early, and how often it blocks or "
        "warns a healthy run. Every trajectory below is replayed through a real `LoopGuard`, "
        "exactly as `loopwarden analyze` replays a transcript, once per profile: "
        + ", ".join(f"{r.name} (`{json.dumps(PROFILES.get(r.name, {}))}`)" for r in results)
        + ".",
        "",
        "## What is replayed",
        "",
        *_inputs(cases),
        "",
        "## How the runs are scored",
        "",
        "- A run **loops** when it holds 5 or more consecutive identical calls whose results are "
        "identical once volatile details are masked (for calls that edit a file, once every "
        "number is masked too). It is **caught** when the profile's first block (or stop) falls "
        "inside that loop.",
        "- The **position** of the block is the blocked call's place in the loop, the loop's "
        "first call being 1: position 4 means three of the loop's calls ran and the fourth did "
        "not.",
        "- **Other loops** are the synthetic loops that are not consecutive repeats (the A-B-C "
        "cycle, the rephrased doomed call): caught when the run is blocked at all.",
        "- **Healthy runs** are all the others. A **false block** is a block or stop in a healthy "
        "run; **warned** counts healthy runs that got at least one warning. *Successful* healthy "
        "runs are those the corpus marks resolved (SWE-bench) or rewarded (tau-bench), and the "
        "synthetic healthy runs and surveys.",
        "- **Healthy bulk** runs (distinct calls, one acknowledgement) are counted in their own "
        "table, not among the healthy runs above: a block or stop anywhere in one is a miss.",
        "- **Stuck** runs (failures quoting the varied argument) are counted in their own table: "
        "the position of the first block and of the stop, counted from the stretch's first call "
        "(a block before the stretch counts as not caught).",
        "",
        "## Results",
        "",
        "| profile | loops caught (5+ identical calls, identical or volatile-only results) "
        "| median position of the blocked call | other loops caught (a cycle) "
        "| false blocks, healthy successful runs | false blocks, all healthy runs "
        "| warned, healthy successful runs | warned, all healthy runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.name} | {_pct(r.caught, r.looped)} | {_median(r.positions)} "
            f"| {_pct(r.other_caught, r.other_loops)} "
            f"| {_pct(r.false_blocks_success, r.healthy_success)} "
            f"| {_pct(r.false_blocks, r.healthy)} "
            f"| {_pct(r.warned_success, r.healthy_success)} "
            f"| {_pct(r.warned, r.healthy)} |"
        )
    lines += [
        "",
        "Per loop shape (loops caught; median position of the blocked call):",
        "",
        "| loop shape | " + " | ".join(r.name for r in results) + " |",
        "|---|" + "---|" * len(results),
    ]
    for shape in results[0].by_shape:
        cells = []
        for r in results:
            found = r.by_shape.get(shape, [])
            caught = [p for p in found if p is not None]
            cells.append(f"{len(caught)}/{len(found)}; {_median(caught)}")
        lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    lines += _same_outcome_table(results)
    lines += _same_window_table(results)
    lines += _bulk_table(results)
    lines += _stuck_table(results)
    lines += _misses(results)
    lines += [
        "",
        "## Reproducing these figures",
        "",
        "```",
        "python scripts/evaluate_profiles.py                 # rewrites this page",
        "python scripts/evaluate_profiles.py --corpus DIR --out other.md   # another corpus",
        "```",
        "",
        "The evaluation is deterministic: the same code and corpus give the same page, and "
        "`tests/test_evaluation.py` fails when this page is out of date. Rerun it after any change "
        "to a detector, a threshold or the volatile masking. Another corpus is a folder of "
        "`*.jsonl.gz` runs in loopwarden's flat JSONL format, each with a `*.meta.jsonl.gz` file "
        "of labels (`trajectory` and `resolved` or `reward`), as tests/data/eval/README.md "
        "describes.",
        "",
    ]
    return "\n".join(lines)


def _same_outcome_table(results: Sequence[ProfileResult]) -> list[str]:
    """Runs stuck on one outcome from varied calls: per shape, and in all."""
    lines = [
        "",
        "Varied calls, same outcome (5+ consecutive calls, not all the same call, one outcome "
        "that says something):",
        "",
        "| shape | runs | "
        + " | ".join(f"{r.name}: caught; median position" for r in results)
        + " | blocked before the stretch |",
        "|---|---|" + "---|" * len(results) + "---|",
    ]
    shapes = list(results[0].same_outcome)
    for shape in [*shapes, "all"]:
        cells = []
        runs = 0
        for r in results:
            found = (
                [p for ps in r.same_outcome.values() for p in ps]
                if shape == "all"
                else r.same_outcome.get(shape, [])
            )
            caught = [p for p in found if p is not None]
            runs = len(found)
            cells.append(f"{len(caught)}/{len(found)}; {_median(caught)}")
        early = " / ".join(str(r.same_outcome_early) for r in results) if shape == "all" else ""
        lines.append(f"| {shape} | {runs} | " + " | ".join(cells) + f" | {early} |")
    return lines


def _same_window_table(results: Sequence[ProfileResult]) -> list[str]:
    """Successful calls showing one unchanged window: warned and blocked, per profile."""
    runs = len(results[0].same_window)
    if not runs:
        return []
    cells = []
    for r in results:
        warned = [w for w, _ in r.same_window if w is not None]
        blocked = [b for _, b in r.same_window if b is not None]
        cells.append(
            f"{len(warned)}/{runs}; {_median(warned)}; {len(blocked)}/{runs}; {_median(blocked)}"
        )
    return [
        "",
        "Varied successful calls showing one outcome (SWE-agent `open`/`goto` around a real "
        "short file, each showing the same window; 5 to 28 calls): measured, not scored as a "
        "loop to catch, since a success repeated across distinct calls is not a failure "
        "(no goal either way):",
        "",
        "| shape | runs | "
        + " | ".join(
            f"{r.name}: warned; median position; blocked; median position" for r in results
        )
        + " |",
        "|---|---|" + "---|" * len(results),
        f"| unchanged file window | {runs} | " + " | ".join(cells) + " |",
    ]


def _bulk_table(results: Sequence[ProfileResult]) -> list[str]:
    """Healthy bulk work (distinct calls, one acknowledgement): blocked and warned per shape."""
    if not results[0].bulk:
        return []
    lines = [
        "",
        "Healthy bulk, one acknowledgement (10 to 40 distinct calls to one tool, each answered "
        "the same: scripts/detection_scenarios.py; goal: none blocked or stopped):",
        "",
        "| shape | runs | "
        + " | ".join(f"{r.name}: blocked or stopped; warned" for r in results)
        + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for shape in [*results[0].bulk, "all"]:
        cells = []
        runs = 0
        for r in results:
            found = [x for xs in r.bulk.values() for x in xs] if shape == "all" else r.bulk[shape]
            runs = len(found)
            blocked = sum(b for _, b in found)
            warned = sum(w for w, _ in found)
            cells.append(f"{blocked}/{runs}; {warned}/{runs}")
        lines.append(f"| {shape} | {runs} | " + " | ".join(cells) + " |")
    return lines


def _stuck_table(results: Sequence[ProfileResult]) -> list[str]:
    """Stuck on a failure quoting the varied argument: blocked by the 5th, stopped by the 8th."""
    if not results[0].stuck:
        return []
    lines = [
        "",
        "Stuck, the failure quotes the varied argument (10 distinct calls failing the same way, "
        "each failure naming that call's own argument, in words or in numbers: "
        "scripts/detection_scenarios.py; goal: blocked by the 5th call, stopped by the 8th; "
        "positions count from the stretch's first call):",
        "",
        "| shape | runs | "
        + " | ".join(
            f"{r.name}: blocked by the 5th; stopped by the 8th; median block, stop" for r in results
        )
        + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for shape in [*results[0].stuck, "all"]:
        cells = []
        runs = 0
        for r in results:
            found = [x for xs in r.stuck.values() for x in xs] if shape == "all" else r.stuck[shape]
            runs = len(found)
            blocks = [b for b, _ in found if b is not None]
            stops = [s for _, s in found if s is not None]
            by_fifth = sum(b is not None and b <= 5 for b, _ in found)
            by_eighth = sum(s is not None and s <= 8 for _, s in found)
            cells.append(
                f"{by_fifth}/{runs}; {by_eighth}/{runs}; {_median(blocks)}, {_median(stops)}"
            )
        lines.append(f"| {shape} | {runs} | " + " | ".join(cells) + " |")
    return lines


def _misses(results: Sequence[ProfileResult]) -> list[str]:
    """The loops each profile missed and the healthy runs it blocked (the first 10 of each)."""
    lines: list[str] = []
    for r in results:
        for what, ids in (
            ("loops missed", r.missed_ids),
            ("healthy runs blocked", r.false_block_ids),
        ):
            if ids:
                first = ", ".join(ids[:10])
                lines.append(f"- `{r.name}`, {len(ids)} {what}; the first 10: {first}.")
    if lines:
        lines = ["", "## Loops missed and healthy runs blocked", "", *lines]
    return lines


def evaluate(corpus: Path) -> tuple[list[ProfileResult], list[Case]]:
    """Measure every profile on every case."""
    cases = build_cases(corpus)
    return [measure(name, cfg, cases) for name, cfg in PROFILES.items()], cases


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus",
        default=str(ROOT / "tests" / "data" / "eval"),
        help="folder of the development corpus: *.jsonl.gz runs with their *.meta.jsonl.gz labels"
        " (default: tests/data/eval of this repository)",
    )
    parser.add_argument(
        "--out",
        default=str(ROOT / "docs" / "evaluation.md"),
        help="the page to write (default: docs/evaluation.md)",
    )
    args = parser.parse_args(argv)
    results, cases = evaluate(Path(args.corpus))
    page = render(results, cases)
    out = Path(args.out)
    # Keep the hand-written part of the page (below the marker) across regenerations.
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    kept = old[old.index(MARKER) :] if MARKER in old else MARKER + "\n"
    out.write_text(page + "\n" + kept, encoding="utf-8")
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())

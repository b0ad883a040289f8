"""The analyzer's faster paths give what the plain ones gave: the same values, bytes and reports.

Each fast path stands in for a standard one (orjson for ``json``, a plain session store for the
memory store, plain lines for rich on a pipe); these tests put the two side by side.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden import LoopGuard, resolve_config
from loopwarden._terminal import json_printable
from loopwarden.analyze import _forked, report_json, runner
from loopwarden.analyze.replay import Replayer, ReplayStore
from loopwarden.records import RunRecorder
from loopwarden.transcripts import TranscriptError, detect, iter_sources, read_transcripts
from loopwarden.transcripts._io import loads_exact

from _support import data_path

# Integers on both sides of 64 bits, floats orjson writes otherwise (below 1e-4, NaN, the
# infinities) and others, strings with control characters, separators and lone surrogates.
_EDGE_INTS = st.sampled_from(
    [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 10**30, -(10**30)]
)
_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-1e-3, max_value=1e-3),
    st.sampled_from([1e-05, 2.5e-05, 1e-4, -1e-4, 0.0, -0.0, 1e16, 1e22, 1e300, 5e-324]),
)
_TEXT = st.text(
    alphabet=st.one_of(st.characters(), st.sampled_from("\x00\x07\x1b\x7f\x85\u2028\ud800"))
)
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), _EDGE_INTS, _FLOATS, _TEXT)


def _values(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        _LEAVES,
        lambda inner: st.one_of(
            st.lists(inner, max_size=6),
            st.tuples(inner, inner),
            st.dictionaries(keys, inner, max_size=6),
        ),
        max_leaves=40,
    )


@settings(max_examples=400, deadline=None)
@given(_values(st.one_of(_TEXT, st.integers(), st.booleans(), st.none())))
def test_the_indented_json_report_is_the_standard_librarys_text(value: Any) -> None:
    """``--output json`` is written by orjson where it can be, byte for byte what
    ``json.dumps(indent=2)`` wrote: tiny floats, NaN and infinities as the standard library
    writes them, and the standard library itself for what orjson cannot write."""
    expected = json_printable(json.dumps(value, indent=2, ensure_ascii=False))
    assert report_json._dumps(value, indent=2) == expected


def test_the_fast_writer_takes_the_common_report_and_keeps_its_floats() -> None:
    """A report of plain values and tiny amounts of money is written by orjson (not by the
    fallback), with the floats as the standard library writes them."""
    document = {"spend": {"dollars": 2.5e-05, "saved": 0.0, "ratio": 0.125}, "calls": [1, 2]}
    fast = report_json._indented_fast(document)
    assert fast == json.dumps(document, indent=2, ensure_ascii=False)
    assert '"dollars": 2.5e-05' in fast


@settings(max_examples=400, deadline=None)
@given(_values(_TEXT))
def test_documents_are_read_as_the_standard_library_reads_them(value: Any) -> None:
    """orjson reads a transcript only when it gives ``json.loads``'s value: integers beyond 64
    bits stay ints (found by looking at the parsed numbers, or at the text when it holds many
    small values), NaN and lone surrogates go through the standard library."""
    for text in (json.dumps(value), json.dumps(value, indent=2)):
        assert repr(loads_exact(text)) == repr(json.loads(text))


def test_a_big_integer_among_many_small_values_is_found_in_the_text() -> None:
    """Past one value per 16 bytes the parsed value is not walked; the text check finds it."""
    for big in (10**30, -(2**63) - 1):
        text = json.dumps([1] * 500 + [{"n": big}])
        assert loads_exact(text)[-1]["n"] == big


def test_the_replay_store_gives_the_memory_stores_reports_and_keeps_no_session() -> None:
    """Replaying through the plain store the analyzer uses gives every report the memory store
    gives (both profiles), and no trajectory's session outlives its replay."""
    trajectories = [
        trajectory
        for path in iter_sources([data_path("samples")])
        for trajectory in read_transcripts(path)
    ]
    for profile in ("openclaw", "recommended"):
        config = resolve_config({"enabled": True, "profile": profile})
        store = ReplayStore()
        plain, memory = Replayer(LoopGuard(config, store=store)), Replayer(LoopGuard(config))
        for trajectory in trajectories:
            assert plain.replay(trajectory) == memory.replay(trajectory)
            assert len(store) == 0
        assert len(memory.guard.store) == len(trajectories)  # type: ignore[arg-type]


def test_the_step_replay_uses_the_guards_judge_and_its_failure_handling(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The step replay decides with the guard's own judge (a config assigned to the guard
    after the replayer was made counts), and a step that fails is handed to the guard's
    failure handling: logged, and the call allowed."""
    looping = [
        trajectory
        for path in iter_sources([data_path("samples")])
        for trajectory in read_transcripts(path)
        if trajectory.calls
    ]
    guard = LoopGuard(resolve_config({"enabled": False}), store=ReplayStore())
    replayer = Replayer(guard)
    guard.config = resolve_config({"enabled": True, "profile": "recommended"})
    expected = Replayer(LoopGuard(guard.config)).replay
    assert [replayer.replay(t) for t in looping] == [expected(t) for t in looping]
    assert any(replayer.replay(t).marks for t in looping)  # not vacuous

    def broken(*_args: Any) -> Any:
        raise RuntimeError("a bug in the step")

    monkeypatch.setattr("loopwarden.analyze.replay.before_step", broken)
    with caplog.at_level("ERROR", logger="loopwarden"):
        report = replayer.replay(looping[0])
    assert not report.marks and not report.saved
    assert f"loop accounting failed (before {looping[0].calls[0].tool})" in caplog.text


def test_a_pretty_printed_document_is_read_once_with_the_standard_librarys_value(
    tmp_path: Path,
) -> None:
    """A document opening with ``{`` alone on its line is parsed from one read; what orjson
    would read otherwise (a big integer) or not at all (a bad byte) goes the usual way."""
    doc = {"trajectory": [{"action": "ls", "observation": "x"}], "info": {"n": 2**70}}
    path = tmp_path / "a.traj"
    path.write_text(json.dumps(doc, indent=2))
    assert repr(detect(path).doc) == repr(doc)
    path.write_bytes(b"{\n" + json.dumps(doc).encode()[1:-1] + b', "x": "\xff"}')
    with pytest.raises(TranscriptError, match="cannot read: 'utf-8' codec"):
        detect(path)


def _recorded(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The runs and the events of a run-records file, times and row ids aside."""
    with sqlite3.connect(db) as conn:
        runs = conn.execute(
            "SELECT session, run_key, agent_id, outcome, stop_reason FROM runs ORDER BY id"
        ).fetchall()
        events = conn.execute(
            "SELECT runs.run_key, call, type, level, action, detector, count, tool_name, "
            "events.agent_id, message, paired_tool_name, args_hash FROM events "
            "JOIN runs ON runs.id = events.run ORDER BY events.id"
        ).fetchall()
    return runs, events


def test_the_step_replay_gives_the_guards_reports_and_run_records(tmp_path: Path) -> None:
    """With a replay store the analyzer runs the core's step directly on each trajectory's
    session; through the guard's own methods (its memory store) every report, every run and
    every loop event recorded (call numbers included) is the same, in both profiles."""
    paths = iter_sources([data_path("samples"), data_path("eval")])
    trajectories = [t for path in paths if detect(path).format for t in read_transcripts(path)]
    actions: set[str] = set()
    for profile in ("openclaw", "recommended"):
        config = resolve_config({"enabled": True, "profile": profile})
        found = []
        for name, store in (("step", ReplayStore()), ("guard", None)):
            db = tmp_path / f"{profile}-{name}.db"
            recorder = RunRecorder(str(db), batch=500)
            replayer = Replayer(LoopGuard(config, store=store), recorder)
            reports = [replayer.replay(trajectory) for trajectory in trajectories]
            recorder.close()
            found.append((reports, _recorded(db)))
        assert found[0] == found[1]
        reports, (runs, events) = found[0]
        assert len(runs) == len(trajectories)
        actions.update(event[4] for event in events)
    # Not vacuous: warnings, blocks and stops were decided and recorded.
    assert {"warn", "block", "stop"} <= actions


def test_a_json_report_to_a_file_does_not_load_rich(tmp_path: Path) -> None:
    """With stderr not a terminal, the messages are plain lines and rich is never imported;
    the line is the one rich wrote."""
    out = tmp_path / "report.json"
    probe = (
        "import sys; from loopwarden.cli import main; code = main(sys.argv[1:]); "
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'rich'))"
    )
    examples = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
    argv = ["analyze", str(examples), "--output", "json", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "[]\n"
    assert done.stderr == (
        f"wrote the json report to {out}; exit 1: the guard would have blocked calls or "
        "stopped runs in 1 trajectory\n"
    )
    assert json.loads(out.read_text())["summary"]["trajectories"] > 1


def test_workers_take_runs_of_about_equal_bytes() -> None:
    """The sources stay in order, cut where a run reaches its share of the bytes."""
    sources = [runner.Source(f"f{n}", explicit=True) for n in range(8)]
    sizes = [50, 1, 1, 1, 47, 30, 30, 40]  # 200 bytes: 4 runs of about 50
    chunks = runner._chunks(sources, sizes, 4)
    assert [source for chunk in chunks for source in chunk] == sources
    assert [[int(s.path[1:]) for s in chunk] for chunk in chunks] == [
        [0],
        [1, 2, 3, 4],
        [5, 6],
        [7],
    ]
    assert len(runner._chunks(sources, [0] * 8, 4)) == 4  # empty files are spread too


def _slow_square(number: int) -> int:
    time.sleep(0.02 * (number % 3))  # the children finish out of order
    return number * number


def _fails_on_five(number: int) -> int:
    if number == 5:
        raise ValueError(f"task {number} is bad")
    return number


def _dies_on_two(number: int) -> int:
    if number == 2:
        os._exit(7)
    return number


def test_forked_workers_give_results_in_task_order() -> None:
    assert list(_forked.forked_map(_slow_square, list(range(12)), 3)) == [n * n for n in range(12)]


def test_an_exception_in_a_forked_worker_is_raised_with_its_traceback() -> None:
    with pytest.raises(ValueError, match="task 5 is bad") as raised:
        list(_forked.forked_map(_fails_on_five, list(range(8)), 2))
    assert isinstance(raised.value.__cause__, _forked.WorkerTraceback)
    assert "_fails_on_five" in str(raised.value.__cause__)


def test_a_forked_worker_that_dies_is_reported() -> None:
    with pytest.raises(RuntimeError, match=r"ended without sending its results.*exit status 7"):
        list(_forked.forked_map(_dies_on_two, list(range(6)), 2))


def test_jobs_reports_match_through_the_standard_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the forked workers are not used (no os.fork, or more tasks than they take) the
    standard process pool runs the chunks: the same results."""
    sources, _ = runner.collect_sources([str(data_path("samples"))])
    configs = [resolve_config({"enabled": True})]
    tasks = [([source], "auto", configs, None, ()) for source in sources]
    forked = [r.reports for rs in runner._in_workers(tasks, 2) for r in rs]
    monkeypatch.setattr(_forked, "MAX_TASKS", 0)
    pooled = [r.reports for rs in runner._in_workers(tasks, 2) for r in rs]
    assert forked == pooled and sum(map(len, forked)) > 0


def test_small_inputs_are_analysed_in_process_whatever_jobs_says() -> None:
    """Under POOL_MIN_BYTES no worker starts: the reports stream from this process (a live
    generator per source), as with --jobs 1; above it they come back from the workers."""
    sources, _ = runner.collect_sources([str(data_path("samples"))])
    config = resolve_config({"enabled": True})
    how = ("auto", ())
    streams = [stream for _, stream in runner._results(sources, how, [config], 2, None)]
    assert all(isinstance(stream, types.GeneratorType) for stream in streams)
    assert sum(len(list(stream)) for stream in streams) > 0
    assert sum(runner._size(source.path) for source in sources) < runner.POOL_MIN_BYTES


def test_replayers_reused_from_file_to_file_give_each_files_own_reports() -> None:
    """One set of replayers serves every file of a run: a file gives the reports it gives on
    its own (before, after and between other files), its sessions counted from 1 again."""
    sources, _ = runner.collect_sources([str(data_path("samples"))])
    configs = [resolve_config({"enabled": True, "profile": p}) for p in ("openclaw", "recommended")]

    def alone(source: runner.Source) -> list[list[Any]]:
        return runner.analyze_source(source, "auto", configs).reports

    expected = [alone(source) for source in sources]
    replayers = runner.new_replayers(configs)
    for order in (sources, sources[::-1], sources + sources):
        for source in order:
            found = runner.analyze_source(source, "auto", configs, replayers=replayers)
            assert found.reports == expected[sources.index(source)]
        assert all(len(replayer.guard.store) == 0 for replayer in replayers)  # type: ignore[arg-type]
    assert any(report.marks for reports in expected for variants in reports for report in variants)

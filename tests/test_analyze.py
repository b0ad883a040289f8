"""``loopwarden analyze``: replay semantics, the JSON contract, outputs, sweep, jobs, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from loopwarden import __version__, resolve_config
from loopwarden.analyze import runner
from loopwarden.cli import main

from _support import data_path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
OPENCLAW = "openclaw-session-example.jsonl"

TRAJECTORY_KEYS = {
    "id", "source", "format", "succeeded", "calls", "warnings", "blocks", "stopped",
    "first_warning", "first_block", "stop", "calls_after_first_block_or_stop", "calls_saved",
    "cost", "events", "spend",
}  # fmt: skip
SUMMARY_KEYS = {
    "trajectories", "calls", "with_warning", "with_block_or_stop", "stopped",
    "calls_after_first_block_or_stop", "calls_saved", "succeeded",
    "succeeded_with_block_or_stop", "cost", "spend",
}  # fmt: skip
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[1] / "docs" / "analyze-report.schema.json").read_text()
)


def valid(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``, checked against the published JSON Schema of the report."""
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator(SCHEMA).validate(doc)
    return doc


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["analyze", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(capsys, *argv, "--output", "json")
    return code, valid(json.loads(out))


def flat(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def same_call_rows(traj: str, results: list[str]) -> list[dict[str, Any]]:
    return [
        {"trajectory": traj, "step": i, "tool": "exec", "args": {"command": "make"},
         "result": result, "error": None}
        for i, result in enumerate(results)
    ]  # fmt: skip


# -- the JSON contract ---------------------------------------------------------------------------


def test_json_contract_on_the_shipped_examples(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, str(EXAMPLES))
    assert code == 1  # the OpenClaw loop is stopped after compaction
    assert doc["loopwarden"] == __version__
    assert doc["config"] == resolve_config({"enabled": True}).to_camel()
    assert any("enabled=true" in notice for notice in doc["notices"])
    assert doc["errors"] == [] and doc["skipped"] == []
    trajectories = doc["trajectories"]
    for traj in trajectories:
        assert set(traj) == TRAJECTORY_KEYS
        assert isinstance(traj["calls"], int) and isinstance(traj["stopped"], bool)
        for event in traj["events"]:
            assert set(event) == {"index", "call", "tool", "level", "action", "detector", "count"}
            assert event["action"] in ("warn", "block", "stop")
            assert 0 <= event["index"] < traj["calls"] and event["call"] == event["index"] + 1
    summary = doc["summary"]
    assert set(summary) == SUMMARY_KEYS
    assert summary["trajectories"] == len(trajectories)
    assert summary["calls"] == sum(t["calls"] for t in trajectories)
    assert summary["with_warning"] == sum(1 for t in trajectories if t["warnings"])
    assert summary["with_block_or_stop"] == sum(
        1 for t in trajectories if t["first_block"] or t["stop"]
    )
    assert summary["calls_after_first_block_or_stop"] == sum(
        t["calls_after_first_block_or_stop"] for t in trajectories
    )
    for traj in trajectories:  # a block is a block and a stop a stop
        assert traj["blocks"] == (0 if traj["first_block"] is None else traj["blocks"])
        assert (traj["first_block"] is None) == (traj["blocks"] == 0)
        assert (traj["stop"] is None) == (not traj["stopped"])


def test_openclaw_loop_warns_then_the_compaction_guard_stops_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = run_json(capsys, str(EXAMPLES / OPENCLAW))
    (traj,) = doc["trajectories"]
    # 2 healthy calls, then identical exec calls: the 11th sees 10 earlier repeats -> warning.
    warning_threshold = doc["config"]["warningThreshold"]
    assert traj["first_warning"] == {
        "index": 2 + warning_threshold,
        "call": 3 + warning_threshold,
        "tool": "exec",
        "detector": "generic_repeat",
        "count": warning_threshold,
    }
    # 14 calls before the compaction; the window's 3rd identical outcome aborts the run.
    window = doc["config"]["postCompactionGuard"]["windowSize"]
    stop = traj["stop"]
    assert stop["index"] == 14 + window - 1 == traj["calls"] - 1 == stop["call"] - 1
    assert stop["detector"] == "compaction_loop_persisted" and stop["tool"] == "exec"
    assert "auto-compaction" in stop["message"]
    assert traj["stopped"] is True and traj["blocks"] == 0 and traj["first_block"] is None
    assert traj["calls_after_first_block_or_stop"] == 0
    assert [e["action"] for e in traj["events"]] == ["warn", "stop"]


def test_without_the_compaction_entry_the_run_is_not_stopped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = (EXAMPLES / OPENCLAW).read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"type":"compaction"' not in line.replace(" ", "")]
    assert len(kept) == len(lines) - 1
    # Re-link the tree: the entry after the compaction pointed at it.
    compaction = json.loads(next(line for line in lines if line not in kept))
    fixed = [line.replace(compaction["id"], compaction["parentId"]) for line in kept]
    path = tmp_path / "no-compaction.jsonl"
    path.write_text("".join(fixed))
    code, doc = run_json(capsys, str(path))
    (traj,) = doc["trajectories"]
    assert traj["stopped"] is False and traj["first_block"] is None and traj["stop"] is None
    assert code == 0


def test_blocked_calls_are_not_executed_and_later_calls_still_count(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 20 identical outcomes, then the same call whose recorded result changed. Live, call 21
    # is blocked and never runs, so its new result must not reach the history: call 22 (same
    # new result) is blocked again. Had the blocked result been fed back, 22 would pass.
    results = ["1 failing"] * 20 + ["0 failing", "0 failing", "0 failing"]
    path = flat(tmp_path / "loop.jsonl", same_call_rows("r", results))
    code, doc = run_json(capsys, str(path))
    (traj,) = doc["trajectories"]
    critical = doc["config"]["criticalThreshold"]
    assert traj["first_block"]["index"] == critical
    assert traj["first_block"]["detector"] == "generic_repeat"
    assert traj["blocks"] == len(results) - critical
    assert traj["calls_after_first_block_or_stop"] == len(results) - critical - 1
    assert code == 1


def test_set_and_config_file_with_agent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = flat(tmp_path / "loop.jsonl", same_call_rows("r", ["same"] * 8))
    _, doc = run_json(capsys, str(path), "--set", "warningThreshold=3", "--set",
                      "criticalThreshold=5")  # fmt: skip
    assert doc["config"]["warningThreshold"] == 3
    assert doc["trajectories"][0]["first_block"]["index"] == 5
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({
        "tools": {"loopDetection": {"enabled": True, "warningThreshold": 2}},
        "agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"criticalThreshold": 4}}}]},
    }))  # fmt: skip
    _, doc = run_json(capsys, str(path), "--config", str(config), "--agent", "ops")
    assert (doc["config"]["warningThreshold"], doc["config"]["criticalThreshold"]) == (2, 4)
    assert doc["trajectories"][0]["first_block"]["index"] == 4
    assert not any("enabled=true" in n for n in doc["notices"])  # the file sets enabled


# -- exit codes and errors -----------------------------------------------------------------------


def test_exit_0_when_nothing_would_be_blocked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run(capsys, str(EXAMPLES / "swe-agent-0x__swe-agent__test-repo-i1.traj"))
    assert code == 0


def test_malformed_file_is_reported_and_the_others_still_analysed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copy(EXAMPLES / OPENCLAW, tmp_path / "good.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"trajectory": "x", "tool": "t", "args": {}}\n{not json\n')
    code, out, err = run(capsys, str(tmp_path), "--output", "json")
    assert code == 1  # the OpenClaw loop is found: that wins over the error, still reported
    doc = json.loads(out)
    assert [t["format"] for t in doc["trajectories"]] == ["openclaw"]
    (error,) = doc["errors"]
    assert f"{bad}:2:" in error and "not valid JSON" in error
    assert f"{bad}:2:" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["--set", "criticalThreshold=abc"],
        ["--set", "repeatThreshold=3"],
        ["--agent", "ops"],
        ["--sweep", "criticalThreshold"],
        ["--sweep", "criticalThreshold=5", "--record", "runs.db"],
    ],
)
def test_exit_2_on_config_and_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, str(EXAMPLES / OPENCLAW), *argv)
    assert code == 2 and out == ""
    assert "error" in err


def test_exit_2_on_missing_path_and_bad_jobs(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(EXAMPLES / OPENCLAW), "/no/such/dir")
    assert code == 2 and "/no/such/dir: no such file or directory" in err
    with pytest.raises(SystemExit) as info:
        main(["analyze", str(EXAMPLES), "--jobs", "0"])
    assert info.value.code == 2


def test_explicit_non_transcript_is_an_error_but_skipped_in_a_directory(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    meta = tmp_path / "runs.meta.jsonl"
    meta.write_text(json.dumps({"trajectory": "r", "resolved": True}) + "\n")
    flat(tmp_path / "run.jsonl", same_call_rows("r", ["ok"]))
    code, doc = run_json(capsys, str(tmp_path))
    assert code == 0 and doc["errors"] == [] and len(doc["skipped"]) == 1
    code, out, err = run(capsys, str(meta), "--output", "json")
    assert code == 2 and out == ""  # nothing to analyse: no report, the error once
    assert err.count("not a recognised transcript") == 1 and "nothing to analyse" in err


@pytest.mark.parametrize("output", ["text", "json", "jsonl", "html"])
def test_input_with_nothing_to_analyse_is_an_error_reported_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    (tmp_path / "notes.json").write_text('{"not": "a transcript"}')
    report = tmp_path / "report.out"
    report.write_text("the previous report")
    code, out, err = run(capsys, str(tmp_path), "--output", output)
    assert code == 2 and out == ""
    assert err.count("nothing to analyse") == 1 and "1 not a transcript" in err
    code, out, err = run(capsys, str(tmp_path / "notes.json"), "--output", output)
    assert code == 2 and out == "" and err.count("not a recognised transcript") == 1
    code, _, _ = run(capsys, str(tmp_path / "notes.json"), "--output", output, "--out", str(report))
    assert code == 2 and report.read_text() == "the previous report"


def test_a_half_written_last_line_is_left_out_with_one_warning(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    whole = (EXAMPLES / OPENCLAW).read_text(encoding="utf-8")
    cut = whole.index('"name":"exec"', len(whole) // 2)  # inside a line, after a complete one
    partial = tmp_path / "live.jsonl"
    partial.write_text(whole[:cut], encoding="utf-8")
    code, out, err = run(capsys, str(partial), "--output", "json")
    lineno = whole[:cut].count("\n") + 1
    assert code in (0, 1) and json.loads(out)["trajectories"][0]["calls"] > 0
    assert err.count("warning:") == 1 and f"live.jsonl:{lineno}: the last line is incomplete" in err
    # A broken line in the middle of a file is still an error, with a clean message.
    partial.write_text(whole[:cut] + "\n" + whole[cut:], encoding="utf-8")
    code, out, err = run(capsys, str(partial), "--output", "json")
    assert code == 2 and "not valid JSON" in err and " at at " not in err


# -- other outputs -------------------------------------------------------------------------------


def test_jsonl_streams_the_same_trajectories_then_the_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, doc = run_json(capsys, str(EXAMPLES))
    _, out, _ = run(capsys, str(EXAMPLES), "--output", "jsonl")
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[:-1] == doc["trajectories"]
    assert lines[-1]["summary"] == doc["summary"]
    assert lines[-1]["config"] == doc["config"]


def test_text_report_says_where_and_why(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(EXAMPLES))
    assert code == 1 and err == ""
    assert "enabled=true" in out  # the report says the defaults were used with enabled=true
    assert "0192f3a1-7c2e-7b5d-9e44-5a1c3d2b9f00" in out
    assert "warned at call 13 of 17 (exec): generic_repeat ×10" in out
    assert "stopped the run at call 17 of 17 (exec): compaction_loop_persisted ×3" in out
    assert "why: CRITICAL: tool exec repeated 3 times" in out
    assert "\x1b[" not in out  # no colour codes when stdout is not a terminal


def test_out_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    code, out, _ = run(capsys, str(EXAMPLES / OPENCLAW), "--output", "json", "--out", str(target))
    assert code == 1 and out == ""
    assert json.loads(target.read_text())["summary"]["trajectories"] == 1


def test_jobs_output_is_identical(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "POOL_MIN_BYTES", 0)  # small files: workers all the same
    for n in range(6):  # several files so the work really is spread
        shutil.copy(EXAMPLES / OPENCLAW, tmp_path / f"copy{n}.jsonl")
    flat(tmp_path / "loop.jsonl", same_call_rows("r", ["same"] * 25))
    paths = [str(EXAMPLES), str(tmp_path)]
    for output in ("json", "jsonl", "text"):
        serial = run(capsys, *paths, "--output", output, "--jobs", "1")
        parallel = run(capsys, *paths, "--output", output, "--jobs", "3")
        assert serial == parallel


def test_sweep_rows_match_single_runs(capsys: pytest.CaptureFixture[str]) -> None:
    sample = str(data_path("samples"))
    code, out, _ = run(capsys, sample, "--output", "json", "--sweep",
                       "criticalThreshold=4,30", "--sweep", "warningThreshold=2,3")  # fmt: skip
    rows = json.loads(out)["sweep"]
    assert [tuple(r["settings"].items()) for r in rows] == [
        (("criticalThreshold", c), ("warningThreshold", w))
        for c in (4, 30) for w in (2, 3)
    ]  # fmt: skip
    for row in rows:
        settings = [f"{k}={v}" for k, v in row["settings"].items()]
        _, single = run_json(capsys, sample, *(x for s in settings for x in ("--set", s)))
        assert row["summary"] == single["summary"]
        assert row["config"] == single["config"]
    # A lower critical threshold cuts the OpenClaw loop short long before the compaction.
    saved = [row["summary"]["calls_after_first_block_or_stop"] for row in rows]
    assert saved[0] > saved[-1] == 0
    assert code == 1
    _, text, _ = run(capsys, sample, "--sweep", "criticalThreshold=4,30")
    assert "criticalThreshold" in text and "calls saved" in text


def test_forced_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, str(EXAMPLES / OPENCLAW), "--format", "openclaw")
    assert code == 1 and doc["trajectories"][0]["format"] == "openclaw"
    code, out, err = run(capsys, str(EXAMPLES / OPENCLAW), "--format", "swe-agent")
    assert code == 2 and out == "" and "not valid JSON" in err


def test_reports_never_carry_arguments_or_results(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    secret = "hunter2-s3cr3t"
    rows = [
        {"trajectory": "r", "step": i, "tool": "login", "args": {"password": secret},
         "result": f"token {secret}", "error": None}
        for i in range(25)
    ]  # fmt: skip
    path = flat(tmp_path / "secret.jsonl", rows)
    for output in ("json", "jsonl", "text", "html"):
        code, out, err = run(capsys, str(path), "--output", output)
        assert code == 1
        assert secret not in out and secret not in err, output


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "loopwarden", "analyze", str(EXAMPLES), "--output", "json"]
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=slave, check=False, timeout=120)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    assert done.returncode == 1
    assert b"replaying" in shown  # the bar went to the terminal...
    assert json.loads(done.stdout)["summary"]["trajectories"] > 0  # ...and not into the report


def test_a_file_broken_part_way_keeps_what_came_before(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "POOL_MIN_BYTES", 0)  # small files: workers all the same
    rows = same_call_rows("first", ["same"] * 3) + same_call_rows("second", ["same"] * 3)
    path = flat(tmp_path / "archive.jsonl", rows)
    with path.open("a") as handle:
        handle.write('{"trajectory": "second", "tool": \n')
    results = {}
    for jobs in ("1", "2"):
        shutil.copy(path, tmp_path / f"copy{jobs}.jsonl")  # two files, so jobs 2 really forks
        code, out, _ = run(capsys, str(path), str(tmp_path / "copy1.jsonl"), "--output", "jsonl",
                           "--jobs", jobs)  # fmt: skip
        assert code == 2
        results[jobs] = out
        lines = [json.loads(line) for line in out.splitlines()]
        # "first" completed before the bad line 7; "second" was cut by it.
        assert [line["id"] for line in lines[:-1]] == ["first", "first"]
        errors = lines[-1]["errors"]
        assert len(errors) == 2 and f"{path}:7:" in errors[0]
        assert "the 1 trajectories before it are included" in errors[0]
    assert results["1"] == results["2"]


def test_a_stop_instead_of_a_block_ends_the_replayed_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = flat(tmp_path / "loop.jsonl", same_call_rows("r", ["same"] * 25))
    code, doc = run_json(capsys, str(path), "--set", "stopAfterBlocks=2")
    (traj,) = doc["trajectories"]
    critical = doc["config"]["criticalThreshold"]
    # First critical verdict blocks; the second one ends the run; nothing after it is replayed.
    assert [(e["index"], e["action"]) for e in traj["events"]][-2:] == [
        (critical, "block"),
        (critical + 1, "stop"),
    ]
    assert traj["stopped"] is True and traj["blocks"] == 1
    assert traj["first_block"]["index"] == critical
    assert traj["calls_after_first_block_or_stop"] == 25 - critical - 1
    assert code == 1


def test_text_report_prints_names_with_brackets_verbatim(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [dict(row, tool="to[/x]ol") for row in same_call_rows("t[/b]", ["same"] * 12)]
    bad = tmp_path / "[red]b.jsonl"  # markup would swallow the tag
    bad.write_text("{bad\n")
    code, out, err = run(capsys, str(flat(tmp_path / "weird.jsonl", rows)), str(bad))
    assert code == 2
    assert "● t[/b]" in out and "(to[/x]ol): generic_repeat" in out
    assert f"error: {bad}:1: not valid JSON" in err


# -- what the command line says ------------------------------------------------------------------


def test_text_shows_the_block_and_the_stop_each_with_its_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, str(EXAMPLES / OPENCLAW), "--set", "profile=recommended")
    _, doc = run_json(capsys, str(EXAMPLES / OPENCLAW), "--set", "profile=recommended")
    events = doc["trajectories"][0]["events"]
    block = next(e for e in events if e["action"] == "block")
    stop = next(e for e in events if e["action"] == "stop")
    assert code == 1
    assert f"blocked at call {block['index'] + 1} of" in out
    assert f"stopped the run at call {stop['index'] + 1} of" in out
    assert out.count("why:") == 2


def test_counts_are_written_in_the_right_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = flat(tmp_path / "one.jsonl", same_call_rows("r", ["ok"]))
    _, out, _ = run(capsys, str(path))
    assert "1 trajectory, 1 tool call, 1 file" in out
    _, out, _ = run(capsys, str(EXAMPLES))
    assert "25 trajectories, 183 tool calls, 6 files" in out


def test_a_bad_sweep_value_is_reported_under_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(EXAMPLES), "--sweep", "bogus=1,2")
    assert code == 2 and err.startswith("error: --sweep: ") and "--set" not in err
    code, _, err = run(capsys, str(EXAMPLES), "--set", "bogus=1")
    assert code == 2 and err.startswith("error: --set: ")


def test_a_sweep_row_says_what_ran_when_a_value_is_clamped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(capsys, str(EXAMPLES), "--sweep", "criticalThreshold=5,20")
    warning = resolve_config({"enabled": True}).warning_threshold
    assert f"5 → runs as {warning + 1}" in out and "20 → runs as" not in out
    _, doc = run_json(capsys, str(EXAMPLES), "--sweep", "criticalThreshold=5,20")
    assert [row["effective"]["criticalThreshold"] for row in doc["sweep"]] == [warning + 1, 20]


@pytest.mark.parametrize("output", ["text", "json", "html"])
def test_a_report_written_to_a_file_says_where_and_what_the_exit_code_means(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, output: str
) -> None:
    report = tmp_path / f"report.{output}"
    code, out, err = run(capsys, str(EXAMPLES), "--output", output, "--out", str(report))
    assert code == 1 and out == "" and report.stat().st_size > 0
    assert f"wrote the {output} report to {report}" in err
    assert "exit 1: the guard would have blocked calls or stopped runs in 1 trajectory" in err
    quiet = flat(tmp_path / "quiet.jsonl", same_call_rows("r", ["ok"]))
    code, _, err = run(capsys, str(quiet), "--output", output, "--out", str(report))
    assert code == 0 and "exit 0: nothing would have been blocked" in err

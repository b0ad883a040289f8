"""``loopwarden analyze`` as a newcomer meets it: the order of the report, its exit codes, where
the report goes, and the errors that used to be silent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopwarden.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "transcripts"
OPENCLAW = EXAMPLES / "openclaw-session-example.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["analyze", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def rows(traj: str, results: list[str], tool: str = "exec") -> list[dict[str, Any]]:
    return [
        {"trajectory": traj, "step": i, "tool": tool, "args": {"command": "make"},
         "result": result, "error": None}
        for i, result in enumerate(results)
    ]  # fmt: skip


def flat(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


# -- 1. the text report: worst first ---------------------------------------------------------------


def test_text_report_lists_the_worst_loops_first_even_past_the_cut(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # 55 runs that only warn, then 3 that are blocked: in file order the blocked ones fell
    # into "… and N more" behind the cut of 50.
    lines = []
    for n in range(55):
        lines += rows(f"warned-{n:02}", ["same"] * 4)
    for n in range(3):
        lines += rows(f"blocked-{n}", ["same"] * (8 + n))
    path = flat(tmp_path / "many.jsonl", lines)
    code, out, _ = run(capsys, str(path), "--set", "warningThreshold=3", "--set",
                       "criticalThreshold=6")  # fmt: skip
    assert code == 1
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("● ")]
    assert len(listed) == 50
    # Blocked first, the most calls saved first; then the warnings in file order.
    assert listed[:3] == ["blocked-2", "blocked-1", "blocked-0"]
    assert listed[3:] == [f"warned-{n:02}" for n in range(47)]
    assert "… and 8 more" in out


# -- 2. --record into something that is no database ------------------------------------------------


@pytest.mark.parametrize("target", ["junk.txt", "junk.txt/x.db"])
def test_record_into_a_file_that_is_no_database_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str
) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("not a database\n")
    code, out, err = run(capsys, str(OPENCLAW), "--record", str(tmp_path / target))
    assert code == 2 and out == ""
    assert err.startswith(f"error: --record {tmp_path / target}: ")
    assert junk.read_text() == "not a database\n"


# -- 5. exit code precedence -----------------------------------------------------------------------


def test_loops_found_still_exit_1_next_to_an_unreadable_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    flat(tmp_path / "loop.jsonl", rows("r", ["same"] * 25))
    (tmp_path / "broken.jsonl").write_text("{not json\n")
    code, out, err = run(capsys, str(tmp_path))
    assert code == 1  # the loop is the signal a CI job acts on
    assert "broken.jsonl:1: not valid JSON" in err
    assert "1 input error" in out
    clean = tmp_path / "clean"
    clean.mkdir()
    flat(clean / "quiet.jsonl", rows("q", ["ok"]))
    (clean / "broken.jsonl").write_text("{not json\n")
    code, _, _ = run(capsys, str(clean))
    assert code == 2  # nothing blocked, but not everything could be read


# -- 7. the format from --out's extension ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "looks"),
    [("r.html", "<!DOCTYPE html>"), ("r.json", '{\n  "schema"'), ("r.jsonl", '{"id"'),
     ("r.txt", "loopwarden analyze: ")],
)  # fmt: skip
def test_out_takes_the_format_from_its_extension(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, looks: str
) -> None:
    target = tmp_path / name
    code, _, _ = run(capsys, str(OPENCLAW), "--out", str(target))
    assert code == 1 and target.read_text().startswith(looks)
    # An explicit --output wins over the extension.
    code, _, _ = run(capsys, str(OPENCLAW), "--out", str(target), "--output", "text")
    assert target.read_text().startswith("loopwarden analyze: ")


# -- 10. a forced format that finds nothing --------------------------------------------------------


@pytest.mark.parametrize("fmt", ["openclaw", "openhands", "claude-code"])
def test_a_forced_format_that_finds_no_tool_call_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fmt: str
) -> None:
    obj = tmp_path / "obj.json"
    obj.write_text('{"a": 1}\n')
    code, out, err = run(capsys, str(obj), "--format", fmt)
    assert code == 2 and out == ""
    assert f"--format {fmt} found no tool call" in err and "expected" in err


def test_a_forced_codex_format_names_the_line_type_it_could_not_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    obj = tmp_path / "obj.json"
    obj.write_text('{"a": 1}\n')
    code, _, err = run(capsys, str(obj), "--format", "codex")
    assert code == 2 and '"None"' not in err
    assert 'a line without a "type"' in err


# -- 13. the smaller ones --------------------------------------------------------------------------


def test_skipped_files_are_counted_in_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    flat(tmp_path / "run.jsonl", rows("r", ["ok"]))
    (tmp_path / "notes.json").write_text('{"not": "a transcript"}')
    _, out, _ = run(capsys, str(tmp_path))
    assert "skipped 1 file that is not a transcript" in out and "file(s)" not in out


def test_a_sweep_without_a_config_does_not_talk_of_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(capsys, str(OPENCLAW), "--sweep", "criticalThreshold=12,16")
    assert "the config does not set" not in out
    assert "no config file given: the defaults with enabled=true" in out


def test_a_stop_reason_does_not_say_the_call_was_blocked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = run(capsys, str(OPENCLAW))
    assert "stopped the run at call 17" in out
    assert "so the call was blocked" not in out


def test_config_check_into_a_closed_pipe_exits_as_the_other_commands() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "openclaw.json"
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "loopwarden", "config", "check", str(example)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert done.stderr == b"", done.stderr.decode()
    assert done.returncode == 141

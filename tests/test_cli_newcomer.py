"""The command line as a newcomer meets it: the order of the analyze report, its exit codes, where
the report goes, the errors that used to be silent, and what the other commands say."""

from __future__ import annotations

import json
import os
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
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = flat(tmp_path / "loop.jsonl", rows("r", ["same"] * 8))
    _, out, _ = run(capsys, str(path), "--set", "profile=recommended")
    block, stop = (line for line in out.splitlines() if line.startswith("  why:"))
    assert "This is a loop, so the call was blocked." in block
    assert "This is a loop, so the run was stopped." in stop
    db = tmp_path / "runs.db"
    run(capsys, str(path), "--set", "profile=recommended", "--record", str(db))
    assert main(["runs", "show", "r", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "stopped because: CRITICAL" in shown and "so the run was stopped" in shown
    assert shown.count("so the call was blocked") == 1  # the block's event only


def test_config_check_into_a_closed_pipe_exits_as_the_other_commands() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "openclaw.json"
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


def test_hooks_status_names_no_other_cli_for_a_missing_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["hooks", "install", "claude-code"]) == 0
    settings = home / ".claude" / "settings.json"
    command = json.loads(settings.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    from loopwarden.hooks._install import parse_command

    parsed = parse_command(command)
    assert parsed is not None
    program = parsed.program[0]
    settings.write_text(settings.read_text().replace(program, "/gone/python"))
    capsys.readouterr()
    assert main(["hooks", "status", "claude-code", "--output", "json"]) == 1
    targets = json.loads(capsys.readouterr().out)["targets"]
    (problem,) = next(t for t in targets if t["scope"] == "user")["problems"]
    assert "/gone/python is missing" in problem and "Gemini CLI then blocks" not in problem


def test_hook_help_gives_the_real_default_database() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", "hook", "--help"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0
    assert "(default: runs.db)" not in done.stdout
    assert "$XDG_STATE_HOME/loopwarden/runs.db" in done.stdout.split("--db FILE")[1]


def test_an_exempt_tool_is_still_watched_by_the_post_compaction_guard_as_documented() -> None:
    import loopwarden as lw

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "the post-compaction guard still watches it" in readme
    guard = lw.LoopGuard({"enabled": True, "toolPolicies": {"sleep": {"exempt": True}}})
    guard.start_run("s", "r")
    for _ in range(40):  # far past every threshold: no detector acts on an exempt tool
        assert guard.before_tool_call("s", "sleep", {"s": 1}, run_id="r").action == "allow"
        guard.after_tool_call("s", "sleep", {"s": 1}, result="ok", run_id="r")
    guard.on_compaction_retry("s", run_id="r")
    actions = []
    for _ in range(3):
        guard.before_tool_call("s", "sleep", {"s": 1}, run_id="r")
        actions.append(
            guard.after_tool_call("s", "sleep", {"s": 1}, result="ok", run_id="r").action
        )
    assert actions == ["allow", "allow", "stop"]


# -- 11. a file cut short --------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_a_file_cut_short_is_analysed_as_far_as_it_goes_with_a_warning_in_every_report(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suffix: str
) -> None:
    import gzip

    whole = OPENCLAW.read_bytes()
    if suffix == ".jsonl":
        data = whole[: whole.index(b'"name":"exec"', len(whole) * 3 // 4)]
    else:
        packed = gzip.compress(whole)
        data = packed[: len(packed) * 3 // 4]  # a copy interrupted three quarters in
    path = tmp_path / f"cut{suffix}"
    path.write_bytes(data)
    code, out, err = run(capsys, str(path), "--output", "json")
    doc = json.loads(out)
    assert code in (0, 1) and doc["errors"] == []
    assert doc["summary"]["calls"] > 0
    (warning,) = doc["warnings"]
    assert warning.startswith(f"{path}:") and warning in err
    _, html, _ = run(capsys, str(path), "--output", "html")
    assert "were analysed" in html and "class='warnings" in html


# -- 12. stdin, and flat JSON lines under other names ----------------------------------------------


def _cli(*args: str, stdin: bytes) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", "analyze", *args],
        input=stdin, capture_output=True, timeout=120,
    )  # fmt: skip
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def test_analyze_reads_a_transcript_from_stdin() -> None:
    done = _cli("-", "--output", "json", stdin=OPENCLAW.read_bytes())
    assert done.returncode == 1, done.stderr
    (traj,) = json.loads(done.stdout)["trajectories"]
    assert traj["source"] == "-" and traj["format"] == "openclaw" and traj["stopped"]
    import gzip

    packed = _cli("-", "--output", "json", stdin=gzip.compress(OPENCLAW.read_bytes()))
    assert json.loads(packed.stdout)["trajectories"] == [traj]
    broken = _cli("-", stdin=b"{not json\n")
    assert broken.returncode == 2 and "error: -:1: not valid JSON" in broken.stderr
    assert "loopwarden-stdin" not in broken.stderr  # the copy's name never shows


def test_flat_json_lines_with_other_field_names_are_mapped(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = [
        {"session_id": 7, "name": "exec", "input": {"command": "make"},
         "output": {"text": "same"}, "n": i}
        for i in range(25)
    ]  # fmt: skip
    path = flat(tmp_path / "mine.jsonl", lines)
    mapping = ["--field", "trajectory=session_id", "--field", "tool=name", "--field",
               "args=input", "--field", "result=output.text", "--field", "step=n"]  # fmt: skip
    code, out, err = run(capsys, str(path), *mapping, "--output", "json")
    assert code == 1, err
    (traj,) = json.loads(out)["trajectories"]
    assert (traj["id"], traj["calls"], traj["format"]) == ("7", 25, "jsonl")
    assert traj["first_block"] is not None
    # The same calls under the flat format's own names give the same verdicts.
    own = flat(tmp_path / "own.jsonl", rows("7", ["same"] * 25))
    _, same, _ = run(capsys, str(own), "--output", "json")
    assert json.loads(same)["trajectories"][0]["events"] == traj["events"]
    # A line without the mapped field is named as the file names it.
    code, _, err = run(capsys, str(path), "--field", "trajectory=sid")
    assert code == 2 and 'missing "sid" (--field trajectory=sid)' in err
    for bad in (["--field", "tool"], ["--field", "bogus=x"], ["--field", "tool=name",
                "--format", "openclaw"]):  # fmt: skip
        code, _, err = run(capsys, str(path), *bad)
        assert code == 2 and "--field" in err

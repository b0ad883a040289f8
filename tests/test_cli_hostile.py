"""The command line under hostile input: terminal escapes, ``--out`` over an input, numbers out of
range, a closed pipe, and a transcript line that expands without bound."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import loopwarden as lw
from loopwarden.cli import main
from loopwarden.transcripts import _io
from loopwarden.transcripts.model import TranscriptError

# A terminal title change, a screen clear, a carriage return that overwrites the line, a C1
# control (8-bit CSI), and rich markup that must stay text.
TITLE, CLEAR, CR, CSI8 = "\x1b]0;pwned\x07", "\x1b[2J", "\r", "\x9b31m"
HOSTILE = f"tool{TITLE}{CLEAR}{CR}FAKE{CSI8}[/]"
RAW_CONTROLS = ("\x1b", "\x07", "\r", "\x9b")


def _assert_no_controls(text: str) -> None:
    for char in RAW_CONTROLS:
        assert char not in text, f"raw {char!r} reached the terminal: {text!r}"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", *args], capture_output=True, timeout=60, env=env
    )
    # Decoded by hand: text=True would turn a raw "\r" into "\n" and hide it.
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


# -- item 9: control characters never reach the terminal -----------------------------------------


def test_printable_escapes_c0_del_c1_and_keeps_plain_text() -> None:
    from loopwarden._terminal import printable

    assert printable("exec") == "exec"
    assert printable("naïve café ✓ [/]") == "naïve café ✓ [/]"
    assert printable(TITLE) == r"\x1b]0;pwned\x07"
    assert printable("a\rb\tc\nd\x7f\x9b") == r"a\rb\tc\nd\x7f\x9b"
    assert printable("a\nb", newlines=True) == "a\nb"
    assert printable("evil\u202etxt.exe\u2028x") == r"evil\u202etxt.exe\u2028x"


def _hostile_db(tmp_path: Path) -> Path:
    db = tmp_path / "runs.db"
    guard = lw.LoopGuard(
        {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3}, record_db=db
    )
    session, run = f"sess{TITLE}", f"run{CLEAR}{CR}x"
    guard.start_run(session, run)
    for _ in range(4):
        decision = guard.before_tool_call(session, HOSTILE, {"a": 1}, run_id=run)
        if decision.allowed:
            guard.after_tool_call(session, HOSTILE, {"a": 1}, result="same", run_id=run)
    guard.end_run(session, run, outcome="failed")
    assert guard.recorder is not None
    guard.recorder.close()
    return db


def test_runs_list_and_show_escape_control_characters(tmp_path: Path) -> None:
    db = _hostile_db(tmp_path)
    listed = _cli("runs", "list", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    _assert_no_controls(listed.stdout)
    assert r"sess\x1b]0;pwned\x07 / run\x1b[2J\rx" in listed.stdout
    shown = _cli("runs", "show", "#1", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    _assert_no_controls(shown.stdout)
    assert r"tool\x1b]0;pwned\x07\x1b[2J\rFAKE\x9b31m[/]" in shown.stdout
    # JSON keeps the exact names (escaped by JSON itself).
    as_json = json.loads(_cli("runs", "show", "#1", "--db", str(db), "--json").stdout)
    assert as_json["events"][0]["tool_name"] == HOSTILE


def test_runs_errors_escape_control_characters(tmp_path: Path) -> None:
    db = _hostile_db(tmp_path)
    missing = _cli("runs", "show", f"x{TITLE}", "--db", str(db))
    assert missing.returncode == 2
    _assert_no_controls(missing.stderr)
    assert r"x\x1b]0;pwned\x07" in missing.stderr


def test_analyze_text_report_escapes_control_characters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    folder = tmp_path / f"dir{CLEAR}"
    folder.mkdir()
    rows = [
        {"trajectory": f"traj{TITLE}", "step": i, "tool": HOSTILE, "args": {"a": 1},
         "result": "same", "error": None}
        for i in range(12)
    ]  # fmt: skip
    transcript = folder / f"t{CR}.jsonl"
    transcript.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    bad = folder / f"bad{TITLE}.jsonl"
    bad.write_text('{"trajectory": "x", "tool": 3}\n', encoding="utf-8")
    code = main(["analyze", str(folder), str(tmp_path / f"missing{CSI8}")])
    out, err = capsys.readouterr()
    assert code == 2
    _assert_no_controls(out)
    _assert_no_controls(err)
    assert r"traj\x1b]0;pwned\x07" in out
    assert r"tool\x1b]0;pwned\x07\x1b[2J\rFAKE\x9b31m[/]" in out
    assert r"t\r.jsonl" in out
    assert r"bad\x1b]0;pwned\x07.jsonl" in err and r"missing\x9b31m" in err


def test_config_check_escapes_control_characters(tmp_path: Path) -> None:
    config = tmp_path / f"conf{CLEAR}.json"
    config.write_text(
        json.dumps({"tools": {"loopDetection": {f"key{TITLE}": 1, "historySize": f"x{CR}y"}}}),
        encoding="utf-8",
    )
    checked = _cli("config", "check", str(config), "--agent", f"a{CSI8}")
    assert checked.returncode == 2
    _assert_no_controls(checked.stdout + checked.stderr)
    assert r"conf\x1b[2J.json" in checked.stderr
    checked = _cli("config", "check", str(config))
    assert checked.returncode == 2
    _assert_no_controls(checked.stdout + checked.stderr)
    assert r"key\x1b]0;pwned\x07" in checked.stderr


@pytest.mark.parametrize("command", ["config check", "analyze", "hooks install", "mcp-proxy"])
def test_config_errors_keep_one_problem_per_line_and_escape_the_rest(
    tmp_path: Path, command: str
) -> None:
    config = tmp_path / "conf.json"
    fake = "\n  - criticalThreshold: fake problem"
    block = {f"key{TITLE}{fake}": 1, "historySize": "x"}
    config.write_text(json.dumps({"tools": {"loopDetection": block}}), encoding="utf-8")
    args = {
        "config check": ["config", "check", str(config)],
        "analyze": ["analyze", str(tmp_path), "--config", str(config)],
        "hooks install": ["hooks", "install", "claude-code", "--print", "--config", str(config)],
        "mcp-proxy": ["mcp-proxy", "--config", str(config), "--", "true"],
    }[command]
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path)}
    done = _cli(*args, env=env)
    assert done.returncode == 2, done.stderr
    _assert_no_controls(done.stderr)
    lines = done.stderr.splitlines()
    assert lines[0].endswith("2 configuration problems:"), done.stderr
    assert [line[:4] for line in lines[1:3]] == ["  - ", "  - "], done.stderr
    assert r"key\x1b]0;pwned\x07\n  - criticalThreshold: fake problem" in done.stderr


def test_hooks_status_escapes_control_characters(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    # as 'hooks install' writes it (only that is recognised as loopwarden's)
    command = shlex.join(["/opt/bin/loopwarden", "hook", "claude-code", "--db", f"x{TITLE}{CR}"])
    entry = {"matcher": "*", "hooks": [{"type": "command", "command": command}]}
    (project / ".claude" / "settings.json").write_text(
        json.dumps({"hooks": {"PreToolUse": [entry]}}), encoding="utf-8"
    )
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path)}
    for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME"):
        env.pop(name, None)
    status = _cli("hooks", "status", "claude-code", "--project", str(project), env=env)
    _assert_no_controls(status.stdout + status.stderr)
    assert r"--db 'x\x1b]0;pwned\x07\r'" in status.stdout


def test_mcp_proxy_log_lines_escape_control_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    from loopwarden.cli import mcp_proxy_cmd

    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        mcp_proxy_cmd._setup_logging("warning")
        # A tool name chosen by the upstream MCP server reaches the guard's log lines.
        logging.getLogger("loopwarden.guard").warning("loop warn: %s", HOSTILE + "\nfake line")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    err = capsys.readouterr().err
    _assert_no_controls(err)
    assert r"loop warn: tool\x1b]0;pwned\x07" in err and r"[/]\nfake line" in err
    assert err.count("\n") == 1  # one record, one line


# -- item 10: --out never destroys an input; reports are written whole ---------------------------


def _transcript(path: Path) -> Path:
    rows = [
        {"trajectory": "t1", "step": i, "tool": "exec", "args": {"command": "make"},
         "result": "same", "error": None}
        for i in range(40)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink", "in-directory"])
def test_out_over_an_input_is_refused_and_the_input_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, how: str
) -> None:
    transcript = _transcript(tmp_path / "run.jsonl")
    before = transcript.read_bytes()
    out, given = transcript, str(transcript)
    if how == "symlink":
        out = tmp_path / "link.jsonl"
        out.symlink_to(transcript)
    elif how == "hardlink":
        out = tmp_path / "hard.jsonl"
        os.link(transcript, out)
    elif how == "in-directory":
        given = str(tmp_path)
    code = main(["analyze", given, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--out {out}" in err and "is also an input" in err
    assert transcript.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_report_to_a_new_path_appears_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    transcript = _transcript(tmp_path / "run.jsonl")
    report = tmp_path / "out" / "report.json"
    report.parent.mkdir()
    code = main(["analyze", str(transcript), "--output", "json", "--out", str(report)])
    assert code == 1, capsys.readouterr().err
    assert json.loads(report.read_text(encoding="utf-8"))["summary"]["trajectories"] == 1
    assert [p.name for p in report.parent.iterdir()] == ["report.json"]  # no temporary left


def test_report_writes_are_atomic(tmp_path: Path) -> None:
    from loopwarden.cli.analyze_cmd import _output

    target = tmp_path / "report.txt"
    target.write_text("old report\n", encoding="utf-8")
    with _output(str(target)) as out:
        out.write("new ")
        out.flush()
        assert target.read_text(encoding="utf-8") == "old report\n"  # not truncated meanwhile
        out.write("report\n")
    assert target.read_text(encoding="utf-8") == "new report\n"
    with pytest.raises(RuntimeError), _output(str(target)) as out:
        out.write("half a rep")
        raise RuntimeError("interrupted")
    assert target.read_text(encoding="utf-8") == "new report\n"  # a failed write changes nothing
    assert [p.name for p in tmp_path.iterdir()] == ["report.txt"]


# -- item 11: numbers out of range and a closed pipe ---------------------------------------------


def test_numbers_out_of_range_are_clear_errors(tmp_path: Path) -> None:
    db = _hostile_db(tmp_path)
    huge = "99999999999999999999999"
    limit = _cli("runs", "list", "--limit", huge, "--db", str(db))
    assert limit.returncode == 2 and "Traceback" not in limit.stderr
    assert f"--limit must be a whole number between 1 and {2**63 - 1}" in limit.stderr
    assert f"got '{huge}'" in limit.stderr
    row = _cli("runs", "show", f"#{huge}", "--db", str(db))
    assert row.returncode == 2 and "Traceback" not in row.stderr
    assert f"#{huge}: row numbers go from #1 to #{2**63 - 1}" in row.stderr
    superscript = _cli("runs", "show", "#²", "--db", str(db))
    assert superscript.returncode == 2 and "Traceback" not in superscript.stderr


def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess[bytes]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read: the first write gets EPIPE
    try:
        return subprocess.run(
            [sys.executable, "-m", "loopwarden", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    db = _hostile_db(tmp_path)
    for args in (
        ("runs", "show", "#1", "--db", str(db)),
        ("runs", "list", "--db", str(db), "--output", "json"),
        ("analyze", str(_transcript(tmp_path / "run.jsonl"))),
    ):
        done = _with_closed_stdout(*args)
        assert done.stderr == b"", done.stderr.decode()
        assert done.returncode == 141  # 128 + SIGPIPE, what a shell reports for `yes | head`


# -- the line bound ------------------------------------------------------------------------------


def _gz_with_long_line(path: Path, line_chars: int) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b'{"trajectory": "t", "tool": "exec", "args": {}}\n')
        handle.write(b'{"trajectory": "t", "tool": "exec", "args": {"x": "')
        chunk = b"a" * (1 << 20)
        for _ in range(line_chars >> 20):
            handle.write(chunk)
        handle.write(b'"}}\n')
    return path


def test_a_line_over_the_limit_is_an_error_naming_file_and_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_io, "MAX_LINE_CHARS", 1 << 20)
    path = _gz_with_long_line(tmp_path / "bomb.jsonl.gz", 8 << 20)
    assert path.stat().st_size < 64 << 10  # small on disk, 8 MiB expanded
    tracemalloc.start()
    try:
        with pytest.raises(TranscriptError) as caught:
            list(_io.iter_jsonl(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(caught.value)
    assert message.startswith(f"{path}:2: ")
    assert "a line longer than 1048576 characters" in message
    assert peak < 4 << 20  # the long line was never held whole (it is 8 MiB)


def test_a_line_at_the_limit_is_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"b": "xx"}\n{"c": 3}', encoding="utf-8")
    monkeypatch.setattr(_io, "MAX_LINE_CHARS", len('{"b": "xx"}'))  # the newline not counted
    assert [line for line, _ in _io.iter_jsonl(path)] == [1, 2, 3]
    monkeypatch.setattr(_io, "MAX_LINE_CHARS", len('{"b": "xx"}') - 1)
    with pytest.raises(TranscriptError, match=r":2: a line longer than 10 characters"):
        list(_io.iter_jsonl(path))


def test_analyze_reports_an_expanding_gz_as_an_input_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(_io, "MAX_LINE_CHARS", 1 << 20)
    path = _gz_with_long_line(tmp_path / "bomb.jsonl.gz", 4 << 20)
    first_line_bomb = tmp_path / "first.jsonl.gz"
    with gzip.open(first_line_bomb, "wb") as handle:
        handle.write(b'{"x": "' + b"a" * (3 << 20) + b'"}\n')
    code = main(["analyze", str(path), str(first_line_bomb)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"{path}:2: a line longer than 1048576 characters" in err
    assert f"{first_line_bomb}:1: a line longer than 1048576 characters" in err

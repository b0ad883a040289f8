"""`loopwarden --version` and `loopwarden config check`, run as a real subprocess."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import loopwarden as lw

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "openclaw.json"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopwarden", *args], capture_output=True, text=True, timeout=60
    )


def test_check_prints_the_effective_resolved_config_of_an_agent() -> None:
    done = run("config", "check", str(EXAMPLE), "--agent", "ops")
    assert done.returncode == 0, done.stderr
    assert "ok" in done.stdout and "agent 'ops'" in done.stdout
    assert '"warningThreshold": 25' in done.stdout and "notice" not in done.stdout
    body = done.stdout[done.stdout.index("{") :]
    assert json.loads(body) == lw.load_config(EXAMPLE).resolve("ops").to_camel()


def test_check_json_output() -> None:
    done = run("config", "check", str(EXAMPLE), "--output", "json")
    assert done.returncode == 0
    payload = json.loads(done.stdout)
    assert payload["config"]["warningThreshold"] == 10 and payload["agent"] is None
    assert payload["notices"] == []  # the shipped example is not clamped anywhere


def test_check_lists_every_problem_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(
        "{tools: {loopDetection: {repeatThreshold: 3, criticalThreshold: -1}},"
        ' agents: {list: [{id: "a", tools: {loopDetection: {detectors: {pingPong: "no"}}}}]}}'
    )
    done = run("config", "check", str(bad))
    assert done.returncode == 2
    assert "3 configuration problems" in done.stderr
    for path in (
        "tools.loopDetection.repeatThreshold",
        "tools.loopDetection.criticalThreshold",
        "agents.list[0].tools.loopDetection.detectors.pingPong",
    ):
        assert path in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_check_syntax_error_and_missing_file_are_one_line_each(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{\n  tools: {,\n}")
    done = run("config", "check", str(broken))
    assert done.returncode == 2 and "syntax error at line 2, column" in done.stderr
    missing = run("config", "check", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "file not found" in missing.stderr
    assert "Traceback" not in done.stderr + missing.stderr


def test_check_unknown_agent_names_the_known_ones() -> None:
    done = run("config", "check", str(EXAMPLE), "--agent", "nobody")
    assert done.returncode == 2
    assert "no such agent" in done.stderr and "ops, main" in done.stderr


def test_no_command_prints_help_and_exits_2() -> None:
    done = run()
    assert done.returncode == 2 and "usage: loopwarden" in done.stderr


def _write(path: Path, config: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return path


def test_markup_in_a_key_or_value_is_printed_verbatim(tmp_path: Path) -> None:
    # Issue 13.4: user text went through rich's markup parser and raised MarkupError (exit 1).
    for block, shown in (({"x[/]:smile:": 1}, "x[/]:smile:"), ({"profile": "[/red]"}, "[/red]")):
        path = _write(tmp_path / "c.json", {"tools": {"loopDetection": block}})
        done = run("config", "check", str(path))
        assert done.returncode == 2, done.stderr
        assert shown in done.stderr and "Traceback" not in done.stderr


def test_markup_in_the_file_path_is_printed_verbatim(tmp_path: Path) -> None:
    path = _write(tmp_path / "a[" / "].json", {"tools": {"loopDetection": {"historySize": 5}}})
    done = run("config", "check", str(path))
    assert done.returncode == 0, done.stderr
    assert f"ok {path}" in done.stdout
    missing = run("config", "check", str(tmp_path / "[/red]" / "nope.json"))
    assert missing.returncode == 2 and "[/red]" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_markup_in_the_agent_id_is_printed_verbatim(tmp_path: Path) -> None:
    agents = {"list": [{"id": "[/red]", "tools": {"loopDetection": {"warningThreshold": 40}}}]}
    path = _write(tmp_path / "c.json", {"tools": {"loopDetection": {}}, "agents": agents})
    done = run("config", "check", str(path), "--agent", "[/red]")
    assert done.returncode == 0, done.stderr
    assert "agent '[/red]'" in done.stdout and "notice" in done.stdout
    unknown = run("config", "check", str(path), "--agent", "[/]")
    assert unknown.returncode == 2 and "--agent '[/]'" in unknown.stderr
    assert "Traceback" not in done.stderr + unknown.stderr


def test_a_deeply_nested_config_is_a_clear_error(tmp_path: Path) -> None:
    # Issue 13.5: 200k levels gave a RecursionError traceback (exit 1).
    deep = 200_000
    path = tmp_path / "deep.json"
    path.write_text('{"tools": {"loopDetection": {"x": ' + "[" * deep + "]" * deep + "}}}")
    done = run("config", "check", str(path))
    assert done.returncode == 2, done.stderr
    assert "nested deeper than" in done.stderr and "Traceback" not in done.stderr


def test_an_oversized_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    path.write_text('{"tools": {}, "pad": "' + "x" * (2 << 20) + '"}')
    done = run("config", "check", str(path))
    assert done.returncode == 2, done.stderr
    assert "larger than" in done.stderr and "Traceback" not in done.stderr


def test_a_volatile_pattern_re2_cannot_run_is_refused(tmp_path: Path) -> None:
    # User patterns run on RE2 (issue 24): one it cannot run (a backreference) is a config error.
    path = _write(
        tmp_path / "c.json", {"tools": {"loopDetection": {"volatilePatterns": [r"(\d+)-\1"]}}}
    )
    done = run("config", "check", str(path))
    assert done.returncode == 2, done.stderr
    assert "tools.loopDetection.volatilePatterns[0]" in done.stderr
    assert "cannot run" in done.stderr and "RE2" in done.stderr


def test_a_bare_block_file_means_what_the_same_dict_means(tmp_path: Path) -> None:
    block = {"enabled": True, "criticalThreshold": 12, "warningThreshold": 4}
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(block))
    assert lw.LoopGuard(str(bare)).config == lw.LoopGuard(dict(block)).config
    assert lw.LoopGuard(str(bare)).config.enabled is True
    done = run("config", "check", str(bare), "--output", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["config"] == lw.resolve_config(block).to_camel()


def test_a_bare_block_file_is_checked_strictly(tmp_path: Path) -> None:
    bare = tmp_path / "bare.json"
    bare.write_text('{"enabled": true, "criticalThreshhold": 3}')
    done = run("config", "check", str(bare))
    assert done.returncode == 2 and "criticalThreshhold: unknown key" in done.stderr


@pytest.mark.parametrize(
    ("content", "where"),
    [
        ({"tools": {"loopDetecton": {"enabled": True}}}, "tools.loopDetecton: unknown block"),
        ({"loopDetection": {"enabled": True}}, "loopDetection: the block belongs under tools"),
        ({"tools": {"criticalThreshold": 3}}, "tools.criticalThreshold: a tools.loopDetection key"),
        (
            {"agents": {"list": [{"id": "a", "tools": {"loopdetection": {}}}]}},
            "agents.list[0].tools.loopdetection: unknown block",
        ),
    ],
)
def test_a_misspelt_or_misplaced_block_is_an_error(
    tmp_path: Path, content: dict[str, object], where: str
) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text(json.dumps(content))
    done = run("config", "check", str(path))
    assert done.returncode == 2 and where in done.stderr, done.stderr
    with pytest.raises(lw.ConfigError, match=r"did you mean|belongs under|outside its block"):
        lw.LoopGuard(str(path))


def test_a_whole_config_without_the_block_still_gets_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text('{"models": {"default": "x"}, "tools": {"exec": {"timeout": 30}}}')
    done = run("config", "check", str(path))
    assert done.returncode == 0 and "no tools.loopDetection block found" in done.stdout


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _subparsers(child)


def test_every_option_has_help_text_and_output_is_one_convention() -> None:
    from loopwarden.cli import build_parser

    for parser in _subparsers(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.help != argparse.SUPPRESS:
                assert action.help, f"{parser.prog} {action.option_strings}: no help text"
            if action.option_strings == ["--json"]:  # the old spelling of --output json
                assert action.help == argparse.SUPPRESS and action.dest == "output"
    done = run("runs", "show", "x", "--output", "json", "--db", "/nonexistent/runs.db")
    assert done.returncode == 2 and "no run records" in done.stderr


def test_the_shipped_example_is_not_clamped_for_any_agent() -> None:
    for agent in (None, *lw.load_config(EXAMPLE).agent_ids):
        done = run("config", "check", str(EXAMPLE), *(("--agent", agent) if agent else ()))
        assert done.returncode == 0, done.stderr
        assert "notice" not in done.stdout, done.stdout


def test_check_says_what_a_block_without_enabled_does(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.json", {"tools": {"loopDetection": {"criticalThreshold": 12}}})
    done = run("config", "check", str(config))
    assert done.returncode == 0
    assert "'enabled' is not set: the loop detectors are off and only the post-compaction " \
        "guard runs" in done.stdout  # fmt: skip
    payload = json.loads(run("config", "check", str(config), "--output", "json").stdout)
    assert any("only the post-compaction guard runs" in n for n in payload["notices"])
    on = _write(tmp_path / "on.json", {"tools": {"loopDetection": {"enabled": True}}})
    assert "enabled' is not set" not in run("config", "check", str(on)).stdout


def test_analyze_runs_a_file_without_enabled_as_the_library_does(tmp_path: Path) -> None:
    config = _write(tmp_path / "c.json", {"tools": {"loopDetection": {"criticalThreshold": 12}}})
    transcripts = EXAMPLE.parent / "transcripts"
    done = run("analyze", str(transcripts), "--config", str(config), "--output", "json")
    doc = json.loads(done.stdout)
    assert "enabled" not in doc["config"]  # as LoopGuard runs the file: detectors off
    assert doc["config"] == lw.load_config(config).resolve().to_camel()
    assert any("only the post-compaction guard runs" in n for n in doc["notices"])
    # No warnings from the detectors; the post-compaction guard still stops the OpenClaw loop.
    assert doc["summary"]["with_warning"] == 0 and doc["summary"]["stopped"] == 1


def test_a_misspelt_agents_container_is_an_error(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "c.json",
        {"agent": {"list": [{"id": "ops", "tools": {"loopDetection": {"enabled": True}}}]},
         "agentz": {"model": "unrelated"}, "gateway": {"port": 1}},
    )  # fmt: skip
    done = run("config", "check", str(config))
    assert done.returncode == 2
    assert "agent: unknown key; did you mean agents?" in done.stderr
    assert "agentz" not in done.stderr and "gateway" not in done.stderr


def test_dir_shows_the_public_api_only() -> None:
    names = dir(lw)
    assert "LoopGuard" in names and "__version__" in names
    assert "TYPE_CHECKING" not in names and "importlib" not in names

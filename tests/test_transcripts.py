"""Transcript importers: every format of docs/transcript-formats.md imports from its real sample
(or, where no native sample exists, from a file written here to the documented shape), with
edge cases."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from loopwarden.transcripts import (
    MISSING,
    Compaction,
    NotATranscript,
    ToolCall,
    Trajectory,
    TranscriptError,
    detect,
    iter_sources,
    read_transcripts,
)

from _support import data_path


def _one(path: Path, fmt: str = "auto") -> Trajectory:
    trajectories = list(read_transcripts(path, fmt))
    assert len(trajectories) == 1
    return trajectories[0]


def _write_jsonl(path: Path, objects: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in objects), encoding="utf-8")
    return path


# -- OpenClaw ------------------------------------------------------------------------------------


def test_openclaw_sample_calls_results_and_compaction() -> None:
    path = data_path("samples", "openclaw-session-example.jsonl")
    assert detect(path).format == "openclaw"
    traj = _one(path)
    assert traj.id == "0192f3a1-7c2e-7b5d-9e44-5a1c3d2b9f00"
    assert traj.format == "openclaw"
    # SOURCES.md: read, exec git status, 12 identical exec, compaction, 3 more identical exec.
    kinds = ["C" if isinstance(item, Compaction) else "T" for item in traj.items]
    assert "".join(kinds) == "T" * 14 + "C" + "T" * 3
    calls = traj.calls
    assert [c.tool for c in calls[:2]] == ["read", "exec"]
    loop = calls[2:]
    assert all(c.params == {"command": "cd demo-app && npm test"} for c in loop)
    assert len({c.tool_call_id for c in calls}) == len(calls)
    for call in loop:
        assert call.error is None
        assert call.result["details"]["exitCode"] == 1
        assert call.result["content"][0]["text"].endswith("(Command exited with code 1)")
    assert traj.orphan_results == 0


def _oc_header() -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": "sess-1", "timestamp": "t", "cwd": "/w"}


def _oc_call(entry: str, parent: str | None, call_id: str, cmd: str) -> dict[str, Any]:
    block = {"type": "toolCall", "id": call_id, "name": "exec", "arguments": {"command": cmd}}
    message = {"role": "assistant", "content": [block], "stopReason": "toolUse"}
    return {"type": "message", "id": entry, "parentId": parent, "message": message}


def _oc_result(entry: str, parent: str, call_id: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "exec",
        "content": [{"type": "text", "text": text}],
        "isError": False,
        **extra,
    }
    return {"type": "message", "id": entry, "parentId": parent, "message": message}


def test_openclaw_replays_only_the_active_branch(tmp_path: Path) -> None:
    lines = [
        _oc_header(),
        _oc_call("a1", None, "c1", "ls"),
        _oc_result("a2", "a1", "c1", "x"),
        _oc_call("b1", "a2", "c2", "abandoned branch"),
        _oc_result("b2", "b1", "c2", "y"),
        _oc_call("d1", "a2", "c3", "live branch"),  # sibling of b1: the user went back
        _oc_result("d2", "d1", "c3", "z"),
    ]
    traj = _one(_write_jsonl(tmp_path / "s.jsonl", lines))
    assert [c.params["command"] for c in traj.calls] == ["ls", "live branch"]


def test_openclaw_v1_without_ids_is_linear_and_errors_map(tmp_path: Path) -> None:
    def plain(obj: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in obj.items() if k not in ("id", "parentId")}

    lines = [
        {"type": "session", "id": "old", "timestamp": "t", "cwd": "/"},
        plain(_oc_call("x", None, "c1", "a")),
        plain(_oc_result("x", "x", "c1", "Unknown tool: weather", isError=True)),
        plain(_oc_call("x", None, "c2", "b")),
        plain(
            _oc_result(
                "x",
                "x",
                "c2",
                "[openclaw] missing tool result in session history; inserted synthetic error "
                "result for transcript repair.",
                isError=True,
            )
        ),
        {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 1, "tokensBefore": 9},
    ]
    traj = _one(_write_jsonl(tmp_path / "v1.jsonl", lines))
    first, second = traj.calls
    # A thrown tool error (no details) reaches the guard as an error, not a result object.
    assert first.result is MISSING and first.error == "Unknown tool: weather"
    # A synthetic repair result is not an execution: no outcome at all.
    assert not second.has_outcome
    assert isinstance(traj.items[-1], Compaction)


def test_openclaw_malformed_line_names_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(_oc_header())
    path.write_text(good + "\n" + json.dumps(_oc_call("a", None, "c", "ls")) + "\n{oops\n")
    with pytest.raises(TranscriptError) as info:
        _one(path)
    assert info.value.line == 3
    assert str(path) in str(info.value) and ":3:" in str(info.value)


# -- SWE-agent -----------------------------------------------------------------------------------


def test_swe_agent_0x_sample() -> None:
    path = data_path("samples", "swe-agent-0x__swe-agent__test-repo-i1.traj")
    assert detect(path).format == "swe-agent"
    traj = _one(path)
    assert [c.tool for c in traj.calls] == ["find_file", "open", "edit", "python", "submit"]
    assert traj.calls[0].params == {"command": 'find_file "missing_colon.py"'}
    raw = json.loads(path.read_text())
    assert [c.result for c in traj.calls] == [s["observation"] for s in raw["trajectory"]]


def test_swe_agent_1x_sample_uses_structured_calls_from_history() -> None:
    path = data_path("samples", SWE_1X)
    traj = _one(path)
    assert [c.tool for c in traj.calls] == ["find_file", "open", "edit", "bash", "submit"]
    assert traj.calls[0].params == {"file_name": "missing_colon.py"}
    assert traj.calls[0].tool_call_id == "call_fJuazlMUN5fQDQ73G6XSpYpx"
    # The final submit is not in the history: the action text stands in for it.
    assert traj.calls[4].params == {"command": "submit"}


# -- mini-swe-agent ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["sympy__sympy-15976", "matplotlib__matplotlib-13989", "django__django-11951"]
)
def test_mini_swe_agent_v1_matches_the_eval_corpus_conversion(name: str) -> None:
    """The corpus in eval/ was converted independently from the same upstream files."""
    path = data_path("samples", f"mini-swe-agent-v1__{name}.traj.json")
    assert detect(path).format == "mini-swe-agent"
    traj = _one(path)
    corpus = data_path("eval", "minisweagent_gemini3pro_verified.jsonl.gz")
    with gzip.open(corpus, "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if f'/{name}"' in line]
    assert rows, "sample not in the corpus"
    mine = [(c.tool, c.params, c.result, c.error) for c in traj.calls]
    assert mine == [(r["tool"], r["args"], r["result"], r["error"]) for r in rows]


def test_mini_swe_agent_sympy_repeated_sed_and_format_errors() -> None:
    traj = _one(data_path("samples", "mini-swe-agent-v1__sympy__sympy-15976.traj.json"))
    sed = "sed -i 's/return mmsubsup/return mmsubsup/' sympy/printing/mathml.py"
    commands = [c.params["command"] for c in traj.calls]
    assert commands.count(sed) == 4  # 3 in a row, a format-error turn, then a 4th (SOURCES.md)
    first = commands.index(sed)
    assert commands[first : first + 3] == [sed] * 3
    assert commands[first + 3] == sed  # the 9-block turn executed nothing, so it is not a call


def test_mini_swe_agent_timeout_becomes_an_error_label() -> None:
    traj = _one(data_path("samples", "mini-swe-agent-v1__matplotlib__matplotlib-13989.traj.json"))
    errors = [c.error for c in traj.calls if c.error]
    assert errors.count("timeout") == 1
    assert errors.count("returncode=1") == 3


def test_mini_swe_agent_v2_tool_calls(tmp_path: Path) -> None:
    def call(call_id: str, cmd: str) -> dict[str, Any]:
        args = json.dumps({"command": cmd})
        return {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": args}}

    doc = {
        "trajectory_format": "mini-swe-agent-1.1",
        "info": {"exit_status": "Submitted", "mini_version": "2.4.6"},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "", "tool_calls": [call("t1", "ls"), call("t2", "x")]},
            {
                "role": "tool",
                "tool_call_id": "t1",
                "content": "<returncode>2</returncode>",
                "extra": {"returncode": 2},
            },
            {
                "role": "tool",
                "tool_call_id": "t2",
                "content": "",
                "extra": {"returncode": -1, "exception_info": "action was not executed"},
            },
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
        ],
    }
    path = tmp_path / "run.traj.json"
    path.write_text(json.dumps(doc))
    traj = _one(path)
    first, second = traj.calls
    assert (first.tool, first.params, first.tool_call_id, first.error) == (
        "bash",
        {"command": "ls"},
        "t1",
        "returncode=2",
    )
    assert not second.has_outcome  # never executed


# -- OpenAI chat and tau-bench -------------------------------------------------------------------


def test_tau_bench_sample() -> None:
    path = data_path("samples", "tau-bench__gpt-4o-airline__first20.json")
    assert detect(path).format == "tau-bench"
    trajs = list(read_transcripts(path))
    assert len(trajs) == 20
    assert trajs[0].id.endswith("/task0/trial0")
    task13 = next(t for t in trajs if t.id.endswith("/task13/trial0"))
    assert sum(1 for c in task13.calls if c.error) == 6  # SOURCES.md: task 13 has 6 errors
    pairs = zip(task13.calls, task13.calls[1:], strict=False)
    assert any((a.tool, a.params) == (b.tool, b.params) for a, b in pairs)
    assert all(t.orphan_results == 0 for t in trajs)


def _openai_messages() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "sys"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "g", "arguments": "{bad json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "A"}]},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
        {"role": "assistant", "content": None, "function_call": {"name": "h", "arguments": "{}"}},
        {"role": "function", "name": "h", "content": "H"},
    ]


@pytest.mark.parametrize("shape", ["array", "object", "jsonl"])
def test_openai_chat_shapes(tmp_path: Path, shape: str) -> None:
    messages = _openai_messages()
    if shape == "jsonl":
        path = _write_jsonl(tmp_path / "chats.jsonl", [{"id": "run-7", "messages": messages}])
    else:
        path = tmp_path / "chat.json"
        path.write_text(json.dumps(messages if shape == "array" else {"messages": messages}))
    assert detect(path).format == "openai"
    traj = _one(path)
    calls = traj.calls
    assert [(c.tool, c.params, c.result) for c in calls] == [
        ("f", {"x": 1}, "A"),
        ("g", "{bad json", "B"),  # unparsable arguments are kept as the raw string
        ("h", {}, "H"),
    ]
    assert traj.orphan_results == 1
    if shape == "jsonl":
        assert traj.id == "run-7"


# -- Anthropic -----------------------------------------------------------------------------------


def test_anthropic_messages(tmp_path: Path) -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "What's in /tmp?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Listing."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "bash",
                        "input": {"command": "ls"},
                    },
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_1",
                        "name": "web_search",
                        "input": {"query": "q"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_1",
                        "content": [{"type": "web_search_result", "url": "u"}],
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "denied",
                        "is_error": True,
                    },
                    {"type": "text", "text": "go on"},
                ],
            },
        ],
    }
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(body))
    assert detect(path).format == "anthropic"
    bash, search = _one(path).calls
    assert (bash.tool, bash.params, bash.result, bash.error) == (
        "bash",
        {"command": "ls"},
        MISSING,
        "denied",
    )
    assert search.result == [{"type": "web_search_result", "url": "u"}]


# -- OpenHands -----------------------------------------------------------------------------------


def test_openhands_sample_tolerates_the_orphan_observation() -> None:
    path = data_path("samples", "openhands-sdk__goal-fixture-events.jsonl")
    assert detect(path).format == "openhands"
    traj = _one(path)
    assert traj.orphan_results == 1  # SOURCES.md: one observation's action is not in the slice
    first, second = traj.calls
    assert first.tool == "terminal" and first.params["kind"] == "TerminalAction"
    assert first.result is MISSING and first.error.startswith("Cannot execute multiple commands")
    assert second.error is None and isinstance(second.result, str)


def test_openhands_conversation_directory_and_condensation(tmp_path: Path) -> None:
    conv = tmp_path / "runs" / "abc123"
    (conv / "events").mkdir(parents=True)
    (conv / "base_state.json").write_text("{}")
    events = [
        {
            "kind": "ActionEvent",
            "id": "e1",
            "source": "agent",
            "timestamp": "t",
            "tool_name": "terminal",
            "tool_call_id": "t1",
            "action": None,
            "tool_call": {
                "id": "t1",
                "name": "terminal",
                "arguments": '{"command": "ls", "summary": "look", "security_risk": "LOW"}',
            },
        },
        {
            "kind": "AgentErrorEvent",
            "id": "e2",
            "source": "agent",
            "timestamp": "t",
            "tool_name": "terminal",
            "tool_call_id": "t1",
            "error": "bad args",
        },
        {
            "kind": "Condensation",
            "id": "e3",
            "source": "agent",
            "timestamp": "t",
            "forgotten_event_ids": ["e1"],
        },
    ]
    for index, event in enumerate(events):
        (conv / "events" / f"event-{index:05d}-{event['id']}.json").write_text(json.dumps(event))
    assert list(iter_sources([tmp_path])) == [conv]  # one source, not three event files
    traj = _one(conv)
    assert traj.id == "abc123"
    (call,) = traj.calls
    assert call.params == {"command": "ls"}  # per-call annotations dropped
    assert call.error == "bad args"
    assert isinstance(traj.items[-1], Compaction)


# -- loopwarden flat JSONL -----------------------------------------------------------------------


def test_flat_jsonl_streams_trajectories_and_compaction(tmp_path: Path) -> None:
    rows = [
        {
            "trajectory": "r1",
            "step": 0,
            "tool": "exec",
            "args": {"c": 1},
            "result": "x",
            "error": None,
        },
        {"trajectory": "r1", "compaction": True},
        {
            "trajectory": "r1",
            "step": 1,
            "tool": "exec",
            "args": {"c": 1},
            "result": None,
            "error": "returncode=1",
        },
        {"trajectory": "r2", "step": 0, "tool": "read", "args": {}, "result": None, "error": None},
    ]
    path = tmp_path / "flat.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    assert detect(path).format == "jsonl"
    first, second = read_transcripts(path)
    assert [type(item) for item in first.items] == [ToolCall, Compaction, ToolCall]
    a, b = first.calls
    assert a.result == "x" and b.result is MISSING and b.error == "returncode=1"
    assert second.calls[0].result is None  # a recorded null result, not a missing one


def test_flat_jsonl_reads_the_eval_corpus_head() -> None:
    corpus = data_path("eval", "taubench_airline_gpt4o.jsonl.gz")
    trajectories = read_transcripts(corpus)
    first = next(trajectories)
    assert first.id == "tau-airline-gpt4o/task0/trial0"
    assert first.calls and all(c.has_outcome for c in first.calls)


def test_flat_jsonl_errors_are_specific(tmp_path: Path) -> None:
    split = _write_jsonl(
        tmp_path / "split.jsonl",
        [
            {"trajectory": "a", "tool": "t", "args": {}},
            {"trajectory": "b", "tool": "t", "args": {}},
            {"trajectory": "a", "tool": "t", "args": {}},
        ],
    )
    with pytest.raises(TranscriptError, match="contiguous") as info:
        list(read_transcripts(split, "jsonl"))
    assert info.value.line == 3
    no_tool = _write_jsonl(tmp_path / "notool.jsonl", [{"trajectory": "a", "args": {}}])
    with pytest.raises(TranscriptError, match='missing "tool"'):
        list(read_transcripts(no_tool, "jsonl"))


# -- detection and discovery ---------------------------------------------------------------------


def test_non_transcripts_are_recognised_as_such(tmp_path: Path) -> None:
    sidecar = _write_jsonl(
        tmp_path / "s1.trajectory.jsonl", [{"traceSchema": "openclaw-trajectory"}]
    )
    meta = data_path("eval", "minisweagent_gemini3pro_verified.meta.jsonl.gz")
    other = tmp_path / "sessions.json"
    other.write_text(json.dumps({"agent:main:main": {"sessionId": "x"}}))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    for path in (sidecar, meta, other, empty):
        found = detect(path)
        assert found.format is None and found.reason, path
        with pytest.raises(NotATranscript, match="--format"):
            list(read_transcripts(path))


def test_iter_sources_recurses_sorted_and_filters_by_suffix(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    for name in ("b/z.jsonl", "a.traj", "notes.md", "b/x.json.gz", ".hidden.json"):
        (tmp_path / name).write_text("")
    found = [p.relative_to(tmp_path).as_posix() for p in iter_sources([tmp_path])]
    assert found == ["a.traj", "b/x.json.gz", "b/z.jsonl"]
    with pytest.raises(TranscriptError, match="no such file"):
        list(iter_sources([tmp_path / "missing"]))


def test_every_sample_imports_with_calls() -> None:
    samples = data_path("samples")
    formats = set()
    for path in iter_sources([samples]):
        trajectories = list(read_transcripts(path))
        assert trajectories and any(t.calls for t in trajectories), path
        formats |= {t.format for t in trajectories}
    assert formats == {"openclaw", "swe-agent", "mini-swe-agent", "tau-bench", "openhands"}


def test_anthropic_response_objects_and_per_message_jsonl(tmp_path: Path) -> None:
    use = {"type": "tool_use", "id": "toolu_9", "name": "read", "input": {"path": "a"}}
    responses = [{"id": "msg_1", "type": "message", "role": "assistant", "content": [use],
                  "stop_reason": "tool_use"}]  # fmt: skip
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(responses))
    assert detect(path).format == "anthropic"
    (call,) = _one(path).calls
    assert (call.tool, call.params, call.has_outcome) == ("read", {"path": "a"}, False)
    result = {"type": "tool_result", "tool_use_id": "toolu_9", "content": [
        {"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}  # fmt: skip
    lines = _write_jsonl(tmp_path / "conv.jsonl", [
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result]},
    ])  # fmt: skip
    assert detect(lines).format == "anthropic"
    traj = _one(lines)
    assert traj.id == "conv" and traj.calls[0].result == "one\ntwo"


def test_openclaw_without_header_is_still_recognised(tmp_path: Path) -> None:
    lines = [_oc_call("a1", None, "c1", "ls"), _oc_result("a2", "a1", "c1", "x")]
    path = _write_jsonl(tmp_path / "salvaged.jsonl", lines)
    assert detect(path).format == "openclaw"
    traj = _one(path)
    assert traj.id == "salvaged" and traj.calls[0].result["content"][0]["text"] == "x"


def test_lines_only_the_stdlib_parser_accepts_still_import(tmp_path: Path) -> None:
    """NaN literals and lone surrogates: the fast parser (orjson, if installed) refuses them."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        '{"trajectory": "r", "tool": "t", "args": {"x": NaN}, "result": "\\ud800"}\n'
        '{"trajectory": "r", "tool": "t", "args": {"x": Infinity}}\n'
    )
    first, second = _one(path).calls
    assert first.params["x"] != first.params["x"]  # NaN
    assert first.result == "\ud800"
    assert second.params == {"x": float("inf")}


SWE_1X = "swe-agent-1x-fncall__6e44b9__sweagenttestrepo-1c2844.traj"
_BIG = 123456789012345678901234567890  # beyond 64 bits: orjson would read it as a float


def test_integers_beyond_64_bits_stay_integers(tmp_path: Path) -> None:
    """Documents, lines and string-encoded arguments are read as the standard library reads
    them, also where the fast parser differs silently: an integer beyond 64 bits stays an int
    (a float would give the call another signature than the live guard computed)."""
    lines = tmp_path / "big.jsonl"
    lines.write_text(
        json.dumps({"trajectory": "r", "tool": "t", "args": {"n": _BIG, "m": -(2**63) - 1}}) + "\n"
    )
    assert _one(lines).calls[0].params == {"n": _BIG, "m": -(2**63) - 1}
    doc = json.loads(data_path("samples", SWE_1X).read_text(encoding="utf-8"))
    for item in doc["history"]:
        for call in item.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps({"n": _BIG})
    doc["info"]["model_stats"]["tokens_sent"] = _BIG
    traj_file = tmp_path / "big.traj"
    traj_file.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    traj = _one(traj_file)
    # The last call (submit) is not in the history: its action text stands in for it.
    assert [call.params for call in traj.calls[:4]] == [{"n": _BIG}] * 4
    assert traj.usage is not None and traj.usage.input_tokens == _BIG
    # A document without such numbers reads the same as with the standard library.
    plain = _one(data_path("samples", SWE_1X))
    assert [c.params for c in plain.calls[:4]] == [
        json.loads(call["function"]["arguments"])
        for item in json.loads(data_path("samples", SWE_1X).read_text())["history"]
        for call in (item.get("tool_calls") or [])[:1]
    ]


def _mutate(rnd: Any, value: Any) -> None:
    """Replace one nested value with a value of another type."""
    keys = list(value) if isinstance(value, dict) else range(len(value))
    if not keys:
        return
    key = rnd.choice(list(keys))
    child = value[key]
    if rnd.random() < 0.3 or not isinstance(child, (dict, list)):
        value[key] = rnd.choice([None, 1, "x", [], {}, [1, "a"], {"a": None}, True])
    else:
        _mutate(rnd, child)


def test_mangled_samples_import_or_fail_with_a_transcript_error(tmp_path: Path) -> None:
    """Valid JSON in unexpected shapes, and truncated files: never a crash of another kind."""
    import random

    rnd = random.Random(7)
    for path in iter_sources([data_path("samples")]):
        fmt = detect(path).format
        assert fmt is not None
        text = path.read_text(encoding="utf-8")
        for attempt in range(12):
            if attempt % 3 == 0:
                mangled = text[: rnd.randrange(len(text))]
            elif path.name.endswith(".jsonl"):
                lines = [json.loads(line) for line in text.splitlines() if line.strip()]
                _mutate(rnd, lines)
                mangled = "\n".join(json.dumps(line) for line in lines)
            else:
                doc = json.loads(text)
                _mutate(rnd, doc)
                mangled = json.dumps(doc)
            target = tmp_path / path.name
            target.write_text(mangled, encoding="utf-8")
            try:
                for trajectory in read_transcripts(target, fmt):
                    assert isinstance(trajectory, Trajectory)
            except TranscriptError as exc:
                assert str(target) in str(exc)


def test_openhands_tree_keeps_only_the_active_branch(tmp_path: Path) -> None:
    def action(event_id: str, parent: str, cmd: str) -> dict[str, Any]:
        return {"kind": "ActionEvent", "id": event_id, "parent_id": parent, "source": "agent",
                "timestamp": "t", "tool_name": "terminal", "tool_call_id": f"tc-{event_id}",
                "action": {"kind": "TerminalAction", "command": cmd}}  # fmt: skip

    events = [
        action("e1", "__root__", "ls"),
        action("e2", "e1", "abandoned"),
        action("e3", "e1", "kept"),  # a sibling of e2: the conversation was forked at e1
    ]
    traj = _one(_write_jsonl(tmp_path / "tree.jsonl", events))
    assert [c.params["command"] for c in traj.calls] == ["ls", "kept"]

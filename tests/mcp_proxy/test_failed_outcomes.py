"""The proxy tells the guard whether a call failed from the one signal MCP gives: ``isError``.

A result with ``isError: true`` is a failure (``failed=True``), one without it a success
(``failed=False``), whatever its text reads like: MCP tools report their failures with
``isError``. Real proxy and test server processes over stdio, the SDK's client; each test
counts the server's real executions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_mcp_proxy import connect, env_for, executions, proxy_argv, run, texts


def _action(result: Any) -> str | None:
    meta = result.meta or {}
    action = meta.get("loopwarden/action")
    if action is None and any(text.startswith("WARNING:") for text in texts(result)[1:]):
        return "warn"
    return action


def _calls(counter: Path, tool: str, argument: str, values: list[str], *options: str) -> list[Any]:
    """The answers to ``tool`` called once per value of ``argument``, in one proxy session."""
    answers: list[Any] = []

    async def body() -> None:
        async with connect(proxy_argv(*options), env_for(counter)) as session:
            for value in values:
                answers.append(await session.call_tool(tool, {argument: value}))

    run(body)
    return answers


def test_a_failure_quoting_its_arguments_is_blocked_at_the_5th_call_and_stopped_at_the_7th(
    counter: Path, tmp_path: Path
) -> None:
    # No config: the recommended profile. Seven distinct URLs, one failure that names each.
    events = tmp_path / "events.jsonl"
    urls = [f"https://api.example.test/items/{n}?token=s3cr3t" for n in range(7)]
    answers = _calls(counter, "fetch", "url", urls, f"--events={events}")
    assert all(answer.isError for answer in answers)
    assert [_action(a) for a in answers] == [None, None, None, "warn", "block", None, "stop"]
    assert urls[0] in texts(answers[0])[0]  # the server's own failure, passed through
    assert executions(counter)["fetch"] == 5  # the blocked 5th and the stopped 7th never ran
    written = events.read_text(encoding="utf-8")
    assert "s3cr3t" not in written and "api.example.test" not in written  # privacy
    assert [json.loads(line)["action"] for line in written.splitlines()] == [
        "warn",
        "block",
        "stop",
    ]


def test_one_acknowledgement_for_distinct_calls_is_never_blocked(counter: Path) -> None:
    answers = _calls(counter, "enqueue", "item", [f"item-{n}" for n in range(12)])
    assert [_action(a) for a in answers] == [None] * 12
    assert all(not a.isError and texts(a) == ["accepted"] for a in answers)
    assert executions(counter)["enqueue"] == 12


def test_a_success_that_reads_like_an_error_is_a_success(counter: Path) -> None:
    # No isError: the server says the call worked, so "Error: ..." in its text is not a failure.
    answers = _calls(counter, "lookup", "key", [f"key-{n}" for n in range(12)])
    assert [_action(a) for a in answers] == [None] * 12
    assert executions(counter)["lookup"] == 12


def test_is_error_reaches_the_repeated_error_detector_and_its_absence_does_not(
    counter: Path,
) -> None:
    # Only the repeated-error detector on: it counts failures with one outcome, whatever the
    # arguments (repeatedErrorThreshold 3: the 4th call after three such failures is blocked).
    options = [
        "--set=enabled=true",
        "--set=detectors.repeatedError=true",
        "--set=repeatedErrorThreshold=3",
        "--set=normalizeVolatile=true",
    ]
    keys = [f"key-{n}" for n in range(6)]
    failing = _calls(counter, "quota", "key", keys, *options)
    assert [_action(a) for a in failing][:4] == [None, None, None, "block"]
    reads_like_error = _calls(counter, "lookup", "key", keys, *options)
    assert [_action(a) for a in reads_like_error] == [None] * 6  # before: read as failures
    assert executions(counter) == {"quota": 3, "lookup": 6}

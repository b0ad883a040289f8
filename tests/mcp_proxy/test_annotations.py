"""Tool annotations as per-tool policies, through the real ``loopwarden mcp-proxy`` process.

The test server (server.py) lists annotated tools: ``watch`` (read-only, its job advances at
every call), ``status`` (read-only, never changes), ``shred`` (destructive, not idempotent) and
``reset`` (destructive, idempotent). The MCP reference ``filesystem`` server annotates its own
tools the same way. With no config the proxy runs the recommended profile, where a call
repeated with one result runs three times; the annotations move that, per docs/mcp-proxy.md.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from test_mcp_proxy import connect, env_for, executions, proxy_argv, run, texts
from test_passthrough import npm_server

import loopwarden as lw
from loopwarden.core.config import ToolPolicy, resolve_config
from loopwarden.mcp_proxy._guarding import CallGuard, policy_from_annotations

# Annotations off, the profile otherwise the same as the proxy's zero-config one.
NO_ANNOTATIONS = ("--set", "profile=recommended", "--set", "toolAnnotations=false")


def call_repeatedly(
    options: tuple[str, ...],
    counter: Path,
    calls: list[tuple[str, dict[str, Any]]],
    *,
    errlog: Path | None = None,
    server: tuple[str, ...] | None = None,
    between: Any = None,
) -> list[Any]:
    """List the tools (as every client does first), then make ``calls`` one after another;
    ``between(i)`` runs before call ``i``. Returns the answers."""
    answers: list[Any] = []

    async def body() -> None:
        log = errlog.open("w") if errlog else sys.stderr
        try:
            argv = proxy_argv(*options, server=server)
            async with connect(argv, env_for(counter), errlog=log) as session:
                await session.list_tools()
                for i, (tool, arguments) in enumerate(calls):
                    if between is not None:
                        between(i)
                    answers.append(await session.call_tool(tool, arguments))
        finally:
            if errlog:
                log.close()

    run(body)
    return answers


def actions(answers: list[Any]) -> list[str | None]:
    """Each answer's loopwarden action: None (the server answered), "block" or "stop"."""
    return [(answer.meta or {}).get("loopwarden/action") for answer in answers]


def warned(answers: list[Any]) -> list[int]:
    """The calls whose answer carries a loopwarden warning."""
    return [i for i, a in enumerate(answers) if any("WARNING" in t for t in texts(a))]


def test_a_read_only_tool_making_progress_is_polling_not_a_loop(counter: Path) -> None:
    calls = [("watch", {"job": "build-7"})] * 8
    plain = call_repeatedly(NO_ANNOTATIONS, counter, calls)
    assert warned(plain) == [3, 6]  # the recommended profile warns at every 3 in a row
    counter.unlink()
    annotated = call_repeatedly((), counter, calls)
    assert warned(annotated) == [] and actions(annotated) == [None] * 8
    assert executions(counter)["watch"] == 8


def test_a_read_only_tool_without_progress_is_still_blocked_at_the_fourth_call(
    counter: Path,
) -> None:
    answers = call_repeatedly((), counter, [("status", {"job": "build-7"})] * 6)
    assert actions(answers) == [None, None, None, "block", "stop", "stop"]
    assert executions(counter)["status"] == 3


def test_a_destructive_non_idempotent_tool_is_blocked_sooner(counter: Path) -> None:
    shred = [("shred", {"path": "notes.txt"})] * 6
    answers = call_repeatedly((), counter, shred)
    assert actions(answers) == [None, None, "block", "stop", "stop", "stop"]
    assert executions(counter)["shred"] == 2
    counter.unlink()
    plain = call_repeatedly(NO_ANNOTATIONS, counter, shred)
    assert actions(plain)[:4] == [None, None, None, "block"]
    assert executions(counter)["shred"] == 3
    counter.unlink()
    # An idempotent destructive tool: a repeat has no further effect, the profile's numbers.
    idempotent = call_repeatedly((), counter, [("reset", {"path": "notes.txt"})] * 6)
    assert actions(idempotent)[:4] == [None, None, None, "block"]


def test_the_users_own_entry_wins_and_the_log_names_tools_never_arguments(
    counter: Path, tmp_path: Path
) -> None:
    log = tmp_path / "proxy.log"
    calls = [("shred", {"path": "secret-path-4711"})] * 5
    options = ("--log-level", "info")
    call_repeatedly(options, counter, calls, errlog=log)
    text = log.read_text()
    assert 'policy from tool annotations for 2 tool(s) (status, watch): {"readOnly": true}' in text
    assert 'for 1 tool(s) (shred): {"consecutiveCriticalThreshold": 2,' in text
    assert "secret-path-4711" not in text
    counter.unlink()
    own = ("--set", "profile=recommended", "--set", "toolPolicies.shred={}", *options)
    answers = call_repeatedly(own, counter, calls, errlog=log)
    assert actions(answers)[:4] == [None, None, None, "block"]
    assert executions(counter)["shred"] == 3
    assert "(shred): none: your toolPolicies entry for it wins" in log.read_text()


def test_the_reference_filesystem_server_annotations_apply(counter: Path, tmp_path: Path) -> None:
    """``read_text_file`` is read-only, ``edit_file`` destructive and not idempotent."""
    server = (str(npm_server("mcp-server-filesystem")), str(tmp_path))
    notes = tmp_path / "notes.txt"
    notes.write_text("line 0\n")

    def grow(i: int) -> None:  # another process writes to the file between the reads
        notes.write_text(notes.read_text() + f"line {i + 1}\n")

    reads = [("read_text_file", {"path": str(notes)})] * 6
    assert warned(call_repeatedly((), counter, reads, server=server, between=grow)) == []
    plain = call_repeatedly(NO_ANNOTATIONS, counter, reads, server=server, between=grow)
    assert warned(plain) == [3]

    # The same edit again and again: it applies once, then fails the same way every time.
    edit = {"path": str(notes), "edits": [{"oldText": "line 0", "newText": "line zero"}]}
    edits = [("edit_file", edit)] * 6
    notes.write_text("line 0\n")
    annotated = actions(call_repeatedly((), counter, edits, server=server))
    notes.write_text("line 0\n")
    plain_edits = actions(call_repeatedly(NO_ANNOTATIONS, counter, edits, server=server))
    assert annotated.index("block") == 3  # two identical failures in a row are enough
    assert plain_edits.index("block") == 4  # three, as for any tool


# ---------------------------------------------------------------------------------------------
# The mapping and CallGuard's bookkeeping, without a server: a real LoopGuard, a listing as a
# server sends it.

OPENCLAW = resolve_config({"enabled": True})
RECOMMENDED = resolve_config({"profile": "recommended"})
DESTRUCTIVE = {"destructiveHint": True, "idempotentHint": False}
# The recommended profile's 8 / 10 and 3 / 3, halved (rounded up).
HALVED = ToolPolicy(
    warning_threshold=4,
    critical_threshold=5,
    consecutive_warning_threshold=2,
    consecutive_critical_threshold=2,
)


@pytest.mark.parametrize(
    ("annotations", "config", "policy"),
    [
        ({"readOnlyHint": True}, RECOMMENDED, ToolPolicy(read_only=True)),
        # the other hints mean nothing for a read-only tool (MCP spec)
        ({"readOnlyHint": True, **DESTRUCTIVE}, RECOMMENDED, ToolPolicy(read_only=True)),
        (DESTRUCTIVE, RECOMMENDED, HALVED),
        (
            {"destructiveHint": True},
            OPENCLAW,
            ToolPolicy(warning_threshold=5, critical_threshold=10),
        ),
        (
            {"destructiveHint": True, "readOnlyHint": False},
            resolve_config({"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}),
            ToolPolicy(warning_threshold=2, critical_threshold=3),
        ),
        ({"destructiveHint": True, "idempotentHint": True}, RECOMMENDED, None),
        ({"destructiveHint": False, "idempotentHint": False}, RECOMMENDED, None),
        ({"openWorldHint": True}, RECOMMENDED, None),
        ({"openWorldHint": False, "readOnlyHint": False}, RECOMMENDED, None),
        ({}, RECOMMENDED, None),  # the spec's defaults are no evidence
        (None, RECOMMENDED, None),
        ({"readOnlyHint": "true", "destructiveHint": 1}, RECOMMENDED, None),  # not booleans
        (["readOnlyHint"], RECOMMENDED, None),
    ],
)
def test_the_mapping_table(annotations: Any, config: Any, policy: ToolPolicy | None) -> None:
    assert policy_from_annotations(annotations, config) == policy


def listing(**tools: Any) -> dict[str, Any]:
    """A ``tools/list`` result: tool name → its annotations (None: no annotations key)."""
    entries = []
    for name, hints in tools.items():
        entry: dict[str, Any] = {"name": name, "inputSchema": {"type": "object"}}
        if hints is not None:
            entry["annotations"] = hints
        entries.append(entry)
    return {"tools": entries}


def test_call_guard_sets_policies_under_the_users_own(caplog: pytest.LogCaptureFixture) -> None:
    guard = lw.LoopGuard({"profile": "recommended", "toolPolicies": {"mv": {"poll": True}}})
    own = guard.config
    calls = CallGuard(guard, "s")
    with caplog.at_level(logging.INFO, "loopwarden.mcp_proxy"):
        calls.learn_tools(
            listing(cat={"readOnlyHint": True}, rm=DESTRUCTIVE, mv=DESTRUCTIVE, x=None)
        )
    assert guard.config.policy("cat") == ToolPolicy(read_only=True)
    assert guard.config.policy("rm") == HALVED
    assert guard.config.policy("mv") == ToolPolicy(poll=True)  # yours wins
    assert guard.config.policy("x") is None
    assert guard.config.for_tool("rm").consecutive_critical_threshold == 2
    assert [r.getMessage() for r in caplog.records] == [
        'policy from tool annotations for 1 tool(s) (cat): {"readOnly": true}',
        "policy from tool annotations for 1 tool(s) (rm): {"
        '"consecutiveCriticalThreshold": 2, "consecutiveWarningThreshold": 2, '
        '"criticalThreshold": 5, "warningThreshold": 4}',
        "policy from tool annotations for 1 tool(s) (mv): none: your toolPolicies entry for "
        "it wins",
    ]
    caplog.clear()
    before = guard.config
    with caplog.at_level(logging.INFO, "loopwarden.mcp_proxy"):
        calls.learn_tools(listing(cat={"readOnlyHint": True}, rm=DESTRUCTIVE, mv=DESTRUCTIVE))
    assert guard.config is before and caplog.records == []  # the same listing: nothing redone
    # The server changes its tools (list_changed, then a new listing): the policies follow.
    with caplog.at_level(logging.INFO, "loopwarden.mcp_proxy"):
        calls.learn_tools(listing(cat={"readOnlyHint": False}, rm={"readOnlyHint": True}))
    assert guard.config.policy("cat") is None
    assert guard.config.policy("rm") == ToolPolicy(read_only=True)
    assert guard.config.policy("mv") == ToolPolicy(poll=True)
    assert own.tool_policies == guard.config.tool_policies[:1]
    assert "(cat): none (its annotations no longer justify one)" in caplog.text


@pytest.mark.parametrize(
    "block",
    [
        {"profile": "recommended", "toolAnnotations": False},
        {"enabled": False},  # detection off: nothing to derive
        {},  # enabled absent: OpenClaw's detectors are off
    ],
)
def test_no_policies_when_annotations_are_off_or_detection_is(block: dict[str, Any]) -> None:
    guard = lw.LoopGuard(block)
    own = guard.config
    CallGuard(guard, "s").learn_tools(listing(cat={"readOnlyHint": True}, rm=DESTRUCTIVE))
    assert guard.config is own


def test_a_malformed_listing_is_ignored() -> None:
    guard = lw.LoopGuard({"profile": "recommended"})
    own = guard.config
    calls = CallGuard(guard, "s")
    for result in (None, {"tools": "x"}, {"tools": [None, {"name": 3}, {"annotations": {}}]}):
        calls.learn_tools(result)
    calls.learn_tools({"tools": [{"name": "t", "annotations": "readOnly"}]})
    assert guard.config is own


def test_a_tool_name_cannot_drive_the_terminal_through_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = CallGuard(lw.LoopGuard({"profile": "recommended"}), "s")
    with caplog.at_level(logging.INFO, "loopwarden.mcp_proxy"):
        calls.learn_tools(listing(**{"cat\x1b[2J\rok": {"readOnlyHint": True}}))
    assert "(cat\\x1b[2J\\rok)" in caplog.text and "\x1b" not in caplog.text

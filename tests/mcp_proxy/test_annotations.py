"""Tool annotations as per-tool policies, through the real ``loopwarden mcp-proxy`` process.

The test server (server.py) lists annotated tools: ``watch`` (read-only, its job advances at
every call), ``status`` (read-only, never changes), ``shred`` (destructive, not idempotent) and
``reset`` (destructive, idempotent). The MCP reference ``filesystem`` server annotates its own
tools the same way. With no config the proxy runs the recommended profile, where a call
repeated with one result runs three times; the annotations move that, per docs/mcp-proxy.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from test_mcp_proxy import connect, env_for, executions, proxy_argv, run, texts
from test_passthrough import npm_server

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

"""Per-tool policies (``toolPolicies``) through LoopGuard: read-only tools, own thresholds.

The MCP proxy fills these from tool annotations (tests/mcp_proxy/test_annotations.py); here
they are set by hand, as a library user would. The properties check the promises the proxy's
mapping relies on: ``readOnly`` never changes a block; lower thresholds never block later.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import loopwarden as lw

from _support import run_calls

OPENCLAW = {"enabled": True}
RECOMMENDED = {"profile": "recommended"}


def with_policies(block: dict[str, Any], policies: dict[str, Any]) -> lw.LoopGuard:
    return lw.LoopGuard({**block, "toolPolicies": policies})


def progressing(tool: str, n: int) -> list[tuple[str, Any, Any]]:
    """One call repeated with the same arguments while its result changes (a job advancing)."""
    return [(tool, {"job": "build"}, f"step {i}") for i in range(n)]


def stuck(tool: str, n: int) -> list[tuple[str, Any, Any]]:
    return [(tool, {"job": "build"}, "still running")] * n


def test_openclaw_a_read_only_tool_making_progress_is_not_warned() -> None:
    plain = run_calls(lw.LoopGuard(OPENCLAW), progressing("status", 15))
    assert plain[10] == "warn"  # OpenClaw's generic repeat counts every identical call
    read_only = run_calls(
        with_policies(OPENCLAW, {"status": {"readOnly": True}}), progressing("status", 15)
    )
    assert set(read_only) == {"allow"}


def test_openclaw_a_read_only_tool_without_progress_is_warned_and_blocked_as_before() -> None:
    plain = run_calls(lw.LoopGuard(OPENCLAW), stuck("status", 24))
    read_only = run_calls(
        with_policies(OPENCLAW, {"status": {"readOnly": True}}), stuck("status", 24)
    )
    assert read_only == plain
    assert plain[10] == "warn" and plain.index("block") == 20


def test_recommended_a_read_only_tool_making_progress_is_not_warned_and_still_capped() -> None:
    guard = lw.LoopGuard(RECOMMENDED)
    assert run_calls(guard, progressing("status", 6))[3] == "warn"  # 4th in a row
    read_only = with_policies(RECOMMENDED, {"status": {"readOnly": True}})
    assert set(run_calls(read_only, progressing("status", 12))) == {"allow"}
    # The runaway cap (50 in a row whatever the results) still holds for a read-only tool.
    capped = run_calls(
        with_policies(RECOMMENDED, {"status": {"readOnly": True}}), progressing("status", 52)
    )
    assert capped.index("block") == 50


def test_recommended_a_read_only_re_read_loop_is_blocked_at_the_same_call() -> None:
    plain = run_calls(lw.LoopGuard(RECOMMENDED), stuck("read_file", 6))
    read_only = run_calls(
        with_policies(RECOMMENDED, {"read_file": {"readOnly": True}}), stuck("read_file", 6)
    )
    assert plain[:5] == ["allow", "allow", "warn", "block", "stop"]
    assert [a for a in read_only if a != "warn"] == [a for a in plain if a != "warn"]
    assert read_only[2] == "warn"  # the last-chance warning before the block stays


def test_a_polling_tool_by_policy_is_judged_by_the_known_poll_detector() -> None:
    guard = with_policies(OPENCLAW, {"check_ci": {"poll": True}})
    events: list[lw.LoopEvent] = []
    guard.subscribe(events.append)
    actions = run_calls(guard, stuck("check_ci", 21))
    assert actions.index("block") == 20
    assert {e.detector for e in events} == {"known_poll_no_progress"}


def test_own_thresholds_block_a_destructive_tool_sooner_in_both_profiles() -> None:
    policy = {"move": {"warningThreshold": 5, "criticalThreshold": 10}}
    plain = run_calls(lw.LoopGuard(OPENCLAW), stuck("move", 22))
    stricter = run_calls(with_policies(OPENCLAW, policy), stuck("move", 22))
    assert (plain.index("block"), stricter.index("block")) == (20, 10)
    assert stricter.index("warn") == 5
    consecutive = {"move": {"consecutiveWarningThreshold": 2, "consecutiveCriticalThreshold": 2}}
    plain = run_calls(lw.LoopGuard(RECOMMENDED), stuck("move", 6))
    stricter = run_calls(with_policies(RECOMMENDED, consecutive), stuck("move", 6))
    assert (plain.index("block"), stricter.index("block")) == (3, 2)
    # Another tool with the same calls keeps the profile's thresholds.
    other = run_calls(with_policies(RECOMMENDED, consecutive), stuck("copy", 6))
    assert other.index("block") == 3


# ---------------------------------------------------------------------------------------------
# Properties over random runs: a few tools, arguments and results, so loops of every kind
# (repeats, ping-pong, cycles, same outcome, unknown tools) come up.

_call = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([{"x": 1}, {"x": 2}]),
    st.sampled_from(["r1", "r2", ""]),
)
# Runs made of segments, each a short pattern repeated: repeats, ping-pongs and cycles of every
# length come up, with stray calls between them.
_segment = st.tuples(st.lists(_call, min_size=1, max_size=3), st.integers(1, 14)).map(
    lambda segment: segment[0] * segment[1]
)
_calls = st.lists(_segment, max_size=5).map(
    lambda segments: [call for segment in segments for call in segment][:70]
)
_blocks = st.sampled_from(
    [
        OPENCLAW,
        RECOMMENDED,
        {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5},
        {"profile": "recommended", "countPendingCalls": False, "stopAfterBlocks": 0},
    ]
)


def _blocking(actions: list[str]) -> list[tuple[int, str]]:
    return [(i, a) for i, a in enumerate(actions) if a in ("block", "stop")]


@settings(max_examples=300, deadline=None)
@given(_calls, _blocks, st.sets(st.sampled_from(["a", "b", "c"])))
def test_read_only_never_changes_a_block(
    calls: list[tuple[str, Any, Any]], block: dict[str, Any], tools: set[str]
) -> None:
    """Only warnings move: one counted over repeats without progress may come at a later call
    (or never), since such repeats reach the threshold later than all repeats do."""
    plain = run_calls(lw.LoopGuard(block), calls)
    read_only = run_calls(with_policies(block, {t: {"readOnly": True} for t in tools}), calls)
    assert _blocking(read_only) == _blocking(plain)


@settings(max_examples=300, deadline=None)
@given(_calls, _blocks, st.sets(st.sampled_from(["a", "b", "c"])))
def test_halved_thresholds_never_block_later(
    calls: list[tuple[str, Any, Any]], block: dict[str, Any], tools: set[str]
) -> None:
    config = lw.resolve_config(block)
    halved = {
        "warningThreshold": (config.warning_threshold + 1) // 2,
        "criticalThreshold": (config.critical_threshold + 1) // 2,
        "consecutiveWarningThreshold": (config.consecutive_warning_threshold + 1) // 2,
        "consecutiveCriticalThreshold": (config.consecutive_critical_threshold + 1) // 2,
    }
    plain = _blocking(run_calls(lw.LoopGuard(block), calls))
    stricter = _blocking(run_calls(with_policies(block, dict.fromkeys(tools, halved)), calls))
    if plain:
        assert stricter and stricter[0][0] <= plain[0][0]

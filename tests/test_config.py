"""SPEC §1: lenient resolution and clamping, strict validation, per-agent merge, file loading."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import loopwarden as lw
from loopwarden.config import agent_ids


def test_defaults_when_nothing_is_configured() -> None:
    config = lw.resolve_config(None)
    assert config.enabled is None
    assert (config.history_size, config.warning_threshold, config.critical_threshold) == (
        30,
        10,
        20,
    )
    assert (config.unknown_tool_threshold, config.global_circuit_breaker_threshold) == (10, 30)
    assert config.detectors == lw.resolve_config({}).detectors
    assert config.detectors.generic_repeat and config.detectors.ping_pong
    assert config.post_compaction_window == 3


@pytest.mark.parametrize(
    "bad", [0, -3, 2.5, "10", None, True, False, math.nan, math.inf, [10], {"v": 10}]
)
def test_invalid_numbers_silently_fall_back_to_defaults(bad: object) -> None:
    config = lw.resolve_config({"historySize": bad, "unknownToolThreshold": bad})
    assert config.history_size == 30
    assert config.unknown_tool_threshold == 10


def test_integral_floats_count_as_integers() -> None:
    config = lw.resolve_config({"historySize": 12.0, "postCompactionGuard": {"windowSize": 5.0}})
    assert config.history_size == 12
    assert config.post_compaction_window == 5


def test_clamping_raises_critical_then_breaker_in_order() -> None:
    config = lw.resolve_config({"warningThreshold": 30})
    assert (config.warning_threshold, config.critical_threshold) == (30, 31)
    assert config.global_circuit_breaker_threshold == 32


def test_clamping_of_breaker_alone() -> None:
    config = lw.resolve_config({"criticalThreshold": 40, "globalCircuitBreakerThreshold": 40})
    assert config.global_circuit_breaker_threshold == 41


def test_history_size_and_unknown_threshold_are_never_clamped() -> None:
    config = lw.resolve_config(
        {"historySize": 1, "unknownToolThreshold": 1, "warningThreshold": 50}
    )
    assert (config.history_size, config.unknown_tool_threshold) == (1, 1)


def test_detector_flags_default_true_and_only_false_turns_them_off() -> None:
    config = lw.resolve_config({"detectors": {"pingPong": False, "genericRepeat": None}})
    assert config.detectors.ping_pong is False
    assert config.detectors.generic_repeat is True
    assert config.detectors.known_poll_no_progress is True


@pytest.mark.parametrize(
    ("raw", "detectors", "records", "compaction"),
    [
        ({"enabled": True}, True, True, True),
        ({}, False, True, True),
        ({"enabled": False}, False, False, False),
    ],
    ids=["true", "absent", "false"],
)
def test_enabled_three_values(raw: dict, detectors: bool, records: bool, compaction: bool) -> None:
    config = lw.resolve_config(raw)
    assert config.detection_enabled is detectors
    assert config.records_calls is records
    assert config.compaction_guard_enabled is compaction


def test_to_camel_round_trips_through_resolution() -> None:
    config = lw.resolve_config(
        {"enabled": True, "warningThreshold": 4, "detectors": {"pingPong": 0}}
    )
    assert lw.resolve_config(config.to_camel()) == config
    assert "enabled" not in lw.resolve_config({}).to_camel()


def test_resolve_accepts_an_already_resolved_config() -> None:
    config = lw.resolve_config({"warningThreshold": 3})
    assert lw.resolve_config(config) is config


FULL = {
    "tools": {"loopDetection": {"enabled": True, "warningThreshold": 25, "detectors": {"a": 1}}},
    "agents": {
        "list": [
            {"id": "ops", "tools": {"loopDetection": {"criticalThreshold": 20}}},
            {"id": "quiet", "tools": {"loopDetection": {"detectors": {"pingPong": False}}}},
            {"id": "plain"},
        ]
    },
}


def test_agent_block_overlays_the_global_block_field_by_field() -> None:
    merged = lw.effective_config(FULL, "ops")
    assert merged == {
        "enabled": True,
        "warningThreshold": 25,
        "criticalThreshold": 20,
        "detectors": {"a": 1},
    }
    resolved = lw.resolve_config(merged)
    # SPEC §1.4 example: global warning 25 + agent critical 20 -> 25 / 26 / 30.
    assert (resolved.warning_threshold, resolved.critical_threshold) == (25, 26)
    assert resolved.global_circuit_breaker_threshold == 30


def test_nested_detector_objects_merge_key_by_key() -> None:
    merged = lw.effective_config(FULL, "quiet")
    assert merged["detectors"] == {"a": 1, "pingPong": False}


def test_agent_without_block_or_unknown_agent_gets_the_global_block() -> None:
    assert lw.effective_config(FULL, "plain") == FULL["tools"]["loopDetection"]
    assert lw.effective_config(FULL, "nobody") == FULL["tools"]["loopDetection"]
    assert lw.effective_config(FULL, None) == FULL["tools"]["loopDetection"]


def test_agent_block_alone_when_there_is_no_global_block() -> None:
    full = {"agents": {"list": [{"id": "a", "tools": {"loopDetection": {"historySize": 5}}}]}}
    assert lw.effective_config(full, "a") == {"historySize": 5}
    assert lw.effective_config(full, None) == {}
    assert agent_ids(full) == ["a"]


def test_validation_reports_every_problem_with_dotted_paths() -> None:
    raw = {
        "tools": {
            "loopDetection": {
                "repeatThreshold": 3,
                "warningThreshold": 0,
                "detectors": {"pingPong": "yes"},
            }
        },
        "agents": {
            "list": [
                {"id": "a"},
                {"id": "b"},
                {"id": "c", "tools": {"loopDetection": {"historySize": "30"}}},
            ]
        },
    }
    with pytest.raises(lw.ConfigError) as caught:
        lw.validate_config(raw)
    problems = caught.value.problems
    assert len(problems) == 4
    text = "\n".join(problems)
    assert "tools.loopDetection.repeatThreshold: unknown key" in text
    assert "tools.loopDetection.warningThreshold: must be a positive integer, got 0" in text
    assert "tools.loopDetection.detectors.pingPong: must be true or false" in text
    assert "agents.list[2].tools.loopDetection.historySize: must be a positive integer" in text


def test_validation_rejects_wrong_container_shapes() -> None:
    with pytest.raises(lw.ConfigError) as caught:
        lw.validate_config({"tools": [], "agents": {"list": {"id": "x"}}})
    assert caught.value.problems == [
        "tools: must be an object, got list",
        "agents.list: must be an array, got dict",
    ]
    with pytest.raises(lw.ConfigError, match=r"agents.list\[0\]: must be an object"):
        lw.validate_config({"agents": {"list": ["ops"]}})
    with pytest.raises(lw.ConfigError, match=r"tools.loopDetection: must be an object"):
        lw.validate_config({"tools": {"loopDetection": 5}})


def test_threshold_order_is_a_notice_with_the_clamped_values_not_an_error() -> None:
    validated = lw.validate_config({"warningThreshold": 30})
    assert validated.notices == (
        "tools.loopDetection: criticalThreshold 20 (default) is not above warningThreshold 30; "
        "runtime uses criticalThreshold 31",
        "tools.loopDetection: globalCircuitBreakerThreshold 30 (default) is not above "
        "criticalThreshold 31; runtime uses globalCircuitBreakerThreshold 32",
    )
    assert validated.resolve().critical_threshold == 31


def test_notices_describe_each_agents_merged_config() -> None:
    full = {
        "tools": {"loopDetection": {"warningThreshold": 25}},
        "agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"criticalThreshold": 20}}}]},
    }
    validated = lw.validate_config(full)
    assert any(
        n.startswith("agent 'ops'") and "uses criticalThreshold 26" in n for n in validated.notices
    )


def test_bare_block_validates_under_its_dotted_path() -> None:
    with pytest.raises(lw.ConfigError, match=r"tools\.loopDetection\.historySize"):
        lw.validate_config({"historySize": -1})


def test_load_config_reads_json5_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text("// c\n{tools: {loopDetection: {enabled: true, warningThreshold: 4,},},}\n")
    loaded = lw.load_config(path)
    assert loaded.resolve().warning_threshold == 4
    assert loaded.source == str(path)


def test_load_config_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(lw.ConfigError) as caught:
        lw.load_config(tmp_path / "absent.json")
    assert str(caught.value) == f"{tmp_path / 'absent.json'}: file not found"


def test_load_config_syntax_error_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "tools": {"loopDetection": {"enabled": true,,}}\n}\n')
    with pytest.raises(lw.ConfigError) as caught:
        lw.load_config(path)
    assert "syntax error at line 2, column" in str(caught.value)


def test_load_config_wrong_top_level_shape(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(lw.ConfigError, match="the config must be an object, got list"):
        lw.load_config(path)


def test_load_config_without_a_block_says_defaults_apply(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"models": {}}')
    assert lw.load_config(path).notices == (
        "no tools.loopDetection block found: the defaults apply",
    )


def test_shipped_example_config_is_valid() -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "openclaw.json"
    loaded = lw.load_config(example)
    assert loaded.agent_ids == ["ops", "main"]
    ops = loaded.resolve("ops")
    assert (ops.warning_threshold, ops.critical_threshold, ops.detectors.ping_pong) == (
        25,
        26,
        False,
    )

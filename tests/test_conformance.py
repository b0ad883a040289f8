"""Replay every scenario vector of conformance/scenarios.jsonl.gz through the public API."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

import loopwarden as lw

from _support import data_path


def _scenarios() -> list[dict[str, Any]]:
    with gzip.open(data_path("conformance", "scenarios.jsonl.gz"), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


SCENARIOS = _scenarios()


def verdict_dict(verdict: lw.Verdict) -> dict[str, Any]:
    if not verdict.stuck:
        return {"stuck": False}
    return {
        "stuck": True,
        "level": verdict.level,
        "detector": verdict.detector,
        "count": verdict.count,
        "message": verdict.message,
        "pairedToolName": verdict.paired_tool_name,
        "warningKey": verdict.warning_key,
    }


def replay(scenario: dict[str, Any]) -> tuple[list[Any], int]:
    """Run a scenario's steps on a fresh state; return the outputs and the history length."""
    state = lw.SessionState()
    config = scenario["config"]
    outputs: list[Any] = []
    for step in scenario["steps"]:
        op, tool, params = step["op"], step["tool"], step["params"]
        if op == "detect":
            outputs.append(verdict_dict(lw.detect(state, tool, params, config, run_id=step["run"])))
        elif op == "call":
            lw.record_call(
                state, tool, params, tool_call_id=step["id"], config=config, run_id=step["run"]
            )
        elif op == "outcome":
            kwargs: dict[str, Any] = {}
            if "result" in step:
                kwargs["result"] = step["result"]
            if "error" in step:
                error = step["error"]
                kwargs["error"] = Exception(error) if step.get("errorIsErrorObject") else error
            record = lw.record_outcome(
                state,
                tool,
                params,
                tool_call_id=step["id"],
                config=config,
                run_id=step["run"],
                **kwargs,
            )
            outputs.append(
                None
                if record is None
                else {"resultHash": record.result_hash, "unknownToolName": record.unknown_tool_name}
            )
        elif op == "hash":
            outputs.append(lw.hash_tool_call(tool, params))
        else:  # pragma: no cover - a new op in the vectors must be noticed
            raise AssertionError(f"unknown op {op!r}")
    return outputs, len(state.history)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["id"] for s in SCENARIOS])
def test_scenario_vector(scenario: dict[str, Any]) -> None:
    outputs, length = replay(scenario)
    expected = scenario["expected"]["outputs"]
    assert len(outputs) == len(expected)
    for i, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert got == want, f"{scenario['id']} output {i}"
    assert length == scenario["expected"]["historyLength"]


def test_all_400_scenarios_are_present() -> None:
    assert len(SCENARIOS) == 400

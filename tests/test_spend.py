"""What runs spent: the report's figures against the sample transcripts, read here on their own.

Each expected figure is computed in this file from the raw JSON of a real transcript (the
fields each agent writes), not from loopwarden's importers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopwarden.analyze.spend import parse_price
from loopwarden.cli import main

from _support import data_path

SAMPLES = data_path("samples")
MINI = sorted(SAMPLES.glob("mini-swe-agent-*.traj.json"))
SWE = sorted(SAMPLES.glob("swe-agent-*.traj"))
OPENCLAW = SAMPLES / "openclaw-session-example.jsonl"
BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)
TIGHT = ["--set", "criticalThreshold=3", "--set", "warningThreshold=2"]


def analyze(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["analyze", *args, "--output", "json"])
    assert code in (0, 1)
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def by_source(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(t["source"]).name: t for t in report["trajectories"]}


def mini_responses(path: Path) -> list[tuple[bool, dict[str, Any]]]:
    """(issued a command, usage) of each model response of a mini-swe-agent v1 trajectory."""
    doc = json.loads(path.read_text())
    found = []
    for message in doc["messages"]:
        if message["role"] != "assistant":
            continue
        usage = message.get("extra", {}).get("response", {}).get("usage")
        if usage is not None:
            found.append((len(BASH_BLOCK.findall(message["content"])) == 1, usage))
    return found


def test_swe_agent_runs_spend_what_model_stats_says(capsys: pytest.CaptureFixture[str]) -> None:
    runs = by_source(analyze(capsys, *map(str, SWE)))
    assert len(runs) == len(SWE) == 2
    for path in SWE:
        stats = json.loads(path.read_text())["info"]["model_stats"]
        spend = runs[path.name]["spend"]
        assert spend["cost"] == pytest.approx(stats["instance_cost"], abs=1e-6)
        assert (spend["input_tokens"], spend["output_tokens"]) == (
            stats["tokens_sent"],
            stats["tokens_received"],
        )
        assert spend["cost_source"] == "recorded"
    assert runs[SWE[1].name]["spend"]["model"] == "gpt-4o"  # 1.x names its model


def test_mini_swe_agent_spend_and_spend_after_the_first_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = analyze(capsys, *map(str, MINI), *TIGHT)
    runs = by_source(report)
    blocked = 0
    for path in MINI:
        doc = json.loads(path.read_text())
        responses = mini_responses(path)
        run = runs[path.name]
        spend = run["spend"]
        assert spend["cost"] == pytest.approx(doc["info"]["model_stats"]["instance_cost"], abs=1e-6)
        assert spend["input_tokens"] == sum(u["prompt_tokens"] for _, u in responses)
        assert spend["output_tokens"] == sum(u["completion_tokens"] for _, u in responses)
        assert spend["model"] == doc["info"]["config"]["model"]["model_name"]
        first = run["first_block"] or run["stop"]
        if first is None:
            assert spend["after_first_block_or_stop"] is None
            continue
        blocked += 1
        # The responses that issued a command, in order: the calls; those after the first
        # block are what the guard would have saved.
        issued = [usage for made_call, usage in responses if made_call]
        assert len(issued) == run["calls"]
        later = issued[first["index"] + 1 :]
        after = spend["after_first_block_or_stop"]
        assert spend["after_basis"] == "responses"
        assert after["cost"] == pytest.approx(sum(u["cost"] for u in later), abs=1e-5)
        assert after["input_tokens"] == sum(u["prompt_tokens"] for u in later)
        assert 0 < after["cost"] < spend["cost"]
    assert blocked >= 2  # the settings make the samples' loops block
    summary = report["summary"]["spend"]
    instance_costs = [
        json.loads(p.read_text())["info"]["model_stats"]["instance_cost"] for p in MINI
    ]
    assert summary["cost"] == pytest.approx(sum(instance_costs), abs=1e-5)
    [model] = summary["per_model"]
    assert summary["per_model"][model]["runs"] == len(MINI)
    assert summary["runs"]["recorded"] == len(MINI)
    # Per tool: mini-swe-agent has one tool, and each response that ran a command is its cost.
    issued_cost = sum(u["cost"] for p in MINI for made, u in mini_responses(p) if made)
    assert summary["per_tool"]["bash"]["cost"] == pytest.approx(issued_cost, abs=1e-5)
    detectors = summary["per_detector"]
    assert sum(d["runs"] for d in detectors.values()) == blocked
    assert sum(d["after_first_block_or_stop"]["cost"] for d in detectors.values()) == (
        pytest.approx(summary["after_first_block_or_stop"]["cost"], abs=1e-5)
    )


def test_a_run_total_is_shared_out_over_the_calls_after_the_first_block(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A real SWE-agent run whose last command is repeated until the guard blocks it."""
    doc = json.loads(SWE[0].read_text())
    doc["trajectory"] += [dict(doc["trajectory"][-2]) for _ in range(5)]
    looped = tmp_path / "looped.traj"
    looped.write_text(json.dumps(doc))

    [run] = analyze(capsys, str(looped), *TIGHT)["trajectories"]

    first = run["first_block"] or run["stop"]
    assert first is not None
    stats = doc["info"]["model_stats"]
    share = (run["calls"] - first["index"] - 1) / run["calls"]
    after = run["spend"]["after_first_block_or_stop"]
    assert run["spend"]["after_basis"] == "share_of_calls"
    assert after["cost"] == pytest.approx(stats["instance_cost"] * share, abs=1e-6)
    assert after["input_tokens"] == round(stats["tokens_sent"] * share)


def openclaw_prompt_and_output(path: Path) -> tuple[int, int]:
    """Tokens of the OpenClaw responses that made tool calls (prompt incl. cache, output)."""
    prompt = output = 0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        content = message.get("content")
        made_call = isinstance(content, list) and any(
            block.get("type") == "toolCall" for block in content if isinstance(block, dict)
        )
        usage = message.get("usage")
        if message.get("role") == "assistant" and made_call and usage:
            prompt += usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
            output += usage["output"]
    return prompt, output


def test_token_only_runs_are_priced_only_from_prices_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    unpriced = analyze(capsys, str(OPENCLAW))
    [run] = unpriced["trajectories"]
    prompt, output = openclaw_prompt_and_output(OPENCLAW)
    assert prompt > 0 and output > 0
    assert (run["spend"]["input_tokens"], run["spend"]["output_tokens"]) == (prompt, output)
    # The session records cost 0 for a model it has no price for: unknown, not free.
    assert run["spend"]["cost"] is None and run["spend"]["cost_source"] is None
    assert unpriced["summary"]["spend"]["runs"]["tokens_only"] == 1

    priced = analyze(capsys, str(OPENCLAW), "--price", "*=3,15")
    [run] = priced["trajectories"]
    assert run["spend"]["cost"] == pytest.approx((prompt * 3 + output * 15) / 1e6, abs=1e-6)
    assert run["spend"]["cost_source"] == "price"
    assert priced["summary"]["spend"]["runs"]["price"] == 1

    recorded = analyze(capsys, str(SWE[1]), "--price", "gpt-4o=1000,1000")
    assert recorded["trajectories"][0]["spend"]["cost_source"] == "recorded"  # never overridden


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("gpt-4o", "no MODEL= part"),
        ("gpt-4o=2.5", "two prices"),
        ("gpt-4o=a,b", "not a number"),
        ("gpt-4o=-1,2", "negative"),
    ],
)
def test_a_bad_price_says_what_is_wrong_and_how_to_write_it(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem) as info:
        parse_price(text)
    assert "MODEL=IN,OUT" in str(info.value)


def test_a_bad_price_on_the_command_line_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["analyze", str(OPENCLAW), "--price", "gpt-4o=2.5"])
    assert info.value.code == 2
    assert "--price 'gpt-4o=2.5': it needs two prices" in capsys.readouterr().err


def test_the_text_report_says_the_spend_and_what_came_after_the_first_block(
    capsys: pytest.CaptureFixture[str],
) -> None:
    total = sum(json.loads(p.read_text())["info"]["model_stats"]["instance_cost"] for p in MINI)
    assert main(["analyze", *map(str, MINI), str(OPENCLAW), *TIGHT]) == 1
    text = capsys.readouterr().out
    assert f"Spend: ${total:,.2f} over {len(MINI)} runs;" in text
    assert "1 run records tokens but no money: --price MODEL=IN,OUT" in text


def test_the_html_report_charts_spend_per_model_and_says_each_runs_spend(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    assert main(["analyze", *map(str, MINI), *map(str, SWE), *TIGHT, "--out", str(page)]) == 1
    html = page.read_text()
    chart = html[
        html.index("<svg id='spend'") : html.index("</svg>", html.index("<svg id='spend'"))
    ]
    mini_total = sum(
        json.loads(p.read_text())["info"]["model_stats"]["instance_cost"] for p in MINI
    )
    model = json.loads(MINI[0].read_text())["info"]["config"]["model"]["model_name"]
    assert f"<title>{model}: ${mini_total:,.2f} spent</title>" in chart
    assert "<title>gpt-4o: $0.02 spent</title>" in chart  # the SWE-agent 1.x run
    for path in MINI:  # each run's strip says what it spent
        cost = json.loads(path.read_text())["info"]["model_stats"]["instance_cost"]
        assert f"${cost:,.2f} spent" in html


CODING = data_path("coding_agents")


def test_codex_rollouts_spend_each_responses_last_token_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real Codex CLI rollouts: a token_count event after each model response."""
    rollouts = sorted((CODING / "codex" / "rollouts").glob("*.jsonl"))
    expected = [0, 0, 0]  # input, output, cached, of the responses that made calls
    for path in rollouts:
        calls_since = 0
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            payload = obj.get("payload") or {}
            if obj.get("type") == "response_item" and payload.get("type") in (
                "function_call",
                "custom_tool_call",
                "local_shell_call",
            ):
                calls_since += 1
            elif obj.get("type") == "event_msg" and payload.get("type") == "token_count":
                last = (payload.get("info") or {}).get("last_token_usage") or {}
                if calls_since and last:
                    expected[0] += last["input_tokens"]
                    expected[1] += last["output_tokens"]
                    expected[2] += last["cached_input_tokens"]
                calls_since = 0
    spend = analyze(capsys, *map(str, rollouts))["summary"]["spend"]
    assert expected[0] > 0
    assert [spend["input_tokens"], spend["output_tokens"], spend["cached_tokens"]] == expected
    assert spend["cost"] is None and spend["runs"]["tokens_only"] > 0


def test_claude_code_sessions_spend_each_responses_usage_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Claude Code writes a response's usage on each of its lines: counted once per response."""
    sessions = sorted((CODING / "claude-code" / "transcripts").rglob("*.jsonl"))
    prompt = output = 0
    for path in sessions:
        seen: set[str] = set()  # response ids are unique within a session file
        for line in path.read_text().splitlines():
            obj = json.loads(line)
            message = obj.get("message") if obj.get("type") == "assistant" else None
            if not isinstance(message, dict) or message.get("id") in seen:
                continue
            content = message.get("content")
            if not (
                isinstance(content, list)
                and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
            ):
                continue
            usage = message["usage"]
            seen.add(message["id"])
            prompt += sum(
                usage.get(key, 0)
                for key in (
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                )
            )
            output += usage["output_tokens"]
    spend = analyze(capsys, *map(str, sessions))["summary"]["spend"]
    assert prompt > 0
    assert (spend["input_tokens"], spend["output_tokens"]) == (prompt, output)

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

from loopwarden.analyze._prices import LIST_PRICES, TABLE_DATE
from loopwarden.analyze.spend import Price, parse_price, price_for, price_list
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


def openclaw_cached(path: Path) -> int:
    """Prompt-cache reads of the OpenClaw responses that made tool calls."""
    cached = 0
    for line in path.read_text().splitlines():
        message = json.loads(line).get("message") or {}
        content = message.get("content")
        calls = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "assistant" and any(b.get("type") == "toolCall" for b in calls):
            cached += message["usage"]["cacheRead"]
    return cached


def openclaw_model(path: Path) -> str:
    models = [
        json.loads(line).get("message", {}).get("model") for line in path.read_text().splitlines()
    ]
    return next(model for model in models if model)


def list_price(prompt: int, cached: int, output: int, price: tuple[float, ...]) -> float:
    """What tokens cost at (input, output, cached input) US dollars per million tokens."""
    return ((prompt - cached) * price[0] + cached * price[2] + output * price[1]) / 1e6


def test_token_only_runs_are_priced_from_the_table_unless_a_price_is_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    prompt, output = openclaw_prompt_and_output(OPENCLAW)
    cached, model = openclaw_cached(OPENCLAW), openclaw_model(OPENCLAW)
    assert prompt > 0 and output > 0 and cached > 0

    unpriced = analyze(capsys, str(OPENCLAW), "--no-price-table")
    [run] = unpriced["trajectories"]
    assert (run["spend"]["input_tokens"], run["spend"]["output_tokens"]) == (prompt, output)
    assert run["spend"]["cached_tokens"] == cached and run["spend"]["model"] == model
    # The session records cost 0 for a model it has no price for: unknown, not free.
    assert run["spend"]["cost"] is None and run["spend"]["cost_source"] is None
    assert run["spend"]["price"] is None
    assert unpriced["summary"]["spend"]["runs"]["tokens_only"] == 1

    # The built-in table lists the session's model: its list price, cache reads at theirs.
    table = analyze(capsys, str(OPENCLAW))
    [run] = table["trajectories"]
    listed = LIST_PRICES[model]
    assert run["spend"]["cost"] == pytest.approx(list_price(prompt, cached, output, listed))
    assert run["spend"]["cost_source"] == "table"
    assert run["spend"]["price"] == {
        "model": model,
        "input": listed[0],
        "output": listed[1],
        "cached": listed[2],
    }
    assert table["summary"]["spend"]["runs"]["table"] == 1
    assert table["summary"]["spend"]["price_table"]["date"] == TABLE_DATE

    # A * price does not override the table's entry; a price naming the model does.
    starred = analyze(capsys, str(OPENCLAW), "--price", "*=1,1")
    assert starred["trajectories"][0]["spend"]["cost_source"] == "table"
    named = analyze(capsys, str(OPENCLAW), "--price", f"{model}=3,15")
    [run] = named["trajectories"]
    assert run["spend"]["cost"] == pytest.approx((prompt * 3 + output * 15) / 1e6, abs=1e-6)
    assert run["spend"]["cost_source"] == "price"
    assert named["summary"]["spend"]["runs"]["price"] == 1
    assert named["summary"]["spend"]["price_table"] is None
    cached_price = analyze(capsys, str(OPENCLAW), "--price", f"{model}=3,15,0.3")
    [run] = cached_price["trajectories"]
    assert run["spend"]["cost"] == pytest.approx(list_price(prompt, cached, output, (3, 15, 0.3)))

    recorded = analyze(capsys, str(SWE[1]), "--price", "gpt-4o=1000,1000")
    assert recorded["trajectories"][0]["spend"]["cost_source"] == "recorded"  # never overridden


def test_a_model_is_priced_under_its_plain_name() -> None:
    prices = price_list([("my-model", Price(1, 2))])
    assert price_for("claude-sonnet-4-5-20250929", prices) == (
        "claude-sonnet-4-5",
        prices["claude-sonnet-4-5"],
    )
    assert price_for("openai/gpt-4o-2024-08-06", prices) == ("gpt-4o", prices["gpt-4o"])
    assert price_for("proxy/my-model", prices) == ("my-model", Price(1, 2))
    assert price_for("minimax-m2.7", prices) is None  # not listed: unpriced, not guessed
    assert price_for("claude-sonnet-4-5", price_list([], table=False)) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("gpt-4o", "no MODEL= part"),
        ("gpt-4o=2.5", "two prices"),
        ("gpt-4o=1,2,3,4", "two prices"),
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
    docs = [json.loads(p.read_text()) for p in MINI]
    total = sum(doc["info"]["model_stats"]["instance_cost"] for doc in docs)
    assert main(["analyze", *map(str, MINI), str(OPENCLAW), *TIGHT, "--no-price-table"]) == 1
    text = capsys.readouterr().out
    assert f"Spend: ${total:,.2f} over {len(MINI)} runs ({len(MINI)} recorded);" in text
    model = docs[0]["info"]["config"]["model"]["model_name"]
    assert f"Per model: {model} ${total:,.2f} (after: $" in text
    issued = sum(u["cost"] for p in MINI for made, u in mini_responses(p) if made)
    assert f"Per tool: bash ${issued:,.2f} (after: $" in text
    assert "Per detector: " in text
    # The run left unpriced is named, with how to price it.
    session = json.loads(OPENCLAW.read_text().splitlines()[0])["id"]
    assert f"1 run records tokens but no money and no price ({session}): --price" in text
    for path, doc in zip(MINI, docs, strict=True):  # each loop says what its run spent
        cost = doc["info"]["model_stats"]["instance_cost"]
        assert f"spent ${cost:,.2f} (recorded); $" in text, path.name


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
    spend = analyze(capsys, *map(str, rollouts), "--no-price-table")["summary"]["spend"]
    assert expected[0] > 0
    assert [spend["input_tokens"], spend["output_tokens"], spend["cached_tokens"]] == expected
    assert spend["cost"] is None and spend["runs"]["tokens_only"] > 0
    # Priced from the table at the model each rollout's turn_context names.
    models = {
        json.loads(line)["payload"]["model"]
        for path in rollouts
        for line in path.read_text().splitlines()
        if json.loads(line).get("type") == "turn_context"
    }
    [model] = models
    priced = analyze(capsys, *map(str, rollouts))["summary"]["spend"]
    assert priced["runs"]["table"] == priced["per_model"][model]["runs"] > 0
    prompt, output, cached = expected
    assert priced["cost"] == pytest.approx(
        list_price(prompt, cached, output, LIST_PRICES[model]), abs=1e-5
    )


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


def gemini_responses(path: Path) -> list[dict[str, Any]]:
    """The ``gemini`` messages of a Gemini CLI session that made tool calls, each as last
    written (the CLI re-appends a message whenever it changes)."""
    last: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini":
            last[record["id"]] = record
    return [message for message in last.values() if message.get("toolCalls")]


def test_gemini_cli_sessions_spend_each_responses_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real Gemini CLI session files: each model response records its ``tokens``."""
    sessions = sorted((CODING / "gemini-cli" / "chats").glob("*.jsonl"))
    prompt = output = cached = 0
    models = set()
    for path in sessions:
        for message in gemini_responses(path):
            tokens = message["tokens"]
            prompt += tokens["input"] + tokens["tool"]
            output += tokens["output"] + tokens["thoughts"]  # thinking is billed as output
            cached += tokens["cached"]
            models.add(message["model"])
    report = analyze(capsys, *map(str, sessions), "--no-price-table")
    spend = report["summary"]["spend"]
    assert prompt > 0
    assert (spend["input_tokens"], spend["output_tokens"], spend["cached_tokens"]) == (
        prompt,
        output,
        cached,
    )
    [model] = models
    assert {run["spend"]["model"] for run in report["trajectories"]} == {model}
    assert spend["runs"]["tokens_only"] == len(report["trajectories"])
    priced = analyze(capsys, *map(str, sessions))["summary"]["spend"]
    assert priced["cost"] == pytest.approx(
        list_price(prompt, cached, output, LIST_PRICES[model]), abs=1e-6
    )


def anthropic_messages(session: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A real Claude Code session as the Anthropic Messages API had it: the user messages and
    the API's own response objects (Claude Code writes one line per content block of a
    response, each with the whole response's usage: they are joined back by id)."""
    messages: list[dict[str, Any]] = []
    responses: dict[str, dict[str, Any]] = {}
    for line in session.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("type") == "user":
            messages.append({"role": "user", "content": obj["message"]["content"]})
        elif obj.get("type") == "assistant":
            message = obj["message"]
            if message["id"] in responses:
                responses[message["id"]]["content"] += message["content"]
            else:
                responses[message["id"]] = dict(message, content=list(message["content"]))
                messages.append(responses[message["id"]])
    return messages, list(responses.values())


def test_anthropic_response_objects_spend_their_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    session = next((CODING / "claude-code" / "transcripts" / "failing-loop").rglob("*.jsonl"))
    messages, responses = anthropic_messages(session)
    made_calls = [
        r for r in responses if any(block["type"] == "tool_use" for block in r["content"])
    ]
    assert made_calls and all(r["type"] == "message" and "usage" in r for r in made_calls)
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    prompt = sum(r["usage"].get(key, 0) for r in made_calls for key in keys)
    output = sum(r["usage"]["output_tokens"] for r in made_calls)
    cached = sum(r["usage"].get("cache_read_input_tokens", 0) for r in made_calls)

    as_list = tmp_path / "conversation.json"
    as_list.write_text(json.dumps(messages))
    as_lines = tmp_path / "responses.jsonl"  # one message per line
    as_lines.write_text("".join(json.dumps(m) + "\n" for m in messages))
    report = analyze(capsys, str(as_list), str(as_lines), "--format", "anthropic")
    assert len(report["trajectories"]) == 2
    for run in report["trajectories"]:
        spend = run["spend"]
        assert (spend["input_tokens"], spend["output_tokens"], spend["cached_tokens"]) == (
            prompt,
            output,
            cached,
        )
        assert spend["model"] == made_calls[0]["model"]

    # A request body names its model; messages without usage record no spend.
    body = tmp_path / "request.json"
    bare = [{k: v for k, v in m.items() if k in ("role", "content")} for m in messages]
    body.write_text(json.dumps({"model": "claude-sonnet-4-5", "messages": bare}))
    [run] = analyze(capsys, str(body), "--format", "anthropic")["trajectories"]
    assert run["spend"] is None and run["calls"] == len(made_calls)


def test_each_runs_strip_shows_its_spend_and_the_part_after_the_first_block(
    tmp_path: Path,
) -> None:
    page = tmp_path / "report.html"
    assert main(["analyze", *map(str, MINI), str(OPENCLAW), *TIGHT, "--out", str(page)]) == 1
    html = page.read_text()
    costs = [json.loads(p.read_text())["info"]["model_stats"]["instance_cost"] for p in MINI]
    for path, cost in zip(MINI, costs, strict=True):
        start = html.index(f"data-id='{json.loads(path.read_text())['instance_id']}'")
        section = html[start : html.index("</section>", start)]
        bar = re.search(
            r"<svg class='runspend'.*?<title>([^<]*)</title><rect width='([\d.]+)'", section
        )
        assert bar is not None, path.name
        assert bar.group(1).startswith(f"${cost:,.2f} spent, $")
        # Scaled to the costliest run of the page (a mini-swe-agent one here).
        assert float(bar.group(2)) == pytest.approx(120 * cost / max(costs), abs=0.1)
    assert "<table id='spend-by-tool'>" in html and "<table id='spend-by-detector'>" in html
    assert "table price of claude-sonnet-4-5" in html  # the OpenClaw run: how it was priced


def test_openhands_runs_spend_their_last_accumulated_stats(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A real OpenHands SDK event log: ``stats`` updates accumulate over the run, per LLM."""
    path = SAMPLES / "openhands-sdk__goal-fixture-events.jsonl"
    last = None
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("key") == "stats":
            last = event["value"]["usage_to_metrics"]
    assert last is not None
    usages = [metrics["accumulated_token_usage"] for metrics in last.values()]
    [run] = analyze(capsys, str(path))["trajectories"]
    spend = run["spend"]
    assert (spend["input_tokens"], spend["output_tokens"], spend["cached_tokens"]) == (
        sum(u["prompt_tokens"] for u in usages),
        sum(u["completion_tokens"] for u in usages),
        sum(u["cache_read_tokens"] for u in usages),
    )
    assert spend["model"] == next(iter(last.values()))["model_name"]
    # LiteLLM accumulates 0 for a model it has no price for: unknown, not free; and the table
    # does not list this model, so the run stays unpriced.
    assert {m["accumulated_cost"] for m in last.values()} == {0.0}
    assert spend["cost"] is None and spend["cost_source"] is None

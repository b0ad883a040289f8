"""What runs spent, in tokens and money, and what they spent after the guard's first block or stop.

Figures come from the transcripts (docs/transcript-formats.md says which formats record what):
per model response where recorded (mini-swe-agent, OpenClaw, Claude Code, Codex, Gemini CLI,
Anthropic responses), else the run's total (SWE-agent's ``model_stats``, OpenHands'
accumulated cost). Money a transcript does not record is priced from prices the user gives
(``--price MODEL=IN,OUT[,CACHED]``, US dollars per million tokens), else from the built-in
table of list prices (``_prices.py``) when it lists the run's model; nothing else is guessed,
and each run says how its money was found (``cost_source``: ``"recorded"``, ``"price"``,
``"table"``, or None when it stays unknown).

What a run spent after its first block or stop is the sum over the responses that issued the
later calls when they are recorded one by one (``after_basis: "responses"``); with only a run
total it is the total's share of the calls that came after (``"share_of_calls"``), an estimate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopwarden.analyze._prices import LIST_PRICES, TABLE_DATE, TABLE_SOURCE
from loopwarden.transcripts.model import ToolCall, Trajectory, Usage


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens: prompt tokens, output tokens, and prompt tokens read from
    a prompt cache (None: as other prompt tokens); ``source`` is ``"price"`` (``--price``) or
    ``"table"`` (the built-in table)."""

    input: float
    output: float
    cached: float | None = None
    source: str = "price"

    def to_json(self, name: str) -> dict[str, Any]:
        """``{model, input, output, cached}``: the price a run was priced at, and its name."""
        return {"model": name, "input": self.input, "output": self.output, "cached": self.cached}


Prices = Mapping[str, Price]
"""Model name (or ``*``: any model the other names miss) → its price."""

TABLE_INFO = {"date": TABLE_DATE, "source": TABLE_SOURCE}
"""What the built-in table is: when it was written and from what (the JSON report says it)."""


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=IN,OUT[,CACHED]`` (US dollars per million input, output and cached input tokens)
    → (model, price)."""
    model, sep, numbers = text.partition("=")
    parts = numbers.split(",")
    problem = None
    if not sep or not model.strip():
        problem = "it has no MODEL= part"
    elif len(parts) not in (2, 3):
        problem = (
            "it needs two prices, input then output (and optionally a third, cached input), "
            "separated by commas"
        )
    else:
        try:
            values = [float(part) for part in parts]
        except ValueError:
            problem = "a price is not a number"
        else:
            if all(math.isfinite(v) and v >= 0 for v in values):
                cached = values[2] if len(values) == 3 else None
                return model.strip(), Price(values[0], values[1], cached)
            problem = "a price is negative or not finite"
    raise ValueError(
        f"--price {text!r}: {problem}; write MODEL=IN,OUT in US dollars per million tokens, "
        "for example --price my-model=3,15 (MODEL * prices every model; a third number, "
        "MODEL=IN,OUT,CACHED, prices prompt tokens read from a cache)"
    )


def price_list(given: Iterable[tuple[str, Price]], *, table: bool = True) -> dict[str, Price]:
    """The prices to use: the built-in table (unless ``table`` is False) overridden by ``given``
    (``--price``), whose ``*`` applies only to models neither names."""
    prices: dict[str, Price] = {}
    if table:
        for name, (inp, out, cached) in LIST_PRICES.items():
            prices[name] = Price(inp, out, cached, "table")
    prices.update(given)
    return prices


# A dated snapshot name: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06.
_SNAPSHOT = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def _names(model: str) -> list[str]:
    """The names ``model`` is looked up by: as written, without a provider prefix
    (``google/gemini-3-pro-preview``), without a snapshot date."""
    base = model.rsplit("/", 1)[-1]
    return list(dict.fromkeys((model, base, _SNAPSHOT.sub("", base))))


def price_for(model: str | None, prices: Prices) -> tuple[str, Price] | None:
    """The price of ``model`` and the name it was found under (a name of ``model``, else
    ``*``); None when ``prices`` has none for it."""
    for name in _names(model) if model is not None else ():
        if name in prices:
            return name, prices[name]
    return ("*", prices["*"]) if "*" in prices else None


@dataclass(slots=True)
class Spend:
    """Tokens and money, each None when not known."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cost: float | None = None

    def add(self, usage: Usage | Spend, share: float = 1.0) -> None:
        """Add ``usage`` (scaled by ``share``, for an estimated part of a run's total)."""
        self.input_tokens = _plus(self.input_tokens, _scaled(usage.input_tokens, share))
        self.output_tokens = _plus(self.output_tokens, _scaled(usage.output_tokens, share))
        self.cached_tokens = _plus(self.cached_tokens, _scaled(usage.cached_tokens, share))
        self.cost = _plus(self.cost, None if usage.cost is None else usage.cost * share)

    def priced(self, price: Price | None) -> Spend:
        """This spend with its money from ``price`` when the transcript did not record it.

        Cached prompt tokens are priced at ``price.cached`` where both are known.
        """
        if self.cost is not None or price is None:
            return self
        if self.input_tokens is None and self.output_tokens is None:
            return self
        prompt, cached = self.input_tokens or 0, 0
        if price.cached is not None and self.cached_tokens:
            cached = min(self.cached_tokens, prompt)
        cost = (
            (prompt - cached) * price.input
            + cached * (price.cached or 0.0)
            + (self.output_tokens or 0) * price.output
        ) / 1e6
        return Spend(self.input_tokens, self.output_tokens, self.cached_tokens, cost)

    def to_json(self) -> dict[str, Any]:
        """``{input_tokens, output_tokens, cached_tokens, cost}`` (cost rounded to 1e-6 USD)."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost": None if self.cost is None else round(self.cost, 6),
        }


def _scaled(value: int | None, share: float) -> int | None:
    return None if value is None else round(value * share)


def _plus(total: Any, value: Any) -> Any:
    if value is None:
        return total
    return value if total is None else total + value


@dataclass(slots=True)
class RunSpend:
    """What one run spent, and after the guard's first block or stop."""

    model: str | None
    total: Spend
    after: Spend | None  # None: the guard neither blocked nor stopped
    cost_source: str | None  # "recorded", "price" (--price), "table", or None: money unknown
    after_basis: str | None  # "responses" or "share_of_calls"; None without a block or stop
    # By the tool each response called (its first call's tool): in all, and after.
    per_tool: dict[str, Spend] = field(default_factory=dict)
    per_tool_after: dict[str, Spend] = field(default_factory=dict)
    price: tuple[str, Price] | None = None  # the price it was priced at, and its name

    def to_json(self) -> dict[str, Any]:
        """The trajectory's ``spend`` object (docs/analyze-json.md)."""
        return {
            "model": self.model,
            **self.total.to_json(),
            "cost_source": self.cost_source,
            "price": None if self.price is None else self.price[1].to_json(self.price[0]),
            "after_first_block_or_stop": None if self.after is None else self.after.to_json(),
            "after_basis": self.after_basis,
        }


def run_spend(trajectory: Trajectory, first: int | None) -> RunSpend | None:
    """What ``trajectory`` spent as recorded; ``first`` is the index of its first block or stop.

    None when the transcript records neither tokens nor money.
    """
    calls = trajectory.calls
    if trajectory.usage is None and all(call.usage is None for call in calls):
        return None
    total = Spend()
    if trajectory.usage is not None:
        total.add(trajectory.usage)
    else:
        for call in calls:
            if call.usage is not None:
                total.add(call.usage)
    after, basis = _after(calls, first, trajectory.usage)
    source = "recorded" if total.cost is not None else None
    spend = RunSpend(trajectory.model, total, after, source, basis)
    for index, call in enumerate(calls):
        if call.usage is not None:
            spend.per_tool.setdefault(call.tool, Spend()).add(call.usage)
            if first is not None and index > first:
                spend.per_tool_after.setdefault(call.tool, Spend()).add(call.usage)
    return spend


def priced(spend: RunSpend | None, prices: Prices) -> RunSpend | None:
    """``spend`` with its unrecorded money priced from ``prices`` (when they have its model)."""
    if spend is None or spend.cost_source == "recorded" or not prices:
        return spend
    found = price_for(spend.model, prices)
    if found is None:
        return spend
    price = found[1]
    total = spend.total.priced(price)
    if total.cost is None:
        return spend
    return RunSpend(
        spend.model,
        total,
        None if spend.after is None else spend.after.priced(price),
        price.source,
        spend.after_basis,
        {tool: part.priced(price) for tool, part in spend.per_tool.items()},
        {tool: part.priced(price) for tool, part in spend.per_tool_after.items()},
        found,
    )


def _after(
    calls: Sequence[ToolCall], first: int | None, run: Usage | None
) -> tuple[Spend | None, str | None]:
    if first is None:
        return None, None
    later = calls[first + 1 :]
    after = Spend()
    if any(call.usage is not None for call in calls):
        if not later:  # nothing came after: nothing more was spent
            return Spend(0, 0, 0, 0.0), "responses"
        for call in later:
            if call.usage is not None:
                after.add(call.usage)
        return after, "responses"
    if run is None or not calls:
        return after, None
    after.add(run, len(later) / len(calls))
    return after, "share_of_calls"


def _pair() -> dict[str, Any]:
    return {"runs": 0, "spend": Spend(), "after": Spend()}


@dataclass(slots=True)
class SpendTotals:
    """Spend summed over the runs of one report: in all, per model, per tool, per detector."""

    total: Spend = field(default_factory=Spend)
    after: Spend = field(default_factory=Spend)
    runs: dict[str, int] = field(
        default_factory=lambda: {"recorded": 0, "price": 0, "table": 0, "tokens_only": 0, "none": 0}
    )
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_tool: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_detector: dict[str, dict[str, Any]] = field(default_factory=dict)
    unpriced: list[str] = field(default_factory=list)  # runs with tokens and no money: ids

    def add(self, spend: RunSpend | None, detector: str | None, run: str = "") -> None:
        """Count one run (``detector``: the one behind its first block or stop; ``run``: its
        id, for the runs left unpriced)."""
        if spend is None:
            self.runs["none"] += 1
            return
        self.runs[spend.cost_source or "tokens_only"] += 1
        if spend.cost_source is None:
            self.unpriced.append(run)
        self.total.add(spend.total)
        model = self.per_model.setdefault(spend.model or "unknown", _pair())
        model["runs"] += 1
        model["spend"].add(spend.total)
        if spend.after is not None:
            self.after.add(spend.after)
            model["after"].add(spend.after)
            if detector is not None:
                entry = self.per_detector.setdefault(detector, _pair())
                entry["runs"] += 1
                entry["spend"].add(spend.total)
                entry["after"].add(spend.after)
        for tool, part in spend.per_tool.items():
            entry = self.per_tool.setdefault(tool, _pair())
            entry["runs"] += 1
            entry["spend"].add(part)
            entry["after"].add(spend.per_tool_after.get(tool, Spend(0, 0, 0, 0.0)))

    def to_json(self) -> dict[str, Any]:
        """The summary's ``spend`` object (docs/analyze-json.md)."""
        return {
            **self.total.to_json(),
            "after_first_block_or_stop": self.after.to_json(),
            "runs": dict(self.runs),
            "price_table": TABLE_INFO if self.runs["table"] else None,
            "per_model": _entries(self.per_model),
            "per_tool": _entries(self.per_tool),
            "per_detector": _entries(self.per_detector),
        }


def _entries(table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        name: {
            "runs": entry["runs"],
            **entry["spend"].to_json(),
            "after_first_block_or_stop": entry["after"].to_json(),
        }
        for name, entry in sorted(table.items())
    }


def usd(value: float | None) -> str:
    """Money as the reports show it: ``$1,234.56``, under a cent ``$0.0036``, or ``unknown``."""
    if value is None:
        return "unknown"
    return f"${value:.4f}" if 0 < value < 0.01 else f"${value:,.2f}"


_HOW = {"recorded": "recorded", "price": "priced from --price", "table": "priced from the table"}
MAX_NAMED = 10  # unpriced runs named in the text report


def how_priced(spend: RunSpend) -> str:
    """How a run's money was found: "recorded", "--price for gpt-4o", "table price of
    gemini-2.5-flash", "unpriced"."""
    if spend.cost_source is None or spend.price is None:
        return "recorded" if spend.cost_source == "recorded" else "unpriced"
    name = spend.price[0]
    if spend.cost_source == "table":
        return f"table price of {name}"
    return "--price *" if name == "*" else f"--price for {name}"


def run_line(spend: RunSpend | None) -> str:
    """One run's spend in words (the text report's loop entries)."""
    if spend is None:
        return ""
    if spend.total.cost is None:
        tokens = (spend.total.input_tokens or 0) + (spend.total.output_tokens or 0)
        return f"spent {tokens:,} tokens, no money recorded (--price MODEL=IN,OUT prices them)"
    line = f"spent {usd(spend.total.cost)} ({how_priced(spend)})"
    if spend.after is not None:
        estimate = ", estimated" if spend.after_basis == "share_of_calls" else ""
        line += f"; {usd(spend.after.cost or 0.0)} after the first block or stop{estimate}"
    return line


def spend_lines(totals: SpendTotals) -> list[str]:
    """The text report's lines about money: in all, after the first block or stop, per model,
    per tool and per detector; how the runs were priced; the runs left unpriced."""
    runs = totals.runs
    costed = runs["recorded"] + runs["price"] + runs["table"]
    lines = []
    if costed:
        kinds = [
            f"{runs[kind]} {_HOW[kind]}" for kind in ("recorded", "price", "table") if runs[kind]
        ]
        lines.append(
            f"Spend: {usd(totals.total.cost)} over {costed} run{'s' * (costed != 1)} "
            f"({', '.join(kinds)}); after the guard's first block or stop: "
            f"{usd(totals.after.cost or 0.0)}."
        )
        for title, table in (
            ("Per model", totals.per_model),
            ("Per tool", totals.per_tool),
            ("Per detector", totals.per_detector),
        ):
            parts = [
                f"{name} {usd(entry['spend'].cost)} (after: {usd(entry['after'].cost or 0.0)})"
                for name, entry in sorted(table.items())
                if entry["spend"].cost is not None
            ]
            if parts:
                lines.append(f"{title}: " + "; ".join(parts) + ".")
        if runs["table"]:
            lines.append(f"Table prices: {TABLE_SOURCE}; --price overrides them.")
    if runs["tokens_only"]:
        named = ", ".join(totals.unpriced[:MAX_NAMED])
        more = len(totals.unpriced) - MAX_NAMED
        lines.append(
            f"{runs['tokens_only']} "
            f"{'run records' if runs['tokens_only'] == 1 else 'runs record'} tokens but no "
            f"money and no price ({named}{f' and {more} more' if more > 0 else ''}): "
            "--price MODEL=IN,OUT (US dollars per million tokens) prices them."
        )
    return lines

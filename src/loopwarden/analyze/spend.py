"""What runs spent, in tokens and money, and what they spent after the guard's first block or stop.

Figures come from the transcripts (docs/transcript-formats.md says which formats record what):
per model response where recorded (mini-swe-agent, OpenClaw, Claude Code), else the run's total
(SWE-agent's ``model_stats``, OpenHands' accumulated cost). Money a transcript does not record
is priced only from prices the user gives (``--price MODEL=IN,OUT``, US dollars per million
tokens): nothing is guessed, and each run says how its money was found (``cost_source``).

What a run spent after its first block or stop is the sum over the responses that issued the
later calls when they are recorded one by one (``after_basis: "responses"``); with only a run
total it is the total's share of the calls that came after (``"share_of_calls"``), an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loopwarden.transcripts.model import ToolCall, Trajectory, Usage


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens: prompt tokens (cached ones too) and output tokens."""

    input: float
    output: float


Prices = Mapping[str, Price]
"""Model name (or ``*``: any model) → its price."""


def parse_price(text: str) -> tuple[str, Price]:
    """``MODEL=IN,OUT`` (US dollars per million input and output tokens) → (model, price)."""
    model, sep, numbers = text.partition("=")
    parts = numbers.split(",")
    problem = None
    if not sep or not model.strip():
        problem = "it has no MODEL= part"
    elif len(parts) != 2:
        problem = "it needs two prices, input then output, separated by a comma"
    else:
        try:
            values = [float(part) for part in parts]
        except ValueError:
            problem = "a price is not a number"
        else:
            if all(math.isfinite(v) and v >= 0 for v in values):
                return model.strip(), Price(values[0], values[1])
            problem = "a price is negative or not finite"
    raise ValueError(
        f"--price {text!r}: {problem}; write MODEL=IN,OUT in US dollars per million tokens, "
        "for example --price my-model=3,15 (MODEL * prices every model)"
    )


def price_for(model: str | None, prices: Prices) -> Price | None:
    """The price of ``model``: its name, its name without a provider prefix, else ``*``."""
    if model is not None:
        for name in (model, model.rsplit("/", 1)[-1]):
            if name in prices:
                return prices[name]
    return prices.get("*")


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
        """This spend with its money from ``price`` when the transcript did not record it."""
        if self.cost is not None or price is None:
            return self
        if self.input_tokens is None and self.output_tokens is None:
            return self
        cost = (
            (self.input_tokens or 0) * price.input + (self.output_tokens or 0) * price.output
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
    cost_source: str | None  # "recorded", "price" (from --price), or None: money unknown
    after_basis: str | None  # "responses" or "share_of_calls"; None without a block or stop
    per_tool: dict[str, Spend] = field(default_factory=dict)  # by the tool each response called

    def to_json(self) -> dict[str, Any]:
        """The trajectory's ``spend`` object (docs/analyze-json.md)."""
        return {
            "model": self.model,
            **self.total.to_json(),
            "cost_source": self.cost_source,
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
    for call in calls:
        if call.usage is not None:
            spend.per_tool.setdefault(call.tool, Spend()).add(call.usage)
    return spend


def priced(spend: RunSpend | None, prices: Prices) -> RunSpend | None:
    """``spend`` with its unrecorded money priced from ``prices`` (when they name its model)."""
    if spend is None or spend.cost_source == "recorded" or not prices:
        return spend
    price = price_for(spend.model, prices)
    if price is None:
        return spend
    total = spend.total.priced(price)
    return RunSpend(
        spend.model,
        total,
        None if spend.after is None else spend.after.priced(price),
        "price" if total.cost is not None else None,
        spend.after_basis,
        {tool: part.priced(price) for tool, part in spend.per_tool.items()},
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


@dataclass(slots=True)
class SpendTotals:
    """Spend summed over the runs of one report: in all, per model, per tool, per detector."""

    total: Spend = field(default_factory=Spend)
    after: Spend = field(default_factory=Spend)
    runs: dict[str, int] = field(
        default_factory=lambda: {"recorded": 0, "price": 0, "tokens_only": 0, "none": 0}
    )
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    per_tool: dict[str, Spend] = field(default_factory=dict)
    per_detector: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, spend: RunSpend | None, detector: str | None) -> None:
        """Count one run (``detector``: the one behind its first block or stop)."""
        if spend is None:
            self.runs["none"] += 1
            return
        self.runs[spend.cost_source or "tokens_only"] += 1
        self.total.add(spend.total)
        model = self.per_model.setdefault(
            spend.model or "unknown", {"runs": 0, "spend": Spend(), "after": Spend()}
        )
        model["runs"] += 1
        model["spend"].add(spend.total)
        if spend.after is not None:
            self.after.add(spend.after)
            model["after"].add(spend.after)
            if detector is not None:
                entry = self.per_detector.setdefault(detector, {"runs": 0, "after": Spend()})
                entry["runs"] += 1
                entry["after"].add(spend.after)
        for tool, part in spend.per_tool.items():
            self.per_tool.setdefault(tool, Spend()).add(part)

    def to_json(self) -> dict[str, Any]:
        """The summary's ``spend`` object (docs/analyze-json.md)."""
        return {
            **self.total.to_json(),
            "after_first_block_or_stop": self.after.to_json(),
            "runs": dict(self.runs),
            "per_model": {
                name: {
                    "runs": entry["runs"],
                    **entry["spend"].to_json(),
                    "after_first_block_or_stop": entry["after"].to_json(),
                }
                for name, entry in sorted(self.per_model.items())
            },
            "per_tool": {name: s.to_json() for name, s in sorted(self.per_tool.items())},
            "per_detector": {
                name: {"runs": entry["runs"], "after_first_block_or_stop": entry["after"].to_json()}
                for name, entry in sorted(self.per_detector.items())
            },
        }


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:,.2f}"


def spend_lines(totals: SpendTotals) -> list[str]:
    """The text report's lines about money: in all, after the first block or stop, per model."""
    runs = totals.runs
    costed = runs["recorded"] + runs["price"]
    lines = []
    if costed:
        how = (
            f" ({runs['recorded']} as recorded, {runs['price']} priced from --price)"
            if runs["price"]
            else ""
        )
        lines.append(
            f"Spend: {_usd(totals.total.cost)} over {costed} run{'s' * (costed != 1)}{how}; "
            f"after the guard's first block or stop: {_usd(totals.after.cost or 0.0)}."
        )
        models = [
            f"{name} {_usd(entry['spend'].cost)} (after: {_usd(entry['after'].cost or 0.0)})"
            for name, entry in sorted(totals.per_model.items())
            if entry["spend"].cost is not None
        ]
        lines.append("Per model: " + "; ".join(models) + ".")
    if runs["tokens_only"]:
        lines.append(
            f"{runs['tokens_only']} "
            f"{'run records' if runs['tokens_only'] == 1 else 'runs record'} tokens but no "
            "money: --price MODEL=IN,OUT (US dollars per million tokens) prices them."
        )
    return lines

"""The built-in price table: list prices of the models the shipped transcripts name.

It prices runs whose transcripts record tokens but no money, when ``--price`` does not name
their model; ``--price MODEL=IN,OUT[,CACHED]`` overrides an entry, ``--no-price-table`` turns it
off. Every run priced from it says so (``cost_source: "table"``): prices change, and a figure
from this table is the list price of the day below, not what anyone was billed.

Source: the vendors' published pay-as-you-go API list prices (Anthropic
docs.anthropic.com/en/docs/about-claude/pricing, Google ai.google.dev/gemini-api/docs/pricing,
OpenAI platform.openai.com/docs/pricing), standard tier, text, prompts up to 200K tokens, no
batch discount. US dollars per million tokens: input, output, and input read from the prompt
cache. Anthropic's cache writes cost more than input (1.25x for 5 minutes); they are priced as
input here.
"""

from __future__ import annotations

TABLE_DATE = "2026-12-02"
"""When the table was written (prices as published then)."""

TABLE_SOURCE = (
    "vendors' published API list prices (Anthropic, Google, OpenAI), standard tier, "
    f"prompts up to 200K tokens, as of {TABLE_DATE}"
)

LIST_PRICES: dict[str, tuple[float, float, float]] = {
    # model: (input, output, cached input), US dollars per million tokens
    "claude-sonnet-4-5": (3.0, 15.0, 0.30),
    "claude-sonnet-4": (3.0, 15.0, 0.30),
    "claude-haiku-4-5": (1.0, 5.0, 0.10),
    "claude-opus-4-8": (5.0, 25.0, 0.50),
    "claude-opus-4-5": (5.0, 25.0, 0.50),
    "claude-opus-4-1": (15.0, 75.0, 1.50),
    "gemini-3-pro-preview": (2.0, 12.0, 0.20),
    "gemini-2.5-pro": (1.25, 10.0, 0.125),
    "gemini-2.5-flash": (0.30, 2.50, 0.03),
    "gpt-4o": (2.50, 10.0, 1.25),
    "gpt-4o-mini": (0.15, 0.60, 0.075),
    "gpt-5": (1.25, 10.0, 0.125),
    "gpt-5-codex": (1.25, 10.0, 0.125),
    "gpt-5.1-codex": (1.25, 10.0, 0.125),
}
"""The models of the shipped samples, development corpus and coding-CLI captures (and close
relatives); a model not listed stays unpriced unless ``--price`` names it."""

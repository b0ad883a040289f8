"""``--output json`` and ``--output jsonl``: the machine-readable report (a stable contract).

json: ``{"schema", "loopwarden", "config", "trajectories": [...], "summary", "notices",
"errors", "warnings", "skipped"}``. jsonl: one trajectory object per line, then one line holding
``summary`` (with ``schema``, ``loopwarden``, ``config``, ``notices``, ``errors``, ``warnings``
and ``skipped``). Every
field is described in docs/analyze-json.md, and docs/analyze-report.schema.json checks them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from loopwarden import __version__
from loopwarden._terminal import json_printable
from loopwarden.analyze.replay import TrajectoryReport
from loopwarden.analyze.runner import Analysis
from loopwarden.analyze.sweep import Variant, sweep_row

SCHEMA = 4
"""The version of the report's shape: 2 named blocks and stops apart and counted calls from 1;
3 added what runs spent (``spend``); 4 prices runs from the built-in table (``cost_source:
"table"``, the ``price`` each run was priced at) and gives spend per tool and per detector as
per model."""


def _dumps(value: Any, *, indent: int | None = None) -> str:
    """JSON as UTF-8 text, with the control characters JSON leaves raw escaped (a terminal may
    show the report: a name in a transcript must not be able to drive it)."""
    return json_printable(json.dumps(value, indent=indent, ensure_ascii=False))


def _tail(analysis: Analysis, notices: Sequence[str]) -> dict[str, Any]:
    return {
        "notices": list(notices),
        "errors": list(analysis.errors),
        "warnings": list(analysis.warnings),
        "skipped": list(analysis.skipped),
    }


def document(analysis: Analysis, notices: Sequence[str]) -> dict[str, Any]:
    """The whole ``--output json`` document for a single-config analysis."""
    reports = analysis.reports[0]
    return {
        "schema": SCHEMA,
        "loopwarden": __version__,
        "config": analysis.configs[0].to_camel(),
        "trajectories": [report.to_json() for report in reports],
        "summary": analysis.totals[0].as_dict(),
        **_tail(analysis, notices),
    }


def write_json(analysis: Analysis, notices: Sequence[str], out: TextIO) -> None:
    """Write the json report."""
    out.write(_dumps(document(analysis, notices), indent=2))
    out.write("\n")


class JsonlWriter:
    """Streams ``--output jsonl``: each trajectory line as soon as it is replayed."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def trajectory(self, variants: list[TrajectoryReport]) -> None:
        """Write one trajectory line (the first, and for jsonl only, config variant)."""
        self.out.write(_dumps(variants[0].to_json()))
        self.out.write("\n")

    def finish(self, analysis: Analysis, notices: Sequence[str]) -> None:
        """Write the closing summary line."""
        last = {
            "schema": SCHEMA,
            "loopwarden": __version__,
            "config": analysis.configs[0].to_camel(),
            "summary": analysis.totals[0].as_dict(),
            **_tail(analysis, notices),
        }
        self.out.write(_dumps(last))
        self.out.write("\n")


def sweep_rows(analysis: Analysis, variants: Sequence[Variant]) -> list[dict[str, Any]]:
    """One row per variant, in the order the variants were crossed."""
    return [
        sweep_row(variant, config.to_camel(), totals)
        for variant, config, totals in zip(variants, analysis.configs, analysis.totals, strict=True)
    ]


def write_sweep(
    analysis: Analysis,
    variants: Sequence[Variant],
    notices: Sequence[str],
    out: TextIO,
    *,
    lines: bool,
) -> None:
    """The sweep as one json document, or (``lines``) one row per line then a closing line."""
    rows = sweep_rows(analysis, variants)
    if lines:
        for row in rows:
            out.write(_dumps(row) + "\n")
        out.write(
            _dumps({"schema": SCHEMA, "loopwarden": __version__, **_tail(analysis, notices)}) + "\n"
        )
        return
    payload = {
        "schema": SCHEMA,
        "loopwarden": __version__,
        "sweep": rows,
        **_tail(analysis, notices),
    }
    out.write(_dumps(payload, indent=2))
    out.write("\n")

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
    text = _indented_fast(value) if indent == 2 else None
    if text is None:
        text = json.dumps(value, indent=indent, ensure_ascii=False)
    return json_printable(text)


class _Unsupported(Exception):
    """A value orjson would write otherwise than the standard library (or not at all)."""


def _indented_fast(value: Any) -> str | None:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same text written by orjson
    (ten times faster on a large report); None when orjson is not there or cannot write it.

    orjson writes a few floats otherwise (``0.00001`` for ``1e-05``, ``null`` for NaN): those
    go in as the standard library's text (:func:`_as_written`). Integers beyond 64 bits, keys
    that are not strings and lone surrogates make orjson raise, and the standard library
    writes the document.
    """
    try:
        import orjson

        fragment = orjson.Fragment
    except (ImportError, AttributeError):  # no orjson, or one older than 3.10
        return None
    try:
        document = _as_written(value, fragment)
        return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    except (_Unsupported, TypeError, ValueError):
        return None


_INFINITE = (float("inf"), float("-inf"))


def _as_written(value: Any, fragment: Any) -> Any:
    """``value`` with every float that orjson would write otherwise than the standard library
    replaced by the standard library's text (an orjson ``Fragment``, written as it is); the
    same object where nothing changes. :class:`_Unsupported` for a type other than the JSON
    ones (the standard library then decides what happens to it)."""
    kind = type(value)
    if kind is dict:
        pairs: Any = value.items()
    elif kind is list or kind is tuple:
        pairs = enumerate(value)
    else:
        return _leaf(value, fragment)
    changed: Any = None
    for key, item in pairs:
        if type(item) is str or type(item) is int or item is None or type(item) is bool:
            continue  # the common leaves, written alike
        new = _as_written(item, fragment)
        if new is item:
            continue
        if changed is None:
            changed = dict(value) if kind is dict else list(value)
        changed[key] = new
    return value if changed is None else changed


def _leaf(value: Any, fragment: Any) -> Any:
    kind = type(value)
    if kind is float:
        # orjson writes floats of magnitude below 1e-4 without an exponent, NaN and the
        # infinities as null; every other float as repr() does (checked on a million floats).
        if value != value or value in _INFINITE or (value and -1e-4 < value < 1e-4):
            return fragment(json.dumps(value))
        return value
    if kind is str or kind is int or kind is bool or value is None:
        return value
    raise _Unsupported(kind.__name__)


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

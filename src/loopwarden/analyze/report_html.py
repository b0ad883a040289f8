"""``--output html``: one self-contained page (inline CSS, JS and SVG; nothing fetched to view it).

A page to send to a colleague: the summary and what the loops cost, then where the loops are
(per detector, per tool), the settings that ran, and one timeline per trajectory, loops first:
a cell per tool call coloured by the guard's verdict, and under it, in plain text, where the
guard warned, blocked or stopped and why (visible on a screenshot or a printout, not only on
hover). A sweep gets its own page: a table and a plot of what each setting saves against what
it would have blocked in runs that succeeded.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from html import escape as html_escape
from typing import Any, TextIO

from loopwarden import __version__
from loopwarden._terminal import plural, printable
from loopwarden.analyze.replay import (
    BLOCKED,
    NOT_RUN,
    OK,
    STOPPED,
    WARNED,
    WARNING_QUIET,
    Mark,
    TrajectoryReport,
    worst_first,
)
from loopwarden.analyze.report_text import duration
from loopwarden.analyze.runner import Analysis, Totals
from loopwarden.analyze.sweep import Variant, sweep_row
from loopwarden.core.config import ResolvedConfig


def escape(text: str, quote: bool = True) -> str:
    """HTML-escaped, control characters shown as escapes (the page may be printed to a terminal,
    and HTML forbids most of them anyway); newlines are kept for the multi-line hover texts."""
    return html_escape(printable(text, newlines=True), quote=quote)


# Timeline code -> (css class, label shown in the hover text and the legend).
_CELL = {
    OK: ("ok", "ok"),
    WARNED: ("warning", "warning"),
    WARNING_QUIET: ("warning", "warning (repeat, not re-emitted)"),
    BLOCKED: ("block", "blocked"),
    STOPPED: ("stop", "run stopped"),
    NOT_RUN: ("notrun", "not run (the run was stopped)"),
}
_VERB = {"warn": "warned", "block": "blocked", "stop": "stopped the run"}

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1d1d1f;background:#fff}
h1{font-size:1.3rem;margin:0 0 .3rem}
h2.part{font-size:1.05rem;margin:1.4rem 0 .4rem}
.meta,.notice{color:#555}
#summary,#cost{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0;padding:0}
#summary div,#cost div{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem;min-width:7rem}
#cost div{border-color:#cf222e33;background:#fff8f8}
dt{font-size:.8rem;color:#555}
dd{margin:0;font-size:1.4rem;font-weight:600}
dd small{font-size:.8rem;font-weight:400;color:#555}
table{border-collapse:collapse;margin:.3rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:right}
th:first-child,td:first-child{text-align:left}
tr.changed td{font-weight:600}
.tables{display:flex;gap:2rem;flex-wrap:wrap}
.legend span.c{vertical-align:middle}
.traj{border-top:1px solid #eee;padding:.6rem 0;break-inside:avoid}
.traj h3{font-size:.95rem;margin:0 0 .3rem;word-break:break-all}
.traj .info{color:#555;font-size:.85rem}
.timeline{display:flex;flex-wrap:wrap;gap:2px;margin-top:.3rem}
.c{display:inline-block;width:12px;height:18px;border-radius:2px}
.c.ok{background-color:rgb(46,160,67)}
.c.warning{background-color:rgb(230,170,20)}
.c.block{background-color:rgb(207,34,46)}
.c.stop{background-color:rgb(110,20,140)}
.c.notrun{background-color:rgb(200,200,200)}
body.only-loops .traj:not(.has-loop){display:none}
.why{margin:.3rem 0 0;font-size:.85rem;color:#333}
.why b.block,.why b.stop{color:rgb(207,34,46)}
.why b.warn{color:rgb(150,100,0)}
.errors{color:#b00}
svg text{font:12px system-ui,sans-serif}
@media print{
  *{-webkit-print-color-adjust:exact;print-color-adjust:exact}
  .filter{display:none}
  body{margin:0}
}
"""

_JS = """
document.getElementById('only-loops').addEventListener('change', function (e) {
  document.body.classList.toggle('only-loops', e.target.checked);
  var shown = document.querySelectorAll(e.target.checked ? '.traj.has-loop' : '.traj').length;
  document.getElementById('shown').textContent = shown;
});
"""


def write_html(analysis: Analysis, notices: Sequence[str], out: TextIO) -> None:
    """Write the whole page."""
    for chunk in _page(analysis, analysis.reports[0], notices):
        out.write(chunk)


def _head(title: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
    )


def _page(
    analysis: Analysis, reports: Sequence[TrajectoryReport], notices: Sequence[str]
) -> Iterator[str]:
    totals = analysis.totals[0]
    yield _head(f"loopwarden analyze: {plural(totals.trajectories, 'trajectory')}")
    yield (
        f"<h1>loopwarden analyze</h1><p class='meta'>loopwarden {escape(__version__)} · "
        f"{plural(analysis.files, 'file')} · {plural(totals.trajectories, 'trajectory')} · "
        f"{plural(totals.calls, 'tool call')}</p>\n"
    )
    for notice in notices:
        yield f"<p class='notice'>note: {escape(notice)}</p>\n"
    yield _summary(totals.as_dict())
    yield _cost(totals)
    yield _breakdowns(reports)
    yield _settings(analysis.configs[0])
    yield "<h2 class='part'>Trajectories, loops first</h2>\n"
    yield _legend()
    yield (
        "<p class='filter'><label><input type='checkbox' id='only-loops'> show only "
        f"trajectories with loops</label> · showing <span id='shown'>{len(reports)}</span></p>"
        "\n<main>\n"
    )
    for report in worst_first(list(reports)):
        yield _trajectory(report)
    yield "</main>\n"
    yield from _problems(analysis)
    yield f"<script>{_JS}</script>\n</body></html>\n"


_SUMMARY = (
    ("trajectories", "trajectories"),
    ("calls", "tool calls"),
    ("with_warning", "warned"),
    ("with_block_or_stop", "blocked or stopped"),
    ("stopped", "stopped"),
    ("calls_after_first_block_or_stop", "calls after first block"),
    ("calls_saved", "calls saved"),
)


def _summary(totals: dict[str, int]) -> str:
    cells = "".join(
        f"<div data-key='{key}'><dt>{label}</dt><dd>{totals[key]}</dd></div>"
        for key, label in _SUMMARY
    )
    return f"<dl id='summary'>{cells}</dl>\n"


def _cost(totals: Totals) -> str:
    """What the loops cost: calls that would not have run; tokens and time after a stop."""
    cells = [
        ("calls_saved", "calls that would not have run", f"{totals.calls_saved:,}"),
    ]
    if totals.tokens is not None:
        saved = totals.tokens_saved or 0
        cells.append(
            (
                "tokens_saved",
                "tokens after the guard would have stopped the run",
                f"{saved:,} <small>of {totals.tokens:,}</small>",
            )
        )
    if totals.seconds is not None:
        saved_s = totals.seconds_saved or 0.0
        cells.append(
            (
                "seconds_saved",
                "time after the guard would have stopped the run",
                f"{duration(saved_s)} <small>of {duration(totals.seconds)}</small>",
            )
        )
    body = "".join(
        f"<div data-key='{key}'><dt>{label}</dt><dd>{value}</dd></div>"
        for key, label, value in cells
    )
    note = (
        ""
        if totals.tokens is not None or totals.seconds is not None
        else "<p class='meta'>These transcripts record no tokens or times.</p>"
    )
    return f"<h2 class='part'>What the loops cost</h2><dl id='cost'>{body}</dl>{note}\n"


def _breakdowns(reports: Sequence[TrajectoryReport]) -> str:
    """Where the loops are: per detector and per tool."""
    by_detector: Counter[tuple[str, str]] = Counter()
    runs: dict[str, set[int]] = {}
    by_tool: Counter[tuple[str, str]] = Counter()
    for number, report in enumerate(reports):
        for tool in report.tools:
            by_tool[tool, "calls"] += 1
        for index in report.saved:
            by_tool[report.tools[index], "saved"] += 1
        for mark in report.events:
            by_detector[mark.detector, mark.action] += 1
            by_tool[mark.tool, mark.action] += 1
            runs.setdefault(mark.detector, set()).add(number)
    if not runs:
        return ""
    actions = ("warn", "block", "stop")
    detector_rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{len(runs[name])}</td>"
        + "".join(f"<td>{by_detector[name, a]}</td>" for a in actions)
        + "</tr>"
        for name in sorted(runs, key=lambda n: (-len(runs[n]), n))
    )
    looping = sorted(
        {tool for tool, kind in by_tool if kind in (*actions, "saved")},
        key=lambda t: (-by_tool[t, "saved"], -by_tool[t, "block"], t),
    )
    tool_rows = "".join(
        f"<tr><td>{escape(tool)}</td><td>{by_tool[tool, 'calls']}</td>"
        + "".join(f"<td>{by_tool[tool, a]}</td>" for a in (*actions, "saved"))
        + "</tr>"
        for tool in looping
    )
    return (
        "<h2 class='part'>Where the loops are</h2><div class='tables'>"
        "<table id='by-detector'><tr><th>detector</th><th>trajectories</th><th>warnings</th>"
        f"<th>blocks</th><th>stops</th></tr>{detector_rows}</table>"
        "<table id='by-tool'><tr><th>tool</th><th>calls</th><th>warnings</th><th>blocks</th>"
        f"<th>stops</th><th>calls saved</th></tr>{tool_rows}</table></div>\n"
    )


def _flat(block: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in block.items():
        if isinstance(value, dict) and key in ("detectors", "postCompactionGuard"):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _settings(config: ResolvedConfig) -> str:
    """The settings that ran, next to OpenClaw's defaults; changed ones in bold."""
    defaults = dict(_flat(ResolvedConfig().to_camel()))
    rows = []
    for key, value in _flat(config.to_camel()):
        default = defaults.get(key)
        changed = key not in defaults or value != default
        shown = "—" if key not in defaults else json.dumps(default)
        rows.append(
            f"<tr{' class=changed' if changed else ''} data-key='{escape(key)}'>"
            f"<td>{escape(key)}</td><td>{escape(json.dumps(value))}</td><td>{escape(shown)}</td>"
            "</tr>"
        )
    return (
        "<h2 class='part'>Settings that ran</h2><table id='settings'><tr><th>setting</th>"
        f"<th>value</th><th>OpenClaw default</th></tr>{''.join(rows)}</table>\n"
    )


def _legend() -> str:
    seen: dict[str, str] = {}
    for css, label in _CELL.values():
        seen.setdefault(css, label)
    items = " ".join(
        f"<span class='c {css}'></span> {escape(label)}" for css, label in seen.items()
    )
    return f"<p class='legend'>{items}</p>\n"


def _trajectory(report: TrajectoryReport) -> str:
    has_loop = bool(report.events)
    by_index: dict[int, list[Mark]] = {}
    for mark in report.marks:
        by_index.setdefault(mark.index, []).append(mark)
    cells = "".join(
        _cell(index, tool, code, by_index.get(index, ()))
        for index, (tool, code) in enumerate(zip(report.tools, report.timeline, strict=True))
    )
    info = (
        f"{escape(report.format)} · {plural(report.calls, 'call')} · "
        f"{plural(report.warnings, 'warning')} · "
        f"{report.blocks} blocked{' · run stopped' if report.stopped else ''} · "
        f"{plural(report.calls_saved, 'call')} saved · {escape(report.source)}"
    )
    css = "traj has-loop" if has_loop else "traj"
    return (
        f"<section class='{css}' data-id='{escape(report.id, quote=True)}'>"
        f"<h3>{escape(report.id)}</h3><div class='info'>{info}</div>"
        f"<div class='timeline'>{cells}</div>{_why(report)}</section>\n"
    )


def _why(report: TrajectoryReport) -> str:
    """Under a loop's timeline, in plain text: the first warning, the first block and the stop,
    each with where and why."""
    marks = [report.first_warning, report.first_blocked_call, report.stop]
    lines = []
    for mark in marks:
        if mark is None:
            continue
        lines.append(
            f"<p class='why' data-action='{mark.action}'><b class='{mark.action}'>"
            f"{_VERB[mark.action]}</b> at call {mark.index + 1} ({escape(mark.tool)}, "
            f"{escape(mark.detector)} ×{mark.count}): {escape(mark.message)}</p>"
        )
    return "".join(lines)


def _cell(index: int, tool: str, code: str, marks: Sequence[Mark]) -> str:
    css, label = _CELL.get(code, _CELL[OK])
    lines = [f"call {index + 1}: {tool}", label]
    for mark in marks:
        lines.append(f"{mark.level} · {mark.detector} ×{mark.count}: {mark.message}")
    title = escape("\n".join(lines), quote=True)
    return f"<span class='c {css}' title='{title}'></span>"


def _problems(analysis: Analysis) -> Iterator[str]:
    if analysis.errors:
        yield "<h2 class='errors part'>Input errors</h2><ul class='errors'>"
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.errors)
        yield "</ul>\n"
    if analysis.skipped:
        yield "<h2 class='part'>Skipped (not transcripts)</h2><ul>"
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.skipped)
        yield "</ul>\n"


# ---------------------------------------------------------------------------------------------
# --sweep


def write_sweep_html(
    analysis: Analysis, variants: Sequence[Variant], notices: Sequence[str], out: TextIO
) -> None:
    """A sweep: one row per setting, and a plot of what each saves against what it blocks."""
    rows = [
        sweep_row(variant, config.to_camel(), totals)
        for variant, config, totals in zip(variants, analysis.configs, analysis.totals, strict=True)
    ]
    labelled = any(totals.succeeded for totals in analysis.totals)
    out.write(_head("loopwarden analyze --sweep"))
    out.write(
        f"<h1>loopwarden analyze: a sweep of {plural(len(rows), 'setting')}</h1>"
        f"<p class='meta'>loopwarden {escape(__version__)} · {plural(analysis.files, 'file')} · "
        f"{plural(analysis.totals[0].trajectories, 'trajectory')}</p>\n"
    )
    for notice in notices:
        out.write(f"<p class='notice'>note: {escape(notice)}</p>\n")
    out.write(_sweep_plot(variants, analysis.totals, labelled))
    out.write(_sweep_table(variants, rows, analysis.totals))
    out.write("".join(_problems(analysis)))
    out.write("</body></html>\n")


def _setting_label(variant: Variant, row: dict[str, Any]) -> str:
    parts = []
    for key, raw in variant.settings:
        ran = row["effective"][key]
        clamped = ran is not None and ran != row["settings"][key]
        parts.append(f"{key}={raw}" + (f" (runs as {ran})" if clamped else ""))
    return ", ".join(parts)


def _cost_of(totals: Totals, labelled: bool) -> int:
    return totals.succeeded_blocked if labelled else totals.with_block_or_stop


def _sweep_plot(variants: Sequence[Variant], totals: Sequence[Totals], labelled: bool) -> str:
    """An inline SVG: x = runs blocked (that succeeded, when the transcripts say), y = calls
    saved; one labelled point per setting."""
    xs = [_cost_of(t, labelled) for t in totals]
    ys = [t.calls_saved for t in totals]
    # Settings that give the same point share it: their labels are stacked, not overprinted.
    points: dict[tuple[int, int], list[str]] = {}
    for variant, x, y in zip(variants, xs, ys, strict=True):
        points.setdefault((x, y), []).append(", ".join(f"{k}={v}" for k, v in variant.settings))
    stack = max(len(labels) for labels in points.values())
    width, left, bottom, right = 720, 70, 50, 220
    top = 24 + 14 * (stack - 1)  # room for the highest point's labels
    height = 330 + top
    x_max, y_max = max(max(xs), 1), max(max(ys), 1)

    def px(x: float) -> float:
        return left + (width - left - right) * x / x_max

    def py(y: float) -> float:
        return height - bottom - (height - bottom - top) * y / y_max

    x_title = (
        "runs that succeeded but would have been blocked or stopped"
        if labelled
        else "runs that would have been blocked or stopped (no success labels in the input)"
    )
    parts = [
        f"<svg id='sweep-plot' role='img' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' xmlns='http://www.w3.org/2000/svg'>",
        f"<line x1='{left}' y1='{py(0)}' x2='{width - right}' y2='{py(0)}' stroke='#555'/>",
        f"<line x1='{left}' y1='{py(0)}' x2='{left}' y2='{top}' stroke='#555'/>",
        f"<text x='{left}' y='{height - 12}'>{escape(x_title)} →</text>",
        f"<text x='12' y='{top + 10}' transform='rotate(-90 12 {top + 10})' "
        "text-anchor='end'>calls saved →</text>",
    ]
    for tick in sorted({0, x_max // 2, x_max}):
        parts.append(f"<text x='{px(tick)}' y='{py(0) + 16}' text-anchor='middle'>{tick}</text>")
    for tick in sorted({0, y_max // 2, y_max}):
        parts.append(f"<text x='{left - 8}' y='{py(tick) + 4}' text-anchor='end'>{tick}</text>")
    for (x, y), labels in points.items():
        texts = "".join(
            f"<text x='{px(x) + 8:.1f}' y='{py(y) - 6 - 14 * (len(labels) - 1 - n):.1f}'>"
            f"{escape(label)}</text>"
            for n, label in enumerate(labels)
        )
        names = escape(" | ".join(labels))
        parts.append(
            f"<g class='point' data-settings='{names}' data-count='{len(labels)}'>"
            f"<circle cx='{px(x):.1f}' cy='{py(y):.1f}' r='5' fill='rgb(207,34,46)'><title>"
            f"{names}: {y} calls saved, {x} blocked</title></circle>{texts}</g>"
        )
    parts.append("</svg>")
    return (
        "<h2 class='part'>What each setting saves against what it blocks</h2>"
        "<p class='meta'>Up and to the left is better: more calls saved, fewer good runs "
        "blocked.</p>" + "".join(parts) + "\n"
    )


def _sweep_table(
    variants: Sequence[Variant], rows: Sequence[dict[str, Any]], totals: Sequence[Totals]
) -> str:
    body = []
    for variant, row, total in zip(variants, rows, totals, strict=True):
        first = row["first_block_or_stop_call"]
        median = "—" if first is None else f"{first['median']:g}"
        body.append(
            f"<tr><td>{escape(_setting_label(variant, row))}</td><td>{total.trajectories}</td>"
            f"<td>{total.with_warning}</td><td>{total.with_block_or_stop}</td>"
            f"<td>{total.succeeded_blocked} of {total.succeeded}</td><td>{median}</td>"
            f"<td>{total.calls_saved}</td></tr>"
        )
    return (
        "<table id='sweep'><tr><th>setting</th><th>trajectories</th><th>warned</th>"
        "<th>blocked or stopped</th><th>blocked, of those that succeeded</th>"
        f"<th>first block (median call)</th><th>calls saved</th></tr>{''.join(body)}</table>\n"
    )

"""``--output html``: one self-contained page (inline CSS and JS, no network needed to view it).

The page shows the summary, then one timeline per trajectory: a cell per tool call coloured by
the guard's verdict (ok / warning / block / stop / not run), with the tool, detector and message
as hover text; a checkbox filters the list down to trajectories with loops.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from html import escape as html_escape
from typing import TextIO

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
)
from loopwarden.analyze.runner import Analysis


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

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1d1d1f;background:#fff}
h1{font-size:1.3rem;margin:0 0 .3rem}
.meta,.notice{color:#555}
#summary{display:flex;gap:1rem;flex-wrap:wrap;margin:1rem 0;padding:0}
#summary div{border:1px solid #ddd;border-radius:6px;padding:.5rem .8rem;min-width:7rem}
#summary dt{font-size:.8rem;color:#555}
#summary dd{margin:0;font-size:1.4rem;font-weight:600}
.legend span.c{vertical-align:middle}
.traj{border-top:1px solid #eee;padding:.6rem 0}
.traj h2{font-size:.95rem;margin:0 0 .3rem;word-break:break-all}
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
.errors{color:#b00}
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
    reports = analysis.reports[0]
    for chunk in _page(analysis, reports, notices):
        out.write(chunk)


def _page(
    analysis: Analysis, reports: Sequence[TrajectoryReport], notices: Sequence[str]
) -> Iterator[str]:
    totals = analysis.totals[0].as_dict()
    yield (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>loopwarden analyze: {totals['trajectories']} trajectories</title>"
        f"<style>{_CSS}</style></head><body>\n"
        f"<h1>loopwarden analyze</h1><p class='meta'>loopwarden {escape(__version__)} · "
        f"{analysis.files} files · config {escape(_config_text(analysis))}</p>\n"
    )
    for notice in notices:
        yield f"<p class='notice'>note: {escape(notice)}</p>\n"
    yield _summary(totals)
    yield _legend()
    yield (
        "<p><label><input type='checkbox' id='only-loops'> show only trajectories with loops"
        f"</label> · showing <span id='shown'>{len(reports)}</span></p>\n<main>\n"
    )
    for report in reports:
        yield _trajectory(report)
    yield "</main>\n"
    yield from _problems(analysis)
    yield f"<script>{_JS}</script>\n</body></html>\n"


def _config_text(analysis: Analysis) -> str:
    camel = analysis.configs[0].to_camel()
    return ", ".join(
        f"{key}={json.dumps(value)}" for key, value in camel.items() if not isinstance(value, dict)
    )


def _summary(totals: dict[str, int]) -> str:
    labels = (
        ("trajectories", "trajectories"),
        ("calls", "tool calls"),
        ("with_warning", "warned"),
        ("with_block", "blocked or stopped"),
        ("stopped", "stopped"),
        ("calls_after_first_block", "calls after first block"),
        ("calls_saved", "calls saved"),
    )
    cells = "".join(
        f"<div data-key='{key}'><dt>{label}</dt><dd>{totals[key]}</dd></div>"
        for key, label in labels
    )
    return f"<dl id='summary'>{cells}</dl>\n"


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
        f"{escape(report.source)}"
    )
    css = "traj has-loop" if has_loop else "traj"
    return (
        f"<section class='{css}' data-id='{escape(report.id, quote=True)}'>"
        f"<h2>{escape(report.id)}</h2><div class='info'>{info}</div>"
        f"<div class='timeline'>{cells}</div>{_why(report)}</section>\n"
    )


def _why(report: TrajectoryReport) -> str:
    """One line under a loop's timeline: where the guard stepped in first, and its message."""
    mark = report.first_block or report.first_warning
    if mark is None:
        return ""
    verb = {"warn": "warned", "block": "blocked", "stop": "stopped the run"}[mark.action]
    return (
        f"<p class='why'>{verb} at call {mark.index + 1} ({escape(mark.tool)}, "
        f"{escape(mark.detector)} ×{mark.count}): {escape(mark.message)}</p>"
    )


def _cell(index: int, tool: str, code: str, marks: Sequence[Mark]) -> str:
    css, label = _CELL.get(code, _CELL[OK])
    lines = [f"call {index + 1}: {tool}", label]
    for mark in marks:
        lines.append(f"{mark.level} · {mark.detector} ×{mark.count}: {mark.message}")
    title = escape("\n".join(lines), quote=True)
    return f"<span class='c {css}' title='{title}'></span>"


def _problems(analysis: Analysis) -> Iterator[str]:
    if analysis.errors:
        yield "<h2 class='errors'>Input errors</h2><ul class='errors'>"
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.errors)
        yield "</ul>\n"
    if analysis.skipped:
        yield "<h2>Skipped (not transcripts)</h2><ul>"
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.skipped)
        yield "</ul>\n"

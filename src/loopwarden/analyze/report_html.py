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
from dataclasses import dataclass
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
from loopwarden.analyze.report_text import duration, skipped_text
from loopwarden.analyze.runner import Analysis, Totals
from loopwarden.analyze.spend import SpendTotals, how_priced, spend_lines, usd
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
.traj .info{color:#555;font-size:.85rem;overflow-wrap:anywhere}
.timeline{display:flex;flex-wrap:wrap;gap:2px;margin-top:.3rem}
.c{display:inline-block;width:12px;height:18px;border-radius:2px}
.runspend{align-self:center;margin-left:.5rem}
.c.ok{background-color:rgb(46,160,67)}
.c.warning{background-color:rgb(230,170,20)}
.c.block{background-color:rgb(207,34,46)}
.c.stop{background-color:rgb(110,20,140)}
.c.notrun{background-color:rgb(200,200,200)}
main.only-loops .traj:not(.has-loop){display:none}
i.cmp{display:inline-block;width:4px;height:18px;
  background:repeating-linear-gradient(#1d1d1f 0 3px,transparent 3px 5px)}
.args{margin:.3rem 0 0;font-size:.85rem}
.args code,#about code{font:12px/1.4 ui-monospace,monospace;background:#f4f4f5;padding:0 .25rem;
  border-radius:3px;white-space:pre-wrap;word-break:break-all}
#about{display:grid;grid-template-columns:max-content 1fr;gap:.15rem .8rem;margin:.4rem 0 1rem;
  font-size:.9rem}
#about dt{font-size:.9rem}
#about dd{margin:0;font-size:.9rem;font-weight:400;min-width:0;overflow-wrap:anywhere}
.scroll{max-width:100%;overflow-x:auto}
td:first-child{overflow-wrap:anywhere}
#sweep td:nth-child(2),#sweep th:nth-child(2){text-align:left}
#sweep td:first-child{white-space:nowrap}
.warnings{color:#8a5a00}
@media (max-width:600px){
  body{margin:.6rem}
  #summary div,#cost div{min-width:5.5rem;padding:.4rem .5rem}
  #about{grid-template-columns:1fr}
  #about dt{margin-top:.3rem}
  table{font-size:.75rem}
  th,td{padding:.15rem .3rem}
}
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
  document.querySelector('main').classList.toggle('only-loops', e.target.checked);
  var shown = document.querySelectorAll(e.target.checked ? '.traj.has-loop' : '.traj').length;
  document.getElementById('shown').textContent = shown;
});
"""


@dataclass(frozen=True, slots=True)
class PageContext:
    """What the page's header says was analysed, and how: the inputs as given, the command
    line, and when (UTC)."""

    inputs: tuple[str, ...] = ()
    command: str = ""
    when: str = ""


def write_html(
    analysis: Analysis,
    notices: Sequence[str],
    out: TextIO,
    context: PageContext | None = None,
) -> None:
    """Write the whole page."""
    for chunk in _page(analysis, analysis.reports[0], notices, context or PageContext()):
        out.write(chunk)


def _head(title: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
    )


def _page(
    analysis: Analysis,
    reports: Sequence[TrajectoryReport],
    notices: Sequence[str],
    context: PageContext,
) -> Iterator[str]:
    totals = analysis.totals[0]
    yield _head(f"loopwarden analyze: {plural(totals.trajectories, 'trajectory')}")
    yield "<h1>loopwarden analyze</h1>\n"
    yield _about(analysis, context)
    for notice in notices:
        yield f"<p class='notice'>note: {escape(notice)}</p>\n"
    yield from _problems(analysis)
    yield _summary(totals.as_dict())
    yield _cost(totals)
    yield _spend(totals.spend)
    yield _breakdowns(reports)
    loops = sum(1 for report in reports if report.events)
    yield "<h2 class='part'>Trajectories, loops first</h2>\n"
    yield _legend()
    # With loops to show, the page opens on them; the box shows the quiet runs too.
    checked = " checked" if loops else ""
    yield (
        f"<p class='filter'><label><input type='checkbox' id='only-loops'{checked}> show only "
        f"trajectories with loops ({loops})</label> · showing <span id='shown'>"
        f"{loops or len(reports)}</span> of {len(reports)}</p>\n"
        f"<main{' class=only-loops' if loops else ''}>\n"
    )
    top = max(
        (r.spend.total.cost for r in reports if r.spend and r.spend.total.cost is not None),
        default=0.0,
    )
    for report in worst_first(list(reports)):
        yield _trajectory(report, top)
    yield "</main>\n"
    yield _settings(analysis.configs[0])
    yield f"<script>{_JS}</script>\n</body></html>\n"


def _about(analysis: Analysis, context: PageContext, swept: Sequence[str] = ()) -> str:
    """The header: what was analysed (inputs, how many), with what (command, settings,
    version) and when."""
    totals = analysis.totals[0]
    config = analysis.configs[0]
    read = (
        f"{plural(analysis.files, 'file')} · {plural(totals.trajectories, 'trajectory')} · "
        f"{plural(totals.calls, 'tool call')}"
    )
    rows = [("inputs", " ".join(f"<code>{escape(path)}</code>" for path in context.inputs))]
    rows.append(("read", escape(read)))
    if context.command:
        rows.append(("command", f"<code>{escape(context.command)}</code>"))
    settings = _settings_line(config, skip=swept)
    if swept:
        settings += "; swept: " + ", ".join(swept)
    rows.append(("settings", escape(settings)))
    rows.append(("loopwarden", escape(__version__)))
    if context.when:
        rows.append(("when", escape(context.when)))
    body = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in rows if value)
    return f"<dl id='about'>{body}</dl>\n"


def _settings_line(config: ResolvedConfig, skip: Sequence[str] = ()) -> str:
    """The settings in one line: the profile, the switch, what differs from the defaults
    (but the keys in ``skip``)."""
    enabled = {
        True: "detectors on",
        False: "everything off",
        None: "only the post-compaction guard",
    }
    defaults = dict(_flat(ResolvedConfig().to_camel()))
    changed = [
        f"{key}={json.dumps(value)}"
        for key, value in _flat(config.to_camel())
        if key not in ("enabled", "profile", *skip) and defaults.get(key, value) != value
    ]
    line = f"profile {config.profile}, {enabled[config.enabled]}"
    if config.profile == "openclaw" and changed:
        line += "; changed: " + ", ".join(changed)
    return line


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
        "<h2 class='part'>Where the loops are</h2><div class='tables'><div class='scroll'>"
        "<table id='by-detector'><tr><th>detector</th><th>trajectories</th><th>warnings</th>"
        f"<th>blocks</th><th>stops</th></tr>{detector_rows}</table></div>"
        "<div class='scroll'><table id='by-tool'><tr><th>tool</th><th>calls</th>"
        "<th>warnings</th><th>blocks</th>"
        f"<th>stops</th><th>calls saved</th></tr>{tool_rows}</table></div></div>\n"
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
        "<h2 class='part'>Settings that ran</h2><div class='scroll'><table id='settings'><tr>"
        f"<th>setting</th><th>value</th><th>OpenClaw default</th></tr>{''.join(rows)}</table>"
        "</div>\n"
    )


def _legend() -> str:
    seen: dict[str, str] = {}
    for css, label in _CELL.values():
        seen.setdefault(css, label)
    items = " ".join(
        f"<span class='c {css}'></span> {escape(label)}" for css, label in seen.items()
    )
    items += " <i class='cmp'></i> context compacted"
    return f"<p class='legend'>{items}</p>\n"


def _trajectory(report: TrajectoryReport, top_cost: float = 0.0) -> str:
    has_loop = bool(report.events)
    by_index: dict[int, list[Mark]] = {}
    for mark in report.marks:
        by_index.setdefault(mark.index, []).append(mark)
    compacted = Counter(report.compaction_at)
    cells = "".join(
        _compaction_marks(compacted[index]) + _cell(index, tool, code, by_index.get(index, ()))
        for index, (tool, code) in enumerate(zip(report.tools, report.timeline, strict=True))
    ) + _compaction_marks(compacted[report.calls])
    info = (
        f"{escape(report.format)} · {plural(report.calls, 'call')} · "
        f"{plural(report.warnings, 'warning')} · "
        f"{report.blocks} blocked{' · run stopped' if report.stopped else ''} · "
        f"{plural(report.calls_saved, 'call')} saved{_run_spend(report)} · "
        f"{escape(report.source)}"
    )
    css = "traj has-loop" if has_loop else "traj"
    return (
        f"<section class='{css}' data-id='{escape(report.id, quote=True)}'>"
        f"<h3>{escape(report.id)}</h3><div class='info'>{info}</div>"
        f"<div class='timeline'>{cells}{_strip_bar(report, top_cost)}</div>{_args(report)}"
        f"{_why(report)}</section>\n"
    )


def _run_spend(report: TrajectoryReport) -> str:
    """`` · $X spent (how) · $Y after the first block or stop`` where the run's money is known."""
    spend = report.spend
    if spend is None or spend.total.cost is None:
        return ""
    after = "" if spend.after is None else f", {usd(spend.after.cost or 0.0)} after the first block"
    return (
        f" · <span class='spend'>{usd(spend.total.cost)} spent ({escape(how_priced(spend))})"
        f"{after}</span>"
    )


def _strip_bar(report: TrajectoryReport, top: float) -> str:
    """The run's spend as a bar beside its strip, scaled to the costliest run of the page; the
    part after the first block or stop in red."""
    spend = report.spend
    if spend is None or spend.total.cost is None or top <= 0:
        return ""
    width = 120
    full = max(1.0, width * spend.total.cost / top)
    after = 0.0 if spend.after is None else min(spend.after.cost or 0.0, spend.total.cost)
    saved = full * after / spend.total.cost if spend.total.cost else 0.0
    title = f"{usd(spend.total.cost)} spent, {usd(after)} of it after the first block or stop"
    return (
        f"<svg class='runspend' width='{width}' height='10' role='img' "
        f"aria-label='{escape(title)}'><title>{escape(title)}</title>"
        f"<rect width='{full:.1f}' height='10' fill='#9bb7d4'/>"
        f"<rect x='{full - saved:.1f}' width='{saved:.1f}' height='10' fill='#d9534f'/></svg>"
    )


def _spend(totals: SpendTotals) -> str:
    """Spend against what came after the first block or stop, per model, as bars (inline SVG),
    and per tool and per detector as tables."""
    rows = [
        (name, entry["spend"].cost, entry["after"].cost or 0.0)
        for name, entry in sorted(totals.per_model.items())
        if entry["spend"].cost is not None
    ]
    lines = "".join(
        f"<p class='meta'>{escape(line)}</p>"
        for line in spend_lines(totals)
        if not line.startswith(("Per tool", "Per detector"))  # the tables below say these
    )
    if not rows:
        return f"<h2 class='part'>What the runs spent</h2>{lines}\n" if lines else ""
    top = max(cost for _, cost, _ in rows) or 1.0
    width, bar, label = 360, 18, 230
    bars = []
    for row, (name, cost, after) in enumerate(rows):
        y = row * (bar + 10)
        full, saved = width * cost / top, width * min(after, cost) / top
        bars.append(
            f"<text x='0' y='{y + 13}' font-size='12'>{escape(name)}</text>"
            f"<rect x='{label}' y='{y}' width='{full:.1f}' height='{bar}' fill='#9bb7d4'>"
            f"<title>{escape(name)}: {usd(cost)} spent</title></rect>"
            f"<rect x='{label + full - saved:.1f}' y='{y}' width='{saved:.1f}' height='{bar}' "
            f"fill='#d9534f'><title>{usd(after)} after the first block or stop</title></rect>"
            f"<text x='{label + full + 6:.1f}' y='{y + 13}' font-size='12'>{usd(cost)}"
            f" ({usd(after)} after)</text>"
        )
    height = len(rows) * (bar + 10)
    svg = (
        f"<svg id='spend' role='img' width='{label + width + 140}' height='{height}' "
        "aria-label='spend per model, and the part after the first block or stop'>"
        + "".join(bars)
        + "</svg>"
    )
    key = (
        "<p class='meta'>Blue: what the runs of each model spent; red: the part after the "
        "guard's first block or stop (what it would have saved). Each run's own bar is beside "
        "its strip below.</p>"
    )
    tables = (
        "<div class='tables'>"
        + _spend_table("spend-by-tool", "tool", totals.per_tool)
        + _spend_table("spend-by-detector", "detector (first block or stop)", totals.per_detector)
        + "</div>"
    )
    return (
        f"<h2 class='part'>What the runs spent</h2>{lines}<div class='scroll'>{svg}</div>{key}"
        f"{tables}\n"
    )


def _spend_table(css_id: str, what: str, table: dict[str, dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{entry['runs']}</td><td>{usd(entry['spend'].cost)}</td>"
        f"<td>{usd(entry['after'].cost or 0.0)}</td></tr>"
        for name, entry in sorted(table.items(), key=lambda item: -(item[1]["spend"].cost or 0))
        if entry["spend"].cost is not None
    )
    if not rows:
        return ""
    return (
        f"<div class='scroll'><table id='{css_id}'><tr><th>{escape(what)}</th><th>runs</th>"
        f"<th>spent</th><th>after the first block or stop</th></tr>{rows}</table></div>"
    )


def _compaction_marks(count: int) -> str:
    title = "context compacted here: the post-compaction guard watches the next calls"
    return f"<i class='cmp' title='{title}'></i>" * count  # not a span: cells are spans


def _args(report: TrajectoryReport) -> str:
    """The looping call as it was made (its arguments shortened): the first block or stop,
    else the first warning."""
    mark = report.first_block_or_stop or report.first_warning
    if mark is None or mark.index not in report.previews:
        return ""
    return (
        f"<p class='args'>the repeated call (call {mark.index + 1}): "
        f"<code>{escape(mark.tool)} {escape(report.previews[mark.index])}</code></p>"
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
    """What could not be read, was read only in part, or was not a transcript: near the top,
    before any figure that leaves them out."""
    if analysis.errors:
        yield (
            f"<h2 class='errors part'>{plural(len(analysis.errors), 'input error')} (left out "
            "of the figures below)</h2><ul id='errors' class='errors'>"
        )
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.errors)
        yield "</ul>\n"
    if analysis.warnings:
        yield (
            "<h2 class='warnings part'>Read in part (what was readable is included)</h2>"
            "<ul id='warnings' class='warnings'>"
        )
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.warnings)
        yield "</ul>\n"
    if analysis.skipped:
        yield (
            f"<h2 class='part'>{escape(skipped_text(len(analysis.skipped)).capitalize())}</h2>"
            "<ul id='skipped'>"
        )
        yield "".join(f"<li>{escape(line)}</li>" for line in analysis.skipped)
        yield "</ul>\n"


# ---------------------------------------------------------------------------------------------
# --sweep


def write_sweep_html(
    analysis: Analysis,
    variants: Sequence[Variant],
    notices: Sequence[str],
    out: TextIO,
    context: PageContext | None = None,
) -> None:
    """A sweep: one row per setting, and a plot of what each saves against what it blocks."""
    rows = [
        sweep_row(variant, config.to_camel(), totals)
        for variant, config, totals in zip(variants, analysis.configs, analysis.totals, strict=True)
    ]
    labelled = any(totals.succeeded for totals in analysis.totals)
    out.write(_head("loopwarden analyze --sweep"))
    out.write(f"<h1>loopwarden analyze: a sweep of {plural(len(rows), 'setting')}</h1>\n")
    swept = [key.removeprefix("tools.loopDetection.") for key, _ in variants[0].settings]
    out.write(_about(analysis, context or PageContext(), swept))
    for notice in notices:
        out.write(f"<p class='notice'>note: {escape(notice)}</p>\n")
    out.write("".join(_problems(analysis)))
    out.write(_sweep_plot(variants, analysis.totals, labelled))
    out.write(_sweep_table(variants, rows, analysis.totals))
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


_PLOT = {"width": 640, "left": 60, "right": 30, "top": 24, "bottom": 50, "height": 340}
_LABEL_CHAR, _LABEL_LINE = 7.5, 15  # px per character of a 12px label, and per line


def _sweep_plot(variants: Sequence[Variant], totals: Sequence[Totals], labelled: bool) -> str:
    """An inline SVG: x = runs blocked (that succeeded, when the transcripts say), y = calls
    saved; one point per outcome, labelled with the numbers of the settings that gave it (the
    table below names them), the labels placed so that none overlaps another or the edge."""
    xs = [_cost_of(t, labelled) for t in totals]
    ys = [t.calls_saved for t in totals]
    points: dict[tuple[int, int], list[int]] = {}
    for number, (x, y) in enumerate(zip(xs, ys, strict=True), start=1):
        points.setdefault((x, y), []).append(number)
    width, height = _PLOT["width"], _PLOT["height"]
    left, right, top, bottom = _PLOT["left"], _PLOT["right"], _PLOT["top"], _PLOT["bottom"]
    x_max, y_max = max(max(xs), 1), max(max(ys), 1)

    def px(x: float) -> float:
        return left + (width - left - right) * x / x_max

    def py(y: float) -> float:
        return height - bottom - (height - bottom - top) * y / y_max

    x_title = (
        "runs that succeeded but would have been blocked or stopped"
        if labelled
        else "runs that would have been blocked or stopped"
    )
    parts = [
        f"<svg id='sweep-plot' role='img' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' style='max-width:100%;height:auto' "
        "xmlns='http://www.w3.org/2000/svg'>",
        f"<line x1='{left}' y1='{py(0)}' x2='{width - right}' y2='{py(0)}' stroke='#555'/>",
        f"<line x1='{left}' y1='{py(0)}' x2='{left}' y2='{top}' stroke='#555'/>",
        f"<text x='{left}' y='{height - 12}'>{escape(x_title)} →</text>",
        f"<text x='14' y='{top}' transform='rotate(-90 14 {top})' "
        "text-anchor='end'>calls saved →</text>",
    ]
    for tick in sorted({0, x_max // 2, x_max}):
        parts.append(f"<text x='{px(tick)}' y='{py(0) + 16}' text-anchor='middle'>{tick}</text>")
    for tick in sorted({0, y_max // 2, y_max}):
        parts.append(f"<text x='{left - 8}' y='{py(tick) + 4}' text-anchor='end'>{tick}</text>")
    centres = [(px(x), py(y)) for x, y in points]
    placed: list[tuple[float, float, float, float]] = []
    for ((x, y), numbers), (cx, cy) in zip(points.items(), centres, strict=True):
        text = ", ".join(f"#{n}" for n in numbers)
        box = _label_box(text, (cx, cy), placed, centres)
        placed.append(box)
        names = escape(
            " | ".join(", ".join(f"{k}={v}" for k, v in variants[n - 1].settings) for n in numbers)
        )
        parts.append(
            f"<g class='point' data-settings='{names}' data-count='{len(numbers)}'>"
            f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='5' fill='rgb(207,34,46)'><title>"
            f"{names}: {y} calls saved, {x} blocked</title></circle>"
            f"<text class='label' x='{box[0]:.1f}' y='{box[3] - 4:.1f}'>{escape(text)}</text></g>"
        )
    parts.append("</svg>")
    what = "fewer runs that succeeded blocked" if labelled else "fewer runs blocked"
    caveat = (
        ""
        if labelled
        else " These transcripts do not say which runs succeeded: a blocked run may be a loop "
        "worth stopping or a good run cut short."
    )
    return (
        "<h2 class='part'>What each setting saves against what it blocks</h2>"
        f"<p class='meta' id='sweep-caption'>Up and to the left is better: more calls saved, "
        f"{what}.{caveat} The numbers are the rows of the table below.</p>"
        "<div class='scroll'>" + "".join(parts) + "</div>\n"
    )


def _label_box(
    text: str,
    centre: tuple[float, float],
    placed: Sequence[tuple[float, float, float, float]],
    centres: Sequence[tuple[float, float]],
) -> tuple[float, float, float, float]:
    """Where a point's label goes: (x0, y0, x1, y1), right of the point (left of it near the
    right edge), moved up or down until it overlaps no label placed before and no point."""
    cx, cy = centre
    wide = len(text) * _LABEL_CHAR
    x0 = cx + 8 if cx + 8 + wide <= _PLOT["width"] - 2 else cx - 8 - wide
    x0 = max(2.0, x0)
    low, high = 2.0, _PLOT["height"] - _PLOT["bottom"] - 2.0
    for step in range(60):
        shift = (step + 1) // 2 * _LABEL_LINE * (1 if step % 2 else -1)
        y0 = min(max(cy - 10 + shift, low), high - _LABEL_LINE)
        box = (x0, y0, x0 + wide, y0 + _LABEL_LINE)
        if not any(_overlap(box, other) for other in placed) and not any(
            _overlap(box, (px - 5, py - 5, px + 5, py + 5)) for px, py in centres
        ):
            return box
    return (x0, cy - 10, x0 + wide, cy - 10 + _LABEL_LINE)  # nowhere free: beside its point


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _sweep_table(
    variants: Sequence[Variant], rows: Sequence[dict[str, Any]], totals: Sequence[Totals]
) -> str:
    body: list[str] = []
    for variant, row, total in zip(variants, rows, totals, strict=True):
        first = row["first_block_or_stop_call"]
        median = "—" if first is None else f"{first['median']:g}"
        body.append(
            f"<tr><td>#{len(body) + 1}</td><td>{escape(_setting_label(variant, row))}</td>"
            f"<td>{total.trajectories}</td>"
            f"<td>{total.with_warning}</td><td>{total.with_block_or_stop}</td>"
            f"<td>{total.succeeded_blocked} of {total.succeeded}</td><td>{median}</td>"
            f"<td>{total.calls_saved}</td></tr>"
        )
    return (
        "<div class='scroll'><table id='sweep'><tr><th>#</th><th>setting</th>"
        "<th>trajectories</th><th>warned</th>"
        "<th>blocked or stopped</th><th>blocked, of those that succeeded</th>"
        f"<th>first block (median call)</th><th>calls saved</th></tr>{''.join(body)}</table>"
        "</div>\n"
    )

"""``--output text``: the terminal report (rich): a summary, then each loop, where and why."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from loopwarden._console import PipeConsole
from loopwarden._terminal import plural, printable
from loopwarden.analyze.replay import Mark, TrajectoryReport, worst_first
from loopwarden.analyze.runner import Analysis, Totals
from loopwarden.analyze.spend import run_line, spend_lines
from loopwarden.analyze.sweep import Variant, sweep_row

MAX_LISTED = 50  # loop trajectories detailed in the text report (worst first); json/html: all


def _console(out: TextIO) -> Console:
    return PipeConsole(file=out, highlight=False, width=None if out.isatty() else 100)


def write_text(analysis: Analysis, notices: Sequence[str], out: TextIO) -> None:
    """Write the human report for a single-config analysis."""
    console = _console(out)
    reports = analysis.reports[0]
    totals = analysis.totals[0].as_dict()
    console.print(
        f"[bold]loopwarden analyze[/]: {plural(totals['trajectories'], 'trajectory')}, "
        f"{plural(totals['calls'], 'tool call')}, {plural(analysis.files, 'file')}",
        soft_wrap=True,
    )
    for notice in notices:
        console.print(_note(notice), soft_wrap=True)
    console.print(_summary_table(totals))
    cost = cost_sentence(analysis.totals[0])
    if cost:
        console.print(cost, soft_wrap=True)
    for line in spend_lines(analysis.totals[0].spend):
        console.print(line, soft_wrap=True, markup=False, highlight=False)
    loops = worst_first([report for report in reports if report.events])
    if loops:
        console.print(f"\n[bold]Loops caught[/] ({plural(len(loops), 'trajectory')})")
        for report in loops[:MAX_LISTED]:
            _print_loop(console, report)
        if len(loops) > MAX_LISTED:
            console.print(
                f"… and {len(loops) - MAX_LISTED} more (use --output json or html for all)"
            )
    else:
        console.print("\nNo loops caught: the guard would not have warned or blocked anything.")
    _print_problems(console, analysis)


def _summary_table(totals: dict[str, int]) -> Table:
    table = Table(title="Summary", title_justify="left", show_header=True)
    for header in (
        "trajectories",
        "tool calls",
        "warned",
        "blocked or stopped",
        "stopped",
        "calls after first block or stop",
        "calls saved",
    ):
        table.add_column(header, justify="right")
    table.add_row(
        *(
            str(totals[key])
            for key in (
                "trajectories",
                "calls",
                "with_warning",
                "with_block_or_stop",
                "stopped",
                "calls_after_first_block_or_stop",
                "calls_saved",
            )
        )
    )
    return table


def cost_sentence(totals: Totals) -> str:
    """What the guard would have saved, in tokens and time, where the transcripts record them."""
    parts = []
    if totals.tokens is not None:
        parts.append(f"{totals.tokens_saved or 0:,} of {totals.tokens:,} tokens")
    if totals.seconds is not None:
        parts.append(f"{duration(totals.seconds_saved or 0.0)} of {duration(totals.seconds)}")
    if not parts:
        return ""
    return f"After the guard would have stopped the runs: {' and '.join(parts)} recorded."


def duration(seconds: float) -> str:
    """A duration as people read it: 42 s, 3.5 min, 2.1 h."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _note(notice: str) -> Text:
    # Text, not markup: notices quote config paths such as agents.list[2].
    return Text.assemble(("note", "yellow"), f": {printable(notice)}")


def _where(mark: Mark, calls: int) -> str:
    return f"call {mark.index + 1} of {calls} ({printable(mark.tool)})"


def _print_loop(console: Console, report: TrajectoryReport) -> None:
    title = Text.assemble(
        ("\n● ", "bold"),
        (printable(report.id), "bold cyan"),
        f"  [{printable(report.format)}] {printable(report.source)}",
    )
    console.print(title, soft_wrap=True)
    warning = report.first_warning
    if warning is not None:
        rest = (
            f" at {_where(warning, report.calls)}: {printable(warning.detector)} ×{warning.count}; "
            f"{plural(report.warnings, 'warning')} in total"
        )
        console.print(Text.assemble("  ", ("warned", "yellow"), rest), soft_wrap=True)
    first = report.first_block_or_stop
    # The first block and the stop each get their line and their reason: a run that was
    # blocked and then stopped shows both (the summary counts the stop).
    for mark in (report.first_blocked_call, report.stop):
        if mark is None:
            continue
        verb = "stopped the run" if mark.action == "stop" else "blocked"
        rest = f" at {_where(mark, report.calls)}: {printable(mark.detector)} ×{mark.count}"
        if mark is first:
            rest += (
                f"; {plural(report.blocks, 'call')} blocked, "
                f"{plural(report.calls_after_first_block_or_stop, 'later call')} recorded, "
                f"{plural(report.calls_saved, 'call')} saved"
            )
        console.print(Text.assemble("  ", (verb, "bold red"), rest), soft_wrap=True)
        console.print(Text(f"  why: {printable(mark.message)}", style="dim"), soft_wrap=True)
    if first is None and warning is not None:
        console.print(Text(f"  why: {printable(warning.message)}", style="dim"), soft_wrap=True)
    spent = run_line(report.spend)
    if spent:
        console.print(Text(f"  {printable(spent)}"), soft_wrap=True)


def _print_problems(console: Console, analysis: Analysis) -> None:
    if analysis.skipped:
        console.print(f"\n[dim]{skipped_text(len(analysis.skipped))}:[/]")
        for line in analysis.skipped:
            console.print(Text(f"  {printable(line)}", style="dim"), soft_wrap=True)
    if analysis.errors:  # each is printed once, on stderr, by the command
        console.print(
            f"\n[bold red]{plural(len(analysis.errors), 'input error')}[/] (listed on stderr)"
        )


def skipped_text(count: int) -> str:
    """ "skipped 1 file that is not a transcript", "skipped 2 files that are not transcripts"."""
    if count == 1:
        return "skipped 1 file that is not a transcript"
    return f"skipped {count} files that are not transcripts"


def write_sweep_text(
    analysis: Analysis, variants: Sequence[Variant], notices: Sequence[str], out: TextIO
) -> None:
    """One table row per swept variant."""
    console = _console(out)
    for notice in notices:
        console.print(_note(notice), soft_wrap=True)
    table = Table(title="Sweep", title_justify="left")
    keys = [key for key, _ in variants[0].settings] if variants else []
    for key in keys:
        # Text, not str: rich reads a str cell as markup, and a swept value is user text.
        table.add_column(Text(printable(key)), min_width=len(key), no_wrap=True)
    for header in (
        "trajectories",
        "warned",
        "blocked or stopped",
        "first block or stop (median call)",
        "calls saved",
    ):
        table.add_column(header, justify="right")
    for variant, config, totals in zip(variants, analysis.configs, analysis.totals, strict=True):
        row = sweep_row(variant, config.to_camel(), totals)
        totals, first = row["summary"], row["first_block_or_stop_call"]
        cells = []
        for key, raw in variant.settings:
            ran = row["effective"][key]
            clamped = ran is not None and ran != row["settings"][key]
            cells.append(Text(printable(f"{raw} → runs as {ran}" if clamped else raw)))
        table.add_row(
            *cells,
            str(totals["trajectories"]),
            str(totals["with_warning"]),
            str(totals["with_block_or_stop"]),
            "-" if first is None else f"{first['median']:g}",
            str(totals["calls_saved"]),
        )
    console.print(table)
    _print_problems(console, analysis)

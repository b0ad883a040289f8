"""``loopwarden analyze PATH...``: replay recorded agent transcripts through the guard.

Answers "what would the guard have done on my agents' past runs?": which loops it catches, how
early, and whether it would have blocked anything. Exit codes, like a linter: 0 nothing blocked,
1 something would have been blocked (or a run stopped), 2 usage, config or input errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console

from loopwarden import ConfigError, ResolvedConfig
from loopwarden.cli._options import add_config_options, config_from_args

OUTPUTS = ("text", "json", "jsonl", "html")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``analyze`` command."""
    from loopwarden.transcripts import FORMATS

    parser = subparsers.add_parser(
        "analyze",
        help="replay agent transcripts through the guard and report the loops it would catch",
        description="Replay recorded agent runs (files or directories, formats detected per "
        "file) through a real LoopGuard and report which loops it would have caught, how early, "
        "and what it would have blocked. With no config, the defaults are used with enabled=true. "
        "Exit 0 when nothing would have been blocked, 1 when something would have, 2 on usage, "
        "config or input errors.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="transcript files or directories")
    parser.add_argument(
        "--format", choices=("auto", *FORMATS), default="auto", help="input format (default: auto)"
    )
    add_config_options(parser)
    parser.add_argument("--output", choices=OUTPUTS, default="text", help="report format")
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE, not stdout")
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        action="append",
        default=[],
        help="replay once per value (several --sweep are crossed); one summary row per variant",
    )
    parser.add_argument(
        "--jobs", type=_jobs, default=1, metavar="N", help="worker processes (default 1)"
    )
    parser.set_defaults(handler=run)


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--jobs expects a positive integer, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--jobs expects a positive integer, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    """Run the analysis and write the report; returns the exit code."""
    from loopwarden.analyze.runner import collect_sources, run_analysis
    from loopwarden.analyze.sweep import parse_sweeps

    err = Console(stderr=True, highlight=False)
    if args.sweep and args.output == "html":
        err.print("[bold red]error[/]: --sweep reports are text, json or jsonl, not html")
        return 2
    try:
        variants = parse_sweeps(args.sweep)
        configs, notices = _configs(args, [variant.overrides for variant in variants])
    except ConfigError as exc:
        err.print(f"[bold red]error[/]: {exc}", markup=True, soft_wrap=True)
        return 2
    sources, input_errors = collect_sources(args.paths)
    with _progress(len(sources)) as advance:
        analysis = run_analysis(sources, args.format, configs, jobs=args.jobs, on_file=advance)
    analysis.errors[:0] = input_errors
    try:
        with _output(args.out) as out:
            _write(args, analysis, variants, notices, out)
    except OSError as exc:
        err.print(f"[bold red]error[/]: cannot write {args.out}: {exc.strerror or exc}")
        return 2
    for line in analysis.errors:
        err.print(f"[bold red]error[/]: {line}", markup=True, soft_wrap=True)
    if analysis.errors:
        return 2
    blocked = any(r.first_block is not None for reports in analysis.reports for r in reports)
    return 1 if blocked else 0


def _configs(
    args: argparse.Namespace, variant_overrides: Sequence[Sequence[str]]
) -> tuple[list[ResolvedConfig], list[str]]:
    """One resolved config per variant (base options plus the variant's settings)."""
    configs: list[ResolvedConfig] = []
    notices: list[str] = []
    for overrides in variant_overrides:
        variant_args = argparse.Namespace(**vars(args))
        variant_args.overrides = [*args.overrides, *overrides]
        config, found = config_from_args(variant_args, default_enabled=True)
        configs.append(config)
        notices.extend(notice for notice in found if notice not in notices)
    return configs, notices


def _write(
    args: argparse.Namespace,
    analysis: Any,
    variants: Sequence[Any],
    notices: list[str],
    out: TextIO,
) -> None:
    from loopwarden.analyze import report_html, report_json, report_text

    if args.sweep:
        if args.output == "text":
            report_text.write_sweep_text(analysis, variants, notices, out)
        else:
            report_json.write_sweep(analysis, variants, notices, out, lines=args.output == "jsonl")
        return
    writers = {
        "text": report_text.write_text,
        "json": report_json.write_json,
        "jsonl": report_json.write_jsonl,
        "html": report_html.write_html,
    }
    writers[args.output](analysis, notices, out)


@contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        return
    with open(path, "w", encoding="utf-8") as handle:
        yield handle


@contextmanager
def _progress(total: int) -> Iterator[Callable[[Any], None] | None]:
    """A progress bar over files on stderr, only when stderr is a terminal."""
    if total < 2 or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    # No auto-refresh thread: worker processes may be forked while the bar is shown.
    with Progress(console=Console(stderr=True), transient=True, auto_refresh=False) as progress:
        task = progress.add_task("replaying", total=total)

        def advance(_result: Any) -> None:
            progress.advance(task)
            progress.refresh()

        yield advance

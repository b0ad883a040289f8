"""``loopwarden analyze PATH...``: replay recorded agent transcripts through the guard.

Answers "what would the guard have done on my agents' past runs?": which loops it catches, how
early, and whether it would have blocked anything. Exit codes, like a linter: 0 nothing blocked,
1 something would have been blocked (or a run stopped), 2 usage, config or input errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TextIO

from loopwarden import ConfigError, ResolvedConfig
from loopwarden._terminal import plural, printable
from loopwarden.cli._options import (
    add_config_options,
    add_output_option,
    config_from_args,
    error_text,
)

if TYPE_CHECKING:
    from rich.console import Console

    from loopwarden.analyze.replay import TrajectoryReport
    from loopwarden.analyze.report_html import PageContext
    from loopwarden.analyze.runner import Analysis, KeepFilter, Source
    from loopwarden.analyze.sweep import Variant

OUTPUTS = ("text", "json", "jsonl", "html")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``analyze`` command."""
    from loopwarden.transcripts import FORMATS
    from loopwarden.transcripts._shapes import FLAT_JSONL_FIELDS as FIELDS

    parser = subparsers.add_parser(
        "analyze",
        help="replay agent transcripts through the guard and report the loops it would catch",
        description="Replay recorded agent runs (files or directories, formats detected per "
        "file) through a real LoopGuard and report which loops it would have caught, how early, "
        "and what it would have blocked. With no --config file, the defaults are used with "
        "enabled=true (then --set); a file is replayed as it runs: without 'enabled' only the "
        "post-compaction guard acts. "
        "Exit 2 on usage or config errors and for a PATH that does not exist; else 1 when "
        "something would have been blocked (even if some file could not be read: it is "
        "reported), else 2 when a file could not be read, else 0.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="transcript files or directories; - reads one transcript from stdin",
    )
    parser.add_argument(
        "--format", choices=("auto", *FORMATS), default="auto", help="input format (default: auto)"
    )
    parser.add_argument(
        "--field",
        metavar="KEY=NAME",
        action="append",
        default=[],
        help="read flat JSON lines whose fields have other names: KEY is one of "
        f"{', '.join(FIELDS)}, NAME the field that holds it in your file (a.b: field b of "
        "object a), e.g. --field trajectory=session_id --field tool=name; implies --format "
        "jsonl (repeatable)",
    )
    add_config_options(parser)
    add_output_option(
        parser, OUTPUTS, default_help="from --out's extension (.html, .json, .jsonl), else text"
    )
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE, not stdout")
    parser.add_argument(
        "--sweep",
        metavar="KEY=V1,V2,...",
        action="append",
        default=[],
        help="replay once per value (several --sweep are crossed); one summary row per "
        "variant in every output format, and with --output html a plot of what each variant "
        "saves against what it blocks",
    )
    parser.add_argument(
        "--jobs",
        type=_jobs,
        default=1,
        metavar="N",
        help="worker processes (default 1); inputs under 4 MB in all are analysed in one "
        "process, where starting workers would cost more than they save",
    )
    parser.add_argument(
        "--record",
        metavar="DB",
        help="also write a run record of every trajectory to the SQLite file DB (read them "
        "with `loopwarden runs list --db DB`); not with --sweep",
    )
    parser.add_argument(
        "--price",
        metavar="MODEL=IN,OUT[,CACHED]",
        action="append",
        type=_price,
        default=[],
        help="US dollars per million input and output tokens of MODEL (and, optionally, cached "
        "input tokens; * for any model the other prices miss), for runs whose transcripts "
        "record tokens but no money (repeatable; overrides the built-in table of list prices); "
        "the report says how each run was priced",
    )
    parser.add_argument(
        "--no-price-table",
        action="store_true",
        help="do not price runs from the built-in table of list prices (docs/costs.md): only "
        "from --price",
    )
    parser.set_defaults(handler=run)


def _price(text: str) -> tuple[str, Any]:
    from loopwarden.analyze.spend import parse_price

    try:
        return parse_price(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
    from loopwarden.analyze.sweep import parse_sweeps

    err = _Stderr()
    if args.output is None:
        args.output = output_for(args.out)
    if args.sweep and args.record:
        err.print(*_error("--record records the runs of one config: drop --sweep or --record"))
        return 2
    problem = _record_problem(args.record) if args.record else None
    if problem is not None:
        err.print(*_error(f"--record {args.record}: {problem}"), soft_wrap=True)
        return 2
    try:
        args.fields = parse_fields(args.field, args.format)
        variants = parse_sweeps(args.sweep)
        configs, notices = _configs(args, [variant.overrides for variant in variants])
    except ConfigError as exc:
        err.print(*_error(error_text(exc), escaped=True), soft_wrap=True)
        return 2
    with _stdin_copy(args.paths) as stdin:
        sources, input_errors = _sources(args.paths, stdin)
        return _run(args, err, (configs, variants, notices), (sources, input_errors))


def _sources(paths: Sequence[str], stdin: str | None) -> tuple[list[Source], list[str]]:
    """The command line's paths as sources, in order; ``-`` is stdin (copied to ``stdin``)."""
    from loopwarden.analyze.runner import Source, collect_sources

    sources: list[Source] = []
    errors: list[str] = []
    for path in paths:
        if path == "-" and stdin is not None:
            sources.append(Source(stdin, explicit=True, name="-"))
            continue
        found, problems = collect_sources([path])
        sources += found
        errors += problems
    return sources, errors


@contextmanager
def _stdin_copy(paths: Sequence[str]) -> Iterator[str | None]:
    """With ``-`` among the paths: stdin copied to a temporary file (the readers detect the
    format, then read the file again), removed afterwards; a gzip stream stays compressed."""
    if "-" not in paths:
        yield None
        return
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="loopwarden-stdin-") as folder:
        head = sys.stdin.buffer.peek(2)[:2] if hasattr(sys.stdin.buffer, "peek") else b""
        path = os.path.join(folder, "stdin.gz" if head == b"\x1f\x8b" else "stdin")
        with open(path, "wb") as copy:
            shutil.copyfileobj(sys.stdin.buffer, copy, 1 << 20)
        yield path


def _run(
    args: argparse.Namespace,
    err: _Stderr,
    setup: tuple[list[ResolvedConfig], list[Variant], list[str]],
    inputs: tuple[list[Source], list[str]],
) -> int:
    """Replay the sources and write the report; returns the exit code."""
    configs, variants, notices = setup
    sources, input_errors = inputs
    clash = _input_at(args.out, sources) if args.out is not None else None
    if clash is not None:
        err.print(
            *_error(
                f"--out {args.out} is also an input ({clash}): writing the report there would "
                "destroy it; choose another file"
            ),
            soft_wrap=True,
        )
        return 2
    try:
        with _output(args.out) as out:
            analysis = _analyze_and_write(
                args, configs, variants, notices, out, (sources, input_errors)
            )
    except BrokenPipeError:
        raise  # stdout's reader went away: the entry point ends quietly
    except _NothingToAnalyse as nothing:
        for line in nothing.analysis.errors:
            err.print(*_error(line), soft_wrap=True)
        err.print(*_error(_nothing_text(args.paths, nothing.analysis)), soft_wrap=True)
        return 2
    except OSError as exc:
        where = args.out if args.out is not None else "the report"
        err.print(*_error(f"cannot write {where}: {exc.strerror or exc}"), soft_wrap=True)
        return 2
    for line in analysis.warnings:
        err.print(("warning", "yellow"), f": {printable(line)}", soft_wrap=True)
    for line in analysis.errors:
        err.print(*_error(line), soft_wrap=True)
    # A loop found is the signal a CI job acts on: it wins over a file that could not be read,
    # which is still reported above (and in the report). A path that does not exist is a
    # mistake on the command line: that is exit 2 whatever was found.
    code = 2 if input_errors or (analysis.errors and not analysis.any_block) else 0
    code = code or int(analysis.any_block)
    if args.out is not None:
        err.print(_written(args.out, args.output, analysis, code), soft_wrap=True)
    return code


def parse_fields(specs: Sequence[str], fmt: str) -> tuple[tuple[str, str], ...]:
    """``--field KEY=NAME`` options as (KEY, NAME) pairs; :class:`ConfigError` when one is not
    of that shape, names an unknown KEY or a KEY twice, or comes with a format other than jsonl."""
    from loopwarden.transcripts._shapes import FLAT_JSONL_FIELDS as FIELDS

    pairs: list[tuple[str, str]] = []
    for spec in specs:
        key, sep, name = (part.strip() for part in spec.partition("="))
        if not sep or not name or key not in FIELDS:
            raise ConfigError(
                [
                    f"--field {spec!r}: expected KEY=NAME with KEY one of {', '.join(FIELDS)}, "
                    "e.g. --field trajectory=session_id"
                ]
            )
        if any(key == seen for seen, _ in pairs):
            raise ConfigError([f"--field {key} given twice"])
        pairs.append((key, name))
    if pairs and fmt not in ("auto", "jsonl"):
        raise ConfigError([f"--field names the fields of --format jsonl, not --format {fmt}"])
    return tuple(pairs)


_EXTENSIONS = {".html": "html", ".htm": "html", ".json": "json", ".jsonl": "jsonl"}


def output_for(out: str | None) -> str:
    """The report format ``--out FILE`` asks for by its extension; text otherwise."""
    if out is None:
        return "text"
    return _EXTENSIONS.get(os.path.splitext(out)[1].lower(), "text")


def _record_problem(path: str) -> str | None:
    """Why ``--record PATH`` cannot take run records (an existing file that is no records
    database, a path under a file), or None; checked before anything is replayed."""
    from loopwarden.records import RecordsError, open_db

    try:
        open_db(path).close()
    except RecordsError as exc:
        return str(exc)
    return None


class _NothingToAnalyse(Exception):
    """No trajectory came out of the inputs: no report is written (the --out file is kept)."""

    def __init__(self, analysis: Analysis) -> None:
        super().__init__("nothing to analyse")
        self.analysis = analysis


def _nothing_text(paths: Sequence[str], analysis: Analysis) -> str:
    named = ", ".join(printable(path) for path in paths)
    why = f"{len(analysis.skipped)} not a transcript" if analysis.skipped else "no transcript"
    return (
        f"nothing to analyse in {named} ({plural(analysis.files, 'file')} read, {why}); "
        "see `loopwarden analyze --help` for the formats, or pass --format"
    )


def _written(path: str, output: str, analysis: Analysis, code: int) -> str:
    """Where the report went, and what the exit code says (a 1 is a finding, not a failure)."""
    meaning = {
        0: "exit 0: nothing would have been blocked",
        1: "exit 1: the guard would have blocked calls or stopped runs in "
        + plural(max(t.with_block_or_stop for t in analysis.totals), "trajectory"),
        2: "exit 2: some input could not be analysed (errors above)",
    }[code]
    if code == 1 and analysis.errors:
        meaning += f"; {plural(len(analysis.errors), 'input error')} above"
    return f"wrote the {output} report to {printable(path)}; {meaning}"


def _error(message: str, *, escaped: bool = False) -> tuple[Part, ...]:
    # Parts, not markup: messages quote paths and config keys that may hold brackets; and
    # printable, since a file name or a transcript's text may hold terminal escapes.
    return ("error", "bold red"), f": {message if escaped else printable(message)}"


Part = str | tuple[str, str]
"""A piece of a message on stderr: text, or (text, rich style)."""


class _Stderr:
    """The command's messages on stderr.

    Through rich (colours; lines wrapped to a terminal's width) when stderr is a terminal or
    the environment asks rich for colours; otherwise each soft-wrapped message is written as the
    plain line rich would write, and rich is not imported: on ``--output json`` with ``--out``
    it was a fifth of the command's start-up.
    """

    _RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")

    def __init__(self) -> None:
        self._console: Console | None = None

    def print(self, *parts: Part, soft_wrap: bool = False) -> None:
        """Print one message made of ``parts``; ``soft_wrap``: never break it into lines."""
        if soft_wrap and self._console is None and not self._styled():
            sys.stderr.write("".join(part if isinstance(part, str) else part[0] for part in parts))
            sys.stderr.write("\n")
            return
        from rich.text import Text

        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)
        self._console.print(Text.assemble(*parts), soft_wrap=soft_wrap)

    def _styled(self) -> bool:
        if any(name in os.environ for name in self._RICH_ENV):
            return True
        try:
            return sys.stderr.isatty()
        except ValueError:  # closed
            return False


def _input_at(out: str, sources: Sequence[Source]) -> str | None:
    """The input file that ``out`` names (also through a link), or None."""
    try:
        target = os.stat(out)
    except OSError:
        return None  # nothing there yet, so nothing to destroy
    for source in sources:
        try:
            found = os.stat(source.path)
        except OSError:
            continue
        if (found.st_dev, found.st_ino) == (target.st_dev, target.st_ino):
            return source.path
    return None


def _analyze_and_write(
    args: argparse.Namespace,
    configs: list[ResolvedConfig],
    variants: Sequence[Variant],
    notices: list[str],
    out: TextIO,
    inputs: tuple[list[Source], list[str]],
) -> Analysis:
    """Replay everything, streaming jsonl lines as they come, then write the report."""
    from loopwarden.analyze import report_json
    from loopwarden.analyze.runner import run_analysis
    from loopwarden.analyze.spend import price_list

    sources, input_errors = inputs
    streaming = args.output == "jsonl" and not args.sweep
    writer = report_json.JsonlWriter(out) if streaming else None
    # Keep in memory only what the chosen report shows: json and html list every trajectory,
    # text only the loops, jsonl and sweeps nothing (they stream or just count).
    keep: KeepFilter
    if args.sweep or streaming:
        keep = _keep_none
    elif args.output == "text":
        keep = _keep_loops
    else:
        keep = _keep_all
    with _progress(len(sources)) as advance:
        analysis = run_analysis(
            sources,
            args.format,
            configs,
            jobs=args.jobs,
            keep=keep,
            on_trajectory=writer.trajectory if writer else None,
            on_file=advance,
            record=args.record,
            fields=args.fields,
            prices=price_list(args.price, table=not args.no_price_table),
        )
    analysis.errors[:0] = input_errors
    if not any(totals.trajectories for totals in analysis.totals):
        raise _NothingToAnalyse(analysis)
    # Each report's module is imported when it is asked for (rich's tables, html...).
    if writer is not None:
        writer.finish(analysis, notices)
    elif args.output == "text":
        from loopwarden.analyze import report_text

        if args.sweep:
            report_text.write_sweep_text(analysis, variants, notices, out)
        else:
            report_text.write_text(analysis, notices, out)
    elif args.output == "html":
        from loopwarden.analyze import report_html

        if args.sweep:
            report_html.write_sweep_html(analysis, variants, notices, out, _page_context(args))
        else:
            report_html.write_html(analysis, notices, out, _page_context(args))
    elif args.sweep:
        report_json.write_sweep(analysis, variants, notices, out, lines=args.output == "jsonl")
    else:
        report_json.write_json(analysis, notices, out)
    return analysis


def _page_context(args: argparse.Namespace) -> PageContext:
    """What the HTML page's header says: the inputs, the command line, the time (UTC)."""
    import shlex
    from datetime import datetime, timezone

    from loopwarden.analyze.report_html import PageContext

    argv = getattr(args, "argv", None) or ["analyze", *args.paths]
    return PageContext(
        inputs=tuple(args.paths),
        command=shlex.join(["loopwarden", *argv]),
        when=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )


def _keep_none(report: TrajectoryReport) -> bool:
    return False


def _keep_loops(report: TrajectoryReport) -> bool:
    return bool(report.events)


def _keep_all(report: TrajectoryReport) -> bool:
    return True


def _configs(
    args: argparse.Namespace, variant_overrides: Sequence[Sequence[str]]
) -> tuple[list[ResolvedConfig], list[str]]:
    """One resolved config per variant (base options plus the variant's settings)."""
    configs: list[ResolvedConfig] = []
    notices: list[str] = []
    for overrides in variant_overrides:
        config, found = config_from_args(
            args, default_enabled=True, swept=overrides, file_decides=True
        )
        configs.append(config)
        notices.extend(notice for notice in found if notice not in notices)
    return configs, notices


@contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    """stdout, or ``path`` written atomically: a reader sees the old file or the whole report.

    The report goes to a temporary file next to the target, replaced onto it once complete; an
    interrupted or failed run leaves the previous file as it was. A FIFO or a device (such as
    ``/dev/stdout``) cannot be replaced, so it is written directly.
    """
    if path is None:
        yield sys.stdout
        return
    target = os.path.realpath(path)  # through a symlink: replace the file, keep the link
    if os.path.exists(target) and not os.path.isfile(target):
        with open(path, "w", encoding="utf-8") as handle:
            yield handle
        return
    folder, name = os.path.split(target)
    temporary = os.path.join(
        folder, f".{name}.{os.urandom(4).hex()}.tmp"
    )  # as secrets.token_hex, unimported
    try:
        with open(temporary, "x", encoding="utf-8") as handle:
            _keep_mode(target, temporary)
            yield handle
            handle.flush()
            os.fsync(handle.fileno())  # the whole report is on disk before it takes the name
        os.replace(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def _keep_mode(target: str, temporary: str) -> None:
    """Give the new report the permissions of the file it replaces (new files: the umask's)."""
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return
    os.chmod(temporary, mode & 0o7777)


@contextmanager
def _progress(total: int) -> Iterator[Callable[[Any], None] | None]:
    """A progress bar over files on stderr, only when stderr is a terminal."""
    if total < 2 or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress

    # No auto-refresh thread: worker processes may be forked while the bar is shown.
    with Progress(console=Console(stderr=True), transient=True, auto_refresh=False) as progress:
        task = progress.add_task("replaying", total=total)

        def advance(_result: Any) -> None:
            progress.advance(task)
            progress.refresh()

        yield advance

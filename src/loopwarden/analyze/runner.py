"""Analyse many transcript files: import, replay under one or more configs, in order.

Work is split by file. With ``jobs > 1`` files are spread over worker processes; results are
collected back in input order, so the report is identical to a single-process run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopwarden import LoopGuard, ResolvedConfig
from loopwarden.analyze.replay import Replayer, TrajectoryReport, quiet_guard_logs
from loopwarden.transcripts import NotATranscript, TranscriptError, iter_sources, read_transcripts


@dataclass(frozen=True, slots=True)
class Source:
    """One unit of work: a transcript file (or conversation directory)."""

    path: str
    explicit: bool  # named on the command line (a non-transcript is then an error, not a skip)


@dataclass(slots=True)
class FileResult:
    """The reports of one source under each config variant, or why it could not be analysed."""

    source: str
    reports: list[list[TrajectoryReport]] = field(default_factory=list)  # [variant][trajectory]
    error: str | None = None
    skipped: str | None = None


@dataclass(slots=True)
class Analysis:
    """Everything the reports need: per-variant trajectory reports, errors and skipped files."""

    configs: list[ResolvedConfig]
    reports: list[list[TrajectoryReport]]
    errors: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    files: int = 0


def collect_sources(paths: Sequence[str]) -> tuple[list[Source], list[str]]:
    """Expand the command-line paths; returns the sources and the input errors (missing paths)."""
    sources: list[Source] = []
    errors: list[str] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            errors.append(f"{raw}: no such file or directory")
            continue
        explicit = path.is_file()
        try:
            sources.extend(Source(str(found), explicit) for found in iter_sources([path]))
        except OSError as exc:
            errors.append(f"{raw}: cannot list: {exc}")
    return sources, errors


def analyze_source(source: Source, fmt: str, configs: Sequence[ResolvedConfig]) -> FileResult:
    """Import one source and replay each trajectory under every config (a worker's job)."""
    result = FileResult(source=source.path, reports=[[] for _ in configs])
    replayers = [Replayer(LoopGuard(config)) for config in configs]
    try:
        with quiet_guard_logs():
            for trajectory in read_transcripts(Path(source.path), fmt):
                for variant, replayer in enumerate(replayers):
                    result.reports[variant].append(replayer.replay(trajectory))
    except NotATranscript as exc:
        if source.explicit:
            result.error = str(exc)
        else:
            result.skipped = f"{source.path}: {exc.detail}"
        result.reports = [[] for _ in configs]
    except TranscriptError as exc:
        result.error = f"{exc} (file not analysed)"
        result.reports = [[] for _ in configs]
    except Exception as exc:  # a bug or an input shape nobody anticipated: report, go on
        result.error = (
            f"{source.path}: unexpected {type(exc).__name__} while analysing: {exc} "
            "(file not analysed; please report this with the file's format)"
        )
        result.reports = [[] for _ in configs]
    return result


def _analyze_star(task: tuple[Source, str, Sequence[ResolvedConfig]]) -> FileResult:
    return analyze_source(*task)


def run_analysis(
    sources: Sequence[Source],
    fmt: str,
    configs: Sequence[ResolvedConfig],
    *,
    jobs: int = 1,
    on_file: Callable[[FileResult], Any] | None = None,
) -> Analysis:
    """Analyse every source (in order) and gather the results."""
    analysis = Analysis(configs=list(configs), reports=[[] for _ in configs])
    for result in _results(sources, fmt, configs, jobs):
        analysis.files += 1
        if result.error is not None:
            analysis.errors.append(result.error)
        if result.skipped is not None:
            analysis.skipped.append(result.skipped)
        for variant, reports in enumerate(result.reports):
            analysis.reports[variant].extend(reports)
        if on_file is not None:
            on_file(result)
    return analysis


def _results(
    sources: Sequence[Source], fmt: str, configs: Sequence[ResolvedConfig], jobs: int
) -> Iterator[FileResult]:
    tasks = [(source, fmt, configs) for source in sources]
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(_analyze_star, tasks)
        return
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        # map() yields in submission order, whatever order the workers finish in.
        yield from pool.map(_analyze_star, tasks, chunksize=max(1, len(tasks) // (jobs * 8)))


def summary(reports: Sequence[TrajectoryReport]) -> dict[str, int]:
    """The ``summary`` object of the JSON contract (plus ``stopped``)."""
    return {
        "trajectories": len(reports),
        "calls": sum(report.calls for report in reports),
        "with_warning": sum(1 for report in reports if report.warnings),
        "with_block": sum(1 for report in reports if report.first_block is not None),
        "stopped": sum(1 for report in reports if report.stopped),
        "calls_after_first_block": sum(report.calls_after_first_block for report in reports),
    }

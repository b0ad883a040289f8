"""Analyse many transcript files: import, replay under one or more configs, in order.

Work is split by file. With ``jobs > 1`` files are spread over worker processes (in runs of
about equal bytes; inputs under :data:`POOL_MIN_BYTES` stay in this process); results are
collected back in input order, so the report is identical to a single-process run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from loopwarden import LoopGuard, ResolvedConfig
from loopwarden.analyze.replay import Replayer, ReplayStore, TrajectoryReport, quiet_guard_logs
from loopwarden.analyze.spend import Prices, SpendTotals, priced
from loopwarden.transcripts import (
    EXPECTED,
    NotATranscript,
    Trajectory,
    TranscriptError,
    iter_sources,
    read_transcripts,
)
from loopwarden.transcripts._io import READ_WARNINGS

if TYPE_CHECKING:
    from loopwarden.records import RunRecorder


# Source, FileResult and Analysis are plain records written as classes with __slots__, not
# dataclasses: nothing compares or prints them, and a dataclass costs about 3.5 M instructions
# at import, paid by every `loopwarden analyze` before its first file (docs/performance.md).
class Source:
    """One unit of work: a transcript file (or conversation directory)."""

    __slots__ = ("explicit", "name", "path")

    def __init__(self, path: str, explicit: bool, name: str | None = None) -> None:
        self.path = path
        self.explicit = explicit  # named on the command line (a non-transcript is an error)
        self.name = name  # what reports call it, when not its path (stdin's copy: "-")


class FileResult:
    """The reports of one source under each config variant, or why it could not be analysed."""

    __slots__ = ("error", "reports", "skipped", "source", "warnings")

    def __init__(self, source: str) -> None:
        self.source = source
        self.reports: list[list[TrajectoryReport]] = []  # [trajectory][variant]
        self.error: str | None = None
        self.skipped: str | None = None
        self.warnings: list[str] = []  # read, with something left out


@dataclass(slots=True)
class Totals:
    """Running summary of one config variant (so reports need not all be kept in memory)."""

    trajectories: int = 0
    calls: int = 0
    with_warning: int = 0
    with_block_or_stop: int = 0
    stopped: int = 0
    calls_after_first_block_or_stop: int = 0
    calls_saved: int = 0
    first_block_indices: list[int] = field(default_factory=list)
    # Runs the transcripts mark as succeeded, and those of them the guard blocked or stopped.
    succeeded: int = 0
    succeeded_blocked: int = 0
    # The cost, summed over the runs whose transcripts record it (None: no run does).
    tokens: int | None = None
    tokens_saved: int | None = None
    seconds: float | None = None
    seconds_saved: float | None = None
    spend: SpendTotals = field(default_factory=SpendTotals)

    def add(self, report: TrajectoryReport) -> None:
        """Count one trajectory's report."""
        calls = len(report.tools)
        # Most runs have no mark: their loop counts are all nought (no scan of the marks).
        first = report.first_block_or_stop if report.marks else None
        self.spend.add(report.spend, None if first is None else first.detector, report.id)
        self.trajectories += 1
        self.calls += calls
        if report.marks:
            self.with_warning += report.first_warning is not None
            self.stopped += report.stopped
        self.calls_saved += len(report.saved)
        if first is not None:
            self.with_block_or_stop += 1
            self.first_block_indices.append(first.index)
            self.calls_after_first_block_or_stop += calls - first.index - 1
        if report.succeeded:
            self.succeeded += 1
            self.succeeded_blocked += first is not None
        if report.tokens is not None:
            self.tokens = _plus(self.tokens, report.tokens)
        if report.tokens_saved is not None:
            self.tokens_saved = _plus(self.tokens_saved, report.tokens_saved)
        if report.seconds is not None:
            self.seconds = _plus(self.seconds, report.seconds)
        if report.seconds_saved is not None:
            self.seconds_saved = _plus(self.seconds_saved, report.seconds_saved)

    def as_dict(self) -> dict[str, Any]:
        """The ``summary`` object of the JSON contract (docs/analyze-json.md)."""
        return {
            "trajectories": self.trajectories,
            "calls": self.calls,
            "with_warning": self.with_warning,
            "with_block_or_stop": self.with_block_or_stop,
            "stopped": self.stopped,
            "calls_after_first_block_or_stop": self.calls_after_first_block_or_stop,
            "calls_saved": self.calls_saved,
            "succeeded": self.succeeded,
            "succeeded_with_block_or_stop": self.succeeded_blocked,
            "cost": {
                "tokens": self.tokens,
                "tokens_saved": self.tokens_saved,
                "seconds": self.seconds,
                "seconds_saved": self.seconds_saved,
            },
            "spend": self.spend.to_json(),
        }


_N = TypeVar("_N", int, float)


def _plus(total: _N | None, value: _N | None) -> _N | None:
    """A sum over the runs that record a cost: None until one does."""
    if value is None:
        return total
    return value if total is None else total + value


KeepFilter = Callable[[TrajectoryReport], bool]


class Analysis:
    """What the reports need: per-variant totals, the kept reports, errors and skipped files."""

    __slots__ = ("configs", "errors", "files", "reports", "skipped", "totals", "warnings")

    def __init__(
        self,
        configs: list[ResolvedConfig],
        totals: list[Totals],
        reports: list[list[TrajectoryReport]],  # [variant][trajectory], only those kept
    ) -> None:
        self.configs = configs
        self.totals = totals
        self.reports = reports
        self.errors: list[str] = []
        self.skipped: list[str] = []
        self.warnings: list[str] = []
        self.files = 0

    @property
    def any_block(self) -> bool:
        """True when any variant would have blocked a call or stopped a run."""
        return any(totals.with_block_or_stop for totals in self.totals)


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


Fields = tuple[tuple[str, str], ...]
"""``--field KEY=NAME`` pairs: the flat jsonl format's fields under other names."""


def iter_source(
    source: Source,
    fmt: str,
    configs: Sequence[ResolvedConfig],
    status: FileResult,
    record: str | None = None,
    fields: Fields = (),
    replayers: list[Replayer] | None = None,
) -> Iterator[list[TrajectoryReport]]:
    """Yield each trajectory's reports (one per config) as it is replayed; streams the file.

    When the file turns out unreadable part-way, the trajectories already yielded stay analysed
    and ``status.error`` says where it stopped; a non-transcript sets ``status.skipped`` (or an
    error, when the file was named explicitly). ``record``: a SQLite file that gets a run
    record for each trajectory (one config only); ``fields``: see :data:`Fields`.
    ``replayers``: those of :func:`new_replayers` for ``configs``, reused from file to file
    (without ``record``; new ones otherwise).
    """
    # One writer per file, many rows per transaction (a replay is a bulk write).
    recorder: RunRecorder | None = None
    if record is not None:
        from loopwarden.records import RunRecorder  # sqlite3: imported when asked for

        recorder = RunRecorder(record, batch=500)
    if replayers is None or recorder is not None:
        replayers = new_replayers(configs, recorder)
    else:
        for replayer in replayers:
            replayer.new_source()
    done = 0
    # A forced format that reads no tool call at all read the wrong kind of file: its empty
    # trajectories are held back until a call shows up, and dropped for an error if none does.
    held: list[Trajectory] = []
    forced = fmt != "auto" or bool(fields)
    try:
        with quiet_guard_logs():
            for trajectory in _read(Path(source.path), (fmt, fields), status.warnings):
                if source.name is not None:
                    trajectory.source = source.name
                if forced and not done and not trajectory.calls:
                    held.append(trajectory)
                    continue
                for pending in [*held, trajectory]:
                    yield [replayer.replay(pending) for replayer in replayers]
                    done += 1
                held.clear()
        if forced and not done:
            status.error = _nothing_found(source.path, fmt, fields)
    except NotATranscript as exc:
        if source.explicit:
            status.error = str(exc)
        else:
            status.skipped = f"{source.path}: {exc.detail}"
    except TranscriptError as exc:
        status.error = f"{exc}{_partial(done)}"
    except Exception as exc:  # a bug or an input shape nobody anticipated: report, go on
        status.error = (
            f"{source.path}: unexpected {type(exc).__name__} while analysing: {exc}"
            f"{_partial(done)}; please report this with the file's format"
        )
    finally:
        if recorder is not None:
            recorder.close()
        if source.name is not None:
            _rename(status, source)


def new_replayers(
    configs: Sequence[ResolvedConfig], recorder: RunRecorder | None = None
) -> list[Replayer]:
    """A replayer per config, each on a guard of its own with a :class:`ReplayStore`.

    They can replay file after file (:func:`iter_source`): the store forgets each trajectory's
    session once it is replayed, so nothing of one file is left for the next, and a guard
    costs more to make than a small file costs to replay.
    """
    return [Replayer(LoopGuard(config, store=ReplayStore()), recorder) for config in configs]


def _nothing_found(path: str, fmt: str, fields: Fields) -> str:
    if fields:
        named = " ".join(f"--field {key}={name}" for key, name in fields)
        return (
            f"{path}: read as flat JSON lines with {named}, it holds no tool call; expected "
            "one object per line with those fields"
        )
    return (
        f"{path}: --format {fmt} found no tool call in this file; expected {EXPECTED[fmt]} "
        "(or leave --format out to detect the format)"
    )


def _rename(status: FileResult, source: Source) -> None:
    """Messages about a stand-in file (stdin's copy) under the name the user gave it."""
    name = source.name or source.path

    def renamed(text: str) -> str:
        return text.replace(source.path, name)

    status.error = None if status.error is None else renamed(status.error)
    status.skipped = None if status.skipped is None else renamed(status.skipped)
    status.warnings[:] = [renamed(line) for line in status.warnings]


def _read(path: Path, how: tuple[str, Fields], warnings: list[str]) -> Iterator[Trajectory]:
    """The file's trajectories; what the reader skips without failing goes to ``warnings``.

    The collector is set only while the reader runs, not while the caller holds a trajectory:
    another file's reader may run in between (the reports are consumed lazily).
    """
    fmt, fields = how
    trajectories = read_transcripts(path, fmt, dict(fields))
    while True:
        token = READ_WARNINGS.set(warnings)
        try:
            trajectory = next(trajectories, None)
        finally:
            READ_WARNINGS.reset(token)
        if trajectory is None:
            return
        yield trajectory


def _partial(done: int) -> str:
    if done == 0:
        return " (file not analysed)"
    return f" (analysis of this file stopped there; the {done} trajectories before it are included)"


def analyze_source(
    source: Source,
    fmt: str,
    configs: Sequence[ResolvedConfig],
    record: str | None = None,
    fields: Fields = (),
    replayers: list[Replayer] | None = None,
) -> FileResult:
    """Import one source and replay each trajectory under every config (a worker's job);
    ``replayers``: as :func:`iter_source` takes them."""
    result = FileResult(source=source.path)
    result.reports = list(iter_source(source, fmt, configs, result, record, fields, replayers))
    return result


def run_analysis(
    sources: Sequence[Source],
    fmt: str,
    configs: Sequence[ResolvedConfig],
    *,
    jobs: int = 1,
    keep: KeepFilter | None = None,
    on_trajectory: Callable[[list[TrajectoryReport]], Any] | None = None,
    on_file: Callable[[FileResult], Any] | None = None,
    record: str | None = None,
    fields: Fields = (),
    prices: Prices | None = None,
) -> Analysis:
    """Analyse every source in order; the same calls and results whatever ``jobs`` is.

    ``keep`` picks the reports kept in memory (all by default); ``on_trajectory`` sees every
    trajectory's reports as they come (for streamed output), ``on_file`` each finished file;
    ``record`` names a SQLite file that gets one run record per trajectory; ``fields``
    renames the flat jsonl format's fields; ``prices`` (``--price``) put money on runs whose
    transcripts record tokens only.
    """
    analysis = Analysis(
        configs=list(configs),
        totals=[Totals() for _ in configs],
        reports=[[] for _ in configs],
    )
    for status, per_trajectory in _results(sources, (fmt, fields), configs, jobs, record):
        for variants in per_trajectory:
            for variant, report in enumerate(variants):
                report.spend = priced(report.spend, prices or {})
                analysis.totals[variant].add(report)
                if keep is None or keep(report):
                    analysis.reports[variant].append(report)
            if on_trajectory is not None:
                on_trajectory(variants)
        analysis.files += 1
        if status.error is not None:
            analysis.errors.append(status.error)
        if status.skipped is not None:
            analysis.skipped.append(status.skipped)
        analysis.warnings.extend(status.warnings)
        if on_file is not None:
            on_file(status)
    return analysis


def _results(
    sources: Sequence[Source],
    how: tuple[str, Fields],
    configs: Sequence[ResolvedConfig],
    jobs: int,
    record: str | None,
) -> Iterator[tuple[FileResult, Iterable[list[TrajectoryReport]]]]:
    """Per source: its status and its per-trajectory reports (a live stream when in-process).

    The status is complete only once the stream has been consumed.
    """
    fmt, fields = how
    sizes = [_size(source.path) for source in sources] if jobs > 1 else []
    if jobs <= 1 or len(sources) <= 1 or sum(sizes) < POOL_MIN_BYTES:
        # Each stream is consumed before the next file's starts: one set of replayers.
        replayers = new_replayers(configs) if record is None else None
        for source in sources:
            status = FileResult(source=source.path)
            yield status, iter_source(source, fmt, configs, status, record, fields, replayers)
        return
    chunks = _chunks(sources, sizes, jobs * _CHUNKS_PER_WORKER)
    tasks = [(chunk, fmt, configs, record, fields) for chunk in chunks]
    for results in _in_workers(tasks, min(jobs, len(tasks))):
        for result in results:
            yield result, result.reports


def _in_workers(tasks: Sequence[_Task], workers: int) -> Iterator[list[FileResult]]:
    """Each task's results, in task order, from ``workers`` worker processes."""
    from loopwarden.analyze import _forked  # pickle, select: with --jobs only

    if hasattr(os, "fork") and len(tasks) <= _forked.MAX_TASKS:
        yield from _forked.forked_map(_analyze_chunk, tasks, workers)
        return
    # Without fork (or with very many tasks): the standard pool, its tasks pickled to it.
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        # map() yields in submission order, whatever order the workers finish in.
        yield from pool.map(_analyze_chunk, tasks)


POOL_MIN_BYTES = 4 << 20
"""With less input than this (bytes on disk), ``--jobs`` above 1 analyses in this process:
starting the workers and sending their reports back would cost more than they save."""

# Each worker takes its share in this many chunks of about equal bytes, so that the workers
# finish close together whatever the sizes of the files (a chunk is one round trip).
_CHUNKS_PER_WORKER = 8


def _size(path: str) -> int:
    """Bytes on disk of a source: a file's, or the files' under a conversation directory."""
    try:
        if not os.path.isdir(path):
            return os.stat(path).st_size
        return sum(
            os.stat(os.path.join(folder, name)).st_size
            for folder, _, names in os.walk(path)
            for name in names
        )
    except OSError:
        return 0  # reported when the source is read


def _chunks(sources: Sequence[Source], sizes: Sequence[int], count: int) -> list[list[Source]]:
    """The sources in order, cut into about ``count`` runs of about equal bytes (a source
    weighs at least one byte: empty or unreadable ones are spread too)."""
    weights = [max(1, size) for size in sizes]
    share = max(1, sum(weights) // count)
    chunks: list[list[Source]] = [[]]
    filled = 0
    for source, weight in zip(sources, weights, strict=True):
        if filled >= share:
            chunks.append([])
            filled = 0
        chunks[-1].append(source)
        filled += weight
    return chunks


_Task = tuple[list[Source], str, Sequence[ResolvedConfig], str | None, Fields]
"""A worker's job: a run of sources, the format, the configs, the record file, the fields."""


def _analyze_chunk(task: _Task) -> list[FileResult]:
    """A worker's job: analyse a run of sources, each as :func:`analyze_source` does."""
    sources, fmt, configs, record, fields = task
    replayers = new_replayers(configs) if record is None else None
    return [analyze_source(source, fmt, configs, record, fields, replayers) for source in sources]


def summary(reports: Iterable[TrajectoryReport]) -> dict[str, int]:
    """The ``summary`` object of the JSON contract for a list of reports."""
    totals = Totals()
    for report in reports:
        totals.add(report)
    return totals.as_dict()

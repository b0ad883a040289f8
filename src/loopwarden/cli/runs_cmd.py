"""``loopwarden runs``: read the durable run records (see :mod:`loopwarden.records`).

loopwarden runs list [--blocked] [--since WHEN] [--limit N] [--db PATH] [--output text|json]
loopwarden runs show RUN_ID [--session S] [--db PATH] [--json]
loopwarden runs prune [--older-than DURATION] [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loopwarden._terminal import printable
from loopwarden.cli._options import add_output_option
from loopwarden.records import (
    RETENTION_DAYS,
    RecordsError,
    RunSummary,
    default_db_path,
    describe_error,
    find_runs,
    list_runs,
    open_db,
    open_readonly,
    prune_runs,
    run_events,
)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_INT = 2**63 - 1  # SQLite's largest integer: a larger --limit or #N cannot be bound


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``runs`` command group."""
    runs = subparsers.add_parser(
        "runs",
        help="list and explain recorded runs (why was a run blocked?)",
        description="Read the run records that LoopGuard(record_db=...) and --record write. "
        f"Default database: {default_db_path()}",
    )
    actions = runs.add_subparsers(dest="runs_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list recorded runs, newest last")
    listing.add_argument(
        "--blocked", action="store_true", help="only runs with a blocked call or a stop"
    )
    listing.add_argument(
        "--since",
        metavar="WHEN",
        help="only runs active since WHEN: a duration back from now (30m, 2h, 7d) or an "
        "ISO date/time (2026-11-30, 2026-11-30T14:00, with an optional UTC offset)",
    )
    listing.add_argument("--limit", default="100", metavar="N", help="newest N runs (default 100)")
    add_output_option(listing)
    _add_db_option(listing)
    listing.set_defaults(handler=run_list)
    show = actions.add_parser(
        "show",
        help="the loop events of one run, in order",
        description="Show one run: its start, end, outcome and every loop event in order. "
        "RUN_ID is the run id, or N (#N) for the row number printed by 'runs list' (a run "
        "whose id is N comes first).",
    )
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument("--session", metavar="S", help="only the run of this session")
    add_output_option(show)
    # The old spelling, kept working but no longer shown: --output json is the convention.
    show.add_argument(
        "--json", action="store_const", const="json", dest="output", help=argparse.SUPPRESS
    )
    _add_db_option(show)
    show.set_defaults(handler=run_show)
    prune = actions.add_parser(
        "prune",
        help="delete old runs and their events",
        description="Delete the runs last active longer ago than DURATION, with their loop "
        f"events, then compact the file. The coding-CLI hooks do the same with "
        f"{RETENTION_DAYS} days at each new turn.",
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        default=f"{RETENTION_DAYS}d",
        help=f"a duration such as 12h, 7d, 8w (default {RETENTION_DAYS}d)",
    )
    _add_db_option(prune)
    prune.set_defaults(handler=run_prune)


def _add_db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="PATH", type=Path, help=f"records database (default {default_db_path()})"
    )


def parse_since(text: str, *, now: float | None = None) -> float:
    """Epoch seconds for ``--since``: a duration back from now, or an ISO date/time.

    A date/time without an offset is read as UTC. Raises ``ValueError`` saying what is accepted.
    """
    now = time.time() if now is None else now
    match = _DURATION.match(text)
    if match:
        return now - float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r}: expected a duration such as 30m, 2h, 7d, or an ISO date/time "
            "such as 2026-11-30 or 2026-11-30T14:00"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _fail(message: str) -> int:
    sys.stderr.write(f"error: {printable(message)}\n")
    return 2


def _row_number_error(run_id: str) -> str | None:
    """Why ``#N`` is no row number SQLite can look up, or None (also for a plain run id)."""
    digits = run_id[1:]
    if not run_id.startswith("#") or not digits.isdigit():
        return None  # looked up as a run id
    if not digits.isascii():  # "#²" passes isdigit(): say what a row number is
        return f"{run_id!r}: a row number is # followed by the digits 0-9, as 'runs list' prints"
    if int(digits) > _MAX_INT:
        return f"{run_id}: row numbers go from #1 to #{_MAX_INT}"
    return None


def _open(args: argparse.Namespace) -> sqlite3.Connection:
    path: Path = args.db if args.db is not None else default_db_path()
    if not path.exists():
        raise RecordsError(
            f"no run records at {path}: record runs with LoopGuard(record_db=...) or --record, "
            "or point --db at another file"
        )
    return open_readonly(path, timeout=5.0)  # reading never creates, migrates or changes it


def run_list(args: argparse.Namespace) -> int:
    """List runs, newest last."""
    text = str(args.limit)
    # Not int(): it reads any script's digits ("٣" is 3), which no shell user means.
    digits = text.isascii() and text.isdigit() and len(text.lstrip("0")) <= len(str(_MAX_INT))
    if not digits or not 1 <= int(text) <= _MAX_INT:
        return _fail(
            f"--limit must be a whole number between 1 and {_MAX_INT}, written with the "
            f"digits 0-9; got {text!r}"
        )
    limit = int(text)
    try:
        since = parse_since(args.since) if args.since else None
        conn = _open(args)
        try:
            runs = list_runs(conn, since=since, blocked_only=args.blocked, limit=limit)
        finally:
            conn.close()
    except (ValueError, RecordsError) as exc:
        return _fail(str(exc))
    except sqlite3.Error as exc:
        return _fail(f"reading run records failed: {exc}")
    if args.output == "json":
        json.dump([run.to_dict() for run in runs], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if not runs:
        print("no runs recorded" + (" with a block or stop" if args.blocked else ""))
        return 0
    print(
        f"{'#':>5}  {'last seen (UTC)':19}  {'outcome':10} {'warn':>4} {'block':>5} {'stop':>4}  "
        "session / run"
    )
    for run in runs:
        print(
            f"{'#' + str(run.id):>5}  {_when(run.last_seen):19}  {_outcome(run):10} "
            f"{run.warnings:>4} {run.blocks:>5} {run.stops:>4}  "
            f"{printable(run.session)} / {_run_name(run)}"
        )
    return 0


def _when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _run_name(run: RunSummary) -> str:
    return printable(run.run_id) if run.run_id is not None else "(no run id)"


def _outcome(run: RunSummary) -> str:
    if run.outcome is not None:
        return printable(run.outcome)
    return "running" if run.started_at is not None else "-"


def run_show(args: argparse.Namespace) -> int:
    """Show one run and its events."""
    bad_row = _row_number_error(args.run_id)
    if bad_row is not None:
        return _fail(bad_row)
    try:
        conn = _open(args)
        try:
            runs = find_runs(conn, args.run_id, session=args.session)
            events = {run.id: run_events(conn, run.id) for run in runs}
        finally:
            conn.close()
    except RecordsError as exc:
        return _fail(str(exc))
    except sqlite3.Error as exc:
        return _fail(f"reading run records failed: {exc}")
    if not runs:
        where = f" in session {args.session!r}" if args.session else ""
        return _fail(
            f"no recorded run {args.run_id!r}{where}; 'loopwarden runs list' shows the "
            "recorded runs (use #N for a run without a run id)"
        )
    if args.output == "json":
        payload: list[dict[str, Any]] = []
        for run in runs:
            item = run.to_dict()
            item["events"] = [event.to_dict() for event in events[run.id]]
            payload.append(item)
        json.dump(payload if len(payload) > 1 else payload[0], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for index, run in enumerate(runs):
        if index:
            print()
        _print_run(run, events[run.id])
    return 0


def _print_run(run: RunSummary, events: list[Any]) -> None:
    agent = printable(run.agent_id or "-")
    print(f"run {_run_name(run)}  (#{run.id}, session {printable(run.session)}, agent {agent})")
    print(f"  started  {_when(run.started_at)}")
    print(f"  ended    {_when(run.ended_at)}   outcome: {_outcome(run)}")
    if run.stop_reason:
        print(f"  stopped because: {printable(run.stop_reason)}")
    if not events:
        print("  no loop events")
        return
    print(f"  {len(events)} loop events:")
    for event in events:
        pair = f" <-> {printable(event.paired_tool_name)}" if event.paired_tool_name else ""
        call = f"call {event.call} " if event.call is not None else ""
        print(
            f"  {_when(event.timestamp)}  {call}{printable(event.action):5} "
            f"{printable(event.level):8} {printable(event.detector)} "
            f"{printable(event.tool_name)}{pair} count={event.count}"
        )
        if event.args_hash:
            print(f"      signature {printable(event.args_hash)}")
        print(f"      {printable(event.message)}")


def run_prune(args: argparse.Namespace) -> int:
    """Delete runs (and their events) last active before now minus ``--older-than``."""
    match = _DURATION.match(args.older_than)
    if not match:
        return _fail(
            f"--older-than {args.older_than!r}: expected a duration such as 12h, 7d or "
            f"{RETENTION_DAYS}d"
        )
    path: Path = args.db if args.db is not None else default_db_path()
    if not path.exists():
        return _fail(f"no run records at {path}: nothing to prune")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    try:
        conn = open_db(path, timeout=10.0)
        try:
            with conn:
                runs, events = prune_runs(conn, time.time() - seconds)
            conn.execute("VACUUM")  # give the freed pages back to the file system
        finally:
            conn.close()
    except RecordsError as exc:
        return _fail(str(exc))
    except sqlite3.Error as exc:
        return _fail(str(describe_error(path, exc)))
    plural = "run" if runs == 1 else "runs"
    print(
        f"Deleted {runs} {plural} and {events} loop events last active more than "
        f"{_spelled(args.older_than)} ago from {printable(str(path))}"
    )
    return 0


def _spelled(duration: str) -> str:
    """``30d`` as ``30 days``."""
    match = _DURATION.match(duration)
    assert match is not None
    names = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week"}
    number = match.group(1)
    return f"{number} {names[match.group(2)]}{'' if number == '1' else 's'}"

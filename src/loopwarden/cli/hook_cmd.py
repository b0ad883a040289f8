"""``loopwarden hook AGENT``: the command a coding CLI runs around every tool call.

    loopwarden hook claude-code|codex|gemini-cli [--config FILE] [--set K=V]... [--db FILE]

One hook event (JSON) on stdin; the answer in that CLI's format on stdout; exit code 0. The
command fails open: a malformed or unknown event, a broken config or an unusable state file
lets the tool call proceed, with one line on stderr. ``loopwarden hooks install`` writes the
command into the CLI's settings. It runs on every tool call, so it imports only what it needs
(no pydantic, no rich): the config is resolved leniently here and checked strictly by
``hooks install`` and ``hooks status``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from loopwarden.hooks._protocol import AGENTS

if TYPE_CHECKING:
    from loopwarden.core.config import ResolvedConfig

DEFAULT_PROFILE = "recommended"
"""The profile the hooks use unless the config names one (why: docs/coding-agents.md)."""

_DESCRIPTION = (
    "Read one hook event of a coding CLI on stdin and answer in that CLI's format: the "
    "guard's decision before a tool runs, the outcome recorded after it, the post-compaction "
    "guard armed at a compaction. Detection is on, with the 'recommended' profile unless the "
    "config names another. State and run records live in "
    "$XDG_STATE_HOME/loopwarden/runs.db (see 'loopwarden runs'). Installed by "
    "'loopwarden hooks install AGENT'; it always lets the call proceed when loopwarden itself "
    "has a problem, with one line on stderr."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The hook's arguments (shared by ``--help`` and the fast path)."""
    from loopwarden.cli._options import add_config_options

    parser.add_argument("agent", choices=AGENTS, help="the coding CLI that runs the hook")
    add_config_options(
        parser, agent=False
    )  # the positional AGENT is the CLI, not an OpenClaw agent
    parser.add_argument(
        "--db",
        metavar="FILE",
        help="the state and run-records file "
        "(default: $XDG_STATE_HOME/loopwarden/runs.db, or ~/.local/state/loopwarden/runs.db)",
    )
    parser.add_argument(
        "--scope",
        choices=("user", "project"),
        default="project",
        help="the settings it was installed in: a user-level hook stands aside in a project "
        "that has loopwarden's hook of its own (written by 'hooks install')",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``hook`` command (its fast path is :func:`main`, see ``loopwarden.cli``)."""
    parser = subparsers.add_parser(
        "hook",
        help="answer one coding-CLI hook event (Claude Code, Codex, Gemini CLI) on stdin",
        description=_DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def main(argv: Sequence[str]) -> int:
    """Run ``loopwarden hook`` with ``argv`` (the words after ``hook``), parsing only its own."""
    parser = argparse.ArgumentParser(prog="loopwarden hook", description=_DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Handle one event from stdin; always exit 0 (the answer, if any, is on stdout)."""
    from loopwarden.hooks._scope import skip

    if skip(args.agent, args.scope):  # switched off, or the project's own install decides
        sys.stdin.buffer.read()  # the CLI is writing the event: take it, never a broken pipe
        return 0
    from loopwarden.core import _lazylog
    from loopwarden.core.canonical import _set_fast_encoder

    _lazylog.on_first_use(lambda: _quiet_logging(args.agent))  # logging only when it logs
    _set_fast_encoder("stdlib")  # exact like orjson, and one import less for one or two hashes
    if any(name.startswith("OTEL_EXPORTER_OTLP") for name in os.environ):
        from loopwarden.otel import export_from_environment

        export_from_environment()  # loop events to OTLP; the SDK loads at the first event only
    text = sys.stdin.read()
    answer = handle(args.agent, text, args.config, args.overrides, args.db)
    if answer:
        sys.stdout.write(answer + "\n")
    return 0


def handle(agent: str, text: str, config: str | None, overrides: list[str], db: str | None) -> str:
    """The answer to print for one event (``""``: nothing); failures are logged, never raised."""
    from loopwarden.core._lazylog import get_logger
    from loopwarden.hooks._protocol import HookInputError, handles, parse_event

    log = get_logger("loopwarden.hooks")
    try:
        event = parse_event(agent, json.loads(text))
    except json.JSONDecodeError as exc:
        log.error("the hook event on stdin is not JSON (%s); the call proceeds", exc)
        return ""
    except HookInputError as exc:
        log.error("%s; the call proceeds", exc)
        return ""
    if event.kind == "ignored":
        if not handles(agent, event.name):
            log.error("ignoring hook event %r: loopwarden does not handle it", event.name)
        return ""
    try:
        resolved = hook_config(config, overrides)
    except (OSError, ValueError) as exc:
        log.error("config: %s; the call proceeds unguarded", exc)
        return ""
    try:
        from loopwarden.hooks._runner import HookRunner

        return HookRunner(agent, resolved, db).handle(event).stdout
    except Exception as exc:  # the guard never breaks a tool call because of its own state
        log.error("state: %s; the call proceeds", _describe(exc))
        return ""


def hook_config(path: str | None, overrides: list[str]) -> ResolvedConfig:
    """The resolved config of a hook: the file's block and ``--set``s, over the default profile.

    Lenient like the runtime resolution everywhere (invalid values fall back to defaults);
    ``hooks install`` and ``hooks status`` check the same inputs strictly.
    """
    from loopwarden.cli._options import apply_overrides
    from loopwarden.core.config import (
        effective_config,
        is_full_config,
        read_config_file,
        resolve_config,
    )

    block: dict[str, Any] = {}
    if path:
        raw = read_config_file(path)
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        block = dict(effective_config(raw, None) if is_full_config(raw) else raw)
    block = apply_overrides(block, overrides)
    block.setdefault("profile", DEFAULT_PROFILE)
    block.setdefault("enabled", True)
    return resolve_config(block)


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(message).splitlines()[0]


def _quiet_logging(agent: str) -> None:
    """Problems go to stderr as one line each; the loop events go to the run records only."""
    import logging

    from loopwarden._terminal import printable

    class OneLine(logging.Formatter):
        """``loopwarden hook AGENT: message`` on one line (a traceback would flood the CLI)."""

        def format(self, record: logging.LogRecord) -> str:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text = f"{text}: {_describe(record.exc_info[1])}"
            # Escaped: a --db path or a name may hold ESC or BEL, which a terminal would obey.
            return printable(f"loopwarden hook {agent}: " + (text.splitlines() or [""])[0])

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    handler.setLevel(logging.ERROR)
    # The guard's line per loop event ("loop %s: ..."), not its own failures ("loop state ...").
    handler.addFilter(lambda record: not str(record.msg).startswith("loop %s: "))
    root = logging.getLogger("loopwarden")
    root.addHandler(handler)
    root.propagate = False

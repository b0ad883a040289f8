"""``loopwarden config check FILE [--agent ID]``: validate a config and print the resolved block."""

from __future__ import annotations

import argparse
import json
import sys

from rich.text import Text

from loopwarden._console import PipeConsole
from loopwarden._terminal import printable
from loopwarden.cli._options import ENABLED_ABSENT, add_output_option, error_text
from loopwarden.core.config import ConfigError, load_config


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``config`` command group."""
    config = subparsers.add_parser("config", help="check OpenClaw loop-detection config files")
    actions = config.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="validate a config file and print the effective resolved config",
        description="Validate FILE strictly (every problem, with its dotted path) and print the "
        "effective tools.loopDetection block after per-agent merge and clamping. "
        "Exit 0 when valid, 2 when not.",
    )
    check.add_argument("file", metavar="FILE", help="an OpenClaw config file (JSON5 or JSON)")
    check.add_argument("--agent", metavar="ID", help="show the effective config of this agent")
    add_output_option(check)
    check.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Validate, then print the resolved config and the clamping notices."""
    # Keys, values, paths and agent ids are the user's text: never parse them as rich markup
    # ("[/red]" raised MarkupError) or emoji codes; only the fixed labels are styled.
    err = _console(stderr=True)
    try:
        loaded = load_config(args.file)
        if args.agent is not None and args.agent not in loaded.agent_ids:
            known = ", ".join(loaded.agent_ids) or "none"
            raise ConfigError(
                [f"--agent {args.agent!r}: no such agent in agents.list (agents: {known})"],
                args.file,
            )
    except ConfigError as exc:
        # Terminal escapes in a key or a path are shown, never obeyed (one problem per line).
        err.print(Text.assemble(("error", "bold red"), f": {error_text(exc)}"), soft_wrap=True)
        return 2
    config = loaded.resolve(args.agent)
    resolved = config.to_camel()
    notices = list(loaded.notices)
    if config.enabled is None:
        notices.append(
            f"'enabled' is not set: {ENABLED_ABSENT}; set \"enabled\": true to turn the "
            "detectors on (false turns everything off)"
        )
    if args.output == "json":
        payload = {"file": args.file, "agent": args.agent, "config": resolved}
        payload["notices"] = notices
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out = _console()
    who = f"agent {args.agent!r}" if args.agent else "global block"
    out.print(
        Text.assemble(("ok", "bold green"), f" {printable(args.file)} ({who})"), soft_wrap=True
    )
    for notice in notices:
        out.print(Text.assemble(("notice", "yellow"), f": {printable(notice)}"), soft_wrap=True)
    out.print(Text(json.dumps(resolved, indent=2)), soft_wrap=True)
    return 0


def _console(*, stderr: bool = False) -> PipeConsole:
    """A console that prints text as given: no markup, emoji codes or highlighting."""
    return PipeConsole(stderr=stderr, markup=False, emoji=False, highlight=False)

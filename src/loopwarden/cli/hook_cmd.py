"""``loopwarden hook AGENT``: the command a coding CLI runs around every tool call.

    loopwarden hook claude-code|codex|gemini-cli [--config FILE] [--set K=V]... [--db FILE]

A thin entry: the hook's work is ``loopwarden.hooks._handler`` (through the user's resident hook
server when there is one, ``loopwarden.hooks._client``). A plain ``hook AGENT ...`` never comes
here: ``loopwarden``'s start-up hands it to the client before the command line is built. This
module gives the command its place in ``loopwarden --help``, and its own ``--help`` and usage
errors.
"""

from __future__ import annotations

import argparse

from loopwarden.hooks._args import AGENTS, HookArgs
from loopwarden.hooks._handler import DEFAULT_PROFILE, hook_config, run

__all__ = ["DEFAULT_PROFILE", "add_arguments", "hook_config", "register"]

_DESCRIPTION = (
    "Read one hook event of a coding CLI on stdin and answer in that CLI's format: the "
    "guard's decision before a tool runs, the outcome recorded after it, the post-compaction "
    "guard armed at a compaction. Detection is on, with the 'recommended' profile unless "
    "--config gives a file (which means what it says, as in OpenClaw) or --set names another. "
    "State and run records live in "
    "$XDG_STATE_HOME/loopwarden/runs.db (see 'loopwarden runs'). Installed by "
    "'loopwarden hooks install AGENT'; it always lets the call proceed when loopwarden itself "
    "has a problem, with one line on stderr."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The hook's arguments, as ``--help`` shows them."""
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
    """Add the ``hook`` command (its fast path is ``loopwarden.hooks._client``)."""
    parser = subparsers.add_parser(
        "hook",
        help="answer one coding-CLI hook event (Claude Code, Codex, Gemini CLI) on stdin",
        description=_DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    return run(HookArgs(args.agent, args.config, args.overrides, args.db, args.scope))

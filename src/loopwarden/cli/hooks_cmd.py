"""``loopwarden hooks install|uninstall|status``: put the hook into a coding CLI's settings.

    loopwarden hooks install AGENT [--project DIR | --user] [--config FILE] [--set K=V]... [--print]
    loopwarden hooks uninstall AGENT [--project DIR | --user]
    loopwarden hooks status [AGENT...] [--project DIR] [--output text|json]

``install`` merges loopwarden's entries into the CLI's own settings file without touching the
user's other hooks; installing again replaces them (never a second copy, which would count
every call twice). The config and ``--set`` are checked strictly here, once, and baked into
the command the CLI runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from loopwarden._terminal import printable
from loopwarden.cli._options import add_config_options, error_text
from loopwarden.hooks._install import (
    SettingsError,
    Target,
    command_words,
    hook_command,
    install,
    installed,
    missing_events,
    read_settings,
    settings_path,
    uninstall,
    write_settings,
)
from loopwarden.hooks._protocol import AGENTS
from loopwarden.records import default_db_path

_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini-cli": "Gemini CLI"}

# What a user must still do after installing, per CLI (each was seen to be needed).
_AFTERWORD = {
    "codex": (
        "Codex runs a new or changed hook only after you trust it: start codex and run /hooks "
        "to review and trust loopwarden's entries (codex exec skips untrusted hooks silently; "
        "--dangerously-bypass-hook-trust runs them without review). Project hooks "
        "(.codex/hooks.json) load only in a trusted project."
    ),
    "gemini-cli": (
        "Gemini CLI runs project hooks (.gemini/settings.json) only in a trusted folder; "
        "user hooks (~/.gemini/settings.json) run everywhere."
    ),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``hooks`` with its ``install``, ``uninstall`` and ``status`` sub-commands."""
    parser = subparsers.add_parser(
        "hooks",
        help="install, remove or check loopwarden's hooks in Claude Code, Codex or Gemini CLI",
        description="Manage loopwarden's entries in a coding CLI's hook settings.",
    )
    actions = parser.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)

    add = actions.add_parser(
        "install",
        help="add loopwarden's hooks to the CLI's settings (replacing earlier ones)",
        description="Merge loopwarden's hook entries into the CLI's settings file, keeping "
        "every other hook and setting. Without --project, the user's settings (every "
        "project). The hook runs this loopwarden by its absolute path.",
    )
    _agent_and_scope(add)
    add_config_options(add, agent=False)
    add.add_argument("--db", metavar="FILE", help="the state file (default: runs.db)")
    add.add_argument(
        "--print",
        action="store_true",
        dest="print_only",
        help="print the merged settings instead of writing them",
    )
    add.set_defaults(handler=_install)

    remove = actions.add_parser(
        "uninstall",
        help="remove loopwarden's hooks from the CLI's settings",
        description="Remove loopwarden's entries from the CLI's settings file; everything "
        "else stays as it was.",
    )
    _agent_and_scope(remove)
    remove.set_defaults(handler=_uninstall)

    status = actions.add_parser(
        "status",
        help="where loopwarden's hooks are installed, and whether they can run",
        description="For each CLI, the user's and the project's settings: loopwarden's "
        "entries, events without one, whether the hook's program exists and its config is "
        "valid. Exit code 1 when a problem is found.",
    )
    status.add_argument(
        "agents", nargs="*", metavar="AGENT", help=f"{', '.join(AGENTS)} (default: all)"
    )
    status.add_argument(
        "--project", metavar="DIR", type=Path, help="the project to check (default: .)"
    )
    status.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        metavar="FORMAT",
        help="output format: text, json (default: text)",
    )
    status.set_defaults(handler=_status)


def _agent_and_scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agent", choices=AGENTS, help="the coding CLI")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--project", metavar="DIR", type=Path, help="that project's settings (e.g. .)"
    )
    scope.add_argument(
        "--user", action="store_true", help="the user's settings, for every project (default)"
    )


# -- install / uninstall ---------------------------------------------------------------------


def _install(args: argparse.Namespace) -> int:
    target = settings_path(args.agent, args.project)
    try:
        options = _checked_options(args)
        merged = install(read_settings(target.path), args.agent, hook_command(args.agent, options))
    except SettingsError as exc:
        return _refuse(target, exc)
    except ValueError as exc:  # ConfigError and --set problems: their text says where
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return 2
    if args.print_only:
        print(json.dumps(merged, indent=2, ensure_ascii=False))
        return 0
    write_settings(target.path, merged)
    events = installed(merged, args.agent)
    command = next(iter(events.values()))[0]
    print(f"Installed loopwarden's hooks for {_NAMES[args.agent]} in {_shown(target.path)}")
    print(f"  events:  {printable(', '.join(events))}")
    print(f"  command: {printable(command)}")
    if args.agent in _AFTERWORD:
        print(f"  note:    {_AFTERWORD[args.agent]}")
    print("Why a call was blocked: loopwarden runs list --blocked, then loopwarden runs show RUN")
    return 0


def _checked_options(args: argparse.Namespace) -> list[str]:
    """The hook's own options, after a strict check of the config and every ``--set``."""
    from loopwarden.cli._options import config_block_from_args

    config = str(Path(args.config).resolve()) if args.config else None
    check = argparse.Namespace(config=config, agent=None, overrides=args.overrides)
    _, notices = config_block_from_args(check)
    for notice in notices:
        print(f"note: {printable(notice)}", file=sys.stderr)
    options: list[str] = []
    if config:
        options += ["--config", config]
    for override in args.overrides:
        options += ["--set", override]
    if args.db:
        options += ["--db", str(Path(args.db).resolve())]
    return options


def _uninstall(args: argparse.Namespace) -> int:
    target = settings_path(args.agent, args.project)
    try:
        settings = read_settings(target.path)
    except SettingsError as exc:
        return _refuse(target, exc)
    found = installed(settings, args.agent)
    if not found:
        print(f"loopwarden's hooks are not in {_shown(target.path)}: nothing to do")
        return 0
    write_settings(target.path, uninstall(settings, args.agent))
    print(f"Removed loopwarden's hooks for {_NAMES[args.agent]} from {_shown(target.path)}")
    print(f"  events: {printable(', '.join(found))}")
    return 0


def _refuse(target: Target, exc: SettingsError) -> int:
    print(f"error: {_shown(target.path)}: {printable(str(exc))}", file=sys.stderr)
    return 2


def _shown(path: object) -> str:
    """A path or text as printed: terminal escapes in it shown, never obeyed."""
    return printable(str(path))


# -- status ----------------------------------------------------------------------------------


def _status(args: argparse.Namespace) -> int:
    unknown = [a for a in args.agents if a not in AGENTS]
    if unknown:
        print(
            f"error: unknown agent {unknown[0]!r}; choose from {', '.join(AGENTS)}", file=sys.stderr
        )
        return 2
    project = args.project or Path.cwd()
    reports = [
        _inspect(settings_path(agent, scope_dir))
        for agent in (args.agents or AGENTS)
        for scope_dir in (None, project)
    ]
    for agent in args.agents or AGENTS:
        _flag_duplicates([r for r in reports if r["agent"] == agent])
    records = str(default_db_path())
    if args.output == "json":
        print(json.dumps({"targets": reports, "records": records}, indent=2))
    else:
        _print_status(reports)
        print(f"State and run records: {records} (loopwarden runs list --blocked)")
    return 1 if any(r["problems"] for r in reports) else 0


def _inspect(target: Target) -> dict[str, Any]:
    report: dict[str, Any] = {
        "agent": target.agent,
        "scope": target.scope,
        "path": str(target.path),
        "installed": False,
        "events": {},
        "problems": [],
    }
    try:
        settings = read_settings(target.path)
    except SettingsError as exc:
        report["problems"].append(str(exc))
        return report
    found = installed(settings, target.agent)
    report["events"] = found
    if not found:
        return report
    report["installed"] = True
    missing = missing_events(found, target.agent)
    if missing:
        report["problems"].append(
            f"no loopwarden entry for {', '.join(missing)}: run 'loopwarden hooks install' again"
        )
    for command in sorted({c for commands in found.values() for c in commands}):
        report["problems"].extend(_command_problems(command))
    return report


def _command_problems(command: str) -> list[str]:
    words = command_words(command)
    program = words[0] if words else None
    if program is None or not (os.path.isfile(program) and os.access(program, os.X_OK)):
        return [
            f"the hook's program {program!r} is missing: the CLI cannot run it, so no call "
            "is guarded; run 'loopwarden hooks install' again"
        ]
    from loopwarden.cli._options import config_block_from_args

    config = _option_values(words, "--config")
    check = argparse.Namespace(
        config=config[0] if config else None, agent=None, overrides=_option_values(words, "--set")
    )
    try:
        config_block_from_args(check)
    except ValueError as exc:
        return [f"the hook's config is invalid: {exc}"]
    return []


def _option_values(words: list[str], option: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word == option]


def _flag_duplicates(reports: list[dict[str, Any]]) -> None:
    """Entries in both scopes with different commands run twice per event: calls count double."""
    commands = {c for r in reports for commands in r["events"].values() for c in commands}
    if len(commands) > 1:
        for report in reports:
            if report["installed"]:
                report["problems"].append(
                    "loopwarden is installed more than once with different commands, so every "
                    "tool call is counted more than once: uninstall one of them"
                )


def _print_status(reports: list[dict[str, Any]]) -> None:
    for report in reports:
        name = f"{_NAMES[report['agent']]} ({report['scope']})"
        state = "installed" if report["installed"] else "not installed"
        print(f"{name:<26} {state:<14} {_shown(report['path'])}")
        if report["installed"]:
            commands = sorted({c for cs in report["events"].values() for c in cs})
            print(f"    events:  {printable(', '.join(report['events']))}")
            for command in commands:
                print(f"    command: {printable(command)}")
        for problem in report["problems"]:
            print(f"    problem: {printable(problem)}")

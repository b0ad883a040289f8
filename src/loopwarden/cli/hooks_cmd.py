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
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from loopwarden._terminal import printable
from loopwarden.cli._options import add_config_options, error_text
from loopwarden.hooks._install import (
    HookCommand,
    SettingsError,
    Target,
    dump_settings,
    hook_command,
    install,
    installed,
    missing_events,
    open_settings,
    parse_command,
    restore_settings,
    settings_path,
    this_program,
    uninstall,
    write_settings,
)
from loopwarden.hooks._protocol import AGENTS
from loopwarden.hooks._scope import DISABLE_VARIABLE
from loopwarden.records import default_db_path

STATUS_FILE = "hook-status.json"
"""Next to a state file: the hook's latest problem with it (absent when there is none)."""

_NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini-cli": "Gemini CLI"}
_COMMANDS = {"claude-code": "claude", "codex": "codex", "gemini-cli": "gemini"}

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
        if target.scope == "user":  # it stands aside where a project has its own install
            options += ["--scope", "user"]
        file = open_settings(target.path)
        merged = install(file.data, args.agent, hook_command(args.agent, options))
        if args.print_only:
            sys.stdout.write(dump_settings(merged, file.raw).decode("utf-8"))
            return 0
        write_settings(file, merged, args.agent)
    except SettingsError as exc:
        return _refuse(target, exc)
    except ValueError as exc:  # ConfigError and --set problems: their text says where
        print(f"error: {error_text(exc)}", file=sys.stderr)
        return 2
    events = installed(merged, args.agent)
    command = next(iter(events.values()))[0]
    print(f"Installed loopwarden's hooks for {_NAMES[args.agent]} in {_shown(target.path)}")
    print(f"  events:  {printable(', '.join(events))}")
    print(f"  command: {printable(command)}")
    print(f"  profile: {_profile_line(args)}")
    if file.raw is not None:
        print(f"  backup:  {_shown(file.backup)} (the file as it was; uninstall puts it back)")
    other = _other_scope(target, args.project)
    if other is not None:
        print(f"  note:    {_scope_note(target, other)}")
    if args.agent in _AFTERWORD:
        print(f"  note:    {_AFTERWORD[args.agent]}")
    print("Why a call was blocked: loopwarden runs list --blocked, then loopwarden runs show RUN")
    print(f"Switch it off for one session: {DISABLE_VARIABLE}=1 {_COMMANDS[args.agent]}")
    parsed = parse_command(command)
    broken = probe(parsed) if parsed is not None else "the command cannot be read"
    if broken is not None:  # installed, but it would let every call through unchecked
        print(f"problem: {printable(broken)}: the hook lets every call through", file=sys.stderr)
        return 1
    return 0


def _other_scope(target: Target, project: Path | None) -> Target | None:
    """The other scope's settings file, when it holds loopwarden's hook too."""
    other = settings_path(target.agent, None if target.scope == "project" else Path.cwd())
    if other.path.resolve() == target.path.resolve():
        return None
    try:
        found = installed(open_settings(other.path).data, target.agent)
    except SettingsError:
        return None
    return other if found else None


def _scope_note(target: Target, other: Target) -> str:
    """What happens with an install in both scopes (the project's decides)."""
    project = target if target.scope == "project" else other
    user = other if project is target else target
    return (
        f"loopwarden's hook is also in {_shown(other.path)}. In this project the project's "
        f"install ({_shown(project.path)}) decides and the user's ({_shown(user.path)}) stands "
        "aside, so every call is counted once, with the project's settings."
    )


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


def _profile_line(args: argparse.Namespace) -> str:
    """Which profile the installed hook runs, and why (a file means what it says)."""
    from loopwarden.core.config import parse_override
    from loopwarden.hooks._handler import hook_config

    # install has checked every --set strictly before this runs, so parse_override cannot fail
    resolved = hook_config(args.config, args.overrides)
    if args.config:
        source = f"from {_shown(args.config)}" + (" and --set" if args.overrides else "")
    elif any(parse_override(item)[0] == ["profile"] for item in args.overrides):
        source = "--set"
    elif args.overrides:
        source = "the hooks' default, with --set"
    else:
        source = "the hooks' default: no config file given"
    return f"{resolved.profile} ({source})"


def _uninstall(args: argparse.Namespace) -> int:
    target = settings_path(args.agent, args.project)
    try:
        file = open_settings(target.path)
        found = installed(file.data, args.agent)
        if not found:
            print(f"loopwarden's hooks are not in {_shown(target.path)}: nothing to do")
            return 0
        done = restore_settings(file, uninstall(file.data, args.agent), args.agent)
    except SettingsError as exc:
        return _refuse(target, exc)
    print(f"Removed loopwarden's hooks for {_NAMES[args.agent]} from {_shown(target.path)}")
    print(f"  events: {printable(', '.join(found))}")
    if done == "restored":
        print("  the file holds the bytes it had before loopwarden's install again")
    elif done == "removed":
        print("  the file held nothing else and was created by loopwarden: removed")
    from loopwarden.hooks._client import stop_servers

    if stop_servers():  # it would otherwise stay until idle; a hook still installed starts one
        print("  the resident hook server was stopped")
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
        ours = [r for r in reports if r["agent"] == agent]
        _judge_scopes(ours)
        if agent == "codex":
            _check_codex_trust([r for r in ours if r["installed"]], project)
    records = default_db_path()
    protection = _protection_problems(_databases(reports))
    if args.output == "json":
        body = {"targets": reports, "records": str(records), "protection": protection}
        print(json.dumps(body, indent=2))
    else:
        _print_status(reports)
        for problem in protection:
            print(f"Protection problem: {printable(problem)}")
        print(f"State and run records: {_shown(records)} (loopwarden runs list --blocked)")
        print(f"Switch the hooks off for one session: {DISABLE_VARIABLE}=1 before the CLI")
    failed = protection or any(r["problems"] for r in reports)
    return 1 if failed else 0


def _inspect(target: Target) -> dict[str, Any]:
    report: dict[str, Any] = {
        "agent": target.agent,
        "scope": target.scope,
        "path": str(target.path),
        "installed": False,
        "events": {},
        "problems": [],
        "notes": [],
    }
    try:
        settings = open_settings(target.path).data
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
        report["problems"].extend(_command_problems(command, target))
    return report


def _command_problems(command: str, target: Target | None = None) -> list[str]:
    parsed = parse_command(command)
    if parsed is None:  # installed() found it, so it parses; kept for the type checker
        return [f"the hook's command cannot be read: {command!r}"]
    program = parsed.program[0]
    broken = probe(parsed)
    if broken is not None:
        fix = shlex.join(reinstall_command(parsed, target))
        if parsed.form == "bare":
            consequence = "the CLI cannot run it (Gemini CLI then refuses every prompt)"
        else:
            consequence = "the hook lets every call through unchecked"
        return [f"{broken}: {consequence}; fix: {fix} (or loopwarden hooks uninstall)"]
    if parsed.form != "fail-open":
        fix = shlex.join(reinstall_command(parsed, target))
        return [
            f"the hook's command was written by an older loopwarden: should {program!r} or "
            f"its packages break, the CLI would get an error (Gemini CLI refuses every prompt); "
            f"fix: {fix}"
        ]
    from loopwarden.cli._options import config_block_from_args

    options = parsed.options
    config = _option_values(options, "--config")
    check = argparse.Namespace(
        config=config[0] if config else None, agent=None, overrides=_option_values(options, "--set")
    )
    try:
        config_block_from_args(check)
    except ValueError as exc:
        return [f"the hook's config is invalid: {exc}"]
    return []


_PROBE_EVENTS = {
    "claude-code": {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "1"},
    "codex": {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_use_id": "1"},
    "gemini-cli": {"hook_event_name": "BeforeTool", "tool_name": "run_shell_command"},
}


def probe(parsed: HookCommand, timeout: float = 30.0) -> str | None:
    """Run the installed hook's program as the CLI would, on one harmless tool call, with a
    throw-away state file: what is broken (its program or interpreter gone, loopwarden not
    importable, a failure inside it), or None when it answers cleanly."""
    import subprocess
    import tempfile

    program = parsed.program[0]
    if not os.path.exists(program):
        what = "interpreter" if parsed.program[1:2] == ["-m"] else "program"
        return f"the hook's {what} {program} is missing (uninstalled, moved or upgraded away)"
    interpreter = _interpreter(program)
    if interpreter is not None and not os.path.exists(interpreter):
        return f"the hook's program {program} cannot start: its interpreter {interpreter} is gone"
    options = [
        word
        for i, word in enumerate(parsed.options)
        if parsed.options[i - (i % 2)] not in ("--db", "--scope")
    ]
    event = {"session_id": "loopwarden-hooks-status", "tool_input": {"command": "true"}}
    event |= _PROBE_EVENTS[parsed.agent]
    env = {k: v for k, v in os.environ.items() if k != DISABLE_VARIABLE}
    env["LOOPWARDEN_HOOK_SERVER"] = "0"
    with tempfile.TemporaryDirectory(prefix="loopwarden-status-") as folder:
        argv = [*parsed.program, "hook", parsed.agent, *options, "--db", f"{folder}/probe.db"]
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(event).encode(),
                capture_output=True,
                env=env,
                cwd=folder,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return f"the hook's program {program} did not answer within {timeout:.0f} s"
        except OSError as exc:
            return f"the hook's program {program} cannot start ({exc.strerror or exc})"
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if done.returncode in (126, 127):
        return f"the hook's program {program} cannot start (exit {done.returncode}: {last})"
    if done.returncode != 0:
        if "No module named 'loopwarden" in last or "No module named loopwarden" in last:
            return f"loopwarden cannot be imported by the hook's program {program} ({last})"
        return f"the hook's program {program} fails (exit {done.returncode}: {last})"
    if lines:
        return f"the hook's program {program} reports a problem: {lines[0].strip()}"
    return None


def _interpreter(program: str) -> str | None:
    """The interpreter a script names on its ``#!`` line (None for a binary or no such line)."""
    try:
        with open(program, "rb") as file:
            head = file.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].split()
    return os.fsdecode(words[0]) if words else None


def reinstall_command(parsed: HookCommand, target: Target | None) -> list[str]:
    """The command that installs this hook again with the loopwarden running now (its options
    kept): what fixes a hook whose program is broken."""
    options = [
        word for i, word in enumerate(parsed.options) if parsed.options[i - (i % 2)] != "--scope"
    ]
    where = (
        ["--project", str(target.path.parent.parent)]
        if target and target.scope == "project"
        else []
    )
    return [*this_program(), "hooks", "install", parsed.agent, *where, *options]


def _option_values(words: list[str], option: str) -> list[str]:
    return [words[i + 1] for i, word in enumerate(words[:-1]) if word == option]


def _judge_scopes(reports: list[dict[str, Any]]) -> None:
    """A user-level and a project-level install: the project's decides, if the user's knows to
    stand aside (``--scope user``); an older user-level command would count every call twice."""
    user = next((r for r in reports if r["scope"] == "user" and r["installed"]), None)
    project = next((r for r in reports if r["scope"] == "project" and r["installed"]), None)
    if user is None or project is None or user["path"] == project["path"]:
        return
    commands = [parse_command(c) for cs in user["events"].values() for c in cs]
    if all(p is not None and _option_values(p.options, "--scope") == ["user"] for p in commands):
        user["notes"].append(
            f"stands aside in this project: the project's install ({project['path']}) "
            "decides, so every call is counted once, with the project's settings"
        )
        return
    user["problems"].append(
        "installed in the project too, and this user-level command does not know to stand "
        "aside, so every call is counted by both: run 'loopwarden hooks install "
        f"{user['agent']} --user' again"
    )


def _protection_problems(databases: list[Path]) -> list[str]:
    """What the hook recorded about its own state (a corrupt, foreign or read-only database...):
    ``hook-status.json`` next to each state file, written while the hook fails open and
    removed by the first event that can use the state again."""
    found = []
    for db in dict.fromkeys(databases):
        try:
            data = json.loads((db.parent / STATUS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        problem = data.get("problem") if isinstance(data, dict) else None
        if not isinstance(problem, str):
            continue
        count = data.get("count")
        since = data.get("since")
        when = ""
        if isinstance(since, (int, float)):
            stamp = datetime.fromtimestamp(since, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")
            when = f", since {stamp} UTC"
        times = f"{count} events" if isinstance(count, int) else "events"
        found.append(
            f"{problem} (state {db}; {times} ran unprotected{when}; the hook lets every call "
            "through until it is fixed)"
        )
    return found


def _databases(reports: list[dict[str, Any]]) -> list[Path]:
    """The state files of the installed hooks: the default one and each ``--db``."""
    found = [default_db_path()]
    for report in reports:
        for commands in report["events"].values():
            for command in commands:
                parsed = parse_command(command)
                if parsed is not None:
                    found += [Path(db) for db in _option_values(parsed.options, "--db")]
    return found


# -- Codex's trust ---------------------------------------------------------------------------

_CODEX_FIX = (
    "Codex skips a hook you have not trusted, without a word: start codex, run /hooks and "
    "trust loopwarden's entries (codex exec --dangerously-bypass-hook-trust runs them "
    "without review)"
)


def _check_codex_trust(reports: list[dict[str, Any]], project: Path) -> None:
    """Say which of loopwarden's Codex entries Codex will not run because they are not trusted.

    Codex itself is asked (``codex app-server``, ``hooks/list``: the trust of each hook, as
    its ``/hooks`` screen shows it); without ``codex`` on PATH, its trust records in
    ``config.toml`` are read (an entry with no record there is certainly not trusted).
    """
    if not reports:
        return
    listed = _codex_hooks(project)
    for report in reports:
        if listed is None:
            untrusted = _untrusted_by_records(report)
            how = "no trust record in Codex's config.toml"
        elif not any(_same_file(h.get("sourcePath"), report["path"]) for h in listed):
            report["problems"].append(
                "Codex does not load this file here (a project's .codex/ is read only in a "
                "project you trust): start codex in the project and trust it"
            )
            continue
        else:
            untrusted = sorted(
                {
                    _event_name(str(h.get("eventName", "")))
                    for h in listed
                    if _same_file(h.get("sourcePath"), report["path"])
                    and (p := parse_command(str(h.get("command", "")))) is not None
                    and p.agent == "codex"
                    and h.get("trustStatus") not in ("trusted", "managed")
                }
            )
            how = "Codex reports them untrusted or changed since you trusted them"
        if untrusted:
            report["problems"].append(
                f"not trusted, so Codex does not run them: {', '.join(untrusted)} ({how}). "
                + _CODEX_FIX
            )


def _codex_hooks(project: Path) -> list[dict[str, Any]] | None:
    """Codex's own list of hooks with their trust (``None`` when codex cannot be asked)."""
    import shutil
    import subprocess

    codex = shutil.which("codex")
    if codex is None:
        return None
    requests: list[dict[str, Any]] = [
        {
            "id": 1,
            "method": "initialize",
            "params": {"clientInfo": {"name": "loopwarden", "version": "1"}},
        },
        {"method": "initialized"},
        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(project.resolve())]}},
    ]
    text = "".join(json.dumps({"jsonrpc": "2.0", **r}) + "\n" for r in requests)
    try:
        with subprocess.Popen(
            [codex, "app-server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=project if project.is_dir() else None,
        ) as server:
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(text)
            server.stdin.flush()
            answer = _reply(server.stdout, 2)
            server.kill()
    except (OSError, ValueError):
        return None
    try:
        return [h for entry in answer["result"]["data"] for h in entry["hooks"]]
    except (KeyError, TypeError):
        return None


def _reply(stream: Any, request: int) -> dict[str, Any]:
    """The JSON-RPC reply to ``request`` (the app server sends notifications in between)."""
    import select
    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = stream.readline()
        if not line:
            break
        message = json.loads(line)
        if isinstance(message, dict) and message.get("id") == request:
            return message
    raise ValueError("codex app-server did not answer")


def _untrusted_by_records(report: dict[str, Any]) -> list[str]:
    """loopwarden's events in a Codex hooks.json with no trust record in Codex's config."""
    import importlib

    try:
        tomllib = importlib.import_module("tomllib")
    except ImportError:  # Python 3.10: no TOML reader in the standard library
        return []
    from loopwarden.hooks._paths import user_settings

    config = Path(user_settings("codex")).with_name("config.toml")
    try:
        text = config.read_text(encoding="utf-8") if config.exists() else ""
        records = tomllib.loads(text).get("hooks", {}).get("state", {})
        settings = open_settings(Path(report["path"])).data
    except (OSError, ValueError):
        return []
    missing = set()
    for event, groups in settings.get("hooks", {}).items():
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            entries = group.get("hooks") if isinstance(group, dict) else None
            for h, entry in enumerate(entries if isinstance(entries, list) else []):
                key = f"{report['path']}:{_snake(event)}:{g}:{h}"
                ours = isinstance(entry, dict) and parse_command(str(entry.get("command", "")))
                if ours and not (
                    isinstance(records.get(key), dict) and records[key].get("trusted_hash")
                ):
                    missing.add(event)
    return sorted(missing)


def _snake(event: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in event).lstrip("_")


def _event_name(wire: str) -> str:
    """Codex's ``preToolUse`` as its settings name it: ``PreToolUse``."""
    return wire[:1].upper() + wire[1:]


def _same_file(a: object, b: str) -> bool:
    return isinstance(a, str) and os.path.realpath(a) == os.path.realpath(b)


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
        for note in report["notes"]:
            print(f"    note:    {printable(note)}")
        for problem in report["problems"]:
            print(f"    problem: {printable(problem)}")

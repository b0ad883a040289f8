"""The ``loopwarden`` command line: one argparse tree, one module per sub-command.

Each command module exposes ``register(subparsers)``; the parser it adds carries a
``handler(args) -> int`` default. Modules are imported lazily-by-listing so a heavy optional
extra (MCP, Redis) is only imported when its command actually runs.

Start-up time matters: ``loopwarden hook`` runs once per tool call of a coding agent. So
``main`` first looks at the first argument: a command named after its module (``hook`` ->
``hook_cmd``, ``mcp-proxy`` -> ``mcp_proxy_cmd``) builds a parser with that module only, and a
bare ``--version`` is answered without argparse; anything else (``--help``, no command, an
unknown one) gets the whole tree, so help and errors list every command.
"""

from __future__ import annotations

import sys

from loopwarden._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

# Sub-command modules under loopwarden.cli, in help order.
_COMMANDS: tuple[str, ...] = (
    "analyze_cmd",
    "config_cmd",
    "hook_cmd",
    "hooks_cmd",
    "mcp_proxy_cmd",
    "runs_cmd",
)


def engine_compiled() -> bool:
    """True when the hot modules run mypyc-compiled (``loopwarden.core.history`` is an extension).

    A regular wheel (``pip install .``) carries the compiled extension modules next to the .py
    files, and the import system prefers the extension; an editable install, a
    ``LOOPWARDEN_PURE=1`` wheel or a failed compilation runs the .py files (see hatch_build.py).
    """
    import importlib.util
    from importlib.machinery import EXTENSION_SUFFIXES

    history = sys.modules.get("loopwarden.core.history")
    if history is not None:
        origin = history.__file__
    else:  # where the import system would load it from, without running it (fast --version)
        spec = importlib.util.find_spec("loopwarden.core.history")
        origin = spec.origin if spec is not None else None
    return str(origin).endswith(tuple(EXTENSION_SUFFIXES))


def volatile_scanner() -> bool:
    """True when the C scanner of the built-in volatile patterns is there (a regular wheel
    builds it with the compiled modules; without it, ``core/volatile.py`` runs them in Python).
    """
    import importlib.util
    from importlib.machinery import EXTENSION_SUFFIXES

    spec = importlib.util.find_spec("loopwarden.core._volatile_scan")
    return spec is not None and str(spec.origin).endswith(tuple(EXTENSION_SUFFIXES))


def engine_build() -> str:
    """The build ``--version`` names: ``compiled engine: mypyc`` (with ``, C volatile scanner``
    when it is there, as in every regular wheel) or ``pure Python``."""
    if not engine_compiled():
        return "pure Python"
    scanner = ", C volatile scanner" if volatile_scanner() else ""
    return f"compiled engine: mypyc{scanner}"


def build_parser(commands: Sequence[str] = _COMMANDS) -> argparse.ArgumentParser:
    """Build the ``loopwarden`` argument parser (by default with every command module)."""
    return _build(commands)[0]


def _version() -> str:
    return f"loopwarden {__version__} ({engine_build()})"


def _build(
    commands: Sequence[str],
) -> tuple[argparse.ArgumentParser, argparse._SubParsersAction[argparse.ArgumentParser]]:
    import argparse  # here: a bare --version does without it
    import importlib

    parser = argparse.ArgumentParser(
        prog="loopwarden",
        description="Detect and stop AI agents that loop on tool calls.",
    )
    parser.add_argument("--version", action="version", version=_version())
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"loopwarden.cli.{name}").register(subparsers)
    return parser, subparsers


def _commands_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules that parsing ``argv`` needs: its command's own, or all of them."""
    if not argv:
        return _COMMANDS
    if argv[0] == "--version":  # argparse prints it and exits before looking further
        return ()
    module = argv[0].replace("-", "_") + "_cmd"
    return (module,) if module in _COMMANDS else _COMMANDS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:  # the hook's fast path (a resident server, else alone)
        from loopwarden.hooks._client import main as hook
        from loopwarden.hooks._client import plain

        if plain(args_list[1:]):  # else --help or a mistake: the parser below says so
            return hook(args_list[1:])
    if args_list == ["--version"]:  # what argparse's version action does, without argparse
        sys.stdout.write(_version() + "\n")
        raise SystemExit(0)
    commands = _commands_for(args_list)
    parser, subparsers = _build(commands)
    if len(commands) == 1 and args_list[0] not in subparsers.choices:
        parser = build_parser()  # a module named otherwise than its command: load them all
    args = parser.parse_args(args_list)
    args.argv = args_list  # the command line as given (the HTML report's header shows it)
    handler = getattr(args, "handler", None)
    if handler is None:
        build_parser().print_help(sys.stderr)  # the whole tree, whatever was parsed
        return 2
    try:
        code: int = handler(args)
        if sys.stdout is not None and not sys.stdout.closed:  # mcp-proxy's transport closes it
            sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
    except BrokenPipeError:
        return _stdout_closed()
    return code


# What a shell reports for a program ended by SIGPIPE (128 + 13), as ``yes | head -1`` does.
_EXIT_BROKEN_PIPE = 141


def _stdout_closed() -> int:
    """End quietly when the reader of stdout went away (``loopwarden runs show ... | head``).

    Standard output is pointed at the null device so that Python's own flush at exit does not
    raise the same error again (the recipe of the ``signal`` module's documentation).
    """
    import os

    try:
        stdout = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no real file behind sys.stdout: no flush
        return _EXIT_BROKEN_PIPE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stdout)
    os.close(devnull)
    return _EXIT_BROKEN_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

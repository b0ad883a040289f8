"""The ``loopwarden`` command line: one argparse tree, one module per sub-command.

Each command module exposes ``register(subparsers)``; the parser it adds carries a
``handler(args) -> int`` default. Modules are imported lazily-by-listing so a heavy optional
extra (MCP, Redis) is only imported when its command actually runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES

from loopwarden._version import __version__

# Sub-command modules under loopwarden.cli, in help order.
_COMMANDS: tuple[str, ...] = ("analyze_cmd", "config_cmd", "mcp_proxy_cmd", "runs_cmd")


def engine_compiled() -> bool:
    """True when the hot modules run mypyc-compiled (``loopwarden.history`` is an extension).

    A regular wheel (``pip install .``) carries the compiled extension modules next to the .py
    files, and the import system prefers the extension; an editable install, a
    ``LOOPWARDEN_PURE=1`` wheel or a failed compilation runs the .py files (see hatch_build.py).
    """
    history = importlib.import_module("loopwarden.history")
    return str(history.__file__).endswith(tuple(EXTENSION_SUFFIXES))


def engine_build() -> str:
    """The build ``--version`` names: ``compiled engine: mypyc`` or ``pure Python``."""
    return "compiled engine: mypyc" if engine_compiled() else "pure Python"


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``loopwarden`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="loopwarden",
        description="Detect and stop AI agents that loop on tool calls.",
    )
    parser.add_argument(
        "--version", action="version", version=f"loopwarden {__version__} ({engine_build()})"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(f"loopwarden.cli.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    code: int = handler(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

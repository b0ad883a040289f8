"""``loopwarden mcp-proxy``: put loop protection in front of any MCP server.

    loopwarden mcp-proxy [--config FILE] [--agent ID] [--set K=V]... [--events FILE] -- COMMAND...
    loopwarden mcp-proxy [options] --url URL [--header "Name: value"]...

The stdio path needs no MCP SDK; ``--url`` uses the SDK's streamable-HTTP transport
(``pip install '.[mcp]'`` from the repository's root), imported only then.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from loopwarden._terminal import printable
from loopwarden.cli._options import add_config_options, config_from_args, error_text
from loopwarden.core.config import ConfigError

_log = logging.getLogger("loopwarden.mcp_proxy")

_DESCRIPTION = (
    "Serve one MCP client over stdio and forward everything to the MCP server started from "
    "COMMAND (stdio) or reached at --url (streamable HTTP). Every tools/call goes through "
    "loopwarden's loop detection: warnings are appended to the tool result, looping calls are "
    "answered with an isError result and never reach the server. With no --config and no "
    "--set, the 'recommended' profile runs (a loop is blocked at its 4th identical call); a "
    "config file or --set means what it says, with enabled=true unless it sets 'enabled'. "
    "Logs go to stderr; stdout is the MCP protocol."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``mcp-proxy`` command."""
    parser = subparsers.add_parser(
        "mcp-proxy",
        help="loop protection in front of any MCP server (stdio or streamable HTTP)",
        description=_DESCRIPTION,
        usage="loopwarden mcp-proxy [options] -- COMMAND [ARGS...]\n"
        "       loopwarden mcp-proxy [options] --url URL",
    )
    add_config_options(parser)
    parser.add_argument(
        "--events", metavar="FILE", type=Path, help="append every loop event as a JSON line"
    )
    parser.add_argument(
        "--record",
        metavar="DB",
        type=Path,
        help="write run records (loop events, run starts and ends) to the SQLite file DB; "
        "read them with `loopwarden runs list --db DB`",
    )
    parser.add_argument("--url", metavar="URL", help="a streamable-HTTP MCP server to wrap")
    parser.add_argument(
        "--name",
        metavar="NAME",
        help="what error answers and log lines call the server (default: the program's file "
        "name, or the URL without credentials and query; never the arguments)",
    )
    parser.add_argument(
        "--header",
        metavar="'NAME: VALUE'",
        action="append",
        default=[],
        help="an HTTP header for --url, e.g. 'Authorization: Bearer ...' (repeatable)",
    )
    parser.add_argument(
        "--call-timeout",
        metavar="SECONDS",
        type=float,
        default=300.0,
        help="fail a request the server has not answered after SECONDS (default 300; 0: never)",
    )
    parser.add_argument(
        "--connect-timeout",
        metavar="SECONDS",
        type=float,
        default=30.0,
        help="give up when the server has not initialized after SECONDS (default 30)",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="stderr log level (default warning: loop warnings, blocks and failures)",
    )
    parser.add_argument(
        "server_command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the stdio MCP server to start, after --",
    )
    parser.set_defaults(handler=run_mcp_proxy)


class _RedactProtocolPayloads(logging.Filter):
    """Keep raw protocol payloads out of the logs (privacy: names, hashes and counts only).

    The SDK logs a message it cannot parse or validate in full, which can include tool
    arguments and results; only the first clause of such a record is kept.
    """

    _PREFIXES = ("Failed to parse", "Failed to validate", "Message that failed")

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "root" or record.name.startswith("mcp"):
            text = record.getMessage()
            if text.startswith(self._PREFIXES):
                record.msg = text.split(":", 1)[0] + " (payload not logged)"
                record.args = None
                record.exc_info = None
                record.exc_text = None
        return True


class _PrintableFormatter(logging.Formatter):
    """Log lines with terminal escapes shown, never obeyed: tool names come from the server."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The message on one line, every control character escaped (a newline too)."""
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        """A traceback keeps its line breaks; other control characters are escaped."""
        return printable(super().formatException(ei), newlines=True)

    def formatStack(self, stack_info: str) -> str:
        """As a traceback."""
        return printable(super().formatStack(stack_info), newlines=True)


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_RedactProtocolPayloads())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _fail(message: str, *, escaped: bool = False) -> int:
    shown = message if escaped else printable(message)  # terminal escapes shown, never obeyed
    sys.stderr.write(f"loopwarden mcp-proxy: error: {shown}\n")
    return 2


def _parse_headers(raw: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for text in raw:
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            raise ValueError(f"--header {text!r}: expected 'NAME: VALUE', e.g. 'X-Api-Key: abc'")
        headers[name.strip()] = value.strip()
    return headers


def _downstream_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Check the server selection; raises ValueError with a how-to-fix message."""
    command = list(args.server_command)
    if command and command[0] == "--":
        command = command[1:]
    if command and args.url:
        raise ValueError("give either --url URL or -- COMMAND, not both")
    if not command and not args.url:
        raise ValueError(
            "no MCP server given: add '-- COMMAND [ARGS...]' (e.g. -- npx -y "
            "@modelcontextprotocol/server-filesystem /tmp) or --url URL"
        )
    if args.header and not args.url:
        raise ValueError("--header only applies to --url servers")
    if args.call_timeout < 0 or args.connect_timeout <= 0:
        raise ValueError("--call-timeout must be >= 0 and --connect-timeout > 0 (seconds)")
    return {
        "command": tuple(command),
        "url": args.url,
        "headers": _parse_headers(args.header),
        "connect_timeout": args.connect_timeout,
        "name": args.name,
    }


def run_mcp_proxy(args: argparse.Namespace) -> int:
    """Resolve the config, then run the proxy until the client disconnects."""
    _setup_logging(args.log_level)
    try:
        downstream = _downstream_kwargs(args)
        config, notices = config_from_args(args, default_enabled=True, zero_config=True)
    except (ValueError, ConfigError) as exc:
        return _fail(error_text(exc), escaped=True)
    from loopwarden.guard import LoopGuard
    from loopwarden.mcp_proxy import DownstreamSpec, ProxyOptions, run

    if args.url:
        from loopwarden.mcp_proxy._http import sdk_problem

        problem = sdk_problem()
        if problem is not None:
            return _fail(problem)
    for notice in notices:
        _log.info("config: %s", notice)
    options = ProxyOptions(
        downstream=DownstreamSpec(**downstream),
        call_timeout=args.call_timeout or None,
        events_path=args.events,
    )
    from loopwarden.otel import export_from_environment

    export_from_environment()  # loop events to OTLP when OTEL_EXPORTER_OTLP_* says where
    guard = LoopGuard(config, agent_id=args.agent, record_db=args.record)
    try:
        code = run(guard, options)
    except OSError as exc:  # the events file could not be opened
        return _fail(str(exc))
    finally:
        if guard.recorder is not None:
            guard.recorder.close()  # what is still buffered reaches the file
    return code

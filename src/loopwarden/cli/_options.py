"""Config options shared by the commands that run a guard: ``--config``, ``--agent``, ``--set``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from loopwarden._overrides import apply_overrides
from loopwarden._terminal import printable
from loopwarden.core.config import (
    ZERO_CONFIG_PROFILE,
    ConfigError,
    ResolvedConfig,
    load_config,
    resolve_config,
    validate_config,
    with_profile_defaults,
)


def add_config_options(parser: argparse.ArgumentParser, *, agent: bool = True) -> None:
    """Add ``--config FILE``, ``--agent ID`` (unless ``agent`` is false) and repeatable
    ``--set KEY=VALUE`` (into ``args.overrides``)."""
    group = parser.add_argument_group("configuration")
    group.add_argument("--config", metavar="FILE", help="an OpenClaw config file (JSON5 or JSON)")
    if agent:
        group.add_argument("--agent", metavar="ID", help="use this agent's per-agent block")
    group.add_argument(
        "--set",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        dest="overrides",
        help="override one tools.loopDetection key, e.g. criticalThreshold=5 or "
        "detectors.pingPong=false (repeatable)",
    )


def add_output_option(
    parser: argparse.ArgumentParser,
    choices: tuple[str, ...] = ("text", "json"),
    *,
    default_help: str | None = None,
) -> None:
    """``--output FORMAT``, the one way every command picks its output format.

    With ``default_help`` the option defaults to None (the command picks the format itself, and
    ``default_help`` says how); otherwise to the first choice.
    """
    parser.add_argument(
        "--output",
        choices=choices,
        default=choices[0] if default_help is None else None,
        metavar="FORMAT",
        help=f"output format: {', '.join(choices)} (default: {default_help or choices[0]})",
    )


def error_text(exc: Exception) -> str:
    """An error's message as printed to a terminal: control characters escaped, so a key or a
    file name cannot drive the terminal or fake a line; a :class:`ConfigError` keeps its layout,
    one problem per line."""
    if isinstance(exc, ConfigError):
        source = printable(exc.source) if exc.source else None
        return str(ConfigError([printable(problem) for problem in exc.problems], source))
    return printable(str(exc))


def config_block_from_args(
    args: argparse.Namespace, swept: Sequence[str] = ()
) -> tuple[dict[str, Any], list[str]]:
    """The effective (unresolved) block from ``--config``/``--agent``/``--set``, with notices;
    ``swept`` are one ``--sweep`` variant's settings, applied last (errors name ``--sweep``)."""
    notices: list[str] = []
    block: dict[str, Any] = {}
    if args.config:
        loaded = load_config(args.config)
        notices.extend(loaded.notices)
        if args.agent and args.agent not in loaded.agent_ids:
            known = ", ".join(loaded.agent_ids) or "none"
            raise ConfigError(
                [f"--agent {args.agent!r}: no such agent in agents.list (agents: {known})"],
                args.config,
            )
        block = loaded.block(args.agent)
    elif args.agent:
        raise ConfigError(["--agent needs --config FILE (the file that lists the agents)"])
    for source, overrides in (("--set", args.overrides), ("--sweep", list(swept))):
        if overrides:
            block = apply_overrides(block, overrides)
            validated = validate_config(block, source=source, whole=False)
            notices.extend(n for n in validated.notices if "no tools.loopDetection" not in n)
    return block, notices


ENABLED_ABSENT = (
    "the loop detectors are off and only the post-compaction guard runs, as in OpenClaw"
)
"""What a block without ``enabled`` does, in the words every command uses."""


def config_from_args(
    args: argparse.Namespace,
    *,
    default_enabled: bool | None,
    swept: Sequence[str] = (),
    file_decides: bool = False,
    zero_config: bool = False,
) -> tuple[ResolvedConfig, list[str]]:
    """Resolve the config the options describe; ``default_enabled`` fills an absent ``enabled``.

    With ``file_decides``, a ``--config`` file that leaves ``enabled`` out runs as it would in
    OpenClaw (only the post-compaction guard), with a notice saying so; ``default_enabled``
    then applies only without a file. ``zero_config``: with neither ``--config`` nor ``--set``,
    the profile that runs when no config is given (``recommended``); a file or a ``--set``
    means exactly what it says. Raises :class:`ConfigError` with a clear message for a
    bad file, agent, ``--set`` or ``--sweep`` value.
    """
    block, notices = config_block_from_args(args, swept)
    if zero_config and not (args.config or args.overrides or swept):
        notices.append(f"no config given: using the {ZERO_CONFIG_PROFILE!r} profile")
        return resolve_config({"profile": ZERO_CONFIG_PROFILE}), notices
    if "enabled" in with_profile_defaults(block) or default_enabled is None:
        return resolve_config(block), notices
    value = str(default_enabled).lower()
    if args.config and file_decides:
        notices.append(
            f"{args.config} does not set 'enabled': {ENABLED_ABSENT}; add --set enabled=true "
            "to replay with the detectors on"
        )
    elif args.config:
        block["enabled"] = default_enabled
        notices.append(
            f"{args.config} does not set 'enabled' (which alone would leave only the "
            f"post-compaction guard on): using enabled={value}"
        )
    else:
        block["enabled"] = default_enabled
        notices.append(f"no config file given: the defaults with enabled={value}")
    return resolve_config(block), notices

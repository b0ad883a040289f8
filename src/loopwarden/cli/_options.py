"""Config options shared by the commands that run a guard: ``--config``, ``--agent``, ``--set``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from loopwarden._terminal import printable
from loopwarden.core.config import (
    BLOCK_PATH,
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
    parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("text", "json")
) -> None:
    """``--output FORMAT``, the one way every command picks its output format."""
    parser.add_argument(
        "--output",
        choices=choices,
        default=choices[0],
        metavar="FORMAT",
        help=f"output format: {', '.join(choices)} (default: {choices[0]})",
    )


def error_text(exc: Exception) -> str:
    """An error's message as printed to a terminal: control characters escaped, so a key or a
    file name cannot drive the terminal or fake a line; a :class:`ConfigError` keeps its layout,
    one problem per line."""
    if isinstance(exc, ConfigError):
        source = printable(exc.source) if exc.source else None
        return str(ConfigError([printable(problem) for problem in exc.problems], source))
    return printable(str(exc))


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``KEY=VALUE`` into a key path and a JSON5 value (bare words stay strings)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError([f"--set {text!r}: expected KEY=VALUE, e.g. criticalThreshold=5"])
    if key.startswith(BLOCK_PATH + "."):
        key = key[len(BLOCK_PATH) + 1 :]
    return key.split("."), _parse_value(raw)


def _parse_value(raw: str) -> Any:
    """A ``--set`` value: JSON5, or the bare word itself."""
    import json

    try:  # JSON is JSON5 with the same values; the stdlib parser spares a hook loading pyjson5
        return json.loads(raw)
    except ValueError:
        pass
    import pyjson5

    try:
        return pyjson5.decode(raw, maxdepth=100)
    except (pyjson5.Json5Exception, RecursionError):
        return raw


def apply_overrides(block: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``block`` with each ``--set`` applied (nested keys by dots)."""
    merged: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in block.items()}
    for text in overrides:
        path, value = parse_override(text)
        target = merged
        for part in path[:-1]:
            child = target.get(part)
            if not isinstance(child, dict):
                child = {}
                target[part] = child
            target = child
        target[path[-1]] = value
    return merged


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


def config_from_args(
    args: argparse.Namespace,
    *,
    default_enabled: bool | None,
    swept: Sequence[str] = (),
    zero_config: bool = False,
) -> tuple[ResolvedConfig, list[str]]:
    """Resolve the config the options describe; ``default_enabled`` fills an absent ``enabled``.

    ``zero_config``: with neither ``--config`` nor ``--set``, the profile that runs when no
    config is given (``recommended``); a file or a ``--set`` means exactly what it says.
    Raises :class:`ConfigError` with a clear message for a bad file, agent, ``--set`` or
    ``--sweep`` value.
    """
    block, notices = config_block_from_args(args, swept)
    if zero_config and not (args.config or args.overrides or swept):
        notices.append(f"no config given: using the {ZERO_CONFIG_PROFILE!r} profile")
        return resolve_config({"profile": ZERO_CONFIG_PROFILE}), notices
    if "enabled" not in with_profile_defaults(block) and default_enabled is not None:
        block["enabled"] = default_enabled
        value = str(default_enabled).lower()
        if args.config or args.overrides or swept:
            notices.append(f"the config does not set 'enabled': using enabled={value}")
        else:
            notices.append(f"no config given: using the defaults with enabled={value}")
    return resolve_config(block), notices

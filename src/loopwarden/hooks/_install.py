"""Where each coding CLI keeps its hooks, and merging loopwarden's entries into that file.

The merge functions are pure (a settings dict in, a new one out): they touch only the hook
entries whose command runs ``loopwarden hook AGENT``, keep every other hook and setting as it
was, and installing twice gives the same file as installing once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Events each CLI must send to loopwarden, with the matcher of the entry ("" = no matcher).
_EVENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude-code": (
        ("UserPromptSubmit", ""),
        ("PreToolUse", "*"),
        ("PostToolUse", "*"),
        ("PostToolUseFailure", "*"),
        ("PostCompact", ""),
        ("SessionStart", "compact"),  # only the start that follows a compaction
        ("Stop", ""),
        ("SubagentStop", ""),
        ("SessionEnd", ""),
    ),
    "codex": (
        ("UserPromptSubmit", ""),
        ("PreToolUse", "*"),
        ("PostToolUse", "*"),
        ("PostCompact", ""),
        ("SessionStart", ""),
        ("Stop", ""),
        ("SessionEnd", ""),
    ),
    "gemini-cli": (
        ("BeforeAgent", ""),
        ("BeforeTool", "*"),
        ("AfterTool", "*"),
        ("AfterAgent", ""),
        ("SessionEnd", ""),
    ),
}

_TIMEOUT_SECONDS = 30  # far above the hook's milliseconds; the CLI kills a hung hook after it
# Codex caps SessionEnd hooks at 3 s and says so on every run when asked for more.
_EVENT_TIMEOUTS = {"SessionEnd": 3}

# A hook command that runs loopwarden's hook for an agent: `.../loopwarden hook AGENT ...` or
# `python -m loopwarden hook AGENT ...`, quoted or not.
_OURS = re.compile(
    r"""(?:^|[\s/'"])loopwarden['"]?\s+hook\s+['"]?(claude-code|codex|gemini-cli)\b"""
)


class SettingsError(ValueError):
    """A settings file loopwarden will not rewrite; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    """One settings file of one CLI: where it is and which scope it is."""

    agent: str
    scope: str  # "user" or "project"
    path: Path


def settings_path(agent: str, project: Path | None) -> Target:
    """The settings file ``hooks install`` writes: the project's, or the user's (``None``)."""
    if project is not None:
        folder = {"claude-code": ".claude", "codex": ".codex", "gemini-cli": ".gemini"}[agent]
        name = "hooks.json" if agent == "codex" else "settings.json"
        return Target(agent, "project", project.resolve() / folder / name)
    return Target(agent, "user", _user_settings(agent))


def _user_settings(agent: str) -> Path:
    home = Path.home()
    if agent == "claude-code":
        base = os.environ.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else home / ".claude") / "settings.json"
    if agent == "codex":
        base = os.environ.get("CODEX_HOME")
        return (Path(base) if base else home / ".codex") / "hooks.json"
    base = os.environ.get("GEMINI_CLI_HOME")
    return (Path(base) if base else home) / ".gemini" / "settings.json"


def hook_command(agent: str, options: list[str], program: list[str] | None = None) -> str:
    """The command line the CLI runs: this loopwarden, by absolute path, whatever PATH it has."""
    return shlex.join([*(program or this_program()), "hook", agent, *options])


def this_program() -> list[str]:
    """How to start the loopwarden that is running now, by absolute path."""
    script = Path(sys.argv[0])
    if script.name == "loopwarden" and script.is_file():
        return [str(script.resolve())]
    return [str(Path(sys.executable).resolve()), "-m", "loopwarden"]


def is_ours(entry: object, agent: str) -> bool:
    """Whether a hook entry runs ``loopwarden hook AGENT``."""
    if not isinstance(entry, Mapping):
        return False
    match = _OURS.search(str(entry.get("command", "")))
    return match is not None and match.group(1) == agent


def install(settings: Mapping[str, Any], agent: str, command: str) -> dict[str, Any]:
    """``settings`` with loopwarden's entries for ``agent`` (replacing any earlier ones)."""
    merged = uninstall(settings, agent)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("its 'hooks' is not an object; fix or remove it, then install again")
    for event, matcher in _EVENTS[agent]:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsError(f"its 'hooks.{event}' is not a list; fix it, then install again")
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [_entry(agent, command, _EVENT_TIMEOUTS.get(event, _TIMEOUT_SECONDS))]
        groups.append(group)
    return merged


def _entry(agent: str, command: str, timeout: int) -> dict[str, Any]:
    if agent == "gemini-cli":  # milliseconds, and a name the CLI shows in its messages
        return {
            "type": "command",
            "command": command,
            "name": "loopwarden",
            "timeout": timeout * 1000,
        }
    return {"type": "command", "command": command, "timeout": timeout}


def uninstall(settings: Mapping[str, Any], agent: str) -> dict[str, Any]:
    """``settings`` without loopwarden's entries for ``agent``; everything else untouched."""
    result = json.loads(json.dumps(settings))  # a deep copy of plain JSON
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return dict(result)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = [g for g in (_without_ours(g, agent) for g in groups) if g is not None]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del result["hooks"]
    return dict(result)


def _without_ours(group: object, agent: str) -> object | None:
    """A matcher group without loopwarden's entries; None when only those were in it."""
    if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
        return group
    entries = group["hooks"]
    kept = [e for e in entries if not is_ours(e, agent)]
    if len(kept) == len(entries):
        return group
    return {**group, "hooks": kept} if kept else None


def installed(settings: Mapping[str, Any], agent: str) -> dict[str, list[str]]:
    """The commands of loopwarden's entries for ``agent``, by event."""
    found: dict[str, list[str]] = {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, Mapping):
        return found
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            for entry in entries if isinstance(entries, list) else []:
                if is_ours(entry, agent):
                    found.setdefault(str(event), []).append(str(entry["command"]))
    return found


def missing_events(found: Mapping[str, list[str]], agent: str) -> list[str]:
    """The events loopwarden needs that have no loopwarden entry."""
    return [event for event, _ in _EVENTS[agent] if event not in found]


def read_settings(path: Path) -> dict[str, Any]:
    """A settings file as a dict (``{}`` when absent); refuses what it could not write back."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise SettingsError(f"cannot read it: {exc.strerror or exc}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsError(
            f"it is not plain JSON ({exc}); loopwarden rewrites only plain JSON, so that "
            "comments or anything else in it are never lost: fix it, or add the entries "
            "`loopwarden hooks install --print` shows by hand"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"it holds a JSON {type(data).__name__}, not an object")
    return data


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    """Write atomically (a crash leaves the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.loopwarden-{os.getpid()}.tmp")
    temporary.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", "utf-8")
    if path.exists():
        os.chmod(temporary, path.stat().st_mode & 0o777)
    os.replace(temporary, path)


def command_words(command: str) -> list[str]:
    """A hook command split as a shell would (``[]`` when it cannot be read)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []

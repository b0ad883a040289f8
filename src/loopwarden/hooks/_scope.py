"""Which install of loopwarden's hook decides when the user's and the project's both run.

The CLIs run every matching hook of every settings file, so a user-level install and a
project-level one would both see each event (and, with different settings, neither one's
behaviour would hold). The project's install wins: it is the more specific one, as the CLIs'
own settings go. The user-level command carries ``--scope user`` and stands aside (answers
nothing) when the project it runs in has loopwarden's hook of its own.

The same goes for ``LOOPWARDEN_DISABLE=1`` (the guard switched off for one session): both are
decided by :func:`skip` in the hook process itself, on every event, before anything else (the
CLI's environment and working folder are the hook process's), so this module imports only
``os`` (``json`` only for a project settings file that names loopwarden's hook).
"""

import os

from loopwarden.hooks._paths import user_settings

DISABLE_VARIABLE = "LOOPWARDEN_DISABLE"
"""Set (to anything but empty or 0) in the CLI's environment: the hook answers nothing."""


def skip(agent: str, scope: str) -> bool:
    """Whether this hook process must answer nothing (the caller drains stdin, exits 0): the
    guard is switched off for the session, or this user-level hook stands aside for the
    project's own install."""
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        return True
    return scope == "user" and project_has_own(agent) is not None


def scope_of(argv: list[str]) -> str:
    """The ``--scope`` of a hook's arguments (``AGENT [OPTION VALUE]...``), ``project`` if none."""
    for i, word in enumerate(argv[:-1]):
        if word == "--scope":
            return argv[i + 1]
    for word in argv:
        if word.startswith("--scope="):
            return word.split("=", 1)[1]
    return "project"


_FOLDER = {"claude-code": ".claude", "codex": ".codex", "gemini-cli": ".gemini"}
_NAMES = {
    "claude-code": ("settings.json", "settings.local.json"),
    "codex": ("hooks.json",),
    "gemini-cli": ("settings.json",),
}


def project_settings(agent: str, start: str | None = None) -> list[str]:
    """The project settings files ``agent`` reads for a session started in ``start``.

    Claude Code and Gemini CLI read the project folder they name in ``CLAUDE_PROJECT_DIR`` /
    ``GEMINI_PROJECT_DIR`` (the working folder otherwise); Codex reads ``.codex/`` in the
    working folder and each folder above it, up to the repository's root (``.git``).
    """
    if start is None:
        named = {"claude-code": "CLAUDE_PROJECT_DIR", "gemini-cli": "GEMINI_PROJECT_DIR"}
        start = os.environ.get(named.get(agent, ""), "") or os.getcwd()
    folders = [os.path.abspath(start)]
    if agent == "codex":
        while not os.path.exists(os.path.join(folders[-1], ".git")):
            parent = os.path.dirname(folders[-1])
            if parent == folders[-1]:
                break
            folders.append(parent)
    user = os.path.realpath(user_settings(agent))
    found = []
    for folder in folders:
        for name in _NAMES[agent]:
            path = os.path.join(folder, _FOLDER[agent], name)
            if os.path.realpath(path) != user:  # a project in HOME: that file is the user's
                found.append(path)
    return found


def project_has_own(agent: str, start: str | None = None) -> str | None:
    """The project settings file whose hooks run ``loopwarden hook AGENT``, if one does.

    Any hook command of the project that runs loopwarden's hook for ``agent`` counts (the one
    ``hooks install`` writes, or a wrapper of the user's around it): that hook sees every event,
    so the user-level one must not count it again.
    """
    needle = f"hook {agent}"
    for path in project_settings(agent, start):
        try:
            with open(path, "rb") as file:
                raw = file.read()
        except OSError:
            continue
        if b"loopwarden" not in raw or needle.encode() not in raw:
            continue
        import json

        try:
            settings = json.loads(raw)
        except ValueError:
            continue
        if any("loopwarden" in c and needle in c for c in _commands(settings)):
            return path
    return None


def _commands(settings: object) -> list[str]:
    """Every hook command in a settings object (``hooks.<event>[].hooks[].command``)."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    found = []
    for groups in hooks.values() if isinstance(hooks, dict) else []:
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                command = entry.get("command") if isinstance(entry, dict) else None
                if isinstance(command, str):
                    found.append(command)
    return found

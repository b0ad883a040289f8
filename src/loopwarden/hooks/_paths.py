"""Where each coding CLI keeps the user's hook settings (imports only ``os``: the hook
process asks on every event of a user-level install)."""

import os


def user_settings(agent: str) -> str:
    """The user's settings file of ``agent`` (the CLI's own environment variables honoured)."""
    home = os.path.expanduser("~")
    if agent == "claude-code":
        base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
        return os.path.join(base, "settings.json")
    if agent == "codex":
        base = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
        return os.path.join(base, "hooks.json")
    base = os.environ.get("GEMINI_CLI_HOME") or home
    return os.path.join(base, ".gemini", "settings.json")

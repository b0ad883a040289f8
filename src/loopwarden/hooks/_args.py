"""The hook's arguments, read without argparse: the hook process (``_client``) checks them
and the hook's work (``_handler``) uses them, and neither may import the other's weight."""

# No `from __future__ import annotations` and no typing import: both cost every hook process.
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from collections.abc import Sequence

AGENTS = ("claude-code", "codex", "gemini-cli")
SCOPES = ("user", "project")
_VALUED = ("--config", "--set", "--db", "--scope")


class HookArgs:
    """The hook's arguments: the CLI it answers, its config, state file and settings scope."""

    __slots__ = ("agent", "config", "db", "overrides", "scope")

    def __init__(
        self,
        agent: str,
        config: "str | None" = None,
        overrides: "list[str] | None" = None,
        db: "str | None" = None,
        scope: str = "project",
    ) -> None:
        self.agent = agent
        self.config = config
        self.overrides = overrides if overrides is not None else []
        self.db = db
        self.scope = scope


def parse_args(argv: "Sequence[str]") -> "HookArgs | None":
    """``AGENT [--config F] [--set K=V]... [--db F] [--scope S]`` read without argparse (its
    import costs every hook process); None for anything else (help, a mistake: the command
    line's parser answers those)."""
    if not argv or argv[0] not in AGENTS:
        return None
    args = HookArgs(argv[0])
    i = 1
    while i < len(argv):
        word = argv[i]
        if word in _VALUED and i + 1 < len(argv):
            name, value = word, argv[i + 1]
            i += 2
        elif "=" in word and word.split("=", 1)[0] in _VALUED:
            name, value = word.split("=", 1)
            i += 1
        else:
            return None
        if name == "--config":
            args.config = value
        elif name == "--set":
            args.overrides.append(value)
        elif name == "--db":
            args.db = value
        elif value in SCOPES:
            args.scope = value
        else:
            return None
    return args

"""loopwarden — stop AI agents from looping on tool calls.

OpenClaw's ``tools.loopDetection`` (rolling-history detectors and the post-compaction guard),
re-implemented exactly in Python. docs/ARCHITECTURE.md says which module owns which part of
the behaviour.

The public names below load lazily (PEP 562): ``import loopwarden`` costs next to nothing, and
``from loopwarden import LoopGuard`` imports only what the guard needs. A coding-agent hook runs
one short process per tool call, so every import it does not need is start-up time it pays.
"""

import importlib as _importlib

from loopwarden._version import __version__

# typing.TYPE_CHECKING without importing typing (a few ms on a bare interpreter): type
# checkers take any `TYPE_CHECKING` name for it.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the eager imports, for type checkers and IDEs
    from loopwarden.core.canonical import UNDEFINED, digest_stable, hash_tool_call, stable_stringify
    from loopwarden.core.compaction import CompactionLoopPersistedError, PostCompactionGuard
    from loopwarden.core.config import (
        ConfigError,
        ResolvedConfig,
        ValidatedConfig,
        effective_config,
        load_config,
        resolve_config,
        validate_config,
    )
    from loopwarden.core.detectors import Verdict, detect
    from loopwarden.core.errors import LoopStoppedError
    from loopwarden.core.history import SessionState, record_call, record_outcome
    from loopwarden.core.outcome import hash_tool_outcome
    from loopwarden.core.tool_call import ToolCallRecord
    from loopwarden.events import LoopEvent
    from loopwarden.guard import Decision, LoopGuard
    from loopwarden.store import AsyncSessionStore, MemoryStore, RunRecord, SessionStore

# Public name -> the module that defines it (kept in step with the imports above by a test).
_LAZY: dict[str, str] = {
    "UNDEFINED": "core.canonical",
    "digest_stable": "core.canonical",
    "hash_tool_call": "core.canonical",
    "stable_stringify": "core.canonical",
    "CompactionLoopPersistedError": "core.compaction",
    "PostCompactionGuard": "core.compaction",
    "ConfigError": "core.config",
    "ResolvedConfig": "core.config",
    "ValidatedConfig": "core.config",
    "effective_config": "core.config",
    "load_config": "core.config",
    "resolve_config": "core.config",
    "validate_config": "core.config",
    "Verdict": "core.detectors",
    "detect": "core.detectors",
    "LoopStoppedError": "core.errors",
    "LoopEvent": "events",
    "Decision": "guard",
    "LoopGuard": "guard",
    "SessionState": "core.history",
    "ToolCallRecord": "core.tool_call",
    "record_call": "core.history",
    "record_outcome": "core.history",
    "hash_tool_outcome": "core.outcome",
    "AsyncSessionStore": "store",
    "MemoryStore": "store",
    "RunRecord": "store",
    "SessionStore": "store",
}

__all__ = [
    "UNDEFINED",
    "AsyncSessionStore",
    "CompactionLoopPersistedError",
    "ConfigError",
    "Decision",
    "LoopEvent",
    "LoopGuard",
    "LoopStoppedError",
    "MemoryStore",
    "PostCompactionGuard",
    "ResolvedConfig",
    "RunRecord",
    "SessionState",
    "SessionStore",
    "ToolCallRecord",
    "ValidatedConfig",
    "Verdict",
    "__version__",
    "detect",
    "digest_stable",
    "effective_config",
    "hash_tool_call",
    "hash_tool_outcome",
    "load_config",
    "record_call",
    "record_outcome",
    "resolve_config",
    "stable_stringify",
    "validate_config",
]


if not TYPE_CHECKING:  # hidden from type checkers, which would take any unknown name as Any

    def __getattr__(name: str) -> object:
        """Import a public name's module on first use, then cache the name in this module."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(_importlib.import_module(f"loopwarden.{module}"), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value


def __dir__() -> list[str]:
    """The public API (loaded or not) and the module's dunder names; not its helpers."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})

"""loopwarden — stop AI agents from looping on tool calls.

OpenClaw's ``tools.loopDetection`` (rolling-history detectors and the post-compaction guard),
re-implemented exactly in Python. ``SPEC.md`` section numbers are cited throughout the code.
"""

from loopwarden._version import __version__
from loopwarden.canonical import UNDEFINED, digest_stable, hash_tool_call, stable_stringify
from loopwarden.compaction import CompactionLoopPersistedError, PostCompactionGuard
from loopwarden.config import (
    ConfigError,
    ResolvedConfig,
    ValidatedConfig,
    effective_config,
    load_config,
    resolve_config,
    validate_config,
)
from loopwarden.detectors import Verdict, detect
from loopwarden.errors import LoopStoppedError
from loopwarden.events import LoopEvent
from loopwarden.guard import Decision, LoopGuard
from loopwarden.history import SessionState, ToolCallRecord, record_call, record_outcome
from loopwarden.outcome import hash_tool_outcome
from loopwarden.store import MemoryStore, RunRecord, SessionStore

__all__ = [
    "UNDEFINED",
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

"""the post-compaction guard: abort a run that resumes the same loop after compaction.

After a context overflow the runtime compacts and retries. If the first ``windowSize`` outcomes
after that are one identical (tool, signature, result) triple, the compaction did not break the
loop and the run is aborted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopwarden.core.errors import LoopStoppedError

DETECTOR = "compaction_loop_persisted"


def _message(tool: str, count: int, window: int) -> str:
    return (
        f"CRITICAL: tool {tool} repeated {count} times with identical arguments and identical "
        f"results within {window} attempts after auto-compaction. The compaction did not break "
        "the loop. Aborting to prevent runaway resource use."
    )


@dataclass(frozen=True)
class CompactionVerdict:
    """The guard's abort verdict."""

    should_abort: bool
    detector: str
    count: int
    tool_name: str
    message: str


class CompactionLoopPersistedError(LoopStoppedError):
    """Raised (or carried by a stop decision) when a loop survives auto-compaction (§7)."""

    def __init__(self, message: str, *, count: int, tool_name: str) -> None:
        super().__init__(message, detector=DETECTOR, count=count, tool_name=tool_name)
        self.should_abort = True

    @classmethod
    def from_verdict(cls, verdict: CompactionVerdict) -> CompactionLoopPersistedError:
        """Build the error that ends the run from the guard's verdict."""
        return cls(verdict.message, count=verdict.count, tool_name=verdict.tool_name)


Triple = tuple[str, str, str]


class PostCompactionGuard:
    """One run's post-compaction window. Not thread-safe: the caller serialises."""

    def __init__(self, enabled: bool = True, window_size: int = 3) -> None:
        self.enabled = enabled
        self.window_size = max(1, int(window_size))
        self.remaining = 0
        self.window: list[Triple] = []

    @property
    def armed(self) -> bool:
        """True while the guard is watching the calls after a compaction retry."""
        return self.remaining > 0

    def arm(self) -> None:
        """Start a fresh window; called at each successful compaction retry."""
        self.remaining = self.window_size
        self.window = []

    def observe(
        self, tool: str, args_hash: str, result_hash: str | None
    ) -> CompactionVerdict | None:
        """Watch one recorded outcome; returns the abort verdict when the loop persisted."""
        if not self.enabled or not self.armed or result_hash is None:
            return None
        triple = (tool, args_hash, result_hash)
        self.remaining -= 1
        self.window.append(triple)
        same = sum(1 for entry in self.window if entry == triple)
        if self.remaining <= 0:
            self.remaining = 0
        if same >= self.window_size:
            return CompactionVerdict(
                True, DETECTOR, same, tool, _message(tool, same, self.window_size)
            )
        return None

    def snapshot(self) -> dict[str, Any]:
        """Plain-data state (for stores and debugging); hashes only, never raw values."""
        return {
            "enabled": self.enabled,
            "windowSize": self.window_size,
            "armed": self.armed,
            "remaining": self.remaining,
            "window": [list(entry) for entry in self.window],
        }

    @classmethod
    def restore(cls, snapshot: dict[str, Any]) -> PostCompactionGuard:
        """Rebuild a guard from :meth:`snapshot` output."""
        guard = cls(bool(snapshot["enabled"]), int(snapshot["windowSize"]))
        guard.remaining = int(snapshot["remaining"])
        guard.window = [(str(a), str(b), str(c)) for a, b, c in snapshot["window"]]
        return guard

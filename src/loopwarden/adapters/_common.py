"""Pieces shared by the framework adapters; imports no framework.

Each adapter translates one framework's tool-call lifecycle into ``LoopGuard.before_tool_call`` /
``after_tool_call`` and the guard's decision back into what that framework understands. What is
common to all of them lives here: the stop exception, the per-run book-keeping and the text
helpers that put loopwarden's messages in front of the model.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from loopwarden.core.errors import LoopStoppedError

if TYPE_CHECKING:
    from loopwarden.guard import Decision, LoopGuard

__all__ = ["LoopStopped"]

_DEFAULT_STOP_REASON = "loopwarden stopped this run because the agent was looping on tool calls."


class LoopStopped(LoopStoppedError):
    """The loop guard ended the run; ``reason`` (also ``message``) says why.

    Raised by the adapters whose framework ends a run with an exception (OpenAI Agents SDK,
    PydanticAI). It is a ``loopwarden.LoopStoppedError``, so one ``except`` catches every
    way loopwarden ends a run. ``decision`` is the guard's ``Decision`` that ended it,
    ``detector`` the detector that fired (for example ``compaction_loop_persisted``), ``count``
    its count, ``tool_name`` the tool, and ``error`` the ``CompactionLoopPersistedError`` when a
    loop survived a compaction.
    """

    def __init__(self, decision: Decision, *, tool_name: str = "") -> None:
        source = decision.error or decision.verdict
        super().__init__(
            stop_reason(decision),
            detector=detector_of(decision) or "loopwarden",
            count=int(getattr(source, "count", 0) or 0),
            tool_name=str(getattr(source, "tool_name", "") or tool_name),
        )
        self.decision = decision
        self.reason: str = self.message
        self.error: BaseException | None = decision.error


def guard_or_default(guard: LoopGuard | None) -> LoopGuard:
    """``guard``, or when an adapter is given none a fresh ``LoopGuard()``: the ``recommended``
    profile, which ends a loop after three identical calls (an in-memory store, one per
    adapter object)."""
    if guard is not None:
        return guard
    from loopwarden.guard import LoopGuard

    return LoopGuard()


def stop_reason(decision: Decision) -> str:
    """The text that explains a stop or a block: the decision's message, else a generic one."""
    return decision.message or _DEFAULT_STOP_REASON


def detector_of(decision: Decision) -> str | None:
    """The detector behind a decision: the compaction error's, else the verdict's, else None."""
    error = getattr(decision, "error", None)
    detector = getattr(error, "detector", None)
    if isinstance(detector, str):
        return detector
    verdict = getattr(decision, "verdict", None)
    detector = getattr(verdict, "detector", None)
    return detector if isinstance(detector, str) else None


def new_run_id() -> str:
    """A fresh run id: one per framework invocation, so each run's detection starts clean."""
    return uuid.uuid4().hex


def with_warning(text: str, warning: str) -> str:
    """``text`` with the loop warning appended as its own paragraph, so the model reads both."""
    return f"{text}\n\n{warning}" if text else warning


def parse_arguments(raw: str | None) -> Any:
    """Tool arguments given as JSON text, decoded; text that is not JSON is kept as the string.

    The guard hashes parameters canonically, so decoding makes ``{"a":1}`` and ``{"a": 1}`` the
    same call, as the model meant them.
    """
    if raw is None or raw == "":
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def output_text(output: Any) -> str:
    """A tool output as the text the model would read (strings as is, other values as JSON)."""
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


@dataclass
class RunState:
    """What an adapter remembers about one run between the framework's hooks."""

    session: str
    run_id: str
    started: bool = False  # the guard was told the run started (adapters that start lazily)
    stopped: Decision | None = None
    seen_compactions: set[str] = field(default_factory=set)
    seen_missing: set[str] = field(default_factory=set)  # calls to missing tools already told
    pending_warnings: dict[str, str] = field(default_factory=dict)
    failed_calls: set[str] = field(default_factory=set)  # calls that raised, by tool-call id
    ended: bool = False  # the guard was told the run ended (adapters whose runs end in two ways)
    model_calls: int = 0  # model calls so far (adapters that name batches by counting them)


K = TypeVar("K", bound=Hashable)


class RunBook(Generic[K]):
    """Per-run adapter state, thread-safe and bounded.

    A run normally forgets its entry when it ends; a run that crashed never says so, so the book
    keeps at most ``max_runs`` entries and drops the least recently used one beyond that.
    """

    def __init__(self, max_runs: int = 4096) -> None:
        if max_runs < 1:
            raise ValueError(f"max_runs must be a positive integer, got {max_runs!r}")
        self._runs: OrderedDict[K, RunState] = OrderedDict()
        self._max = max_runs
        self._lock = threading.Lock()

    def get(self, key: K, session: str, run_id: str) -> RunState:
        """The state of run ``key``, created on first use."""
        with self._lock:
            state = self._runs.get(key)
            if state is None:
                state = RunState(session=session, run_id=run_id)
                self._runs[key] = state
                while len(self._runs) > self._max:
                    self._runs.popitem(last=False)
            else:
                self._runs.move_to_end(key)
            return state

    def peek(self, key: K) -> RunState | None:
        """The state of run ``key`` if the book has it."""
        with self._lock:
            return self._runs.get(key)

    def pop(self, key: K) -> RunState | None:
        """Forget run ``key`` (it ended) and return what was known about it."""
        with self._lock:
            return self._runs.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

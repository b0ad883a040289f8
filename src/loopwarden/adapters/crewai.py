"""CrewAI adapter: ``guard_crew(crew, guard)`` runs a crew's tool calls through a loop guard.

Requires the ``crewai`` extra (from the repository's root: ``pip install '.[crewai]'``; it
cannot share an environment with the ``openai-agents`` and ``google-adk`` extras, see
docs/integrations.md)::

    from crewai import Crew
    from loopwarden import LoopGuard
    from loopwarden.adapters.crewai import LoopStopped, guard_crew

    crew = guard_crew(Crew(agents=[...], tasks=[...]), LoopGuard())
    try:
        result = crew.kickoff()
    except LoopStopped as stop:
        print(stop.reason)

CrewAI's hooks are global; loopwarden registers its own once and acts only for the crews
given to ``guard_crew``. What the model sees:

- **warn**: the tool runs; its result text gets the warning appended (``after_tool_call``).
- **block**: the tool does not run (``before_tool_call`` blocks it); the fixed text CrewAI
  shows for a blocked call is replaced by loopwarden's blocked text (``after_tool_call`` runs
  for blocked calls too).
- **stop** (a loop that survived a compaction, or the guard's ``stopAfterBlocks``): the stopping
  call is answered like a block, and the crew's next model call raises :class:`CrewLoopStopped`
  (a :class:`LoopStopped` and CrewAI's ``HookAborted``) out of ``kickoff``.

The session is the crew (its ``id``), a run is one ``kickoff``. When CrewAI summarises an agent's
conversation to fit the context window, the summary that replaces it arms the post-compaction
guard for the calls that follow. With ``Crew(cache=True)`` an
identical call is answered from CrewAI's cache without running the tool; the guard still sees
each call and the (identical) cached result, so detection is unchanged.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loopwarden.adapters._common import (
    LoopStopped,
    guard_or_default,
    new_run_id,
    stop_reason,
    with_warning,
)

try:
    from crewai.hooks.dispatch import HookAborted, InterceptionPoint, register
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.crewai needs CrewAI: "
        "pip install '.[crewai]' from loopwarden's repository root"
    ) from exc

if TYPE_CHECKING:
    from loopwarden.guard import Decision, LoopGuard

__all__ = ["CrewLoopStopped", "LoopGuardHooks", "LoopStopped", "guard_crew"]

SessionKey = Callable[[Any], str] | None


class CrewLoopStopped(LoopStopped, HookAborted):  # type: ignore[misc,unused-ignore]
    """The loop guard ended a crew's run; catch it as ``LoopStopped`` (or CrewAI's
    ``HookAborted``, which CrewAI lets through to the caller of ``kickoff``)."""

    # CrewAI's flow runtime (its agent executor) logs an exception leaving a listener at ERROR,
    # which Python prints to stderr when the application configured no logging ("Error
    # executing listener call_llm_native_tools: CRITICAL: ..."), unless the exception says it
    # was reported already. A stop is reported: raised to the caller, and in the guard's events.
    _flow_listener_logged = True

    def __init__(self, decision: Decision, *, tool_name: str = "") -> None:
        LoopStopped.__init__(self, decision, tool_name=tool_name)
        self.source = "loopwarden"


@dataclass
class _Call:
    """A call between its before and after hook (CrewAI passes the same input dict to both)."""

    params: dict[str, Any]
    decision: Decision
    batch: str


@dataclass
class _Run:
    session: str
    run_id: str
    stopped: Decision | None = None
    turns: dict[str, int] = field(default_factory=dict)  # model calls per agent role
    calls: dict[int, _Call] = field(default_factory=dict)  # id(tool_input) → the call
    executors: dict[str, Any] = field(default_factory=dict)  # agent role → its executor
    summaries: set[str] = field(default_factory=set)  # digests of the summaries seen
    started: Future[None] | None = None  # the guard's start of the run, when off the loop


class LoopGuardHooks:
    """Runs the tool calls of the crews it is attached to through a ``LoopGuard``.

    ``guard_crew(crew, guard)`` is ``LoopGuardHooks(guard).attach(crew)``.

    Args:
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of the crew naming the guard session; default ``crew-<crew.id>``.
        max_runs: how many crews (with their current run) the hooks keep state for.
    """

    def __init__(
        self, guard: LoopGuard | None = None, *, session: SessionKey = None, max_runs: int = 4096
    ):
        self.guard = guard_or_default(guard)
        self._session = session
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._max_runs = max_runs
        self._lock = threading.Lock()
        # Run starts and ends reached on an event loop (akickoff) go here: one thread, so
        # they reach the guard in order, and the loop is never blocked by the store.
        self._boundaries: ThreadPoolExecutor | None = None

    def attach(self, crew: Any) -> Any:
        """Guard ``crew``'s tool calls from its next ``kickoff`` on; returns the crew."""
        _ensure_registered()
        with _WATCH_LOCK:
            _WATCHED[str(crew.id)] = self
            while len(_WATCHED) > _MAX_WATCHED:
                _WATCHED.popitem(last=False)
        return crew

    def run_of(self, crew: Any) -> tuple[str, str] | None:
        """The guard ``(session, run_id)`` of the crew's current (or last) run, if known."""
        with self._lock:
            run = self._runs.get(str(crew.id))
        return None if run is None else (run.session, run.run_id)

    # -- run boundaries -------------------------------------------------------------------------

    def _start(self, crew: Any) -> None:
        session = f"crew-{crew.id}" if self._session is None else str(self._session(crew))
        run = _Run(session, new_run_id())
        with self._lock:
            self._runs[str(crew.id)] = run
            while len(self._runs) > self._max_runs:
                self._runs.popitem(last=False)
        run.started = self._off_loop(self.guard.start_run, run.session, run.run_id)

    def _end(self, crew: Any, status: str) -> None:
        with self._lock:
            run = self._runs.get(str(crew.id))
            if run is not None:
                run.executors.clear()  # no references to a finished run's executors
        if run is not None:
            self._off_loop(self.guard.end_run, run.session, run.run_id, outcome=status)

    def _off_loop(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[None] | None:
        """Call ``fn`` now, or in the boundaries thread when this hook runs on an event loop.

        CrewAI's hooks are synchronous, and ``akickoff`` calls the run-boundary hooks on its
        event loop: a store round trip there would block the loop.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            fn(*args, **kwargs)
            return None
        with self._lock:
            if self._boundaries is None:
                self._boundaries = ThreadPoolExecutor(1, thread_name_prefix="loopwarden-crewai")
            boundaries = self._boundaries
        return boundaries.submit(_logged, fn, *args, **kwargs)

    @staticmethod
    def _wait_started(run: _Run) -> None:
        """A tool call of the run waits for the run's start to reach the guard (CrewAI runs
        tool calls in its worker threads, never on the loop)."""
        started = run.started
        if started is not None:
            started.result()
            run.started = None

    def _run(self, crew: Any) -> _Run:
        with self._lock:
            run = self._runs.get(str(crew.id))
        if run is None:  # attached during a kickoff: the run starts now
            self._start(crew)
            return self._run(crew)
        return run

    # -- model calls ----------------------------------------------------------------------------

    def _before_model(self, ctx: Any) -> None:
        """End a stopped run; otherwise a new model call starts a new batch for its agent."""
        run = self._run(ctx.crew)
        if run.stopped is not None:
            raise CrewLoopStopped(run.stopped)
        role = _role(ctx)
        with self._lock:
            run.turns[role] = run.turns.get(role, 0) + 1
            # CrewAI summarises the executor's messages after this hook, before the model
            # call: the tool hooks look at them (they get no executor themselves).
            executor = getattr(ctx, "executor", None)
            if executor is not None:
                run.executors[role] = executor

    # -- around each tool call ------------------------------------------------------------------

    def _before_tool(self, ctx: Any) -> bool | None:
        run = self._run(ctx.crew)
        self._wait_started(run)
        role = _role(ctx)
        with self._lock:
            batch = f"{role}#{run.turns.get(role, 0)}"
            executor = run.executors.get(role)
            fresh = _summary_keys(getattr(executor, "messages", None)) - run.summaries
            run.summaries |= fresh
        if fresh:
            self.guard.on_compaction_retry(run.session, run_id=run.run_id)
        decision = self.guard.before_tool_call(
            run.session, ctx.tool_name, ctx.tool_input, run_id=run.run_id, batch=batch
        )
        with self._lock:
            run.calls[id(ctx.tool_input)] = _Call(ctx.tool_input, decision, batch)
        if decision.action == "stop":
            run.stopped = run.stopped or decision
        return False if decision.action in ("block", "stop") else None

    def _after_tool(self, ctx: Any) -> str | None:
        run = self._run(ctx.crew)
        with self._lock:
            call = run.calls.pop(id(ctx.tool_input), None)
        if call is None or call.params is not ctx.tool_input:
            return None  # a call loopwarden did not decide about
        if not call.decision.allowed:
            # CrewAI shows a fixed text for a blocked call; the model gets the reason instead.
            return stop_reason(call.decision)
        outcome: dict[str, Any] = {"result": ctx.tool_result}
        if getattr(ctx, "tool", None) is None:
            # A tool the agent does not have: CrewAI answers "Tool not found", which does not
            # name it; the guard's unknown-tool detector reads the name from the error.
            outcome = {"error": f"Unknown tool: {ctx.tool_name}", "failed": True}
        after = self.guard.after_tool_call(
            run.session,
            ctx.tool_name,
            ctx.tool_input,
            run_id=run.run_id,
            batch=call.batch,
            **outcome,
        )
        if after.action == "stop":
            run.stopped = run.stopped or after
        if call.decision.action == "warn" and call.decision.message:
            return with_warning(str(ctx.tool_result or ""), call.decision.message)
        return None


def _logged(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """``fn`` in the boundaries thread: the guard logs its own failures; anything else too."""
    try:
        fn(*args, **kwargs)
    except Exception:
        logging.getLogger("loopwarden.adapters.crewai").exception("run boundary failed")


def _summary_parts() -> tuple[str, str]:
    """The fixed text before and after the summary in CrewAI's summary message."""
    try:
        from crewai.utilities.i18n import I18N_DEFAULT

        head, _, tail = I18N_DEFAULT.slice("summary").partition("{merged_summary}")
    except Exception:  # another CrewAI layout: the 1.15 text
        head, tail = "<summary>\n", "\n</summary>\n\nContinue the task"
    return head, tail.strip()[:60]


_SUMMARY_HEAD, _SUMMARY_TAIL = _summary_parts()


def _summary_keys(messages: Any) -> set[str]:
    """Digests of the summary messages at the start of a conversation (where CrewAI puts the
    summary that replaces the messages it summarised)."""
    keys: set[str] = set()
    for message in list(messages or [])[:8]:
        content = message.get("content") if isinstance(message, dict) else None
        if (
            isinstance(content, str)
            and content.startswith(_SUMMARY_HEAD)
            and _SUMMARY_TAIL in content
        ):
            keys.add(hashlib.sha256(content.encode()).hexdigest())
    return keys


def _role(ctx: Any) -> str:
    agent = getattr(ctx, "agent", None)
    return str(getattr(agent, "role", None) or "agent")


# -- the global hooks, registered once, dispatching to the crew's LoopGuardHooks ---------------

_WATCHED: OrderedDict[str, LoopGuardHooks] = OrderedDict()
_WATCH_LOCK = threading.Lock()
_MAX_WATCHED = 4096
_registered = False


def _watcher(ctx: Any) -> LoopGuardHooks | None:
    crew = getattr(ctx, "crew", None)
    if crew is None:
        return None
    with _WATCH_LOCK:
        return _WATCHED.get(str(getattr(crew, "id", "")))


def _on_start(ctx: Any) -> None:
    hooks = _watcher(ctx)
    if hooks is not None:
        hooks._start(ctx.crew)


def _on_end(ctx: Any) -> None:
    hooks = _watcher(ctx)
    if hooks is not None:
        hooks._end(ctx.crew, str(getattr(ctx, "status", "completed")))


def _on_model(ctx: Any) -> None:
    hooks = _watcher(ctx)
    if hooks is not None:
        hooks._before_model(ctx)


def _on_before_tool(ctx: Any) -> bool | None:
    hooks = _watcher(ctx)
    return None if hooks is None else hooks._before_tool(ctx)


def _on_after_tool(ctx: Any) -> str | None:
    hooks = _watcher(ctx)
    return None if hooks is None else hooks._after_tool(ctx)


def _ensure_registered() -> None:
    global _registered
    with _WATCH_LOCK:
        if _registered:
            return
        register(InterceptionPoint.EXECUTION_START, _on_start)
        register(InterceptionPoint.EXECUTION_END, _on_end)
        register(InterceptionPoint.PRE_MODEL_CALL, _on_model)
        register(InterceptionPoint.PRE_TOOL_CALL, _on_before_tool)
        register(InterceptionPoint.POST_TOOL_CALL, _on_after_tool)
        _registered = True


def guard_crew(crew: Any, guard: LoopGuard | None = None, *, session: SessionKey = None) -> Any:
    """Guard ``crew``'s tool calls with ``guard`` from its next ``kickoff`` on; returns the crew.

    Args:
        crew: a ``crewai.Crew``; guarding it again replaces the earlier guard.
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of the crew naming the guard session; default ``crew-<crew.id>``.
    """
    return LoopGuardHooks(guard, session=session).attach(crew)

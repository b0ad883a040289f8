"""Claude Agent SDK adapter: ``guard_options(options, guard)`` adds loop protection to a query.

Requires the ``claude-agent-sdk`` extra (from the repository's root:
``pip install '.[claude-agent-sdk]'``)::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from loopwarden import LoopGuard
    from loopwarden.adapters.claude_agent_sdk import guard_options

    options = guard_options(ClaudeAgentOptions(...), LoopGuard())
    async for message in query(prompt="...", options=options):
        ...

The SDK drives the Claude Code CLI, which calls the SDK's in-process hooks; the adapter adds
``PreToolUse`` / ``PostToolUse`` / ``PostToolUseFailure`` hooks (every tool: built-in ones, MCP
tools, the SDK's in-process tools), and ``UserPromptSubmit`` / ``Stop`` / ``PreCompact`` hooks
for the run boundaries. The hooks speak the same protocol as ``loopwarden hook claude-code``.
What the model sees:

- **warn**: the tool runs; the warning reaches the model right after the call's result
  (``additionalContext``).
- **block**: the tool does not run; ``PreToolUse`` denies it and the blocked text is the
  reason the model gets as the call's error.
- **stop**: the stopping call is denied with the reason and a note that every further call of
  this turn will be refused, and so they are. A stop found after a call ran (a loop that
  survived a compaction) ends the turn (``"continue": false`` with the reason as
  ``stopReason``).

The session is Claude Code's ``session_id`` (the conversation); a run is one user prompt (its
``prompt_id`` when the CLI gives one), so every ``query`` or ``client.query`` starts clean. A
subagent's calls are a run of their own. A compaction (``PreCompact``) arms the
post-compaction guard.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from loopwarden.adapters._common import RunBook, RunState, guard_or_default, new_run_id
from loopwarden.hooks._protocol import (
    SILENT,
    Answer,
    HookEvent,
    HookInputError,
    context,
    deny,
    end_run,
    parse_event,
)

try:
    from claude_agent_sdk import ClaudeAgentOptions, HookContext, HookMatcher
    from claude_agent_sdk.types import HookEvent as SdkHookEvent
    from claude_agent_sdk.types import HookJSONOutput
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "loopwarden.adapters.claude_agent_sdk needs the Claude Agent SDK: "
        "pip install '.[claude-agent-sdk]' from loopwarden's repository root"
    ) from exc

if TYPE_CHECKING:
    from loopwarden.guard import Decision, LoopGuard

__all__ = ["LoopGuardHooks", "guard_options"]

AGENT = "claude-code"  # the hook protocol these hooks speak
SessionKey = Callable[[str], str] | None


class LoopGuardHooks:
    """The hook callbacks that run a Claude Agent SDK session's tool calls through a guard.

    ``guard_options(options, guard)`` is ``LoopGuardHooks(guard).attach(options)``; keep the
    object to find a session's current run (``run_of(session_id)``).

    Args:
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of Claude Code's ``session_id`` naming the guard session; default:
            the ``session_id`` itself.
        max_runs: how many sessions (and subagent runs) the hooks keep state for.
    """

    def __init__(
        self, guard: LoopGuard | None = None, *, session: SessionKey = None, max_runs: int = 4096
    ):
        self.guard = guard_or_default(guard)
        self._session = session
        self._runs: RunBook[str] = RunBook(max_runs)

    def matchers(self) -> dict[SdkHookEvent, list[HookMatcher]]:
        """The ``ClaudeAgentOptions.hooks`` entries, one matcher per event, every tool."""
        events = (
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "PreCompact",
            "Stop",
            "SubagentStop",
        )
        return {cast("SdkHookEvent", name): [HookMatcher(hooks=[self._hook])] for name in events}

    def attach(self, options: ClaudeAgentOptions) -> ClaudeAgentOptions:
        """A copy of ``options`` whose hooks run loopwarden's first (``options`` is unchanged)."""
        hooks: dict[SdkHookEvent, list[HookMatcher]] = {
            event: list(matchers) for event, matchers in (options.hooks or {}).items()
        }
        for event, ours in self.matchers().items():
            hooks[event] = [*ours, *hooks.get(event, [])]
        return replace(options, hooks=hooks)

    def run_of(self, session_id: str) -> tuple[str, str] | None:
        """The guard ``(session, run_id)`` of a Claude Code session's current run, if known."""
        run = self._runs.peek(session_id)
        return None if run is None else (run.session, run.run_id)

    # -- the hook ---------------------------------------------------------------------------------

    async def _hook(
        self, payload: Any, tool_use_id: str | None, context_: HookContext
    ) -> HookJSONOutput:
        """One hook event in, the answer for the CLI out (``{}``: no opinion)."""
        try:
            event = parse_event(AGENT, payload)
        except HookInputError:
            return {}  # not an event loopwarden can use: the call goes on untouched
        answer = await self._apply(event)
        return _output(answer)

    async def _apply(self, event: HookEvent) -> Answer:
        if event.kind == "prompt":
            await self._start(event.session_id, event.run_id or new_run_id())
            return SILENT
        run = await self._current(event)
        # The SDK offers PreCompact (the CLI hook listens to PostCompact): no call comes in
        # between, so arming before the compaction is arming for the calls after it.
        if event.kind == "compaction" or event.name == "PreCompact":
            await self.guard.aon_compaction_retry(run.session, run_id=run.run_id)
        elif event.kind == "before":
            return await self._before(run, event)
        elif event.kind == "after":
            return await self._after(run, event)
        elif event.kind == "turn_end":
            await self._end(_key(event))
        return SILENT

    async def _before(self, run: RunState, event: HookEvent) -> Answer:
        decision = await self.guard.abefore_tool_call(
            run.session,
            event.tool,
            event.params,
            run_id=run.run_id,
            tool_call_id=event.tool_call_id,
        )
        message = decision.message or ""
        if decision.action == "stop":
            looping = _tool_of(run.stopped)
            run.stopped = run.stopped or decision
            if looping and looping != event.tool:
                # The stop's reason names the looping tool: say that this one is not it.
                message = (
                    f"This call to {event.tool} was not run: loopwarden stopped this turn "
                    f"after a loop on {looping}. {message}"
                )
            return deny(AGENT, event, message, stop=True)
        if decision.action == "block":
            return deny(AGENT, event, message)
        if decision.action == "warn" and message:
            return context(event, message)  # Claude Code shows it right after the result
        return SILENT

    async def _after(self, run: RunState, event: HookEvent) -> Answer:
        after = await self.guard.aafter_tool_call(
            run.session,
            event.tool,
            event.params,
            result=event.result,
            error=event.error,
            failed=event.failed,
            run_id=run.run_id,
            tool_call_id=event.tool_call_id,
        )
        if after.action == "stop" and after.message:
            run.stopped = run.stopped or after
            return end_run(AGENT, event, after.message)
        return SILENT

    # -- runs ---------------------------------------------------------------------------------

    async def _start(self, key: str, run_id: str) -> RunState:
        await self._end(key)
        session = key if self._session is None else str(self._session(key))
        run = self._runs.get(key, session, run_id)
        await self.guard.astart_run(run.session, run.run_id)
        return run

    async def _current(self, event: HookEvent) -> RunState:
        """The run an event belongs to; a run is started when its prompt was not seen."""
        main = self._runs.peek(event.session_id)
        if main is None or (event.run_id is not None and event.run_id != main.run_id):
            main = await self._start(event.session_id, event.run_id or new_run_id())
        if event.subagent is None:
            return main
        sub = self._runs.peek(_key(event))
        if sub is None:  # a subagent's calls are a run of their own, inside the turn's
            sub = self._runs.get(_key(event), main.session, f"{main.run_id}/agent-{event.subagent}")
            await self.guard.astart_run(sub.session, sub.run_id)
        return sub

    async def _end(self, key: str) -> None:
        run = self._runs.pop(key)
        if run is not None:
            await self.guard.aend_run(run.session, run.run_id)


def _tool_of(decision: Decision | None) -> str | None:
    """The tool whose loop made ``decision`` (a stop), if it names one."""
    error = None if decision is None else decision.error
    return getattr(error, "tool_name", None) or None


def _key(event: HookEvent) -> str:
    return event.session_id if event.subagent is None else f"{event.session_id}/{event.subagent}"


def _output(answer: Answer) -> HookJSONOutput:
    """The hook protocol's JSON answer as the SDK's output dict (``continue`` is ``continue_``)."""
    if not answer.stdout:
        return {}
    body: dict[str, Any] = json.loads(answer.stdout)
    if "continue" in body:
        body["continue_"] = body.pop("continue")
    return cast("HookJSONOutput", body)


def guard_options(
    options: ClaudeAgentOptions, guard: LoopGuard | None = None, *, session: SessionKey = None
) -> ClaudeAgentOptions:
    """A copy of ``options`` with loopwarden's hooks first in line (``options`` is unchanged).

    Args:
        options: the ``ClaudeAgentOptions`` to guard; hooks already in it are kept.
        guard: the ``LoopGuard`` deciding about each call; default: ``LoopGuard()``, the
            ``recommended`` profile.
        session: a function of Claude Code's ``session_id`` naming the guard session.
    """
    return LoopGuardHooks(guard, session=session).attach(options)

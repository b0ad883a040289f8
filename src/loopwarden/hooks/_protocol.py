"""The coding CLIs' hook protocols, as pure functions: payload → :class:`HookEvent`, and a
guard decision → the :class:`Answer` that CLI understands.

What each CLI really does with an answer was checked against the real CLIs (Claude Code 2.1,
Codex 0.171, Gemini CLI 0.61) in headless mode; the tables in ``docs/coding-agents.md`` say the
same for users. The facts that shape the answers:

- **Claude Code** shows a ``PreToolUse`` deny's reason to the model as the call's error result;
  ``additionalContext`` (without a decision) reaches the model right after the call's result;
  ``"continue": false`` ends a headless run only from ``PostToolUse`` (not from ``PreToolUse``,
  nor after a failed call).
- **Codex** shows a deny's reason as the call's output and ``additionalContext`` as a developer
  message; it discards an answer with any field it does not expect for the event (a deny next to
  ``"continue": false`` is ignored and the command runs), and no answer ends a ``codex exec``
  run. ``PostToolUse`` ``decision: block`` replaces the call's output with the reason.
- **Gemini CLI** shows a ``BeforeTool`` deny's reason as the call's error; it ignores context
  given before a tool runs, so a warning is delivered after it (``AfterTool``
  ``additionalContext``); ``"continue": false`` ends the run. Its ``PreCompress`` fires before
  every model request, compaction or not, so it cannot arm the post-compaction guard.

Where a CLI cannot end the run, the guard's stopped run does it: every later call of the run
is denied with the stop reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from loopwarden.core.canonical import UNDEFINED

AGENTS: tuple[str, ...] = ("claude-code", "codex", "gemini-cli")
"""The coding CLIs ``loopwarden hook`` speaks to."""

EventKind = Literal["prompt", "before", "after", "compaction", "turn_end", "session_end", "ignored"]


class HookInputError(ValueError):
    """A hook payload loopwarden cannot use; the message says what is wrong and where."""


@dataclass(frozen=True, slots=True)
class HookEvent:
    """One hook event, in loopwarden's terms (never logged or stored as is: it holds raw data)."""

    name: str  # the CLI's own event name, e.g. "PreToolUse"
    kind: EventKind
    session_id: str
    run_id: str | None  # the CLI's turn id when the payload has one
    subagent: str | None = None  # the subagent making the call (Claude Code's agent_id)
    tool: str = ""
    params: Any = None
    tool_call_id: str | None = None
    result: Any = UNDEFINED
    error: Any = None
    failed: bool | None = None  # known failure, known success, or None: the guard decides
    transcript: str | None = None  # the CLI's session file, where it says more than the payload


@dataclass(frozen=True, slots=True)
class Answer:
    """What the hook process prints on stdout (possibly nothing; it always exits 0)."""

    stdout: str = ""
    repeat: bool = True  # given again to a duplicate hook process of the same call


SILENT = Answer()

# The CLI's event name → what it means to the guard. Events not listed are answered silently.
_KINDS: dict[str, dict[str, EventKind]] = {
    "claude-code": {
        "UserPromptSubmit": "prompt",
        "PreToolUse": "before",
        "PostToolUse": "after",
        "PostToolUseFailure": "after",
        # Claude Code fires both after an automatic or manual compaction; arming twice before
        # the next call is the same as arming once (a fresh window each time).
        "PostCompact": "compaction",
        "SessionStart": "compaction",  # only with source "compact", see _kind
        "Stop": "turn_end",
        "SubagentStop": "turn_end",  # the subagent's run (agent_id) ends
        "SessionEnd": "session_end",
    },
    "codex": {
        "UserPromptSubmit": "prompt",
        "PreToolUse": "before",
        "PostToolUse": "after",
        "PostCompact": "compaction",
        "SessionStart": "compaction",
        "Stop": "turn_end",
        "SessionEnd": "session_end",
    },
    "gemini-cli": {
        "BeforeAgent": "prompt",
        "BeforeTool": "before",
        "AfterTool": "after",
        "AfterAgent": "turn_end",
        "SessionEnd": "session_end",
    },
}

# Gemini CLI's shell output names the process group, a new number every call.
_GEMINI_VOLATILE = re.compile(r"^Process Group PGID: \d+\n?", re.MULTILINE)
# What Gemini CLI 0.61's run_shell_command puts after a command's output, in this order, each
# line only when it applies: "Error: …" (could not start), "Exit Code: N" (only when N is not
# 0), "Signal: …", "Background PIDs: …", "Process Group PGID: N"; the whole wrapped in
# <untrusted_context>. Read at the end only: the command's own output comes before them (its
# last line could pass for one, which no real failure text does).
_GEMINI_TRAILER = re.compile(
    r"(?:^Exit Code: (?P<code>-?\d+)\n)?(?:^(?P<signal>Signal): [^\n]*\n)?"
    r"(?:^Background PIDs: [^\n]*\n)?(?:^Process Group PGID: \d+\n)?"
    r"(?:</untrusted_context>\n?)?\Z",
    re.MULTILINE,
)
_TRAILER_CHARS = 4096
# A command Gemini CLI ended (its timeout, or the user) reports this instead of an output.
_GEMINI_CANCELLED = re.compile(r"\A(?:<untrusted_context>\n)?Command was (?:automatically )?cancel")


def parse_event(agent: str, payload: object) -> HookEvent:
    """Read one hook payload of ``agent``; raises :class:`HookInputError` when it is unusable."""
    if not isinstance(payload, Mapping):
        raise HookInputError(f"the hook event must be a JSON object, got {type(payload).__name__}")
    name = _text(payload, "hook_event_name", required=True)
    session_id = _text(payload, "session_id", required=True)
    kind = _kind(agent, name, payload)
    run_id = _text(payload, "turn_id") or _text(payload, "prompt_id") or None
    subagent = _text(payload, "agent_id") or None
    if kind not in ("before", "after"):
        return HookEvent(name, kind, session_id, run_id, subagent)
    tool = _text(payload, "tool_name", required=True)
    params = _call_params(tool, payload.get("tool_input", {}))
    call_id = _text(payload, "tool_use_id") or None
    if kind == "before":
        return HookEvent(name, kind, session_id, run_id, subagent, tool, params, call_id)
    result, error, failed = _outcome(agent, name, payload)
    transcript = _text(payload, "transcript_path") or None
    return HookEvent(
        name,
        kind,
        session_id,
        run_id,
        subagent,
        tool,
        params,
        call_id,
        result,
        error,
        failed,
        transcript,
    )


# Shell tools carry a free-text description of the command next to it: a model re-wording it
# is still running the same command, so it is not part of the call's signature.
_SHELL_TOOLS = frozenset({"Bash", "run_shell_command", "shell"})


def _call_params(tool: str, params: Any) -> Any:
    if tool in _SHELL_TOOLS and isinstance(params, Mapping) and "description" in params:
        return {k: v for k, v in params.items() if k != "description"}
    return params


def handles(agent: str, name: str) -> bool:
    """Whether ``name`` is one of the events loopwarden's hook for ``agent`` knows."""
    return name in _KINDS[agent]


def _kind(agent: str, name: str, payload: Mapping[str, Any]) -> EventKind:
    kind = _KINDS[agent].get(name, "ignored")
    if name == "SessionStart" and payload.get("source") != "compact":
        return "ignored"
    return kind


def _text(payload: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = payload.get(key)
    if isinstance(value, str) and value.strip():
        return value
    if required:
        found = "missing" if value is None else f"{type(value).__name__} {value!r:.40}"
        raise HookInputError(f"the hook event's {key!r} must be a non-empty string ({found})")
    return ""


def _outcome(agent: str, name: str, payload: Mapping[str, Any]) -> tuple[Any, Any, bool | None]:
    """(result, error, failed) of a finished call, as the guard hashes them.

    A CLI's tool response becomes the text a model would see, wrapped as a tool result: the
    outcome hash of a bare dict reads only its ``details`` and ``content``, which these
    responses do not have, so every response would otherwise look the same.

    ``failed`` is the strongest signal the payload has. Claude Code sends a failed call (a
    non-zero exit included) as ``PostToolUseFailure``, so its ``PostToolUse`` is a success.
    Gemini CLI's shell output says a non-zero exit code in a line of its own. Codex's payload
    has no exit code: ``None`` here (the hook reads it from the rollout, ``_codex_exit``).
    """
    if name == "PostToolUseFailure":  # Claude Code: a failed call carries only its error text
        return UNDEFINED, str(payload.get("error") or "tool call failed"), True
    response = payload.get("tool_response")
    if agent == "gemini-cli" and isinstance(response, Mapping):
        error = response.get("error")
        if error:
            return UNDEFINED, _as_text(error), True
        raw = _as_text(response.get("llmContent", response))
        text = _GEMINI_VOLATILE.sub("", raw)
        failed = _shell_failed(raw) if payload.get("tool_name") == "run_shell_command" else None
        return _text_result(text), None, failed
    known = False if agent == "claude-code" else None
    return _text_result(_as_text(response)), None, known


def _shell_failed(text: str) -> bool:
    """Whether Gemini CLI's ``run_shell_command`` output reports a failure: a non-zero exit
    code, a signal, or a command it cancelled."""
    end = text[-_TRAILER_CHARS:]  # the trailer is a few short lines: a huge output is not scanned
    if len(text) > _TRAILER_CHARS:
        end = end.partition("\n")[2]  # from a line's start
    trailer = _GEMINI_TRAILER.search(end.removesuffix("\n") + "\n")
    if trailer is not None and (trailer["signal"] or (trailer["code"] or "0") != "0"):
        return True
    return _GEMINI_CANCELLED.match(text) is not None


def _as_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


# -- answers -----------------------------------------------------------------------------------


def deny(agent: str, event: HookEvent, reason: str, *, stop: bool = False) -> Answer:
    """The call must not run; ``reason`` reaches the model as its result, and a one-line note
    reaches the person at the keyboard (``systemMessage``: each CLI shows it to the user).

    ``stop`` also ends the run where the CLI honours that before a tool runs (Gemini CLI only).
    """
    note = for_user(event, reason, stopped=stop)
    if agent == "gemini-cli":
        body: dict[str, Any] = {"decision": "deny", "reason": reason, "systemMessage": note}
        if stop:
            body.update({"continue": False, "stopReason": reason})
        return _json(body)
    if stop:  # the turn goes on: say that every later call will be refused, whatever it is
        reason = stopped_turn(reason)
    if agent == "codex":  # Codex adds ". Command: <cmd>" after the reason: no full stop twice
        reason = reason.rstrip().removesuffix(".")
    return _json(
        {
            "systemMessage": note,
            "hookSpecificOutput": {
                "hookEventName": event.name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            },
        }
    )


def context(event: HookEvent, text: str, *, note: str | None = None) -> Answer:
    """Let the call run (or stand) and show ``text`` to the model next to its result (and
    ``note`` to the user)."""
    body: dict[str, Any] = {
        "hookSpecificOutput": {"hookEventName": event.name, "additionalContext": text}
    }
    if note:
        body = {"systemMessage": note, **body}
    return Answer(json.dumps(body, ensure_ascii=False), repeat=False)


def end_run(agent: str, event: HookEvent, reason: str) -> Answer:
    """After a call ran: end the run if the CLI lets a hook do that here, else tell the model.

    Later calls of the run are denied with ``reason`` either way (the guard's stopped run).
    The user is told in each case (``systemMessage``).
    """
    note = for_user(event, reason, stopped=True)
    if agent == "codex":  # no answer ends a codex exec run; this replaces the call's output
        return _json({"decision": "block", "reason": stopped_turn(reason), "systemMessage": note})
    if agent == "claude-code" and event.name == "PostToolUseFailure":
        return context(event, stopped_turn(reason), note=note)  # "continue": false ignored here
    return _json({"continue": False, "stopReason": note, "systemMessage": note})


STOPPED_TURN = (
    "loopwarden stopped this turn: every further tool call in it will be refused. Stop calling "
    "tools and tell the user what happened."
)

USER_HINT = "why: loopwarden runs list --blocked; off for one session: LOOPWARDEN_DISABLE=1"
"""How the note shown to the user ends: where to read more, and how to switch it off."""


def for_user(event: HookEvent, reason: str, *, stopped: bool) -> str:
    """The one line the person at the keyboard sees when loopwarden refuses or stops."""
    what = "stopped the turn at" if stopped else "refused"
    first = reason.strip().splitlines()[0] if reason.strip() else "a loop"
    sentence = re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]
    return f"loopwarden {what} a {event.tool or 'tool'} call: {sentence} ({USER_HINT})"


def stopped_turn(reason: str) -> str:
    """The stop reason, for a CLI whose turn goes on after it: what happens to later calls."""
    return f"{reason}\n{STOPPED_TURN}"


def warns_before(agent: str) -> bool:
    """Whether the CLI shows context given before a tool runs (Gemini CLI only shows it after)."""
    return agent != "gemini-cli"


def _json(body: Mapping[str, Any]) -> Answer:
    return Answer(json.dumps(body, ensure_ascii=False))


def notice(text: str) -> Answer:
    """Let the call proceed and show ``text`` to the user (``systemMessage``: every CLI shows it).

    Given once per CLI session, never repeated to a duplicate hook process.
    """
    return Answer(json.dumps({"systemMessage": text}, ensure_ascii=False), repeat=False)

"""loopwarden's own answers in the coding CLIs' session logs (sessions run with its hook on).

A call the hook refused never ran: its "result" is loopwarden's refusal as the CLI words it, and
replaying it must not count it as a call the guard would save. A warning the hook added to a
result (Gemini CLI appends ``<hook_context>`` to the call's output) is not the tool's output,
and must not make an identical result look different.
"""

from __future__ import annotations

import re

from loopwarden.transcripts.model import MISSING, ToolCall

# How each CLI hands a hook's refusal back to the model, before the hook's reason.
_REFUSED_BY = (
    "Command blocked by PreToolUse hook: ",  # Codex
    "Tool execution blocked: ",  # Gemini CLI
    "Agent execution stopped by hook: ",  # Gemini CLI, a refusal that also ends the run
    "Error: ",  # Claude Code's toolUseResult spelling
)
# The guard's refusals (core/detectors.py, core/patterns.py, core/compaction.py) and the hook's
# reason when its state is unavailable.
_REFUSAL = re.compile(
    r"CRITICAL: (?:Called |tool |attempted unavailable tool |You are |a cycle of |\S+ has "
    r"repeated identical ).*?(?:so the call was blocked|execution blocked|Aborting to prevent "
    r"runaway resource use|Stop retrying that missing tool)"
    r"|Tool call refused: loop-detection state is unavailable",
    re.DOTALL,
)
# A hook's context appended to a result by Gemini CLI: "\n\n<hook_context>...</hook_context>".
_HOOK_CONTEXT = re.compile(r"\s*<hook_context>.*?</hook_context>\s*\Z", re.DOTALL)


def is_refusal(text: str) -> bool:
    """Whether ``text`` (a call's error or output) is loopwarden's hook refusing the call."""
    body = text.strip()
    for prefix in _REFUSED_BY:
        if body.startswith(prefix):
            body = body[len(prefix) :]
            break
    return _REFUSAL.match(body) is not None


def without_hook_context(text: str) -> str:
    """A result without the hook context Gemini CLI appended to it."""
    while True:
        stripped = _HOOK_CONTEXT.sub("", text)
        if stripped == text:
            return text
        text = stripped


def mark_refused(call: ToolCall, text: str | None) -> None:
    """When ``text`` (what the call got back) is loopwarden's refusal, mark the call refused:
    it never ran, so it has no outcome of its own."""
    if text is not None and is_refusal(text):
        call.refused = True
        call.result, call.error, call.failed = MISSING, None, None

"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON object per line. ``user`` and ``assistant`` lines carry an Anthropic message in
``message``: assistant ``tool_use`` blocks are the calls, ``tool_result`` blocks (with
``is_error``) in the following user lines are their results. A run (turn) is one prompt and the
calls made to answer it: Claude Code 2.1 writes the prompt's ``promptId`` on the prompt and on
every tool result of the turn; in older files a user line that is not a tool result, a
compaction summary or a meta line starts the next run. A ``system`` line with ``subtype:
"compact_boundary"`` marks a context compaction. Subagent transcripts
(``<session>/subagents/agent-<id>.jsonl``, or ``isSidechain`` lines inside the main file) are
runs of their own. Other line types (``summary``, ``file-history-snapshot``,
``queue-operation``, ``attachment``...) are not replayed. The ``stream-json`` output of
``claude -p`` has the same lines (with ``session_id``) and is read the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopwarden.transcripts._hook_answers import mark_refused
from loopwarden.transcripts._io import epoch_seconds, iter_jsonl, text_of, token_sum
from loopwarden.transcripts._turns import TurnSplitter
from loopwarden.transcripts.anthropic import model_name
from loopwarden.transcripts.anthropic import usage as response_usage
from loopwarden.transcripts.model import MISSING, ToolCall, Trajectory, TranscriptError

FORMAT = "claude-code"

# Text the CLI itself writes as a user line: not a prompt from the user.
_NOT_PROMPTS = ("[Request interrupted by user", "<local-command-stdout>", "<local-command-stderr>")


def read(path: Path) -> Iterator[Trajectory]:
    """Import one Claude Code session file: one trajectory per user turn that made tool calls."""
    stem = path.name.split(".")[0]
    threads: dict[str, TurnSplitter] = {}
    responses: set[str] = set()  # model responses whose tokens were counted
    for lineno, obj in iter_jsonl(path):
        kind = obj.get("type")
        if kind not in ("user", "assistant", "system"):
            continue
        splitter = _thread(threads, path, stem, obj)
        if kind == "system":
            if obj.get("subtype") == "compact_boundary":
                splitter.add_compaction(lineno)
            continue
        message = obj.get("message")
        if not isinstance(message, dict):
            raise TranscriptError(str(path), f'a "{kind}" line without a "message" object', lineno)
        if kind == "assistant":
            _calls(splitter, message, lineno, _cost(obj, message, responses))
        else:
            _user(splitter, obj, message)
        if splitter is threads.get("main"):
            yield from splitter.drain()
    for splitter in threads.values():
        yield from splitter.finish()


def _thread(
    threads: dict[str, TurnSplitter], path: Path, stem: str, obj: dict[str, Any]
) -> TurnSplitter:
    """The splitter of the line's thread: the main conversation or one subagent."""
    key = "main"
    agent = obj.get("agentId") if obj.get("isSidechain") is True else None
    parent_call = obj.get("parent_tool_use_id")  # stream-json output: the subagent's Agent call
    if isinstance(agent, str) and agent:
        key = f"agent-{agent}"
    elif obj.get("isSidechain") is True:
        key = "sidechain"
    elif isinstance(parent_call, str) and parent_call:
        key = f"agent-{parent_call}"
    splitter = threads.get(key)
    if splitter is None:
        session = obj.get("sessionId", obj.get("session_id"))
        session = session if isinstance(session, str) and session else stem
        prefix = session if key == "main" else f"{session}:{key}"
        splitter = TurnSplitter(str(path), FORMAT, prefix)
        threads[key] = splitter
    return splitter


def _cost(obj: dict[str, Any], message: dict[str, Any], counted: set[str]) -> tuple[Any, ...]:
    """(time, tokens) of an assistant line. Claude Code writes one line per content block of a
    response, each with the response's whole usage: its tokens are counted once per id."""
    at = epoch_seconds(obj.get("timestamp"))
    response = message.get("id")
    if isinstance(response, str) and response in counted:
        return at, None, None
    tokens = token_sum(
        message.get("usage"),
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
    )
    if tokens is not None and isinstance(response, str):
        counted.add(response)
    return at, tokens, response_usage(message) if tokens is not None else None


def _calls(
    splitter: TurnSplitter, message: dict[str, Any], lineno: int, cost: tuple[Any, ...]
) -> None:
    content = message.get("content")
    if not isinstance(content, list):
        return
    at, tokens, usage = cost
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            block_id = block.get("id")
            splitter.add_call(
                ToolCall(
                    tool=str(block.get("name") or "unknown"),
                    params=block.get("input", {}),
                    tool_call_id=str(block_id) if block_id is not None else None,
                    line=lineno,
                    at=at,
                    tokens=tokens,
                    usage=usage,
                )
            )
            tokens, usage = None, None  # a response's tokens go on its first call
            splitter.note_model(model_name(message.get("model")))


def _user(splitter: TurnSplitter, obj: dict[str, Any], message: dict[str, Any]) -> None:
    # 2.1 writes the prompt's id on the prompt and on every tool result and summary of its turn.
    splitter.turn_key(obj.get("promptId"))
    content = message.get("content")
    results = [
        block
        for block in (content if isinstance(content, list) else [])
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    for block in results:
        _result(splitter, block)
    if not results and not splitter.keyed and _is_prompt(obj, content):
        splitter.start_turn()


def _is_prompt(obj: dict[str, Any], content: Any) -> bool:
    """A user line the user (or a caller of ``claude -p``) wrote, which starts a turn."""
    flags = ("isMeta", "isCompactSummary", "isVisibleInTranscriptOnly", "isSynthetic")
    if any(obj.get(flag) is True for flag in flags):
        return False
    text = text_of(content).lstrip()
    return bool(text) and not text.startswith(_NOT_PROMPTS)


def _result(splitter: TurnSplitter, block: dict[str, Any]) -> None:
    call = splitter.take(block.get("tool_use_id"))
    if call is None:
        return
    text = text_of(block.get("content"))
    if block.get("is_error") is True:
        # What PostToolUseFailure reports too: the error text, no result.
        call.result, call.error = MISSING, text
        mark_refused(call, text)
    else:
        # The text the model saw. toolUseResult ({stdout, stderr, ...} for Bash) holds the same
        # output; a plain dict result would hash to one value whatever it holds.
        call.result = text
        if block.get("is_error") is False:  # Claude Code says it succeeded (a Bash exit 0)
            call.failed = False

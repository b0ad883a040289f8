"""Codex's exit code of a finished shell command, read from its rollout file.

Codex's ``PostToolUse`` payload carries the command's output but no exit code. The rollout it
names (``transcript_path``) does: Codex appends the command's ``item_completed`` event (a
``CommandExecution`` item with ``exit_code``) before it runs the ``PostToolUse`` hooks, checked
with Codex 0.171 (``tests/data/coding_agents/codex/capture_exit_codes.py``). The event is among
the file's last lines then, so only the tail is read; when it is not there (a line longer than
the tail, a rollout not written yet, another Codex), the answer is ``None`` and the guard judges
the output text as before.
"""

from __future__ import annotations

import json
import os
import stat

TAIL_BYTES = 256 * 1024
"""How much of the rollout's end is read: the event of the call just finished is near the end
(only the outputs of calls finishing at the same time can come after it)."""


def command_failed(path: str, call_id: str, turn_id: str | None) -> bool | None:
    """Whether shell call ``call_id`` of turn ``turn_id`` failed, as the rollout at ``path``
    records it (a non-zero exit code), or ``None`` when its tail does not say."""
    read = _tail(path)
    if read is None:
        return None
    tail, cut = read
    needle = json.dumps(call_id).encode()  # as it is written in the file, quotes included
    lines = tail.split(b"\n")
    if cut:
        lines = lines[1:]  # the first line starts before the tail: not readable
    for line in reversed(lines):
        # Cheap filters first: most lines are other events, and lines can be long.
        if needle not in line or b'"item_completed"' not in line:
            continue
        failed = _command_failed(line, call_id, turn_id)
        if failed is not None:
            return failed
    return None


def _tail(path: str) -> tuple[bytes, bool] | None:
    """The file's last :data:`TAIL_BYTES` bytes, and whether that is not the whole file;
    ``None`` for anything but a readable regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device named as a transcript
            return None
        start = max(0, info.st_size - TAIL_BYTES)
        return os.pread(fd, info.st_size - start, start), start > 0
    except OSError:
        return None
    finally:
        os.close(fd)


def _command_failed(line: bytes, call_id: str, turn_id: str | None) -> bool | None:
    try:
        event = json.loads(line)
    except ValueError:  # a line being written, or not JSON
        return None
    payload = event.get("payload") if isinstance(event, dict) else None
    if not isinstance(payload, dict) or payload.get("type") != "item_completed":
        return None
    item = payload.get("item")
    if not isinstance(item, dict) or item.get("type") != "CommandExecution":
        return None
    if item.get("id") != call_id:
        return None
    if turn_id is not None and payload.get("turn_id") not in (None, turn_id):
        return None  # a call id reused in another turn
    code = item.get("exit_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    # No exit code (a process killed before it could give one): Codex's own verdict.
    status = item.get("status")
    return True if status == "failed" else None

"""Shared test helpers.

Optional integrations (framework extras, redis-server, chromium) are skipped with a clear
reason when missing on a developer machine, but CI sets ``LOOPWARDEN_REQUIRE_ALL=1`` so a
missing piece fails the run instead of silently skipping it.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import loopwarden as lw
from loopwarden.cli import engine_compiled

# The test data that ships with the repository: conformance vectors, sample transcripts and the
# development corpus (each folder's README says what it holds and where it comes from).
DATA = Path(__file__).resolve().parent / "data"


# True when loopwarden's hot modules are the mypyc-compiled build (a regular wheel install):
# their functions call each other directly, so spies set on module globals are not seen.
COMPILED = engine_compiled()


def _must_have() -> bool:
    return os.environ.get("LOOPWARDEN_REQUIRE_ALL") == "1"


def require_module(name: str, extra: str) -> ModuleType:
    """Import an optional dependency, or skip (fail under CI) naming the extra to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        reason = f"{name} not installed: pip install '.[{extra}]' ({exc})"
        if _must_have():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def require_binary(name: str, how: str) -> str:
    """Find an executable, or skip (fail under CI) saying how to install it."""
    path = shutil.which(name)
    if path is None:
        reason = f"{name} not found on PATH: {how}"
        if _must_have():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return path


def require_cli(name: str) -> Path:
    """A coding CLI installed by npm in tests/coding_agents, or skip (fail under CI) saying how."""
    path = Path(__file__).resolve().parent / "coding_agents" / "node_modules" / ".bin" / name
    if not path.exists():
        reason = f"{path} missing: run: npm ci --prefix tests/coding_agents"
        if _must_have():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    return path


def data_path(*parts: str) -> Path:
    """A file or folder of the repository's test data (tests/data), failing if it is missing."""
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(
            f"test data missing: {path} (it is part of the repository: is the clone whole?)"
        )
    return path


def wait_for_hook_server(state_home: Path, timeout: float = 60.0) -> Path:
    """The socket of the hook server a hook process started for ``state_home``, once it answers.

    Raises ``AssertionError`` if none is listening within ``timeout`` seconds.
    """
    import socket
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in (state_home / "loopwarden").glob("hookd-*.sock"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(path))
                except OSError:
                    continue
                return path
        time.sleep(0.05)
    raise AssertionError(f"no hook server answered in {state_home} within {timeout} s")


def run_calls(guard: lw.LoopGuard, calls: list[tuple[str, Any, Any]], run: str = "r") -> list[str]:
    """Replay (tool, params, result) calls live; return each call's final action."""
    actions = []
    for tool, params, result in calls:
        before = guard.before_tool_call("s", tool, params, run_id=run)
        if before.action in ("block", "stop"):
            actions.append(before.action)
            continue
        after = guard.after_tool_call("s", tool, params, result=result, run_id=run)
        actions.append("stop" if after.action == "stop" else before.action)
    return actions

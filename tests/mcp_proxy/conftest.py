"""Fixtures shared by the mcp-proxy tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from _support import require_module


@pytest.fixture(autouse=True)
def _mcp_sdk() -> None:
    require_module("mcp", "mcp")


@pytest.fixture
def counter(tmp_path: Path) -> Path:
    """The file where the test server appends one line per real tool execution."""
    return tmp_path / "executions.txt"

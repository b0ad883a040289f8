"""``--set KEY=VALUE`` applied to a config block (the command line's and the hooks' alike)."""

from __future__ import annotations

from typing import Any

from loopwarden.core.config import parse_override

__all__ = ["apply_overrides"]


def apply_overrides(block: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``block`` with each ``--set`` applied (nested keys by dots)."""
    merged: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in block.items()}
    for text in overrides:
        path, value = parse_override(text)
        target = merged
        for part in path[:-1]:
            child = target.get(part)
            if not isinstance(child, dict):
                child = {}
                target[part] = child
            target = child
        target[path[-1]] = value
    return merged

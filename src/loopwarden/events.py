"""Loop events (the type lives in the core, :mod:`loopwarden.core.events`; named here too)."""

from __future__ import annotations

from loopwarden.core.events import Action, EventType, LoopEvent

__all__ = ["Action", "EventType", "LoopEvent"]

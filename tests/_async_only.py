"""An async-only session store for tests: proves a code path uses the guard's async methods.

``LoopGuard``'s sync methods refuse a store without ``update`` (``TypeError``), so a framework run
that completes over this store never called the guard synchronously. ``updates`` counts the
awaited updates (a run that never reached the guard would count none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from loopwarden.store import GuardSession, MemoryStore

T = TypeVar("T")


class AsyncOnlyStore:
    """``aupdate`` / ``apeek`` over a MemoryStore, and nothing sync."""

    def __init__(self) -> None:
        self.inner = MemoryStore()
        self.updates = 0

    async def aupdate(self, key: str, fn: Callable[[GuardSession], T]) -> T:
        self.updates += 1
        return await self.inner.aupdate(key, fn)

    async def apeek(self, key: str) -> GuardSession | None:
        return await self.inner.apeek(key)

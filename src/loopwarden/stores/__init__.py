"""Session stores beyond the in-memory default: shared (Redis) and persisted (SQLite).

Every store implements :class:`loopwarden.store.SessionStore` and is passed to
``LoopGuard(store=...)``. The heavy clients are imported only when a store is built::

    from loopwarden.stores.redis import RedisStore      # the redis extra: pip install '.[redis]'
    from loopwarden.stores.sqlite import SQLiteStore    # stdlib sqlite3
"""

from __future__ import annotations

from typing import Literal

OnStoreError = Literal["allow", "block"]
ON_STORE_ERROR_CHOICES: tuple[OnStoreError, ...] = ("allow", "block")


class StoreUnavailableError(RuntimeError):
    """A store could not read or write a session (server down, timeout, conflict storm).

    ``policy`` is the store's ``on_store_error`` setting: ``"allow"`` lets the tool call
    proceed without loop accounting, ``"block"`` refuses it. The message never holds
    credentials. ``reported``: the store has logged this outage already (once), so the guard
    logs each call it affects at debug level only.
    """

    def __init__(
        self, message: str, *, policy: OnStoreError = "allow", reported: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.policy: OnStoreError = policy
        self.reported = reported


def check_on_store_error(value: object) -> OnStoreError:
    """Validate an ``on_store_error`` setting; raises ``ValueError`` naming the choices."""
    if value == "allow":
        return "allow"
    if value == "block":
        return "block"
    raise ValueError(
        f"on_store_error must be 'allow' (the call proceeds, the error is logged) or 'block' "
        f"(the call is refused), got {value!r}"
    )


__all__ = [
    "ON_STORE_ERROR_CHOICES",
    "OnStoreError",
    "StoreUnavailableError",
    "check_on_store_error",
]

"""A module logger that imports :mod:`logging` only when something is logged.

``import logging`` costs about 4 ms (it pulls in traceback, string, weakref...), a noticeable
share of a coding-agent hook process that runs once per tool call and usually logs nothing.
The logger returned here is the real ``logging.getLogger(name)`` as soon as any of its
attributes is used, so handlers, levels and ``caplog`` see exactly what they always saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable
    from logging import Logger

# Run once, right before the first lazy logger is used: a short-lived process (the coding-CLI
# hook) configures its handlers there, and pays for logging only when it logs.
_first_use: list[Callable[[], None]] = []
_quieted: list[bool] = []


def quiet_unless_configured() -> None:
    """Give the ``loopwarden`` logger a ``NullHandler`` (once), as libraries should.

    Without one, Python's last-resort handler prints every warning of a library to stderr when
    the application configured no logging: a `loop block: ...` line per decision. With it,
    the guard's log lines go wherever the application's handlers send them, and nowhere else.
    """
    if _quieted:
        return
    import logging

    logging.getLogger("loopwarden").addHandler(logging.NullHandler())
    _quieted.append(True)


class _LazyLogger:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import logging

        quiet_unless_configured()
        while _first_use:
            _first_use.pop()()
        return getattr(logging.getLogger(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy logger {self._name!r}>"


def get_logger(name: str) -> Logger:
    """``logging.getLogger(name)``, with ``logging`` imported on the logger's first use."""
    return cast("Logger", _LazyLogger(name))


def on_first_use(configure: Callable[[], None]) -> None:
    """Call ``configure`` once, right before any lazy logger is first used."""
    _first_use.append(configure)

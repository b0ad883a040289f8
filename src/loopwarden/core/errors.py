"""Exceptions a runtime can catch when the guard ends a run."""

from __future__ import annotations


class LoopStoppedError(RuntimeError):
    """The guard ended a run; ``message`` says why (the same text the model and the run record
    get), ``detector`` which detector fired, ``count`` its count and ``tool_name`` the tool."""

    def __init__(self, message: str, *, detector: str, count: int, tool_name: str) -> None:
        super().__init__(message)
        self.message = message
        self.detector = detector
        self.count = count
        self.tool_name = tool_name

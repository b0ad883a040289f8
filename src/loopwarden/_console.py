"""The rich console every command prints its report with (rich is imported only by importers)."""

from __future__ import annotations

from rich.console import Console


class PipeConsole(Console):
    """A console that lets a closed pipe reach the CLI's entry point.

    rich's own handling exits with status 1; raising ``BrokenPipeError`` instead lets
    ``loopwarden`` end quietly with 141, as every command does when its reader goes away
    (``loopwarden config check FILE | head -1``).
    """

    def on_broken_pipe(self) -> None:
        """Stop rendering and raise: ``loopwarden`` ends quietly, as on a closed pipe."""
        self.quiet = True
        raise BrokenPipeError

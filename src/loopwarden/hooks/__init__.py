"""Loop protection inside the coding CLIs (Claude Code, Codex CLI, Gemini CLI), through their hooks.

Each CLI runs ``loopwarden hook AGENT`` around every tool call with one JSON event on stdin and
reads the answer from stdout and the exit code. The package is split like the rest of
loopwarden:

- :mod:`loopwarden.hooks._protocol` (pure): a CLI's payload → a neutral :class:`HookEvent`, and a
  guard :class:`~loopwarden.guard.Decision` → the answer in that CLI's format.
- :mod:`loopwarden.hooks._runner` (shell): the state file, the guard, one atomic transaction per
  event, failing open.
- :mod:`loopwarden.hooks._install` : merging loopwarden's entries into the CLI's settings file.

Everything here is private; the command line (``loopwarden hook``, ``loopwarden hooks``) is the
interface.
"""

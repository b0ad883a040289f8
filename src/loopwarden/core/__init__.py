"""The functional core: loop detection as pure functions over plain data.

Canonical form and call hashing (``canonical``), outcome hashing (``outcome``), configuration
(``config``), the record of a call (``tool_call``), a session's history and its incremental engine
(``history``, ``_engine``), the detectors (``detectors``, ``patterns``), volatile-output
normalisation (``volatile``), the post-compaction guard (``compaction``), the exception that
ends a run (``errors``), a session's bookkeeping and its runs (``session``), loop events
(``events``), the guard's decision about one call as one step over a session (``step``) and
the reference engine the tests compare against (``reference``).

Nothing here keeps a lock, touches files or sockets, or imports the shell around it
(``loopwarden.guard``, the stores, the run records, the CLI, the adapters, the MCP proxy and the
hooks); the shell imports the core. Two small side effects remain: a new record or event is stamped
with the clock's time, and a dropped ``volatilePatterns`` entry is logged once per process.

The public names are exported from ``loopwarden``; import them from there.
"""

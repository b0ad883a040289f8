"""The functional core: loop detection as pure functions over plain data.

Canonical form and call hashing (``canonical``), outcome hashing (``outcome``), configuration
(``config``), the record of a call (``tool_call``), a session's history and its incremental engine
(``history``, ``_engine``), the detectors (``detectors``, ``patterns``), volatile-output
normalisation (``volatile``) and the post-compaction guard (``compaction``). Nothing here does
I/O, keeps a lock or imports the shell around it (``loopwarden.guard``, the stores, the run
records, the CLI, the adapters, the MCP proxy and the hooks); the shell imports the core.

The public names are exported from ``loopwarden``; import them from there.
"""

"""Splitting one coding-agent session file into runs, one per user turn.

Claude Code, Codex and Gemini CLI write a whole session (many user prompts) into one file. The
guard scopes its history to a run, and a run of these CLIs is one user turn: the prompt and every
tool call the agent made to answer it. :class:`TurnSplitter` builds one :class:`Trajectory` per
turn, links each result to a call of its own turn, and drops turns that made no tool call
(nothing for the guard to see).
"""

from __future__ import annotations

from collections.abc import Iterator

from loopwarden.transcripts.model import CallLinker, Compaction, Item, ToolCall, Trajectory


class TurnSplitter:
    """One trajectory per turn of a session, ids ``<session>:turn-<n>`` (n counts from 1)."""

    def __init__(self, source: str, fmt: str, session: str) -> None:
        self.source = source
        self.format = fmt
        self.session = session
        self.turns = 0
        self._done: list[Trajectory] = []
        self._current: Trajectory | None = None
        self._linker: CallLinker | None = None
        self._seen_ids: set[str] = set()
        self._key: str | None = None
        self.keyed = False  # the file names its turns (prompt or turn ids)

    def start_turn(self) -> None:
        """Close the running turn and open the next.

        Compactions after the last call of the closing turn move to the new one: a CLI that
        compacts before it sends a new prompt (Gemini CLI writes the compression first, the
        prompt after it) compacts for the new turn, and the guard is armed there, as in the
        live hooks.
        """
        carried: list[Item] = []
        if self._current is not None:
            items = self._current.items
            while items and isinstance(items[-1], Compaction):
                carried.insert(0, items.pop())
        self._close()
        self.turns += 1
        self._current = Trajectory(
            id=f"{self.session}:turn-{self.turns}", source=self.source, format=self.format
        )
        self._current.items.extend(carried)
        self._linker = CallLinker(self._current)

    def turn_key(self, key: object) -> None:
        """A line naming its turn (a prompt or turn id): a new id starts a new turn."""
        if not isinstance(key, str) or not key:
            return
        self.keyed = True
        if key != self._key:
            self._key = key
            self.start_turn()

    def _ensure(self) -> CallLinker:
        # Calls before any prompt (a file cut at its start) form a turn of their own.
        if self._linker is None:
            self.start_turn()
        assert self._linker is not None
        return self._linker

    def add_call(self, call: ToolCall) -> None:
        """Append a call to the running turn, unless its id was seen before (a line rewritten)."""
        if call.tool_call_id is not None:
            if call.tool_call_id in self._seen_ids:
                return
            self._seen_ids.add(call.tool_call_id)
        self._ensure().add_call(call)

    def note_model(self, model: object) -> None:
        """The model that answered in the running turn: the turn's model is the first named."""
        current = self._current
        if isinstance(model, str) and model and current is not None and current.model is None:
            current.model = model

    def add_compaction(self, line: int | None) -> None:
        """A context compaction inside the running turn: arms the post-compaction guard there."""
        linker = self._ensure()
        linker.trajectory.items.append(Compaction(line=line))

    def take(self, tool_call_id: object) -> ToolCall | None:
        """The pending call of the running turn a result answers, or None (counted as orphan)."""
        return self._ensure().take(tool_call_id)

    def pending_by_name(self, tool: object) -> str | None:
        """The id of the oldest call of this tool still without an outcome (formats with no ids)."""
        current = self._current
        for call in current.calls if current is not None else []:
            if call.tool == tool and not call.has_outcome:
                return call.tool_call_id
        return None

    def _close(self) -> None:
        current = self._current
        if current is not None and current.calls:
            self._done.append(current)
        self._current, self._linker = None, None

    def drain(self) -> Iterator[Trajectory]:
        """Yield (and forget) the turns finished so far; streams long files turn by turn."""
        done, self._done = self._done, []
        yield from done

    def finish(self) -> Iterator[Trajectory]:
        """Close the last turn and yield every turn not yet yielded."""
        self._close()
        yield from self.drain()

"""The incremental engine behind ``SessionState``: per-run counters kept up to date on every change.

Detection defines every measurement as a walk over the run's history. Walking costs O(historySize)
per call; this module keeps, per run, the state those walks would find, and updates it on the
three events that change a history:

- **append** of a record at the newest end (a pending call, or a complete outcome record);
- **completion** of a pending record, anywhere in the run (parallel calls finish out of order,
  and an outcome attaches to the newest matching pending record, which may be old);
- **eviction** of the session's oldest record, which is also the oldest record of its run.

A record changes at most once (pending → complete: ``record_outcome`` only fills records without
a result, and a stored outcome always has a result hash), and only at one of those events.

What is kept per run (``_Run``):

- **U** (unknown-tool streak): the run is cut into ``_Segment`` s, each one pending record followed
  by the complete records after it (the first segment has no pending record). A pending record
  breaks the streak, complete records never change, so each segment summarises its trailing
  streak; completing a pending record merges its segment into the previous one in O(1).
  U = the trailing streak of the last segment.
- **R, N** (repeat count, no-progress streak) per signature (``_Sig``): counts plus the streak of
  equal result hashes at the newest end of the signature's complete records. Pending records of
  the signature are chained newest ↔ oldest, which also answers "newest matching pending record"
  in O(1). Tool-call ids are indexed per run (``_Run.by_id``).
- **P** (ping-pong): the alternating tail's two signatures and length, and per side a count of
  result hashes (``None`` counting pending records): evidence = each side holds one hash.

Cost per operation is O(1), with one exception explained at ``_Sig.complete_inside``. Memory is
a fixed number of small objects per record and per distinct signature present
(docs/performance.md).
Thread safety is the caller's job (``LoopGuard`` holds a per-session lock).
"""

from __future__ import annotations

from typing import Any

from loopwarden.core.canonical import _digest_plain, _plain_key, hash_tool_call
from loopwarden.core.tool_call import ToolCallRecord

RunKey = str | None
VETO_HASH = "veto:tool-loop"  # a veto record's result hash before its call had any result
SigKey = Any  # the signature string; (tool, signature) for a foreign record whose two disagree


class _Segment:
    """One pending record of a run plus the complete records after it, up to the next pending.

    ``n`` complete records; the newest ``t`` of them share tool ``tool`` and unknown-tool name
    ``unk`` (``t == 0``: the newest has no unknown name, or there is none). The pending record is
    also a link in two chains: its signature's pending records (``k_prev``/``k_next``) and the
    run's pending records with the same tool-call id (``i_prev``/``i_next``). ``before`` is
    the signature's newest complete record older than the pending one, other than a veto with
    ``VETO_HASH`` (at position ``before_kseq``): what a call in flight is presumed to return
    (``core/in_flight.py``).
    """

    __slots__ = (
        "before",
        "before_kseq",
        "i_next",
        "i_prev",
        "k_next",
        "k_prev",
        "kseq",
        "n",
        "next",
        "pending",
        "prev",
        "rseq",
        "sig",
        "t",
        "tool",
        "unk",
    )

    def __init__(
        self,
        prev: _Segment | None = None,
        pending: ToolCallRecord | None = None,
        sig: _Sig | None = None,
        kseq: int = 0,
        rseq: int = 0,
    ) -> None:
        self.prev = prev
        self.next: _Segment | None = None
        self.pending = pending
        self.sig = sig
        self.kseq = kseq  # position among the signature's records
        self.rseq = rseq  # position in the run (appends counted from the run's start)
        self.n = 0
        self.t = 0
        self.tool: str | None = None
        self.unk: str | None = None
        self.k_prev: _Segment | None = None
        self.k_next: _Segment | None = None
        self.i_prev: _Segment | None = None
        self.i_next: _Segment | None = None
        self.before: ToolCallRecord | None = None
        self.before_kseq = -1


class _Sig:
    """R and N for one signature in one run, and its chain of pending records."""

    __slots__ = (
        "count",
        "done",
        "key",
        "last_done",
        "latest",
        "p_new",
        "real",
        "real_kseq",
        "streak",
        "tool",
        "total",
    )

    def __init__(self, key: SigKey, tool: str) -> None:
        self.key = key
        self.tool = tool
        self.count = 0  # R: records of this signature in the run
        self.total = 0  # records ever appended; the next record's kseq
        self.done = 0  # complete records present
        self.streak = 0  # N
        self.latest: str | None = None  # N's hash
        self.last_done = -1  # kseq of the newest complete record
        self.p_new: _Segment | None = None  # newest pending record (chained to older ones)
        # The newest complete record but a VETO_HASH veto, and its kseq: a new pending record's
        # ``before``. Records are evicted oldest first, so the kseqs present are
        # total - count .. total - 1: one below that was evicted (see ``presumed``).
        self.real: ToolCallRecord | None = None
        self.real_kseq = -1

    def add_done(self, kseq: int, result_hash: str) -> None:
        """A complete record became the newest complete record of the signature."""
        if self.streak and result_hash == self.latest:
            self.streak += 1
        else:
            self.streak, self.latest = 1, result_hash
        self.last_done = kseq
        self.done += 1

    def complete_inside(self, seg: _Segment, result_hash: str) -> None:
        """N when a pending record older than the newest complete one gets ``result_hash``.

        The new complete record can split the streak, and then N becomes the number of complete
        records newer than it. That is a rank query over a set with deletions anywhere (pending
        records complete in any order), which no structure answers in O(1) (Fredman–Saks:
        Ω(log n / log log n)). We count the pending records of this signature between it and the
        newest complete one instead: calls of the same signature issued after it and still
        awaiting their outcome. That bounds the work by the calls in flight, not by historySize,
        and only an out-of-order completion pays it.
        """
        kseq = seg.kseq
        newer_pending = 0
        after = seg.k_next
        while after is not None and after.kseq < self.last_done:
            newer_pending += 1
            after = after.k_next
        newer_done = self.last_done - kseq - newer_pending
        if result_hash == self.latest:
            if newer_done <= self.streak:  # inside the streak or right before it: it grows
                self.streak += 1
        elif newer_done < self.streak:  # inside the streak: only the newer part remains
            self.streak = newer_done
        self.done += 1

    def unchain(self, seg: _Segment) -> None:
        """Unlink a pending record (completed or evicted) from the signature's chain."""
        before, after = seg.k_prev, seg.k_next
        if before is not None:
            before.k_next = after
        if after is None:
            self.p_new = before
        else:
            after.k_prev = before
        seg.k_prev = seg.k_next = None


class _Run:
    """Everything detection needs about one run's records, kept current by the three events."""

    __slots__ = (
        "a",
        "b",
        "by_id",
        "first",
        "last",
        "n",
        "newest",
        "side_a",
        "side_b",
        "sigs",
        "tail",
        "top",
    )

    def __init__(self) -> None:
        self.first = self.last = _Segment()
        self.n = 0  # records of the run present
        self.top = -1  # rseq of the newest record
        self.sigs: dict[SigKey, _Sig] = {}
        self.by_id: dict[Any, _Segment] = {}  # tool-call id -> newest pending record with it
        self.newest: ToolCallRecord | None = None
        # Ping-pong: the tail's newest signature ``a``, the other one ``b``, its length, and per
        # side the count of each result hash (None = pending). Sides are valid when tail >= 2.
        self.a: str | None = None
        self.b: str | None = None
        self.tail = 0
        self.side_a: dict[str | None, int] = {}
        self.side_b: dict[str | None, int] = {}

    # -- append ------------------------------------------------------------------------------

    def add_pending(self, record: ToolCallRecord, key: SigKey) -> None:
        """Append a record that has no result yet (flat: it runs for nearly every call)."""
        sig = self.sigs.get(key)
        is_new = sig is None
        if sig is None:
            sig = _Sig(key, record.tool_name)
        seg = _Segment(self.last, record, sig, sig.total, self.top + 1)
        seg.before, seg.before_kseq = sig.real, sig.real_kseq
        tool_call_id = record.tool_call_id
        if tool_call_id is not None:  # index by id first: it refuses a bad id before any change
            try:
                same_id = self.by_id.get(tool_call_id)
            except TypeError:
                raise TypeError(
                    f"tool_call_id must be a string or None, got {type(tool_call_id).__name__}"
                ) from None
            if same_id is not None:
                same_id.i_next = seg
                seg.i_prev = same_id
            self.by_id[tool_call_id] = seg
        self.top += 1
        if is_new:  # filed only now: a refused id above must leave no trace
            self.sigs[key] = sig
        sig.total += 1
        sig.count += 1
        self.n += 1
        self.last.next = seg
        self.last = seg
        # Chain as the signature's newest pending record.
        newest = sig.p_new
        seg.k_prev = newest
        if newest is not None:
            newest.k_next = seg
        sig.p_new = seg
        # Ping-pong tail, as _push_tail does (inlined here).
        signature = record.args_hash
        tail = self.tail
        if tail and signature == self.a:
            self.tail = 1
        elif tail >= 2 and signature == self.b:
            self.tail = tail + 1
            self.a, self.b = signature, self.a
            self.side_a, self.side_b = self.side_b, self.side_a
            self.side_a[None] = self.side_a.get(None, 0) + 1
        elif tail:
            self.tail = 2
            self.a, self.b = signature, self.a
            self.side_a = {None: 1}
            self.side_b = {self.newest.result_hash if self.newest else None: 1}
        else:
            self.tail, self.a = 1, signature
        self.newest = record

    def add_done(self, record: ToolCallRecord, key: SigKey, result_hash: str) -> None:
        """Append a record that already has its result (an outcome with no pending match)."""
        sig = self.sigs.get(key)
        if sig is None:
            sig = self.sigs[key] = _Sig(key, record.tool_name)
        sig.add_done(sig.total, result_hash)
        if result_hash != VETO_HASH:
            sig.real, sig.real_kseq = record, sig.total
        sig.total += 1
        sig.count += 1
        self.top += 1
        self.n += 1
        last = self.last
        last.n += 1
        unk = record.unknown_tool_name
        if unk is None:
            last.t = 0
        elif last.t and last.unk == unk and last.tool == record.tool_name:
            last.t += 1
        else:
            last.t, last.tool, last.unk = 1, record.tool_name, unk
        self._push_tail(record, result_hash)

    def _push_tail(self, record: ToolCallRecord, result_hash: str | None) -> None:
        """Extend or restart the alternating tail with the new newest record."""
        signature = record.args_hash
        if self.tail and signature == self.a:
            self.tail = 1
        elif self.tail >= 2 and signature == self.b:
            self.tail += 1
            self.a, self.b = signature, self.a
            self.side_a, self.side_b = self.side_b, self.side_a
            side = self.side_a
            side[result_hash] = side.get(result_hash, 0) + 1
        elif self.tail:
            self.tail = 2
            self.a, self.b = signature, self.a
            self.side_a = {result_hash: 1}
            self.side_b = {self.newest.result_hash if self.newest else None: 1}
        else:
            self.tail, self.a = 1, signature
        self.newest = record

    def _unindex_id(self, seg: _Segment, tool_call_id: Any) -> None:
        before, after = seg.i_prev, seg.i_next
        if after is None:
            if before is None:
                del self.by_id[tool_call_id]
            else:
                self.by_id[tool_call_id] = before
        else:
            after.i_prev = before
        if before is not None:
            before.i_next = after
        seg.i_prev = seg.i_next = None

    # -- completion --------------------------------------------------------------------------

    def match(self, key: SigKey, tool_call_id: Any) -> _Segment | None:
        """The newest pending record of this signature (with this tool-call id, when given)."""
        sig = self.sigs.get(key)
        if sig is None or sig.p_new is None:
            return None
        if tool_call_id is None:
            return sig.p_new
        try:
            seg = self.by_id.get(tool_call_id)
        except TypeError:
            return None  # unhashable: record_call refused it, so no record carries it
        # Tool-call ids are unique per call in practice; the walk skips other signatures' calls
        # that reuse the id.
        while seg is not None and seg.sig is not sig:
            seg = seg.i_prev
        return seg

    def complete(self, seg: _Segment, result_hash: str, unk: str | None) -> None:
        """The pending record of ``seg`` got its outcome (already written on the record).

        One flat function on purpose: it runs for nearly every tool call, and each helper call
        costs as much as the work it would do.
        """
        record = seg.pending
        sig = seg.sig
        assert record is not None and sig is not None
        # N: the signature's newest result grows or restarts the streak; an older one may cut it.
        if seg.kseq > sig.last_done:
            if sig.streak and result_hash == sig.latest:
                sig.streak += 1
            else:
                sig.streak, sig.latest = 1, result_hash
            sig.last_done = seg.kseq
            sig.done += 1
        else:
            sig.complete_inside(seg, result_hash)
        # Unchain from the signature's pending records, and from the tool-call id index.
        before, after = seg.k_prev, seg.k_next
        if before is not None:
            before.k_next = after
        if after is None:
            sig.p_new = before
        else:
            after.k_prev = before
        if record.tool_call_id is not None:
            self._unindex_id(seg, record.tool_call_id)
        # P: a record inside the ping-pong tail moves from pending to its hash on its side.
        if self.tail >= 2 and seg.rseq > self.top - self.tail:
            side = self.side_a if record.args_hash == self.a else self.side_b
            left = side[None] - 1
            if left:
                side[None] = left
            else:
                del side[None]
            side[result_hash] = side.get(result_hash, 0) + 1
        # U: fold the segment into the previous one, combining the trailing streaks.
        prev = seg.prev
        assert prev is not None
        tool = record.tool_name
        if seg.n == 0 or (seg.t == seg.n and seg.unk == unk and seg.tool == tool):
            # The completed record joins the segment's own streak (all of it, or empty).
            if unk is None:
                prev.t = 0
            else:
                t = seg.n + 1
                if prev.t and prev.unk == unk and prev.tool == tool:
                    t += prev.t
                prev.t, prev.tool, prev.unk = t, tool, unk
        else:
            prev.t, prev.tool, prev.unk = seg.t, seg.tool, seg.unk
        prev.n += seg.n + 1
        nxt = seg.next
        prev.next = nxt
        if nxt is None:
            self.last = prev
        else:
            nxt.prev = prev

    def learn(self, seg: _Segment, record: ToolCallRecord) -> None:
        """Before ``complete``: the record of ``seg`` got a real outcome (``record``'s hash).

        It becomes the signature's newest real outcome if no newer one is present, and the
        ``before`` of the newer pending records whose ``before`` is older than it (kseqs only
        grow along the chain, and so do their ``before_kseq``: the walk stops at the first one
        it leaves alone). Bounded by the signature's pending records, like ``complete_inside``.
        """
        sig = seg.sig
        assert sig is not None
        kseq = seg.kseq
        if kseq > sig.real_kseq:
            sig.real, sig.real_kseq = record, kseq
        after = seg.k_next
        while after is not None and after.before_kseq < kseq:
            after.before, after.before_kseq = record, kseq
            after = after.k_next

    # -- presumed outcomes (core/in_flight.py) ---------------------------------------------

    def presume(self, seg: _Segment, result_hash: str, unk: str | None) -> _Undo:
        """Complete ``seg``'s record with an outcome it is only presumed to have, undoably.

        The engine's own ``complete`` runs (so detection reads exactly what a real outcome would
        give); what it changes is saved first, and :meth:`withdraw` puts it back. Undo the
        presumptions newest first.
        """
        record, sig, prev = seg.pending, seg.sig, seg.prev
        assert record is not None and sig is not None and prev is not None
        undo = _Undo(seg, record, sig, prev, self.last)
        undo.sig_fields = (sig.streak, sig.latest, sig.last_done, sig.done, sig.p_new)
        undo.prev_fields = (prev.t, prev.tool, prev.unk, prev.n, prev.next)
        undo.links = (seg.k_prev, seg.k_next, seg.i_prev, seg.i_next)
        if record.tool_call_id is not None:
            undo.by_id = self.by_id.get(record.tool_call_id)
        if self.tail >= 2 and seg.rseq > self.top - self.tail:
            side = self.side_a if record.args_hash == self.a else self.side_b
            undo.side = side
            undo.side_counts = (side.get(None), side.get(result_hash))
        undo.result_hash = result_hash
        record.result_hash, record.unknown_tool_name = result_hash, unk
        self.complete(seg, result_hash, unk)
        return undo

    def withdraw(self, undo: _Undo) -> None:
        """Take back one :meth:`presume` (the newest one not taken back yet)."""
        seg, record, sig, prev = undo.seg, undo.record, undo.sig, undo.prev
        record.result_hash = record.unknown_tool_name = None
        sig.streak, sig.latest, sig.last_done, sig.done, sig.p_new = undo.sig_fields
        prev.t, prev.tool, prev.unk, prev.n, prev.next = undo.prev_fields
        k_prev, k_next, i_prev, i_next = undo.links
        if k_prev is not None:
            k_prev.k_next = seg
        if k_next is not None:
            k_next.k_prev = seg
        seg.i_prev, seg.i_next = i_prev, i_next
        if i_prev is not None:
            i_prev.i_next = seg
        if i_next is not None:
            i_next.i_prev = seg
        if record.tool_call_id is not None and undo.by_id is not None:
            self.by_id[record.tool_call_id] = undo.by_id
        side = undo.side
        if side is not None:
            for key, count in (
                (None, undo.side_counts[0]),
                (undo.result_hash, undo.side_counts[1]),
            ):
                if count is None:
                    side.pop(key, None)
                else:
                    side[key] = count
        if seg.next is not None:
            seg.next.prev = seg
        self.last = undo.last

    # -- eviction ----------------------------------------------------------------------------

    def evict(self, record: ToolCallRecord) -> None:
        """Remove the run's oldest record (trim dropped it from the session)."""
        self.n -= 1
        if self.tail > self.n:  # the tail reached back to the evicted record
            self.tail -= 1
            if self.tail >= 2:
                side = self.side_a if record.args_hash == self.a else self.side_b
                left = side[record.result_hash] - 1
                if left:
                    side[record.result_hash] = left
                else:
                    del side[record.result_hash]
        first = self.first
        if first.n:  # a complete record: the first segment's oldest
            first.n -= 1
            if first.t > first.n:
                first.t = first.n
            sig = self.sigs.get(record.args_hash)
            if sig is None or sig.tool != record.tool_name:
                sig = self.sigs[(record.tool_name, record.args_hash)]
            sig.count -= 1
            sig.done -= 1
            if sig.streak > sig.done:  # the streak reached back to the evicted record
                sig.streak = sig.done
                if not sig.done:
                    sig.latest = None
        else:  # the pending record that opens the next segment, which becomes the first
            seg = first.next
            assert seg is not None and seg.pending is record and seg.sig is not None
            sig = seg.sig
            sig.count -= 1
            sig.unchain(seg)
            if record.tool_call_id is not None:
                self._unindex_id(seg, record.tool_call_id)
            seg.prev = None
            seg.pending = seg.sig = None
            self.first = seg
        if not sig.count:
            del self.sigs[sig.key]


class _Undo:
    """What :meth:`_Run.presume` changed, to put back."""

    __slots__ = (
        "by_id",
        "last",
        "links",
        "prev",
        "prev_fields",
        "record",
        "result_hash",
        "seg",
        "side",
        "side_counts",
        "sig",
        "sig_fields",
    )

    def __init__(
        self, seg: _Segment, record: ToolCallRecord, sig: _Sig, prev: _Segment, last: _Segment
    ) -> None:
        self.seg, self.record, self.sig, self.prev, self.last = seg, record, sig, prev, last
        self.sig_fields: tuple[int, str | None, int, int, _Segment | None] = (0, None, 0, 0, None)
        self.prev_fields: tuple[int, str | None, str | None, int, _Segment | None] = (
            0,
            None,
            None,
            0,
            None,
        )
        self.links: tuple[_Segment | None, _Segment | None, _Segment | None, _Segment | None] = (
            None,
            None,
            None,
            None,
        )
        self.by_id: _Segment | None = None
        self.side: dict[str | None, int] | None = None
        self.side_counts: tuple[int | None, int | None] = (None, None)
        self.result_hash = ""


def presumable(sig: _Sig, seg: _Segment) -> ToolCallRecord | None:
    """The record whose outcome ``seg``'s pending call is presumed to return, if still present."""
    if seg.before is not None and seg.before_kseq >= sig.total - sig.count:
        return seg.before
    return None


def signature_key(tool: str, signature: str) -> SigKey:
    """The key a record's signature state is filed under.

    ``hash_tool_call`` makes ``"{tool}:{64 hex}"``, so the signature alone determines the tool
    and is the key. A record loaded from elsewhere whose two fields disagree is filed under the
    pair: detection and outcome matching compare both, so it must never meet a real signature.
    """
    width = len(tool)
    if len(signature) == width + 65 and signature.startswith(tool) and signature[width] == ":":
        return signature
    return (tool, signature)


class Memo:
    """The last signature computed, the tool, and the params' keys and values, flat.

    One per session, updated in place by :func:`signature`: no tuple returned and no memo
    allocated per call. A class, not a tuple: the compiled build reads its fields as native
    attributes. ``tool`` None: nothing remembered yet (no tool name equals it).
    """

    __slots__ = ("flat", "signature", "tool")

    def __init__(self) -> None:
        self.signature = ""
        self.tool: str | None = None
        self.flat: list[Any] = []


def signature(memo: Memo, tool: str, params: Any) -> str:
    """``hash_tool_call(tool, params)``, reusing the previous answer when it must be the same.

    detect, record_call and record_outcome of one call hash the same params three times. When
    params is a plain dict whose keys and values are the very objects remembered from the last
    hash, and those were all immutable scalars (str, int, float, bool, None: the same object
    always has the same canonical text), its signature cannot have changed. Identity,
    not equality: no ``__eq__`` runs, ``1`` never stands in for ``True``, and a dict changed in
    place since holds other objects. Anything else (nesting, subclasses, ``update_plan``'s
    normaliser) is hashed afresh and leaves the memo as it was; a flat dict hashed afresh
    becomes what the memo remembers.
    """
    if type(params) is not dict or tool == "update_plan":
        return hash_tool_call(tool, params)
    fields: dict[Any, Any] = params
    if memo.tool == tool:
        flat = memo.flat
        if len(fields) * 2 == len(flat):
            at = 0
            for key, value in fields.items():
                if key is not flat[at] or value is not flat[at + 1]:
                    break
                at += 2
            else:
                return memo.signature
    # One walk both proves the params flat and plain (what canonical's _plain_form would
    # check before encoding them) and collects what the memo keeps: then they are encoded
    # and hashed directly, not walked a second time by hash_tool_call.
    remembered: list[Any] = []
    plain = True
    for key, value in fields.items():
        if type(key) is not str:
            return hash_tool_call(tool, params)
        kind = type(value)
        if kind is float:  # the memo keeps it, but only _plain_form knows how to write it
            plain = False
        elif not (kind is str or kind is int or kind is bool or value is None):
            return hash_tool_call(tool, params)
        if plain and not _plain_key(key):
            plain = False
        remembered.append(key)
        remembered.append(value)
    result = f"{tool}:{_digest_plain(params)}" if plain else hash_tool_call(tool, params)
    memo.signature, memo.tool, memo.flat = result, tool, remembered
    return result

"""The fast volatile normaliser gives exactly what the plain one gave, on real and hostile text.

`VolatileNormalizer` skips patterns whose gate finds nothing and runs rewritten forms of the
built-in patterns. The plain algorithm it replaced is kept here as the oracle: every built-in
pattern of `BUILTIN_PATTERNS` in turn over the whole text, after a keyword check on the
lower-cased text, then the user's patterns; structures copied leaf by leaf. Both must give the
same text for every input, so outcome hashes, and with them decisions, cannot change.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from collections import UserDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.core.volatile import BUILTIN_PATTERNS, VolatileNormalizer

from _support import data_path

# ---------------------------------------------------------------------------------------------
# The oracle: the normaliser as it was before the fast path (same patterns, same order).

_REQUIRED = {
    "uuid": ("-",),
    "timestamp": ("-",),
    "clock": (":",),
    "pid": ("pid",),
    "attempt": ("attempt",),
    "line": ("line ",),
}


def _reference_rules(extra: Iterable[str]) -> list[tuple[re.Pattern[str], str, tuple[str, ...]]]:
    rules = [
        (re.compile(rx), f"<{name}>", _REQUIRED.get(name, ())) for name, rx in BUILTIN_PATTERNS
    ]
    # User patterns run on RE2, where \d, \w, \s and \b are ASCII: re.ASCII in Python's terms.
    return rules + [(re.compile(rx, re.ASCII), "<volatile>", ()) for rx in extra]


def reference_text(value: str, extra: Iterable[str] = ()) -> str:
    """Each pattern in turn over the whole text (the keyword checks read the original text)."""
    lowered = value.lower()
    for pattern, replacement, required in _reference_rules(extra):
        if all(piece in lowered for piece in required):
            value = pattern.sub(replacement, value)
    return value


def reference_normalize(value: Any, extra: Iterable[str] = (), seen: set[int] | None = None) -> Any:
    seen = set() if seen is None else seen
    if isinstance(value, str):
        return reference_text(value, extra)
    if not isinstance(value, (Mapping, list, tuple)) or id(value) in seen:
        return value
    seen.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {k: reference_normalize(v, extra, seen) for k, v in value.items()}
        return [reference_normalize(v, extra, seen) for v in value]
    finally:
        seen.discard(id(value))


N = VolatileNormalizer.build()

# ---------------------------------------------------------------------------------------------
# Real outcomes: both corpora of the development set, the samples, the test data.


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _corpus_rows(name: str) -> Iterator[dict[str, Any]]:
    with gzip.open(data_path("eval", name), "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


@pytest.mark.parametrize(
    "corpus", ["minisweagent_gemini3pro_verified.jsonl.gz", "taubench_airline_gpt4o.jsonl.gz"]
)
def test_every_outcome_of_the_development_corpora_normalises_as_before(corpus: str) -> None:
    rows = 0
    changed = 0
    for row in _corpus_rows(corpus):
        rows += 1
        outcome = {"result": row.get("result"), "error": row.get("error")}
        fast = N.normalize(outcome)
        assert fast == reference_normalize(outcome), (corpus, row.get("trajectory"))
        changed += fast != outcome
    # The check means something only if the corpus has volatile text for the patterns to mask.
    assert rows > 100
    if corpus.startswith("minisweagent"):
        assert changed > 100


def _data_files() -> list[Path]:
    samples = sorted(p for p in data_path("samples").iterdir() if p.suffix != ".md")
    data = Path(__file__).parent / "data"
    ours = sorted(p for p in data.rglob("*") if p.is_file() and p.stat().st_size < 5_000_000)
    return samples + ours


def _texts_of(path: Path) -> list[str]:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    text = raw.decode("utf-8", errors="surrogateescape")
    found = [text]
    for line in text.splitlines():
        try:
            found.extend(_strings(json.loads(line)))
        except ValueError:
            continue
    with contextlib.suppress(ValueError):
        found.extend(_strings(json.loads(text)))
    return found


def test_the_samples_and_the_test_data_normalise_as_before() -> None:
    files = _data_files()
    assert len(files) > 5
    for path in files:
        for text in _texts_of(path):
            assert N.text(text) == reference_text(text), path.name


# ---------------------------------------------------------------------------------------------
# Hostile and generated text: pieces the patterns and their gates look for, in every order.

_PIECES = [
    "0",
    "7",
    "42",
    "12345678",
    "0123456789abcdef",
    "deadbeefdeadbeef",
    "a3c1e9f0b2d4c6e8f0a1b3c5d7e9f1a2",
    "3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c",
    "abcdefab-abcd-abcd-abcd-abcdefabcdef",
    "2026-11-30T00:06:10.123Z",
    "2026-12-01T10_25_33_033Z",
    "2026-12-01 10:25",
    "+02:00",
    "12:01:33",
    "1:02:03,5",
    "0.12s",
    "3.4 sec",
    "250ms",
    "5µs",
    "17us",
    "3 ns",
    "8\x1cms",
    "9 minutes",
    "2h",
    "hrs",
    "pid",
    "PID:",
    "pıd",
    "pİd",
    "attempt #",
    "ATTEMPT",
    "line ",
    "LINE ",
    "line",
    "<uuid>",
    "<hex>",
    "<duration>",
    "٣",
    "１２",
    "\u00b5",
    "\x1c",
    "\u2003",
    "\u0130",
    "\u212a",
    "_",
    "-",
    ":",
    ".",
    ",",
    "#",
    "=",
    " ",
    "\n",
    "\t",
    "x",
    "g",
    "é",
    "T",
    "Z",
]

_hostile = st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=3)), max_size=40).map(
    "".join
)


@settings(max_examples=3000, deadline=None)
@given(_hostile)
def test_generated_text_normalises_as_before(text: str) -> None:
    assert N.text(text) == reference_text(text)


_ascii_hostile = st.lists(st.sampled_from([p for p in _PIECES if p.isascii()]), max_size=40)


@settings(max_examples=2000, deadline=None)
@given(_ascii_hostile)
def test_generated_ascii_text_normalises_as_before(pieces: list[str]) -> None:
    # ASCII text takes the byte-class gates, other text the regular-expression ones.
    text = "".join(pieces)
    assert N.text(text) == reference_text(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdefABCDEFghsmnu -:._T\n", max_size=200))
def test_dense_hex_and_numbers_normalise_as_before(text: str) -> None:
    assert N.text(text) == reference_text(text)


_USER_PATTERNS = [r"job-\d+", r"req_[a-z0-9]{6}", r"seed=\d+"]
USER = VolatileNormalizer.build(_USER_PATTERNS)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*_PIECES, "job-", "req_", "seed=", "abc123"]), max_size=30))
def test_user_patterns_apply_after_the_builtins_as_before(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert USER.text(text) == reference_text(text, _USER_PATTERNS)


# ---------------------------------------------------------------------------------------------
# Structures: the same copy, whatever the containers and leaves are.


class _Text(str):
    """A str subclass: normalised as its text, as re.sub returns it (a plain str)."""


def test_structures_of_every_kind_normalise_as_before() -> None:
    shared = "took 12ms at 2026-11-30T00:06:10Z"
    loop: list[Any] = ["pid 7"]
    loop.append(loop)
    value = {
        "content": [{"type": "text", "text": shared}],
        "details": {"aggregated": shared, "n": 5, "f": 1.5, "ok": True, "none": None},
        "tuple": ("line 3", 4, ("attempt 2",)),
        "mapping": UserDict({"k": "12:01:33", "nested": UserDict({"x": "5s"})}),
        "subclass": _Text("request 3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c"),
        "plain": _Text("nothing to mask"),
        "bytes": b"12ms",
        "loop": loop,
    }
    fast = N.normalize(value)
    assert fast == reference_normalize(value)
    assert type(fast["subclass"]) is str and type(fast["plain"]) is str
    assert isinstance(fast["mapping"], dict) and isinstance(fast["tuple"], list)
    assert fast["loop"][1] is loop
    assert fast["details"]["aggregated"] == "took <duration> at <timestamp>"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="0123456789 msline:-abcdef", min_size=30, max_size=36),
            st.sampled_from(
                ["took 12ms at 2026-11-30T00:06:10Z", "took 13ms at 2026-11-30T00:06:11Z"]
            ),
        ),
        max_size=12,
    )
)
def test_texts_of_one_length_in_one_structure_normalise_as_before(texts: list[str]) -> None:
    # The walk remembers the last long text of each length and compares before reusing its
    # result: texts of one length that differ, and repeats, in any order.
    value = {"content": [{"type": "text", "text": t} for t in texts], "again": list(texts)}
    assert N.normalize(value) == reference_normalize(value)


def test_short_texts_beyond_the_cache_normalise_as_before() -> None:
    # Short texts' results are remembered across calls, in a cache emptied when full: more
    # distinct texts than it holds, each normalised twice, as values and as structures.
    texts = [f"pid {i}" if i % 3 else f"{i}ms" for i in range(10_000)]
    for _ in range(2):
        for text in texts:
            assert N.normalize(text) == reference_text(text)
        assert N.normalize({"texts": texts}) == reference_normalize({"texts": texts})


def test_deep_structures_stop_where_they_did() -> None:
    deep: Any = "12ms"
    for _ in range(260):
        deep = [deep]
    fast, slow = N.normalize(deep), _reference_deep(deep)
    assert fast == slow


def _reference_deep(value: Any, depth: int = 0) -> Any:
    # The reference walk with its depth limit (201 levels are copied, deeper ones kept).
    if isinstance(value, str):
        return reference_text(value)
    if depth > 200 or not isinstance(value, list):
        return value
    return [_reference_deep(v, depth + 1) for v in value]


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet="0123456789.,  \x1c\nnmsuhecoidrtxX_<>", max_size=120))
def test_dense_durations_normalise_as_before(text: str) -> None:
    # Numbers, points, spaces and the units' letters: ASCII durations are tried only from
    # where one can end, back through its run of digits and points.
    assert N.text(text) == reference_text(text)

"""The C scanner of the built-in volatile patterns gives exactly what the Python path gives.

`loopwarden.core._volatile_scan.scan` (built into a regular wheel with the mypyc-compiled
modules) normalises an exact str of ASCII text in C; `volatile.builtin_text_python` is the
specification, itself checked against the plain sequential ``re.sub`` of every pattern of
`BUILTIN_PATTERNS` (tests/test_volatile_fast.py's oracle, used here too). In the pure build
(editable install) the module is absent and these tests skip; in the compiled build its absence
fails them.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopwarden.core import volatile
from loopwarden.core.volatile import builtin_text_python
from test_volatile_fast import _corpus_rows, _data_files, _strings, _texts_of, reference_text

from _support import COMPILED

try:
    from loopwarden.core._volatile_scan import scan as _scan
    from loopwarden.core._volatile_scan import walk as _walk
except ImportError:
    if COMPILED:  # a regular wheel builds the scanner with the compiled modules, or neither
        pytest.fail("the compiled build has no C volatile scanner", pytrace=False)
    pytest.skip("no C volatile scanner: the pure build (editable install)", allow_module_level=True)

scan: Callable[[object], str | None] = _scan
walk: Callable[[object, Callable[[str], str]], object] = _walk


def check(text: str, oracle: bool = True) -> None:
    """The scanner's text is the Python path's (and the oracle's); the same object if unchanged.

    The corpora's texts are compared with the Python path only: test_volatile_fast.py compares
    that with the oracle on the same texts (the oracle takes a minute over them).
    """
    assert text.isascii() and type(text) is str
    out = scan(text)
    assert out == builtin_text_python(text), text
    if oracle:
        assert out == reference_text(text), text
    assert type(out) is str
    if out == text:
        assert out is text


def test_the_normaliser_uses_the_scanner() -> None:
    assert volatile._scan is scan
    assert volatile._c_walk is walk


# ---------------------------------------------------------------------------------------------
# Every text of the shipped corpora and test data.


@pytest.mark.parametrize(
    "corpus", ["minisweagent_gemini3pro_verified.jsonl.gz", "taubench_airline_gpt4o.jsonl.gz"]
)
def test_every_outcome_text_of_the_development_corpora(corpus: str) -> None:
    texts = changed = 0
    for row in _corpus_rows(corpus):
        for text in _strings({"result": row.get("result"), "error": row.get("error")}):
            if text.isascii():
                check(text, oracle=False)
                texts += 1
                changed += scan(text) != text
            else:
                assert scan(text) is None
    assert texts > 100
    if corpus.startswith("minisweagent"):
        assert changed > 100


def test_the_samples_and_the_test_data() -> None:
    files = _data_files()
    assert len(files) > 5
    for path in files:
        for text in _texts_of(path):
            if text.isascii():
                check(text, oracle=False)


# ---------------------------------------------------------------------------------------------
# Edge cases: each pattern's choices, texts ending mid-pattern, every prefix of dense texts.

EDGES = [
    ("", ""),
    ("1:02:03", "<clock>"),
    ("at 12:01:33.5x", "at <clock>.5x"),
    ("12:01:33,25", "<clock>"),
    ("pid:=#12", "<pid>"),
    ("PID 4 and spid 5 and pid5", "<pid> and spid 5 and pid5"),
    ("Attempt #3", "<attempt>"),
    ("attempt\t\x0b #7 of ATTEMPT  8", "<attempt> of <attempt>"),
    ("attempt ## 3", "attempt ## 3"),
    ("line 12a", "line 12a"),
    ("line 12", "<line>"),
    ("Line 12", "Line 12"),
    ("1.5.3ms", "1.<duration>"),
    ("10 minutes", "<duration>"),
    ("5mins_", "5mins_"),
    ("5mins", "<duration>"),
    ("3 secs 4sec 2seconds 1 hours 7hrs 9h", "<duration> " * 5 + "<duration>"),
    ("5\x1cms 6\x1fs 7\x0bns", "<duration> <duration> <duration>"),
    ("5  ms", "5  ms"),
    ("5.ms", "5.ms"),
    ("2026-11-30T00:06:10.123Z", "<timestamp>"),
    ("2026-12-01T10_25_33_033Z-debug-0.log", "<timestamp>-debug-0.log"),
    ("2026-12-01 10:25", "<timestamp>"),
    ("2026-12-01T10:25_33", "2026-12-01T10:25_33"),
    ("2026-12-01T10:25 33", "<timestamp> 33"),
    ("2026-12-01T10_25:33", "<timestamp>:33"),
    ("2026-12-01T10:25:33+02:00", "<timestamp>"),
    ("2026-12-01T10:25:33+0200", "<timestamp>"),
    ("2026-12-01T10:25:33+02:0", "<timestamp>+02:0"),
    ("2026-12-01T10:25:33.5Zulu", "<timestamp>.5Zulu"),
    ("3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c", "<uuid>"),
    ("x3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c", "x3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c"),
    ("x3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c0d2e", "x3f2b9c1e-8a4d-4c2e-9b1a-<hex>"),
    ("3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9", "3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9"),
    ("0123456789abcde", "0123456789abcde"),
    ("0123456789abcdef", "<hex>"),
    ("0123456789abcdef0", "<hex>"),
    ("0123456789012345", "0123456789012345"),
    ("abcdefabcdefabcd", "abcdefabcdefabcd"),
    ("g0123456789abcdef", "g0123456789abcdef"),
    ("0123456789abcdef_", "0123456789abcdef_"),
    ("pid 5attempt 3", "<pid><attempt>"),
]


@pytest.mark.parametrize(("text", "expected"), EDGES)
def test_edge_cases(text: str, expected: str) -> None:
    check(text)
    assert scan(text) == expected


_DENSE = [
    "req 3f2b9c1e-8a4d-4c2e-9b1a-0d2e4f6a8b9c at 2026-11-30T00:06:10.123+02:00 took 1.5 secs",
    "pid: 4242, attempt #3 at line 62275: 12:01:33,5 deadbeefdeadbeef01 10 minutes",
    "2026-12-01T10_25_33_033Z 0123456789abcdef0 9 hrs PID=#7 Attempt 2 line 9",
]


@pytest.mark.parametrize("text", _DENSE)
def test_every_prefix_and_suffix_of_dense_texts(text: str) -> None:
    # Texts ending (and starting) anywhere inside a pattern.
    for cut in range(len(text) + 1):
        check(text[:cut])
        check(text[cut:])


def test_long_texts() -> None:
    # Buffers grown many times over (a duration's placeholder is longer than "5s"), and a long
    # text with nothing to replace.
    many = "5s " * 40_000 + "pid 7 " * 10_000 + "0123456789abcdef " * 5_000
    check(many)
    check("x" * 100_000)
    check("7" * 100_000)
    check("a" * 99_999 + "1")


def test_other_values_are_declined() -> None:
    class Text(str):
        pass

    assert scan("5 ms é") is None
    assert scan(Text("5 ms")) is None
    assert scan(b"5 ms") is None
    assert scan(5) is None


# ---------------------------------------------------------------------------------------------
# Generated text, from an alphabet dense in the patterns' pieces.

_SPACES = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
_PIECES = [
    *"0123456789abcdefABCDEF-:_.,TZ+#=",
    *_SPACES,
    *"nsumhecoirtxlgpP",
    "pid",
    "PID",
    "Attempt",
    "attempt",
    "line ",
    "sec",
    "min",
    "mins",
    "minutes",
    "hours",
    "hrs",
    "ms",
    "2026-12-01",
    "T10:25",
    ":33",
    "_33",
    "12:01",
    "0123456789abcdef",
    "3f2b9c1e-8a4d-",
    "<hex>",
]


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40))
def test_generated_text(pieces: list[str]) -> None:
    check("".join(pieces))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200))
def test_any_ascii_text(text: str) -> None:
    check(text)


def test_the_oracle_applies_the_patterns_in_order() -> None:
    # The oracle is the plain sequential re.sub the scanner must equal (a sanity check that
    # the comparison above is against the patterns themselves).
    text = "pid 5attempt 3"
    step = re.sub(r"\b(?i:pid)\b[\s:=#]*\d+", "<pid>", text)
    assert reference_text(text) == re.sub(r"\b(?i:attempt)\b\s*#?\d+", "<attempt>", step)


# ---------------------------------------------------------------------------------------------
# The walk of a structure in C (``walk``) against the Python walk (``_Walk``), the specification.

_PLAIN = volatile.VolatileNormalizer()


class _Text(str):
    pass


def assert_same(c_copy: Any, python_copy: Any, seen: dict[int, Any] | None = None) -> None:
    """The two copies are alike in every value and type, and share every object one of them
    shares with the input (a container left as it is: a cycle, or past the depth bound)."""
    seen = {} if seen is None else seen
    assert type(c_copy) is type(python_copy)
    if id(python_copy) in seen:
        assert seen[id(python_copy)] is c_copy
        return
    if isinstance(python_copy, (dict, list, tuple)):
        seen[id(python_copy)] = c_copy
        assert len(c_copy) == len(python_copy)
        if isinstance(python_copy, dict):
            assert list(c_copy) == list(python_copy)
            pairs = [(c_copy[k], python_copy[k]) for k in python_copy]
        else:
            pairs = list(zip(c_copy, python_copy, strict=True))
        for c_item, python_item in pairs:
            assert_same(c_item, python_item, seen)
    else:
        assert c_copy == python_copy


def check_walk(value: Any) -> None:
    python_copy = volatile._Walk(_PLAIN).copy(value, 0)
    c_copy = walk(value, volatile._builtin_text_of)
    assert c_copy is not NotImplemented
    assert_same(c_copy, python_copy)
    assert_same(_PLAIN.normalize(value), python_copy)


@pytest.mark.parametrize(
    "corpus", ["minisweagent_gemini3pro_verified.jsonl.gz", "taubench_airline_gpt4o.jsonl.gz"]
)
def test_the_walk_of_every_outcome_of_the_development_corpora(corpus: str) -> None:
    rows = 0
    for row in _corpus_rows(corpus):
        check_walk({"result": row.get("result"), "error": row.get("error")})
        rows += 1
    assert rows > 100


_LEAVES = st.one_of(
    st.lists(st.sampled_from(_PIECES), max_size=12).map("".join),
    st.lists(st.sampled_from([*_PIECES, "é", "µs", "\u0663"]), max_size=12).map("".join),
    st.lists(st.sampled_from(_PIECES), min_size=12, max_size=30).map("".join),
    st.sampled_from(_PIECES).map(_Text),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
_STRUCTURES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "text", "5 ms", "é"]), inner, max_size=5),
    ),
    max_leaves=30,
)


@settings(max_examples=800, deadline=None)
@given(_STRUCTURES)
def test_generated_structures(value: Any) -> None:
    check_walk(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=12, max_size=40).map("".join), st.integers(0, 5))
def test_long_texts_repeated_and_varied_within_one_structure(text: str, change: int) -> None:
    # The walk remembers long texts: one text twice, and texts of one length that differ.
    other = text[:change] + ("x" if text[change : change + 1] != "x" else "y") + text[change + 1 :]
    check_walk([text, {"again": text, "other": other}, [other, text, other + "é", text + "é"]])


def test_cycles_and_deep_structures_are_left_as_the_python_walk_leaves_them() -> None:
    loop: list[Any] = ["5 ms"]
    loop.append(loop)
    table: dict[str, Any] = {"pid": "pid 7"}
    table["self"] = [table, ("line 3", table)]
    check_walk([loop, table, loop])
    deep: Any = "took 5 ms"
    for depth in range(230):
        deep = [deep, "pid 3"] if depth % 2 else {"x": deep, "at": "10:25:33"}
    check_walk(deep)


def test_other_values_are_left_to_the_python_walk() -> None:
    class Table(dict[str, Any]):
        pass

    class Items(list[Any]):
        pass

    for odd in (
        volatile.UNDEFINED,
        Table(a="5 ms"),
        Items(["5 ms"]),
        OrderedDict(a="5 ms"),
        object(),
        b"5 ms",
        {1, 2},
        {"fine": "5 ms", "odd": [1, "2 s", Items(["pid 4"])]},
    ):
        assert walk([odd], volatile._builtin_text_of) is NotImplemented
        python_copy = volatile._Walk(_PLAIN).copy([odd], 0)
        assert_same(_PLAIN.normalize([odd]), python_copy)
    # Past the depth bound no value is read, so none stops the walk.
    deep: Any = [volatile.UNDEFINED]
    for _ in range(volatile._MAX_DEPTH + 1):
        deep = [deep]
    check_walk(deep)


def test_user_patterns_take_the_python_walk() -> None:
    normalizer = volatile.VolatileNormalizer.build([r"req-[a-z]+"])
    value = {"a": ["req-abc took 5 ms", "é req-xyz"], "b": ("req-q",)}
    expected = {"a": ["<volatile> took <duration>", "é <volatile>"], "b": ["<volatile>"]}
    assert normalizer.normalize(value) == expected


def test_a_structure_changed_while_it_is_walked_does_not_crash_the_walk() -> None:
    # other() runs Python code, in which another thread may change the structure being walked.
    items: list[Any] = ["5 ms", _Text("took 1 s"), "é 3 ms", "pid 4"]
    table: dict[str, Any] = {"a": "é 5 ms", "b": "1 s"}

    def shortening(text: str) -> str:
        items.clear()
        table.clear()
        return volatile._builtin_text_of(text)

    assert walk(items, shortening) == ["<duration>", "took <duration>"]
    table.update(a="é 5 ms", b="1 s")
    assert walk(table, shortening) == {"a": "é <duration>"}

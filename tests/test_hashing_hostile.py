"""Hashing under hostile values: bounded work, and one answer in both builds.

Work is counted, never timed: the leaves below are objects written via ``str()`` that count
how often they are written, so a writer that re-serialises subtrees shows up as a count that
grows faster than the number of leaves. ``bench/bench_hostile_hashing.py`` measures the time.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden import LoopGuard
from loopwarden.core import canonical
from loopwarden.core.canonical import digest_stable, hash_tool_call, stable_stringify
from loopwarden.core.outcome import hash_tool_outcome

# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


class Leaf:
    """A hashable object written via str(), counting how often the writer asks for its text."""

    def __init__(self, name: str, counter: list[int]) -> None:
        self.name = name
        self.counter = counter

    def __str__(self) -> str:
        self.counter[0] += 1
        return self.name


def nested_sets(depth: int, counter: list[int]) -> frozenset[Any]:
    """frozenset({Leaf, frozenset({Leaf, ...})}): every level must sort two non-numbers."""
    value: frozenset[Any] = frozenset({Leaf("leaf0", counter)})
    for level in range(1, depth + 1):
        value = frozenset({Leaf(f"leaf{level}", counter), value})
    return value


def colliding_dicts(depth: int, counter: list[int]) -> dict[Any, Any]:
    """{1: {...}, "1": Leaf}: keys equal after str(), so each level sorts by value text."""
    value: dict[Any, Any] = {"x": Leaf("leaf0", counter)}
    for level in range(1, depth + 1):
        value = {1: value, "1": Leaf(f"leaf{level}", counter)}
    return value


def reference(value: object, path: tuple[int, ...] = ()) -> str:
    """The canonical text by the definition, recursively (small values only).

    Sets: numbers first by value, then the other items by their canonical text (UTF-16 order);
    dicts: keys via str(), by key, then (when two keys became equal) by the value's text.
    """
    scalar = canonical._scalar_text(value)
    if scalar is not None:
        return scalar
    if id(value) in path:
        return '"[Circular]"'
    inner = (*path, id(value))
    if isinstance(value, dict):
        pairs = [(k if isinstance(k, str) else str(k), v) for k, v in dict.items(value)]
        texts = [(k, reference(v, inner)) for k, v in pairs]
        texts.sort(key=lambda kv: (kv[0].encode("utf-16-be"), kv[1].encode("utf-16-be")))
        return "{" + ",".join(canonical._quote(k) + ":" + t for k, t in texts) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(reference(item, inner) for item in value) + "]"
    if isinstance(value, (set, frozenset)):
        numbers = [
            item
            for item in value
            if isinstance(item, (int, float))
            and not isinstance(item, bool)
            and not (isinstance(item, float) and math.isnan(item))
        ]
        others = [reference(item, inner) for item in value if not any(item is n for n in numbers)]
        numbers.sort()
        others.sort(key=lambda text: text.encode("utf-16-be"))
        return "[" + ",".join([reference(n, inner) for n in numbers] + others) + "]"
    return canonical._quote(str(value))


# --------------------------------------------------------------------------------------------
# Item 1: each subtree is written once
# --------------------------------------------------------------------------------------------


def test_nested_sets_write_each_leaf_once() -> None:
    # Before the fix the sort key re-serialised every subtree: 2**depth writes of the deepest leaf.
    counter = [0]
    value = nested_sets(24, counter)
    stable_stringify(value)
    assert counter[0] == 25


def test_colliding_keys_write_each_leaf_once() -> None:
    counter = [0]
    value = colliding_dicts(24, counter)
    stable_stringify(value)
    assert counter[0] == 25


def test_work_grows_linearly_with_depth() -> None:
    counts = []
    for depth in (50, 100, 200):
        counter = [0]
        digest_stable(
            {"sets": nested_sets(depth, counter), "keys": colliding_dicts(depth, counter)}
        )
        counts.append(counter[0])
    assert counts == [2 * 51, 2 * 101, 2 * 201]


def test_deep_nested_sets_are_written_as_lists() -> None:
    # Too deep for any recursive writer; the text is still the nested lists, not str(frozenset).
    value: frozenset[Any] = frozenset({1})
    for _ in range(5000):
        value = frozenset({"a", value})
    text = stable_stringify(value)
    assert text.startswith('["a",["a",') and text.endswith("[1]" + "]" * 5000)


def test_guard_hashes_nested_sets_with_bounded_work() -> None:
    counter = [0]
    guard = LoopGuard({"enabled": True})
    params = {"q": nested_sets(60, counter), "k": colliding_dicts(60, counter)}
    guard.before_tool_call("s", "lookup", params)
    guard.after_tool_call("s", "lookup", params, result={"details": params, "content": []})
    # before: params hashed once; after: params and the result (which holds them) once each.
    assert 0 < counter[0] <= 4 * 122


@given(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40))
@settings(max_examples=30, deadline=None)
def test_same_text_as_the_definition(depth_sets: int, depth_keys: int) -> None:
    counter = [0]
    value = [nested_sets(depth_sets % 6, counter), colliding_dicts(depth_keys % 6, counter)]
    assert stable_stringify(value) == reference(value)


def test_same_text_as_the_definition_on_mixed_sets() -> None:
    value = {
        "s": {3, 1.5, -2, float("nan"), "b", "a", True, None, (1, "x"), frozenset({2, "z"})},
        "k": {1: [1], "1": [0], 2.0: "two", "2.0": "x", None: 1, "None": 0},
        "u": {"\U0001f600", "\ue000", "z"},
    }
    assert stable_stringify(value) == reference(value)
    assert stable_stringify({"k": {1: [1], "1": [0]}, "s": {"b", 2, "a", 1.5}}) == (
        '{"k":{"1":[0],"1":[1]},"s":[1.5,2,"a","b"]}'
    )


@dataclasses.dataclass(eq=False)
class Box:
    items: list[Any]


def test_cycle_through_a_set_is_circular() -> None:
    holder: list[Any] = []
    fs = frozenset({"a", Box(holder)})
    holder.append(fs)
    assert stable_stringify([fs]) == '[["a",{"items":["[Circular]"]}]]'


# --------------------------------------------------------------------------------------------
# Item 13: a dict subclass is read as the dict it stores, in both builds
# --------------------------------------------------------------------------------------------


class Lying(dict):  # type: ignore[type-arg]
    """Overrides every way of reading a mapping with answers unrelated to what it stores."""

    def get(self, key: Any, default: Any = None) -> Any:
        return "lie"

    def items(self) -> Any:
        return [("lie", "lie")]

    def keys(self) -> Any:
        return ["lie"]

    def values(self) -> Any:
        return ["lie"]

    def __getitem__(self, key: Any) -> Any:
        return "lie"

    def __iter__(self) -> Any:
        return iter(["lie"])

    def __contains__(self, key: object) -> bool:
        return True

    def __len__(self) -> int:
        return 99


class Raising(dict):  # type: ignore[type-arg]
    """Overrides that raise, as a broken proxy object would."""

    def get(self, key: Any, default: Any = None) -> Any:
        raise RuntimeError("get")

    def items(self) -> Any:
        raise RuntimeError("items")

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("getitem")

    def __iter__(self) -> Any:
        raise RuntimeError("iter")


def _plain(value: Any) -> Any:
    """The same value with every dict subclass replaced by a dict of what it stores."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


OUTCOMES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("exec", {}, {"details": {"status": "completed", "exitCode": 1, "aggregated": "out"}}),
    ("exec", {}, {"details": {"status": "running", "tail": "t"}}),
    ("process", {"action": "poll"}, {"details": {"status": "done", "exitCode": 0}}),
    ("message", {"action": "send"}, {"details": {"messageId": "m1", "ok": True, "n": {"ts": 1}}}),
    ("read", {}, {"details": {"x": 1}, "content": [{"type": "text", "text": " hi "}]}),
    ("update_plan", {}, {"details": {"plan": [{"status": "done", "step": "a"}]}}),
    ("lookup", {}, {"details": {"status": "blocked", "deniedReason": "tool-loop"}}),
]


def _wrap(value: Any, cls: type[dict[Any, Any]]) -> Any:
    if isinstance(value, dict):
        return cls({k: _wrap(v, cls) for k, v in value.items()})
    if isinstance(value, list):
        return [_wrap(v, cls) for v in value]
    return value


def test_dict_subclass_outcome_is_hashed_as_its_stored_dict() -> None:
    for cls in (Lying, Raising):
        for tool, params, result in OUTCOMES:
            expected = hash_tool_outcome(tool, params, result)
            hostile = hash_tool_outcome(tool, _wrap(params, cls), _wrap(result, cls))
            assert hostile == expected, (cls.__name__, tool)
            assert _plain(_wrap(result, cls)) == result


def test_dict_subclass_is_written_as_its_stored_dict() -> None:
    value = {"a": {"b": [1, {"c": 2}]}, "plan": [{"status": "x", "step": "y"}]}
    for cls in (Lying, Raising):
        assert stable_stringify(_wrap(value, cls)) == stable_stringify(value)
        assert hash_tool_call("t", _wrap(value, cls)) == hash_tool_call("t", value)
        assert hash_tool_call("update_plan", _wrap(value, cls)) == hash_tool_call(
            "update_plan", value
        )


# --------------------------------------------------------------------------------------------
# Property: hostile values never raise and always hash the same
# --------------------------------------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
# Keys that collide after str(): 1 and "1", None and "None", 1.5 and "1.5".
_KEYS = st.one_of(
    st.sampled_from([0, 1, "0", "1", None, "None", 1.5, "1.5", True, "True"]), st.text(max_size=3)
)
_HASHABLE = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.frozensets(inner, max_size=4), st.tuples(inner, inner), st.lists(inner).map(tuple)
    ),
    max_leaves=12,
)
_VALUES = st.recursive(
    st.one_of(_SCALARS, st.frozensets(_HASHABLE, max_size=5), st.sets(_HASHABLE, max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(_KEYS, inner, max_size=5),
        st.dictionaries(_KEYS, inner, max_size=3).map(Lying),
        st.dictionaries(_KEYS, inner, max_size=3).map(Raising),
    ),
    max_leaves=25,
)


def _deep(value: Any, depth: int, shape: int) -> Any:
    """`value` under `depth` levels of lists, colliding-key dicts, sets, or (shape 3) all three."""
    for level in range(depth):
        kind = level % 3 if shape == 3 else shape
        if kind == 0:
            value = [value]
        elif kind == 1:
            value = {1: value, "1": level}
        else:
            value = frozenset({"a", _freeze(value)})
    return value


def _freeze(value: Any) -> Any:
    # A set item must be hashable: a level that is a list or dict is represented by its text.
    return value if isinstance(value, frozenset) else repr(type(value))


_HOSTILE = st.one_of(
    _VALUES,
    st.builds(
        _deep,
        _VALUES,
        st.integers(min_value=0, max_value=3000),
        st.integers(min_value=0, max_value=3),
    ),
)


def _outcome_and_call(tool: str, value: Any) -> tuple[Any, ...]:
    return (
        hash_tool_call(tool, value),
        hash_tool_outcome(tool, value, value),
        hash_tool_outcome(tool, {"action": "poll"}, {"details": value, "content": [value]}),
        hash_tool_outcome(tool, {}, error=value),
    )


def _guard_decisions(tool: str, value: Any) -> list[tuple[str, str | None]]:
    guard = LoopGuard({"enabled": True})
    decisions: list[tuple[str, str | None]] = []
    for _ in range(3):
        before = guard.before_tool_call("s", tool, value, run_id="r")
        after = guard.after_tool_call("s", tool, value, result={"details": value}, run_id="r")
        decisions += [(before.action, before.message), (after.action, after.message)]
    return decisions


@given(st.sampled_from(["exec", "process", "message", "update_plan", "lookup"]), _HOSTILE)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hostile_values_hash_the_same_every_time(tool: str, value: Any) -> None:
    first = _outcome_and_call(tool, value)
    assert _outcome_and_call(tool, value) == first
    assert _guard_decisions(tool, value) == _guard_decisions(tool, value)


@given(_VALUES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_hostile_values_have_the_defined_text(value: Any) -> None:
    assert stable_stringify(value) == reference(value)


# --------------------------------------------------------------------------------------------
# Sorting by text: prefixes that tie are compared further, in UTF-16 order
# --------------------------------------------------------------------------------------------

_TAILS = st.text(
    alphabet=st.sampled_from(["a", "b", '"', "\ue000", "\uffff", "\U0001f600", "\U00010000", "é"]),
    max_size=4,
)


@given(
    st.integers(min_value=0, max_value=120),
    st.lists(st.tuples(_TAILS, st.integers(0, 3)), min_size=1, max_size=6),
)
@settings(max_examples=200, deadline=None)
def test_long_common_prefixes_sort_as_the_definition(length: int, tails: list[Any]) -> None:
    head = "p" * length
    value = {
        "set": frozenset((head + tail, n) for tail, n in tails),
        "nested": frozenset(frozenset({(head, tail), n}) for tail, n in tails),
        "keys": {n: [head, tail] for tail, n in tails} | {str(n): head + tail for tail, n in tails},
    }
    assert stable_stringify(value) == reference(value)


def test_utf16_order_past_the_prefix() -> None:
    # Code-point order puts U+E000 before U+1F600; UTF-16 order (D83D DE00) puts it after.
    head = "x" * 100
    value = frozenset({head + "\ue000", head + "\U0001f600"})
    assert stable_stringify(value) == f'["{head}\U0001f600","{head}\ue000"]'


@given(st.lists(st.text(alphabet="ab\ue000\U0001f600", max_size=6), max_size=6), st.data())
@settings(max_examples=200, deadline=None)
def test_rope_compare_is_utf16_order(parts: list[str], data: st.DataObject) -> None:
    other = data.draw(st.lists(st.text(alphabet="ab\ue000\U0001f600", max_size=6), max_size=6))
    a, b = "".join(parts), "".join(other)
    expected = (a.encode("utf-16-be") > b.encode("utf-16-be")) - (
        a.encode("utf-16-be") < b.encode("utf-16-be")
    )
    rope_a = canonical._Rope([canonical._Rope(parts[:2]), *parts[2:]])
    assert canonical._compare(rope_a, canonical._Rope(other)) == expected
    assert canonical._compare(a, b) == expected

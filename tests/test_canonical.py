"""Canonical form, digests and call signatures."""

from __future__ import annotations

import copy
import dataclasses
import enum
import gzip
import hashlib
import json
import math
import pickle
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopwarden.core import canonical
from loopwarden.core.canonical import (
    UNDEFINED,
    digest_stable,
    hash_tool_call,
    js_number,
    js_trim,
    normalize_params,
    stable_stringify,
)

from _support import data_path, require_module

# --------------------------------------------------------------------------------------------
# Conformance vectors
# --------------------------------------------------------------------------------------------


def _canonical_vectors() -> list[dict[str, str]]:
    with gzip.open(data_path("conformance", "canonical.jsonl.gz"), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_all_canonical_vectors_match_text_and_digest() -> None:
    vectors = _canonical_vectors()
    assert len(vectors) == 2000
    failures = []
    for line, vector in enumerate(vectors, start=1):
        value = json.loads(vector["json"])
        text = stable_stringify(value)
        digest = digest_stable(value)
        if text != vector["canonical"] or digest != vector["sha256"]:
            failures.append(f"line {line}: {vector['json'][:80]!r} -> {text[:80]!r}")
    assert not failures, f"{len(failures)} vectors differ:\n" + "\n".join(failures[:20])


# --------------------------------------------------------------------------------------------
# Scalars
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "js"),
    [
        (1.0, "1"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (-123.456, "-123.456"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1e-6, "0.000001"),
        (1.5e-6, "0.0000015"),
        (1e-7, "1e-7"),
        (-2.5e-8, "-2.5e-8"),
        (1e16, "10000000000000000"),
        (2.0**60, "1152921504606847000"),  # shortest digits, then zeros (not 1152921504606846976)
        (0.1 + 0.2, "0.30000000000000004"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
    ],
)
def test_floats_are_written_as_javascript_writes_numbers(value: float, js: str) -> None:
    assert js_number(value) == js
    assert stable_stringify(value) == js


@pytest.mark.parametrize(
    ("value", "text"),
    [(math.nan, '"NaN"'), (math.inf, '"Infinity"'), (-math.inf, '"-Infinity"')],
)
def test_non_finite_floats_become_strings(value: float, text: str) -> None:
    assert stable_stringify(value) == text


def test_one_and_one_point_zero_hash_the_same() -> None:
    assert digest_stable({"n": 1}) == digest_stable({"n": 1.0})
    assert hash_tool_call("read", {"limit": 10}) == hash_tool_call("read", {"limit": 10.0})


def test_json_literals_and_undefined() -> None:
    assert stable_stringify(None) == "null"
    assert stable_stringify(True) == "true"
    assert stable_stringify(False) == "false"
    assert stable_stringify(UNDEFINED) == "undefined"
    assert stable_stringify([UNDEFINED, 1]) == "[undefined,1]"
    assert stable_stringify({"k": UNDEFINED}) == '{"k":undefined}'


def test_ints_are_decimal_digits_even_beyond_the_int_to_str_limit() -> None:
    assert stable_stringify(-42) == "-42"
    huge = 7 * 10**6000 + 3
    assert stable_stringify(huge) == "7" + "0" * 5999 + "3"
    assert stable_stringify(-huge) == "-7" + "0" * 5999 + "3"


class _Color(enum.IntEnum):
    RED = 1


def test_int_and_str_subclasses_are_written_as_their_values() -> None:
    assert stable_stringify(_Color.RED) == "1"
    assert stable_stringify(True) == "true"  # bool is an int subclass but a JSON literal


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ('say "hi"', r'"say \"hi\""'),
        ("back\\slash", r'"back\\slash"'),
        ("\b\f\n\r\t", r'"\b\f\n\r\t"'),
        ("\x00\x01\x1f", r'"\u0000\u0001\u001f"'),
        ("\x7f é 漢字 😀 \u2028", '"\x7f é 漢字 😀 \u2028"'),
    ],
)
def test_strings_are_escaped_as_json_stringify_does(value: str, text: str) -> None:
    assert stable_stringify(value) == text


def test_lone_surrogates_are_removed_and_split_pairs_joined() -> None:
    assert stable_stringify("a\ud800b\udfffc") == '"abc"'
    assert stable_stringify("\ud83d\ude00") == '"😀"'  # a pair stored as two code points
    assert stable_stringify({"k\udc00": 1}) == '{"k":1}'
    stable_stringify("\ud800").encode("utf-8")  # the canonical text is always valid UTF-8


# --------------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------------


def test_lists_and_tuples_are_arrays_without_spaces() -> None:
    assert stable_stringify([1, (2, "x"), []]) == '[1,[2,"x"],[]]'


def test_dict_keys_are_sorted() -> None:
    assert stable_stringify({"b": 1, "a": {"d": 2, "c": 3}}) == '{"a":{"c":3,"d":2},"b":1}'


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which sorts before U+E000 in UTF-16, though its
    # code point is larger. Python's own sorted() would put U+E000 first.
    value = {"\ue000": 2, "\U0001f600": 1, "\uffff": 3, "a": 0}
    assert stable_stringify(value) == '{"a":0,"😀":1,"\ue000":2,"\uffff":3}'
    assert sorted(value) != ["a", "\U0001f600", "\ue000", "\uffff"]


def test_non_string_keys_are_converted_with_str() -> None:
    assert stable_stringify({1: "a", None: "b", (1, 2): "c"}) == (
        '{"(1, 2)":"c","1":"a","None":"b"}'
    )


def test_keys_equal_after_str_do_not_depend_on_insertion_order() -> None:
    assert stable_stringify({1: "x", "1": "y"}) == stable_stringify({"1": "y", 1: "x"})


def test_bytes_are_written_as_uint8array_objects() -> None:
    expected = '{"data":"aGkA/w==","type":"Uint8Array"}'
    assert stable_stringify(b"hi\x00\xff") == expected
    assert stable_stringify(bytearray(b"hi\x00\xff")) == expected
    assert stable_stringify(memoryview(b"hi\x00\xff")) == expected


def test_exception_without_traceback_has_undefined_stack() -> None:
    text = stable_stringify(ValueError("boom"))
    assert text == '{"message":"boom","name":"ValueError","stack":undefined}'


def test_raised_exception_carries_its_traceback_as_stack() -> None:
    try:
        raise KeyError("k")
    except KeyError as exc:
        caught = exc
    parsed = json.loads(stable_stringify(caught))
    assert parsed["name"] == "KeyError"
    assert parsed["message"] == "'k'"
    assert "Traceback" in parsed["stack"]
    assert "test_raised_exception_carries_its_traceback_as_stack" in parsed["stack"]


@dataclasses.dataclass
class _Point:
    x: float
    tags: list[str]


def test_dataclasses_are_written_as_their_field_dicts() -> None:
    assert stable_stringify(_Point(1.0, ["a"])) == '{"tags":["a"],"x":1}'
    assert stable_stringify(_Point).startswith('"<class ')  # the class itself is just an object


def test_pydantic_models_are_written_as_their_field_dicts() -> None:
    import pydantic  # a core dependency

    class Model(pydantic.BaseModel):
        b: str = "x"
        a: int

    assert stable_stringify(Model(a=2)) == '{"a":2,"b":"x"}'


def test_sets_are_sorted_lists() -> None:
    assert stable_stringify({3, 1, 2}) == "[1,2,3]"
    assert stable_stringify(frozenset({"b", "a"})) == '["a","b"]'
    mixed = {2, "a", 1.5, (1, 2), None}
    assert stable_stringify(mixed) == '[1.5,2,"a",[1,2],null]'


def test_set_order_does_not_depend_on_iteration_order() -> None:
    words = [f"w{i}" for i in range(50)]
    first = set(words)
    # Same elements in a much larger hash table: Python iterates them in another order.
    second = set(words + [f"filler{i}" for i in range(5000)])
    second -= {f"filler{i}" for i in range(5000)}
    assert second == first
    assert list(second) != list(first)
    assert stable_stringify(second) == stable_stringify(first)


class _Opaque:
    def __str__(self) -> str:
        return "opaque!"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_other_objects_are_written_as_their_str() -> None:
    assert stable_stringify(_Opaque()) == '"opaque!"'
    assert stable_stringify({"o": _Opaque()}) == '{"o":"opaque!"}'


def test_object_whose_str_raises_still_hashes() -> None:
    assert stable_stringify(_Unprintable()) == '"<unprintable _Unprintable>"'


class _BadFloat(float):
    def __eq__(self, other: object) -> bool:
        raise ValueError("no comparisons")

    __hash__ = float.__hash__


def test_number_subclass_is_written_by_its_value_even_if_its_methods_raise() -> None:
    assert stable_stringify([_BadFloat(2.5), _BadFloat(3.0)]) == "[2.5,3]"


@dataclasses.dataclass
class _Exploding:
    x: int

    def __getattribute__(self, name: str) -> Any:
        if name == "x":
            raise RuntimeError("field access fails")
        return object.__getattribute__(self, name)


def test_dataclass_whose_fields_raise_is_written_as_its_str() -> None:
    # Its field dict is unreadable, and so is its repr (which reads the field): the fallback text.
    assert stable_stringify({"d": _Exploding(1)}) == '{"d":"<unprintable _Exploding>"}'


# --------------------------------------------------------------------------------------------
# Cycles, sharing and depth
# --------------------------------------------------------------------------------------------


def test_cyclic_list_is_written_as_circular() -> None:
    items: list[Any] = [1]
    items.append(items)
    assert stable_stringify(items) == '[1,"[Circular]"]'


def test_cyclic_dict_is_written_as_circular() -> None:
    node: dict[str, Any] = {"name": "n"}
    node["self"] = node
    node["children"] = [node]
    assert stable_stringify(node) == '{"children":["[Circular]"],"name":"n","self":"[Circular]"}'


def test_cycle_through_a_dataclass_is_circular() -> None:
    point = _Point(0.5, [])
    point.tags.append(point)  # type: ignore[arg-type]
    assert stable_stringify(point) == '{"tags":["[Circular]"],"x":0.5}'


@dataclasses.dataclass(eq=False)  # hashable by identity, so it can sit in a set
class _Node:
    children: list[Any]


def test_cycle_through_a_set_terminates() -> None:
    node = _Node([])
    bag = {node}
    node.children.append(bag)
    assert stable_stringify(bag) == '[{"children":["[Circular]"]}]'
    assert (
        stable_stringify([bag, bag])
        == '[[{"children":["[Circular]"]}],[{"children":["[Circular]"]}]]'
    )


def test_shared_acyclic_references_are_written_in_full() -> None:
    shared = {"v": [1, 2]}
    assert stable_stringify([shared, shared, {"again": shared}]) == (
        '[{"v":[1,2]},{"v":[1,2]},{"again":{"v":[1,2]}}]'
    )


def test_ten_thousand_deep_lists_do_not_crash() -> None:
    root: list[Any] = []
    node = root
    for _ in range(10_000):
        child: list[Any] = []
        node.append(child)
        node = child
    assert stable_stringify(root) == "[" * 10_001 + "]" * 10_001


def test_ten_thousand_deep_dicts_do_not_crash() -> None:
    root: dict[str, Any] = {}
    node = root
    for _ in range(10_000):
        child: dict[str, Any] = {}
        node["k"] = child
        node = child
    assert stable_stringify(root) == '{"k":' * 10_000 + "{}" + "}" * 10_000
    assert len(digest_stable(root)) == 64


# --------------------------------------------------------------------------------------------
# Digests, signatures, update_plan, trim
# --------------------------------------------------------------------------------------------


def test_digest_is_sha256_of_the_utf8_canonical_text() -> None:
    value = {"é": [1.0, None]}
    expected = hashlib.sha256('{"é":[1,null]}'.encode()).hexdigest()
    assert digest_stable(value) == expected


def test_signature_is_tool_colon_digest_of_params() -> None:
    params = {"path": "/a", "limit": 5}
    assert hash_tool_call("read", params) == "read:" + digest_stable(params)


def test_update_plan_rewording_steps_is_not_a_new_signature() -> None:
    first = {"plan": [{"step": "do x", "status": "done"}], "explanation": "because"}
    reworded = {"plan": [{"step": "do it", "status": "done"}], "explanation": "why not"}
    assert hash_tool_call("update_plan", first) == hash_tool_call("update_plan", reworded)
    # ...but the same rewording is a different call for any other tool
    assert hash_tool_call("other", first) != hash_tool_call("other", reworded)


def test_update_plan_status_change_is_a_new_signature() -> None:
    pending = {"plan": [{"step": "do x", "status": "pending"}]}
    done = {"plan": [{"step": "do x", "status": "done"}]}
    assert hash_tool_call("update_plan", pending) != hash_tool_call("update_plan", done)


def test_update_plan_normal_form() -> None:
    params = {
        "plan": [{"step": " \ufeff", "status": "done"}, {"step": "b"}, "junk"],
        "explanation": "\u3000",
    }
    assert normalize_params("update_plan", params) == {
        "planLength": 3,
        "statuses": ["done", None, None],
        "stepPresence": [False, True, False],
        "hasExplanation": False,
    }
    assert normalize_params("update_plan", {"plan": "nope"})["planLength"] == 0  # type: ignore[index]
    assert normalize_params("update_plan", ["not", "a", "dict"]) == ["not", "a", "dict"]
    assert normalize_params("read", params) is params


@pytest.mark.parametrize(
    ("text", "js", "py"),
    [
        ("\ufeffbom\ufeff", "bom", "\ufeffbom\ufeff"),  # JS trims U+FEFF, str.strip() keeps it
        ("\x1cfs\x1f", "\x1cfs\x1f", "fs"),  # str.strip() removes U+001C-U+001F, JS keeps them
        ("\x85nel\x85", "\x85nel\x85", "nel"),  # U+0085 likewise
        ("\u3000\u2028 both \t\n", "both", "both"),
    ],
)
def test_js_trim_differs_from_str_strip(text: str, js: str, py: str) -> None:
    assert js_trim(text) == js
    assert text.strip() == py


# --------------------------------------------------------------------------------------------
# The UNDEFINED sentinel
# --------------------------------------------------------------------------------------------


def test_undefined_is_a_falsy_singleton_that_survives_pickle_and_copy() -> None:
    assert repr(UNDEFINED) == "UNDEFINED"
    assert not UNDEFINED
    assert type(UNDEFINED)() is UNDEFINED
    assert pickle.loads(pickle.dumps(UNDEFINED)) is UNDEFINED
    assert copy.copy(UNDEFINED) is UNDEFINED
    assert copy.deepcopy({"k": UNDEFINED})["k"] is UNDEFINED


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

_any_char = st.characters(codec=None, exclude_categories=())  # includes lone surrogates
_keys = st.text(_any_char, max_size=6)
_json_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(_any_char, max_size=12)
)


def _json_like(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_keys, inner, max_size=5),
        max_leaves=30,
    )


def _shuffled(value: Any, rng: random.Random) -> Any:
    """The same value with every dict's insertion order shuffled."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(_json_like(_json_leaves), st.randoms(use_true_random=False))
def test_canonical_form_does_not_depend_on_key_order(value: Any, rng: random.Random) -> None:
    assert stable_stringify(_shuffled(value, rng)) == stable_stringify(value)


def _ints_as_floats(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _ints_as_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints_as_floats(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) <= 2**53:
        return float(value)
    return value


@settings(max_examples=150)
@given(_json_like(_json_leaves))
def test_ints_and_equal_floats_hash_the_same(value: Any) -> None:
    assert digest_stable(_ints_as_floats(value)) == digest_stable(value)


def _expected_parse(value: Any) -> Any:
    """What JSON.parse of the canonical text must give back: surrogates gone, specials as text."""
    if isinstance(value, dict):
        return {_clean_text(k): _expected_parse(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expected_parse(v) for v in value]
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _clean_text(text: str) -> str:
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "ignore")


_unique_clean_keys = st.text(st.characters(codec="utf-8"), max_size=6)


@settings(max_examples=150)
@given(
    st.recursive(
        _json_leaves,
        lambda inner: (
            st.lists(inner, max_size=5) | st.dictionaries(_unique_clean_keys, inner, max_size=5)
        ),
        max_leaves=30,
    )
)
def test_canonical_text_parses_back_to_the_value(value: Any) -> None:
    parsed = json.loads(stable_stringify(value))
    assert _same(parsed, _expected_parse(value)), (parsed, value)


def _same(parsed: Any, expected: Any) -> bool:
    """Equality where a float may come back as the int JavaScript wrote (1e16 -> 10**16)."""
    if isinstance(expected, float):
        return type(parsed) in (int, float) and float(parsed) == expected
    if isinstance(expected, dict):
        return (
            isinstance(parsed, dict)
            and parsed.keys() == expected.keys()
            and all(_same(parsed[k], v) for k, v in expected.items())
        )
    if isinstance(expected, list):
        return (
            isinstance(parsed, list)
            and len(parsed) == len(expected)
            and all(_same(p, e) for p, e in zip(parsed, expected, strict=True))
        )
    return type(parsed) is type(expected) and parsed == expected


class _Slotted:
    __slots__ = ("a",)

    def __init__(self) -> None:
        self.a = 1


_odd_leaves = (
    _json_leaves
    | st.binary(max_size=8)
    | st.just(UNDEFINED)
    | st.builds(ValueError, st.text(_any_char, max_size=5))
    | st.builds(_Point, st.floats(), st.lists(st.text(max_size=3), max_size=2))
    | st.sampled_from([_Opaque(), _Unprintable(), _Slotted(), object, _Color.RED, math, ...])
    | st.decimals(allow_nan=True)
    | st.complex_numbers()
    | st.frozensets(st.integers() | st.text(_any_char, max_size=3) | st.floats(), max_size=4)
)
_odd_keys = (
    _keys | st.integers() | st.none() | st.booleans() | st.floats() | st.tuples(st.integers())
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(
        _odd_leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.tuples(inner, inner)
            | st.dictionaries(_odd_keys, inner, max_size=4)
            | st.sets(st.integers() | st.text(max_size=3), max_size=4)
        ),
        max_leaves=25,
    )
)
def test_hashing_never_raises_on_arbitrary_values(value: Any) -> None:
    text = stable_stringify(value)
    text.encode("utf-8")  # always valid UTF-8
    assert len(digest_stable(value)) == 64
    assert hash_tool_call("t", value).startswith("t:")


# --------------------------------------------------------------------------------------------
# The fast path (a C JSON encoder behind a type check) against the exact walker
# --------------------------------------------------------------------------------------------

_ENCODERS = ["stdlib", "orjson"]


def _encoder(name: str) -> Any:
    if name == "orjson":
        require_module("orjson", "fast")
    return canonical._make_encoder(name)


_boundary_floats = st.sampled_from(
    [
        1e-4,
        math.nextafter(1e-4, 0),
        9.999e-5,
        1e-6,
        1e-7,
        1e16,
        math.nextafter(1e16, 0),
        1e15 + 0.5,
        2.0**53 - 0.5,
        1e21,
        0.1,
        -0.5,
        -0.0,
        1.0,
        5e-324,
        math.nan,
        math.inf,
    ]
)
_diff_keys = st.text(
    st.sampled_from('aZ_ \x00\x1f"\\é\ue000\uffff\ud800\udc00') | st.characters(codec=None),
    max_size=4,
)
_diff_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**63 - 2, max_value=2**64 + 2)
    | st.floats()
    | _boundary_floats
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=10)
)
_diff_values = st.recursive(
    _diff_leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_diff_keys, inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("name", _ENCODERS)
@settings(max_examples=250, suppress_health_check=[HealthCheck.too_slow])
@given(value=_diff_values)
def test_fast_path_is_byte_identical_to_the_exact_walker(name: str, value: Any) -> None:
    fast = canonical._stringify_fast(value, _encoder(name))
    if fast is not None:
        assert fast == canonical._stringify_exact(value).encode("utf-8")


@pytest.mark.parametrize("name", _ENCODERS)
@settings(max_examples=150)
@given(number=st.floats(min_value=1e-4, max_value=1e16) | st.floats(-1e16, -1e-4))
def test_fast_path_floats_match_javascript(name: str, number: float) -> None:
    fast = canonical._stringify_fast([number], _encoder(name))
    if fast is not None:
        assert fast.decode() == f"[{js_number(number)}]"


@pytest.mark.parametrize("name", _ENCODERS)
def test_fast_path_is_taken_for_plain_json(name: str) -> None:
    value = {"command": "ls -la", "n": 30, "big": -(2**62), "ok": True, "x": None, "r": [0.25]}
    value["nested"] = {"é": ["\x01 ctl", (1, "t")], "\ue000": 1, "Z": 1.5}
    fast = canonical._stringify_fast(value, _encoder(name))
    assert fast is not None
    assert fast == canonical._stringify_exact(value).encode("utf-8")


@pytest.mark.parametrize("name", _ENCODERS)
@pytest.mark.parametrize(
    "value",
    [
        1e-5,  # 0.00001: repr() writes 1e-05
        1e21,  # 1e+21
        {"\U0001f600": 1},  # UTF-16 key order
        {1: "non-str key"},
        "lone \ud800",  # removed by the exact walker
        10**5000,  # beyond int -> str
        _Color.RED,  # int subclass
        UNDEFINED,
        b"bytes",
        {"set": {1}},
    ],
    ids=lambda value: type(value).__name__,  # repr(10**5000) itself would fail
)
def test_fast_path_refuses_what_it_would_write_differently(name: str, value: Any) -> None:
    assert canonical._stringify_fast({"k": [value]}, _encoder(name)) is None


@pytest.mark.parametrize("name", _ENCODERS)
def test_fast_path_rewrites_floats_javascript_writes_as_integers_or_strings(name: str) -> None:
    value = {"a": [1.0, -0.0, 1e16, 2.0**60, 1e19, math.nan, math.inf, -math.inf], "b": (0.5, 3.0)}
    original = json.dumps(value)
    fast = canonical._stringify_fast(value, _encoder(name))
    assert fast is not None
    assert fast.decode() == (
        '{"a":[1,0,10000000000000000,1152921504606847000,10000000000000000000,'
        '"NaN","Infinity","-Infinity"],"b":[0.5,3]}'
    )
    assert json.dumps(value) == original  # the value itself is not modified


def test_fast_path_refuses_cycles_and_deep_nesting() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert canonical._stringify_fast(cyclic, _encoder("stdlib")) is None
    deep: list[Any] = []
    node = deep
    for _ in range(200):
        node.append([])
        node = node[0]
    assert canonical._stringify_fast(deep, _encoder("stdlib")) is None
    assert stable_stringify(deep) == "[" * 201 + "]" * 201

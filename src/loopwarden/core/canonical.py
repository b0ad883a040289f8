"""Canonical form and call signatures.

`stable_stringify` writes any Python value as the canonical text OpenClaw hashes: JSON with keys
sorted by UTF-16 code units, numbers written as JavaScript writes them, lone surrogates removed,
cycles written as ``"[Circular]"``. It never raises and never recurses on the data (deep nesting is
walked with an explicit stack).

Two writers produce that text:

- `_stringify_exact`, the general walker: every rule of the canonical form, for any value;
- `_stringify_fast`, tried first: a C JSON encoder (orjson when installed, else the stdlib's),
  used only when a cheap type walk proves its output is byte for byte the exact walker's.
  Tool calls are mostly plain JSON (str, int, bool, None, lists, ASCII-keyed dicts), so the hot
  path rarely pays for the general walker. Tests check both writers against the conformance
  vectors and against each other on random values.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable
from functools import cmp_to_key
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, ClassVar, Final

__all__ = [
    "UNDEFINED",
    "UndefinedType",
    "digest_stable",
    "hash_tool_call",
    "js_number",
    "js_trim",
    "normalize_params",
    "normalize_plan",
    "stable_stringify",
]


class UndefinedType:
    """Type of `UNDEFINED`, the stand-in for JavaScript's ``undefined`` (a singleton)."""

    __slots__ = ()
    _instance: ClassVar[UndefinedType | None] = None

    def __new__(cls) -> UndefinedType:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        # Pickle by reference to the module attribute, so unpickling yields the same singleton.
        return "UNDEFINED"

    def __copy__(self) -> UndefinedType:
        return self

    def __deepcopy__(self, memo: object) -> UndefinedType:
        return self


UNDEFINED: Final = UndefinedType()
"""JavaScript ``undefined``: written as the bare token ``undefined`` by `stable_stringify`."""

# ECMAScript WhiteSpace + LineTerminator, the set String.prototype.trim removes. Python's
# str.strip() differs: it keeps U+FEFF and removes U+001C-U+001F and U+0085.
_JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

# A valid surrogate pair (kept, joined into one code point) or a lone surrogate (removed).
_SURROGATES: Final = re.compile(r"[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]")
_ANY_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")

_CIRCULAR: Final = '"[Circular]"'
_NON_FINITE: Final = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def js_trim(s: str) -> str:
    """Trim like JavaScript's ``String.prototype.trim`` (not like ``str.strip``)."""
    return s.strip(_JS_WHITESPACE)


def js_number(x: float) -> str:
    """Write a finite float as JavaScript's ``Number.prototype.toString`` does.

    Python's ``repr`` already gives the shortest round-trip digits; only the layout differs
    (ECMA-262 Number::toString: fixed notation for 1e-6 <= |x| < 1e21, else exponent with a sign).
    """
    if x == 0:
        return "0"  # also -0.0
    text = float.__repr__(x)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + (int(exponent) if exponent else 0)  # ECMA-262's n
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0")
    count = len(digits)  # ECMA-262's k
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    exp = point - 1
    exp_text = f"e+{exp}" if exp >= 0 else f"e-{-exp}"
    if count == 1:
        return sign + digits + exp_text
    return sign + digits[0] + "." + digits[1:] + exp_text


def _float_text(x: float) -> str:
    if math.isfinite(x):
        return js_number(x)
    return _NON_FINITE[float.__repr__(x)]


def _int_text(n: int) -> str:
    try:
        return int.__repr__(n)
    except ValueError:  # beyond sys.get_int_max_str_digits(): convert in chunks
        return _big_int_text(n)


def _big_int_text(n: int) -> str:
    sign, n = ("-", -n) if n < 0 else ("", n)
    chunk = 10**1000
    parts: list[str] = []
    while n >= chunk:
        n, rest = divmod(n, chunk)
        parts.append(int.__repr__(rest).zfill(1000))
    parts.append(int.__repr__(n))
    return sign + "".join(reversed(parts))


def _clean(s: str) -> str:
    """Remove lone UTF-16 surrogates (a valid pair stored as two code points becomes one)."""
    if s.isascii() or _ANY_SURROGATE.search(s) is None:
        return s
    return _SURROGATES.sub(_join_pair, s)


def _join_pair(match: re.Match[str]) -> str:
    pair = match.group()
    if len(pair) == 1:
        return ""
    return chr(0x10000 + ((ord(pair[0]) - 0xD800) << 10) + (ord(pair[1]) - 0xDC00))


def _quote(s: str) -> str:
    # The C encode_basestring escapes exactly as JSON.stringify does once surrogates are gone:
    # \" \\ \b \f \n \r \t, other controls as lowercase \u00xx, everything else verbatim.
    return encode_basestring(_clean(s))


def _safe_str(obj: object) -> str:
    try:
        text = str(obj)
    except Exception:  # an object whose __str__ fails must still hash
        return f"<unprintable {type(obj).__qualname__}>"
    return text if type(text) is str else str.__str__(text)


def _utf16_key(key: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like JavaScript's code-unit string order.
    return key.encode("utf-16-be")


# --------------------------------------------------------------------------------------------
# The exact walker
# --------------------------------------------------------------------------------------------

_TEXT: Final = 0  # stack item: literal text to append
_VALUE: Final = 1  # stack item: a value to write
_LEAVE: Final = 2  # stack item: a container is finished, remove it from the current path
_CAPTURE: Final = 3  # stack item: a child of a _Sorting node is written, move its text there
_SORTED: Final = 4  # stack item: all children of a _Sorting node are written, sort and append

_Children = tuple[bool, list[tuple[str, Any]]]  # (is_object, [(prefix text, value)])


class _Rope:
    """Text as a sequence of pieces (str or _Rope), flattened once when the writer is done.

    A sorted node's text is built from its children's texts; joining them into one str at every
    level would copy a deep child once per enclosing set (quadratic in the nesting depth).
    """

    __slots__ = ("parts",)

    def __init__(self, parts: list[Any]) -> None:
        self.parts = parts


class _Chunks:
    """The non-empty str pieces of a text (str or _Rope), in order, without recursion."""

    __slots__ = ("stack",)

    def __init__(self, text: object) -> None:
        self.stack: list[tuple[list[Any], int]] = [([text], 0)]

    def next(self) -> str:
        """The next piece, or "" at the end."""
        stack = self.stack
        while stack:
            parts, index = stack.pop()
            if index == len(parts):
                continue
            stack.append((parts, index + 1))
            piece = parts[index]
            if isinstance(piece, _Rope):
                stack.append((piece.parts, 0))
            elif piece:
                return str(piece)
        return ""


def _flatten(pieces: list[Any]) -> str:
    chunks = _Chunks(_Rope(pieces))
    out: list[str] = []
    chunk = chunks.next()
    while chunk:
        out.append(chunk)
        chunk = chunks.next()
    return "".join(out)


_PREFIX: Final = 32  # code points of a child's text that its sort key holds


def _prefix(text: object) -> tuple[str, bool]:
    """The first _PREFIX code points of a text, and whether that is the whole text."""
    if isinstance(text, str):
        return text[:_PREFIX], len(text) <= _PREFIX
    chunks = _Chunks(text)
    parts: list[str] = []
    size = 0
    while size < _PREFIX:
        chunk = chunks.next()
        if not chunk:
            return "".join(parts), True
        parts.append(chunk)
        size += len(chunk)
    head = "".join(parts)
    if len(head) > _PREFIX:
        return head[:_PREFIX], False
    return head, not chunks.next()


def _compare(a: object, b: object) -> int:
    """-1, 0 or 1: the order of two texts (str or _Rope) by UTF-16 code units, read lazily.

    Only the common prefix is read, so sorting never copies a whole child's text.
    """
    left, right = _Chunks(a), _Chunks(b)
    x, y = left.next(), right.next()
    i = j = 0
    while x and y:
        m = min(len(x) - i, len(y) - j)
        u, v = x[i : i + m], y[j : j + m]
        if u != v:
            return _first_difference(u, v)
        i += m
        j += m
        if i == len(x):
            x, i = left.next(), 0
        if j == len(y):
            y, j = right.next(), 0
    return (1 if x else 0) - (1 if y else 0)


def _first_difference(u: str, v: str) -> int:
    """The order of two unequal strs of the same length, by their first differing character."""
    lo, hi = 0, len(u)  # u[:lo] == v[:lo] and u[:hi] != v[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if u[lo:mid] == v[lo:mid]:
            lo = mid
        else:
            hi = mid
    return -1 if _utf16_key(u[lo]) < _utf16_key(v[lo]) else 1


class _Sorting:
    """A container whose children are ordered by their own canonical text.

    That is a set, or a dict with keys equal after str() ({1: x, "1": y}). Each child is written
    once, in place, and its text captured here (as a rope); the node's text is then the sorted
    children. Sorting by a separately computed text instead re-wrote every subtree once per
    enclosing set: exponential in the nesting depth. Children are sorted by a short prefix of
    their text; only children whose prefixes tie are compared further, lazily.
    """

    __slots__ = ("keys", "start", "texts", "values")

    def __init__(self, keys: list[str] | None, values: list[Any]) -> None:
        self.keys = keys  # None for a set
        self.values = values
        self.texts: list[object] = []  # str or _Rope
        self.start = 0  # where the children's text begins in the output

    def capture(self, out: list[Any]) -> None:
        """Move the text just written for the next child from `out` to `texts`."""
        if len(out) == self.start + 1:  # a scalar or a sorted node: one piece
            self.texts.append(out.pop())
        else:
            self.texts.append(_Rope(out[self.start :]))
            del out[self.start :]

    def rope(self) -> _Rope:
        """The node's text, children in canonical order."""
        if self.keys is None:
            ranks: list[Any] = [_set_rank(value) for value in self.values]
            order = _sorted_texts(ranks, self.texts)
            if not order:
                return _Rope(["[]"])
            parts: list[Any] = ["["]
            for index in order:
                parts.append(self.texts[index])
                parts.append(",")
            parts[-1] = "]"  # the last "," closes the list
            return _Rope(parts)
        keys = self.keys
        order = _sorted_texts([_utf16_key(k) for k in keys], self.texts)
        parts = ["{"]
        for index in order:
            parts.append(encode_basestring(keys[index]) + ":")
            parts.append(self.texts[index])
            parts.append(",")
        parts[-1] = "}"  # a dict here has two keys or more: the last "," closes it
        return _Rope(parts)


def _sorted_texts(ranks: list[Any], texts: list[object]) -> list[int]:
    """Indexes of the children by (rank, text): by prefix first, ties compared lazily."""
    prefixes = [_prefix(text) for text in texts]
    # ASCII sorts the same as str as in UTF-16: compare the str, without encoding it.
    ascii_only = all(head.isascii() for head, _ in prefixes)
    keys = [
        (rank, head if ascii_only else _utf16_key(head))
        for rank, (head, _) in zip(ranks, prefixes, strict=True)
    ]
    order = sorted(range(len(texts)), key=lambda index: keys[index])
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and keys[order[end]] == keys[order[start]]:
            end += 1
        if end - start > 1 and not all(prefixes[index][1] for index in order[start:end]):
            tied = order[start:end]
            tied.sort(key=cmp_to_key(_by_text(texts)))
            order[start:end] = tied
        start = end
    return order


def _by_text(texts: list[object]) -> Callable[[int, int], int]:
    def compare(a: int, b: int) -> int:
        return _compare(texts[a], texts[b])

    return compare


def _set_rank(value: object) -> tuple[int, Any]:
    """Sets: numbers first, by value; then everything else by canonical text.

    (0, number) for a number, (1, 0) for anything else, which the text then orders.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:  # the builtin value: a subclass's comparison methods are never called
            number = float.__float__(value) if isinstance(value, float) else int.__index__(value)
        except Exception:
            return 1, 0
        if not (isinstance(number, float) and math.isnan(number)):
            return 0, number
    return 1, 0


def _stringify_exact(root: object) -> str:
    """Write `root` canonically, following every rule of the canonical form, without recursion.

    Each value is written once, so the work is linear in the length of the text. `active` maps
    id() -> object for the containers on the current path (kept alive so ids are not reused);
    meeting one of them again is a true cycle and is written as ``"[Circular]"``.
    """
    active: dict[int, object] = {}
    out: list[Any] = []  # str, or a _Rope for a sorted node
    ropes = False
    stack: list[tuple[int, Any]] = [(_VALUE, root)]
    while stack:
        tag, item = stack.pop()
        if tag == _TEXT:
            out.append(item)
        elif tag == _CAPTURE:
            item.capture(out)
        elif tag == _SORTED:
            out.append(item.rope())
            ropes = True
        elif tag == _LEAVE:
            del active[item]
        else:
            _write_value(item, out, stack, active)
    return _flatten(out) if ropes else "".join(out)


def _write_value(
    item: object, out: list[Any], stack: list[tuple[int, Any]], active: dict[int, object]
) -> None:
    """Write a scalar to `out`, or push a container's children (and its end) onto `stack`."""
    try:
        scalar = _scalar_text(item)
    except Exception:  # a str/int/float subclass whose overridden methods raise
        scalar = _quote(_safe_str(item))
    if scalar is not None:
        out.append(scalar)
        return
    ident = id(item)
    if ident in active:
        out.append(_CIRCULAR)
        return
    node = _expand(item)
    if isinstance(node, str):  # an object written as its str(), no children
        out.append(node)
        return
    active[ident] = item
    stack.append((_LEAVE, ident))
    if isinstance(node, _Sorting):
        node.start = len(out)
        stack.append((_SORTED, node))
        values: list[Any] = node.values
        for index in range(len(values) - 1, -1, -1):
            stack.append((_CAPTURE, node))
            stack.append((_VALUE, values[index]))
        return
    is_object, children = node
    out.append("{" if is_object else "[")
    stack.append((_TEXT, "}" if is_object else "]"))
    for prefix, value in reversed(children):
        stack.append((_VALUE, value))
        if prefix:
            stack.append((_TEXT, prefix))


def _scalar_text(value: object) -> str | None:
    """The text of a scalar (JSON literal, string or number), or None for anything else."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is UNDEFINED:
        return "undefined"
    # Subclasses (enums, numpy floats...) are written by their builtin value, taken with the
    # builtin's own method so that an override cannot change or break the text.
    if isinstance(value, str):
        return _quote(str.__str__(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_text(int.__index__(value))
    if isinstance(value, float):
        return _float_text(float.__float__(value))
    return None


def _expand(value: object) -> _Children | _Sorting | str:
    """Children of a container-like value, or the final text of an object written via str().

    Builtin containers, subclasses included, are read through the builtin's own methods
    (`dict.items`, `list.__iter__`...): what they store is written, and overrides of items(),
    get(), __getitem__ or __iter__ are never called, so both builds write the same text.
    """
    try:
        if isinstance(value, dict):
            return _object_node(list(dict.items(value)))
        if isinstance(value, (list, tuple)):
            return False, _array_children(_stored_items(value))
        if isinstance(value, (set, frozenset)):
            return _Sorting(None, list(value))
        if isinstance(value, (bytes, bytearray, memoryview)):
            data = base64.b64encode(bytes(value)).decode("ascii")
            return _object_node([("data", data), ("type", "Uint8Array")])
        fields = _field_items(value)
        if fields is not None:
            return _object_node(fields)
    except Exception:
        # An object that will not expose its contents (a field property that raises, a set
        # whose iteration fails) is written like any other object: as its str().
        pass
    return _quote(_safe_str(value))


def _stored_items(value: list[Any] | tuple[Any, ...]) -> list[Any]:
    """The items a list or tuple (or a subclass) stores, without calling an overridden __iter__."""
    if type(value) is list:
        return value
    if isinstance(value, list):
        return list(list.__iter__(value))
    return list(tuple.__iter__(value))


def _array_children(items: list[Any]) -> list[tuple[str, Any]]:
    return [("," if index else "", item) for index, item in enumerate(items)]


def _object_node(items: list[tuple[Any, Any]]) -> _Children | _Sorting:
    pairs = [(_clean(str.__str__(k) if isinstance(k, str) else _safe_str(k)), v) for k, v in items]
    keys = {key for key, _ in pairs}
    if len(keys) < len(pairs):
        # Two keys became equal after str() (e.g. 1 and "1"): order them by value too, so the
        # text does not depend on insertion order.
        return _Sorting([key for key, _ in pairs], [value for _, value in pairs])
    if all(key.isascii() for key in keys):
        pairs.sort(key=lambda kv: kv[0])
    else:
        pairs.sort(key=lambda kv: _utf16_key(kv[0]))
    return True, [
        (("," if index else "") + encode_basestring(key) + ":", value)
        for index, (key, value) in enumerate(pairs)
    ]


def _field_items(value: object) -> list[tuple[str, Any]] | None:
    """(key, value) pairs for exceptions, dataclass instances and pydantic models, else None."""
    if isinstance(value, BaseException):
        return _exception_items(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name, UNDEFINED)) for f in dataclasses.fields(value)]
    model_fields = getattr(type(value), "model_fields", None)  # pydantic v2, without importing it
    if isinstance(model_fields, dict) and hasattr(value, "model_dump"):
        items = [(name, getattr(value, name, UNDEFINED)) for name in model_fields]
        extra = getattr(value, "__pydantic_extra__", None)
        if isinstance(extra, dict):
            items.extend(dict.items(extra))
        return items
    return None


def _exception_items(exc: BaseException) -> list[tuple[str, Any]]:
    stack: object = UNDEFINED
    if exc.__traceback__ is not None:
        # Imported here: an exception with a traceback among a call's values is rare, and
        # traceback (with linecache, textwrap...) is a share of every process's start-up.
        import traceback

        try:
            stack = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except Exception:
            stack = UNDEFINED
    return [("message", _safe_str(exc)), ("name", type(exc).__name__), ("stack", stack)]


# --------------------------------------------------------------------------------------------
# The fast path
# --------------------------------------------------------------------------------------------

_MAX_FAST_DEPTH: Final = 64
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


def _stringify_fast(value: object, encode: Callable[[object], bytes] | None = None) -> bytes | None:
    """The canonical UTF-8 bytes from a C JSON encoder, or None when it might differ.

    Sound because `_plain_form` hands the encoder only values it writes byte for byte as
    `_stringify_exact` does, and the encoder's own failures are the remaining cases: lone
    surrogates (the UTF-8 encoding refuses them) and ints beyond the encoder's range.
    """
    plain = _plain_form(value, 0)
    if plain is _REFUSED:
        return None
    return _encode_plain(plain, encode)


def _encode_plain(plain: object, encode: Callable[[object], bytes] | None = None) -> bytes | None:
    """A plain value (see `_plain_form`) encoded by the C encoder, or None when it refuses."""
    try:
        dumps = _HASHING.dumps
        if encode is None and dumps is not None:  # the usual case, without a closure
            return dumps(plain, option=_ORJSON_SORT_KEYS)
        return (encode or _HASHING.encoder or _fast_encoder())(plain)
    except (ValueError, TypeError):  # surrogates, huge ints: the exact walker handles them
        return None


_REFUSED: Final = object()


def _plain_form(value: Any, depth: int) -> Any:
    """`value` itself, a copy a JSON encoder writes exactly as JavaScript would, or _REFUSED.

    Admitted, by exact type (no subclasses): None, bool, int, str; list, tuple; dict whose keys
    are str without astral characters (then code-point order, which the encoders sort by, is
    UTF-16 order); floats as `_plain_float` allows. A container is copied only when a float in
    it must be replaced, so plain JSON costs one read-only walk. Nesting deeper than
    _MAX_FAST_DEPTH is refused, which also rules out cycles.
    """
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return _plain_float(value)
    if depth >= _MAX_FAST_DEPTH:
        return _REFUSED
    if kind is dict:
        return _plain_dict(value, depth + 1)
    if kind is list or kind is tuple:
        return _plain_array(value, depth + 1)
    return _REFUSED


def _plain_dict(value: dict[Any, Any], depth: int) -> Any:
    # Typed containers and exact-type tests (not a set lookup) keep the compiled build on
    # native operations; the interpreted one does not mind.
    copy: dict[Any, Any] | None = None
    for key, item in value.items():
        if type(key) is not str:
            return _REFUSED
        text: str = key
        if not text.isascii() and _ASTRAL.search(text) is not None:
            return _REFUSED
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue  # inline: a call per leaf would double the cost
        plain = _plain_form(item, depth)
        if plain is not item:
            if plain is _REFUSED:
                return _REFUSED
            if copy is None:
                copy = dict(value)
            copy[key] = plain
    return value if copy is None else copy


def _plain_array(value: list[Any] | tuple[Any, ...], depth: int) -> Any:
    copied: list[Any] | None = None
    for index, item in enumerate(value):
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        plain = _plain_form(item, depth)
        if plain is not item:
            if plain is _REFUSED:
                return _REFUSED
            if copied is None:
                copied = list(value)
            copied[index] = plain
    return value if copied is None else copied


def _plain_float(number: float) -> object:
    """A float, int or str the encoders write as the canonical text of `number`, or _REFUSED."""
    if 1e-4 <= abs(number) < 1e16 and not number.is_integer():
        return number  # repr() and JavaScript agree: shortest digits, fixed notation
    if number.is_integer() and abs(number) < 1e21:
        # JavaScript writes these as integer literals (1.0 -> 1; above 2**53 the shortest
        # digits padded with zeros, which is not always int(number)).
        return int(number) if abs(number) < 2**53 else int(js_number(number))
    if not math.isfinite(number):
        return _NON_FINITE[float.__repr__(number)][1:-1]  # the string "NaN", "Infinity"...
    return _REFUSED  # exponent notation or 1e-6 <= |x| < 1e-4: only the walker writes those


def _encode_stdlib(value: object) -> bytes:
    return "".join(_STDLIB_ENCODER(value, 0)).encode("utf-8")


_STDLIB_ENCODER: Final[Callable[[object, int], list[str]]] = (
    # The C encoder of json.dumps(ensure_ascii=False, separators=(",", ":"), sort_keys=True),
    # built once: json.dumps would rebuild it on every call.
    c_make_encoder(None, None, encode_basestring, None, ":", ",", True, False, True)
    if c_make_encoder is not None
    else lambda value, _level: [
        json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode(value)
    ]
)

_ORJSON_SORT_KEYS: Final = 1 << 5  # orjson.OPT_SORT_KEYS (checked when orjson is chosen)
_sha256: Final = hashlib.sha256


class _Hashing:
    """The process's hashing choices, read by every digest (twice per tool call).

    Fields of one object behind a ``Final`` name, not module globals: the compiled build reads
    a global that can change through the module's dict, a lookup per read; a field of a native
    object is one load. Changed only by `_set_fast_encoder` and `_set_hash_key`.
    """

    __slots__ = ("dumps", "encoder", "key")

    def __init__(self) -> None:
        self.encoder: Callable[[object], bytes] | None = None
        # orjson.dumps itself while orjson is the fast-path encoder, for `_encode_plain` to
        # call directly.
        self.dumps: Callable[..., bytes] | None = None
        # Set only by a process that persists signatures where others might read them (the
        # coding-CLI hook): digests become keyed BLAKE2b, equal exactly when the plain ones
        # are. None: SHA-256.
        self.key: bytes | None = None


_HASHING: Final = _Hashing()


def _fast_encoder() -> Callable[[object], bytes]:
    """orjson when it imports (several times faster on long strings), else the stdlib encoder."""
    if _HASHING.encoder is None:
        try:
            _set_fast_encoder("orjson")
        except ImportError:
            _set_fast_encoder("stdlib")
    encoder = _HASHING.encoder
    assert encoder is not None
    return encoder


def _set_fast_encoder(name: str) -> None:
    """Choose the fast-path encoder: "orjson" or "stdlib" (benchmarks compare them)."""
    encoder = _make_encoder(name)
    dumps: Callable[..., bytes] | None = None
    if name == "orjson":
        import orjson

        if orjson.OPT_SORT_KEYS != _ORJSON_SORT_KEYS:
            raise ImportError(f"orjson {orjson.__version__}: unexpected OPT_SORT_KEYS value")
        dumps = orjson.dumps
    _HASHING.encoder, _HASHING.dumps = encoder, dumps


def _make_encoder(name: str) -> Callable[[object], bytes]:
    if name == "orjson":
        import orjson  # a dependency on CPython; absent elsewhere (PyPy)

        dumps, sort_keys = orjson.dumps, orjson.OPT_SORT_KEYS

        def encode(value: object) -> bytes:  # a closure: faster than partial() with a keyword
            return dumps(value, option=sort_keys)

        return encode
    if name == "stdlib":
        return _encode_stdlib
    raise ValueError(f"unknown fast encoder {name!r}: use 'orjson' or 'stdlib'")


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def stable_stringify(value: object) -> str:
    """The canonical text of `value`; equal to OpenClaw's for JSON-like values."""
    data = _stringify_fast(value)
    return data.decode("utf-8") if data is not None else _stringify_exact(value)


def digest_stable(value: object) -> str:
    """Lowercase hex SHA-256 of the UTF-8 of `stable_stringify(value)`."""
    data = _stringify_fast(value)
    if data is None:
        data = _stringify_exact(value).encode("utf-8")
    return _digest_bytes(data)


def _digest_bytes(data: bytes) -> str:
    key = _HASHING.key
    if key is not None:
        return hashlib.blake2b(data, key=key, digest_size=32).hexdigest()
    return _sha256(data).hexdigest()


def _digest_plain(value: object) -> str:
    """`digest_stable(value)` for a value its caller has already walked as `_plain_form` would
    and found plain as it is (every key a str without astral characters, every leaf a str,
    int, bool or None): the encoder writes it directly, without walking it a second time.
    The encoder's own refusals (lone surrogates, huge ints) still go to the exact walker.
    """
    data = _encode_plain(value)
    if data is None:
        data = _stringify_exact(value).encode("utf-8")
    return _digest_bytes(data)


def _plain_key(key: object) -> bool:
    """A dict key `_plain_dict` admits as it is: a str without astral characters."""
    if type(key) is not str:
        return False
    text: str = key
    return text.isascii() or _ASTRAL.search(text) is None


def _set_hash_key(key: bytes | None) -> None:
    """Key every digest of this process with ``key`` (None: plain SHA-256, the default).

    For a process whose signatures are stored where a guessed call could be checked against
    them: keyed digests compare equal exactly when plain ones do, so no decision changes, but
    they cannot be recomputed without the key. Digests made under different keys never match.
    """
    _HASHING.key = key


def _hash_keyed() -> bool:
    """Whether this process's digests are keyed (:func:`_set_hash_key`)."""
    return _HASHING.key is not None


def normalize_params(tool: str, params: object) -> object:
    """Params as hashed: the identity, except `update_plan`, whose step wording is ignored."""
    if tool != "update_plan" or not isinstance(params, dict):
        return params
    return normalize_plan(params)


def normalize_plan(params: dict[Any, Any]) -> dict[str, object]:
    """The shape of an `update_plan` payload: step count, statuses, which steps have text.

    Dicts and lists are read as what they store (`dict.get`, not an overridden get()), as the
    canonical writer reads them, so both builds give the same shape.
    """
    plan = dict.get(params, "plan")
    entries = _stored_items(plan) if isinstance(plan, list) else []
    statuses: list[object] = []
    presence: list[bool] = []
    for entry in entries:
        if isinstance(entry, dict):
            status = dict.get(entry, "status")
            statuses.append(None if status is UNDEFINED else status)
            presence.append(_is_non_blank(dict.get(entry, "step")))
        else:
            statuses.append(None)
            presence.append(False)
    return {
        "planLength": len(entries),
        "statuses": statuses,
        "stepPresence": presence,
        "hasExplanation": _is_non_blank(dict.get(params, "explanation")),
    }


def _is_non_blank(value: object) -> bool:
    return isinstance(value, str) and js_trim(value) != ""


def hash_tool_call(tool: str, params: object) -> str:
    """The call signature (``args_hash``): ``"{tool}:{sha256 of canonical params}"``."""
    if tool == "update_plan":
        params = normalize_params(tool, params)
    return f"{tool}:{digest_stable(params)}"

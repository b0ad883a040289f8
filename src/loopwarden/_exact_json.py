"""JSON parsed by orjson when that gives exactly the standard library's value.

orjson parses several times faster than ``json.loads``. It refuses, with an error, what the
standard library accepts beyond JSON (NaN, Infinity, lone surrogates, a byte order mark), and
differs silently on one thing only: it reads an integer beyond 64 bits as a float, where the
standard library keeps the integer (and a signature computed from one would not be the one
the live guard computes). :func:`fast_loads` finds both cases and then gives no value, so the
caller parses with the standard library, whose value or error is the one that counts.

Shared by the transcript readers (whole documents and JSONL lines) and the MCP proxy (one
message per line).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NO_VALUE: Any = object()
"""What :func:`fast_loads` returns when the standard library must parse the text."""

_orjson_loads: Callable[[str | bytes], Any] | None
try:
    from orjson import loads as _orjson_loads
except ImportError:  # no wheel for every Python implementation
    _orjson_loads = None
FAST = _orjson_loads is not None
"""Whether orjson is there (without it :func:`fast_loads` never gives a value)."""

# Every float orjson makes of an integer beyond 64 bits is a whole number of magnitude 2**63 or
# more (smaller integers stay ints), so a value without one is the standard library's value; a
# value with one (or a float literal such as 1e20, which reads the same either way) is left to
# the standard library.
_BIG = float(2**63)
# Looking at every number costs about 30 ns a value; a text with more values than one per
# 16 bytes is checked for 19 digits in a row instead (digits mapped to "0", everything else to
# " ", C speed, about 2 ns a byte): the cheaper of the two.
_BYTES_PER_VALUE = 16
_DIGIT_RUN = b"0" * 19
_DIGITS = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
# The text is mapped in slices: a mapped copy of a whole large message would double what it
# holds in memory for a moment. Each slice overlaps the next so that no run is cut in two.
_SLICE = 1 << 20


def fast_loads(raw: str | bytes) -> Any:
    """orjson's value of ``raw`` when it is ``json.loads``'s, else :data:`NO_VALUE` (also when
    orjson is not installed or refuses the text)."""
    if _orjson_loads is None:
        return NO_VALUE
    try:
        value = _orjson_loads(raw)
    except ValueError:
        return NO_VALUE
    found = _big_float(value, len(raw) // _BYTES_PER_VALUE)
    if found is None:  # too many values to look at: look at the text
        found = has_digit_run(raw.encode() if isinstance(raw, str) else raw)
    return NO_VALUE if found else value


def has_digit_run(data: bytes) -> bool:
    """Whether 19 digits follow each other somewhere in ``data``."""
    if len(data) <= _SLICE:
        return _DIGIT_RUN in data.translate(_DIGITS)
    overlap = len(_DIGIT_RUN) - 1
    return any(
        _DIGIT_RUN in data[start : start + _SLICE + overlap].translate(_DIGITS)
        for start in range(0, len(data), _SLICE)
    )


def _big_float(value: Any, budget: int) -> bool | None:
    """Whether ``value`` holds a whole float of magnitude 2**63 or more; None when it holds
    more than ``budget`` values (the caller then checks the text)."""
    if type(value) is float:
        return value.is_integer() and abs(value) >= _BIG
    if type(value) is not dict and type(value) is not list:
        return False
    # The containers are walked by type, dicts by their values and lists by index: compiled,
    # those loops take no iterator object per container (a third of the walk's cost).
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        budget -= len(item)
        if budget < 0:
            return None
        if type(item) is dict:
            mapping: dict[Any, Any] = item
            for each in mapping.values():
                if _holds_big(each, stack):
                    return True
        else:
            array: list[Any] = item
            for each in array:
                if _holds_big(each, stack):
                    return True
    return False


def _holds_big(each: Any, stack: list[Any]) -> bool:
    """Whether ``each`` is a big whole float; a container is put on ``stack`` instead."""
    kind = type(each)
    if kind is dict or kind is list:
        stack.append(each)
        return False
    return kind is float and each.is_integer() and abs(each) >= _BIG

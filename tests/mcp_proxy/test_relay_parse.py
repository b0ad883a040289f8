"""The relay reads each message as the standard library's ``json.loads`` does, whichever parser
computes it (orjson when it gives the same value)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from loopwarden._exact_json import _SLICE, has_digit_run
from loopwarden.mcp_proxy._downstream import CHUNK
from loopwarden.mcp_proxy._proxy import _parse

# Where orjson and the standard library part: orjson refuses these (NaN, Infinity, an overflowing
# float, lone surrogates escaped or encoded, a byte order mark, deep nesting) or, for integers
# beyond 64 bits, reads them as floats.
EDGES = [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}',
    b'{"id":1,"result":{"n":-9223372036854775809,"m":18446744073709551616}}',
    b'{"id":"2","result":{"big":123456789012345678901234567890}}',
    b'{"id":3,"params":{"x":NaN,"y":Infinity,"z":-Infinity}}',
    b'{"id":4,"params":{"x":1e400,"y":-1e400}}',
    b'{"id":5,"params":{"text":"\\ud800 alone"}}',
    b'{"id":6,"params":{"text":"\xed\xa0\x80"}}',
    b'\xef\xbb\xbf{"id":7}',
    b'{"a":1,"a":2}',
    b"[" * 1200 + b"]" * 1200,
    b'{"id":8,"params":{"text":"caf\xc3\xa9 \\u00e9 \\n"}}',
    b"not json",
    b'{"id":9} trailing',
    b"\xff\xfe{}",
    # Large messages are checked in slices: a 19-digit integer across a slice boundary counts.
    b'{"id":10,"result":{"text":"' + b"x" * (CHUNK - 40) + b'","n":-92233720368547758090}}',
    b'{"id":11,"result":{"text":"' + b"x" * (3 * CHUNK) + b'","n":-9223372036854775808}}',
    # Dense in numbers (more than one value per 16 bytes): the text is scanned instead, in
    # slices, with the big integer across the first slice boundary.
    b'{"id":12,"result":[' + b"1," * (CHUNK // 2 - 20) + b"92233720368547758090,1]}",
    b'{"id":13,"result":[' + b"1," * (CHUNK // 2 + 200) + b"9223372036854775807]}",
]


def _standard(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and each number of the same type (1 is not 1.0)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("line", EDGES, ids=range(len(EDGES)))
def test_relay_reads_a_message_as_the_standard_library_does(line: bytes) -> None:
    assert _same(_parse(line), _standard(line))


@pytest.mark.parametrize("at", [0, 1, _SLICE - 19, _SLICE - 10, _SLICE - 1, _SLICE, 2 * _SLICE - 5])
def test_a_digit_run_is_found_wherever_it_lies(at: int) -> None:
    data = bytearray(b"x" * (3 * _SLICE))
    data[at : at + 19] = b"1" * 19
    assert has_digit_run(bytes(data))
    data[at + 9] = ord(",")
    assert not has_digit_run(bytes(data))

"""A fast reader for the JSON5 people write in config files: rewrite to JSON, then ``json.loads``.

The ``json5`` package is pure Python and reads about 5-20 s per MB, so a hand-written 50 KB
config cost a good part of a second on every hook call. Hand-written JSON5 mostly differs from
JSON in a few token-level ways (comments, unquoted keys, single quotes, trailing commas, hex,
``+1``, ``.5``); this module rewrites exactly those, token by token with one C-speed regular
expression, and lets the stdlib parser (C) do the rest. Anything it is not sure of (an escape
only JSON5 knows, Unicode identifiers or whitespace, a token out of place) returns ``UNSURE``,
and the caller asks the reference ``json5`` parser, which also words the syntax errors. The
rewrite never turns invalid JSON5 into valid JSON: a bare word that is not a key or a literal,
a comma with nothing before it and adjacent values all stay errors for ``json.loads``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

UNSURE: Final = object()


class TooDeep(ValueError):
    """The text nests arrays/objects deeper than the limit; raised before parsing."""


_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\n\r]+)
    |(?P<comment>//[^\n\r]*|/\*[\s\S]*?\*/)
    |(?P<dq>"[^"\\\n\r]*(?:\\.[^"\\\n\r]*)*")
    |(?P<sq>'[^'\\\n\r]*(?:\\.[^'\\\n\r]*)*')
    |(?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
    |(?P<num>[+-]?(?:Infinity|NaN|0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))
    |(?P<punct>[{}\[\],:])
    """,
    re.VERBOSE,
)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_LITERALS = frozenset({"true", "false", "null", "Infinity", "NaN"})
_SQ_PIECE = re.compile(r"""\\(.)|\"""")


def loads(text: str, max_depth: int) -> Any:
    """The value of a JSON5 ``text``, or ``UNSURE`` when the reference parser must decide.

    Raises :class:`TooDeep` when arrays/objects nest deeper than ``max_depth``, and
    :class:`Invalid` when the text is surely not JSON5 (then ``json5`` would only take seconds
    on a large file to say the same).
    """
    tokens = _tokens(text, max_depth)
    if tokens is None:
        return UNSURE
    rewritten = _rewrite(tokens)
    if rewritten is None:
        return UNSURE
    out, starts = rewritten
    joined = " ".join(out)  # a separator, so adjacent values never merge ("1 2" is not 12)
    try:  # strict=False: JSON5 strings may hold raw tabs and other control characters
        return json.loads(joined, strict=False)
    except json.JSONDecodeError as exc:
        if any(piece[0] == '"' and _json5_only_escape(piece) for piece in out):
            return UNSURE  # a string JSON cannot read: the reference parser decides
        # Every token is now in JSON's spelling and the grammars agree, so JSON's "no" is final.
        at_end = exc.pos >= len(joined)
        offset = len(text) if at_end else _source_offset(exc.pos, out, starts)
        raise Invalid(_END if at_end else _WORDING.get(exc.msg, exc.msg), offset) from None


class Invalid(ValueError):
    """The text is not JSON5: ``message`` says why, ``offset`` where (in the original text)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


_END = "unexpected end of the file (a missing closing bracket or value?)"
_WORDING = {
    "Expecting value": "expected a value",
    "Expecting ',' delimiter": "expected ',' or a closing bracket",
    "Expecting ':' delimiter": "expected ':' after the key",
    "Expecting property name enclosed in double quotes": "expected a key (a name or a string)",
    "Extra data": "unexpected text after the end of the value",
}
_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt]|(.))', re.DOTALL)


def _json5_only_escape(piece: str) -> bool:
    """True when a string holds an escape JSON does not have (``\\x41``, ``\\v``, ``\\0``...)."""
    return any(m.group(1) is not None for m in _ESCAPE.finditer(piece))


def _source_offset(pos: int, out: list[str], starts: list[int]) -> int:
    """Where in the original text the rewritten token at ``pos`` of the JSON text began."""
    offset = 0
    for piece, start in zip(out, starts, strict=True):
        offset += len(piece) + 1
        if pos < offset:
            return start
    return starts[-1] if starts else 0


def _tokens(text: str, max_depth: int) -> list[tuple[str, str, int]] | None:
    """The significant tokens as (kind, text, offset); ``None`` at a character not understood."""
    tokens: list[tuple[str, str, int]] = []
    depth = pos = 0
    for match in _TOKEN.finditer(text):
        if match.start() != pos:
            return None
        pos = match.end()
        kind = match.lastgroup or ""
        if kind in ("ws", "comment"):
            continue
        token = match.group()
        if kind == "punct" and token in "[{":
            depth += 1
            if depth > max_depth:
                raise TooDeep(max_depth)
        elif kind == "punct" and token in "]}":
            depth -= 1
        tokens.append((kind, token, match.start()))
    return tokens if pos == len(text) else None


def _rewrite(tokens: list[tuple[str, str, int]]) -> tuple[list[str], list[int]] | None:
    """The tokens in JSON's spelling with their offsets; ``None`` when one has no sure spelling.

    Raises :class:`Invalid` on a bare word that is neither a key nor a literal.
    """
    out: list[str] = []
    starts: list[int] = []
    for i, (kind, token, start) in enumerate(tokens):
        if kind == "ident":
            if i + 1 < len(tokens) and tokens[i + 1][1] == ":":
                token = f'"{token}"'
            elif token not in _LITERALS:
                raise Invalid(f"unexpected {token!r} (a string value needs quotes)", start)
        elif kind == "sq":
            token = _double_quoted(token)
        elif kind == "num":
            number = _number(token)
            if number is None:
                return None
            token = number
        elif kind == "punct" and token in "]}" and _after_value(out):
            out.pop()  # a trailing comma after a value: JSON5 allows it, JSON does not
            starts.pop()
        out.append(token)
        starts.append(start)
    return out, starts


def _after_value(out: list[str]) -> bool:
    """True when ``out`` ends in a comma that follows a value (not ``[``, ``{``, ``,`` or ``:``)."""
    return len(out) > 1 and out[-1] == "," and out[-2] not in ("[", "{", ",", ":")


def _double_quoted(token: str) -> str:
    """A single-quoted JSON5 string as a JSON string (``\\'`` unescaped, ``"`` escaped)."""

    def piece(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped is None:
            return '\\"'
        return "'" if escaped == "'" else match.group()

    return '"' + _SQ_PIECE.sub(piece, token[1:-1]) + '"'


def _number(token: str) -> str | None:
    """A JSON5 number in JSON's spelling, or ``None`` when unsure (``-NaN``, ``01``)."""
    sign = ""
    if token[0] in "+-":
        sign, token = ("-" if token[0] == "-" else ""), token[1:]
    if token in ("Infinity", "NaN"):
        return None if sign and token == "NaN" else sign + token
    if token[:2] in ("0x", "0X"):
        return sign + str(int(token, 16))
    if token.startswith("."):
        token = "0" + token
    token = re.sub(r"\.(?=[eE]|$)", ".0", token)
    return sign + token if _JSON_NUMBER.fullmatch(token) else None

"""Text that is safe to print to a terminal: control characters shown, never obeyed.

Session, run and tool names, error texts and file paths come from agents, transcripts and the
file system. Printed raw, an ESC or C1 sequence in them could set the terminal's title, clear the
screen or move the cursor, and a carriage return could overwrite a line with fake text. Every
command that prints such text to a terminal passes it through :func:`printable` first.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls; the Unicode line and paragraph separators (they break a line on
# some terminals) and the bidirectional overrides and isolates (they reorder what is shown).
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_UNSAFE_KEEP_NEWLINE = "[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
# What JSON leaves raw with ensure_ascii=False (it escapes C0 itself): DEL, C1 and the rest.
_UNSAFE_IN_JSON = "[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
_COMPILED: dict[str, re.Pattern[str]] = {}


def _pattern(source: str) -> re.Pattern[str]:
    """The compiled pattern, compiled on first use: most runs never meet a control character,
    and compiling these classes is a measurable share of a command's start-up."""
    pattern = _COMPILED.get(source)
    if pattern is None:
        pattern = _COMPILED[source] = re.compile(source)
    return pattern


_NAMED = {"\t": r"\t", "\n": r"\n", "\r": r"\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, newlines: bool = False) -> str:
    r"""``text`` with every control character written as an escape (``\x1b``, ``\r``, ``\u202e``).

    Plain text, including non-ASCII letters and brackets, is returned unchanged. ``newlines``
    keeps ``\n`` for the few places whose layout is multi-line; elsewhere it is escaped too, so
    one value always prints on one line.
    """
    if text.isprintable():  # the common case: nothing to escape (a space is printable)
        return text
    return _pattern(_UNSAFE_KEEP_NEWLINE if newlines else _UNSAFE).sub(_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_printable(document: str) -> str:
    r"""A JSON text with the control characters JSON leaves raw written as ``\uXXXX`` escapes.

    The same values once parsed; safe to print to a terminal. These characters can only occur
    inside JSON strings, where an escape means the same character.
    """
    if document.isascii():
        return document
    return _pattern(_UNSAFE_IN_JSON).sub(_json_escape, document)


def plural(count: int, noun: str) -> str:
    """ "1 call", "2 calls", "3 trajectories"."""
    if count == 1:
        return f"1 {noun}"
    return f"{count} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"

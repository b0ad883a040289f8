"""Type stub of the C scanner ``_volatile_scan.c`` (built into regular wheels only)."""

from collections.abc import Callable

def scan(value: object, /) -> str | None:
    """The built-in volatile patterns applied to an exact str of ASCII text, else ``None``."""

def walk(value: object, other: Callable[[str], str], /) -> object:
    """``VolatileNormalizer().normalize(value)`` of a structure of dicts, lists, tuples, str,
    int, float, bool and None (``other`` gives the text of strings that are not ASCII or not an
    exact str), else ``NotImplemented``."""

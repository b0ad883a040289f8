"""Type stub of the C scanner ``_volatile_scan.c`` (built into regular wheels only)."""

def scan(value: object, /) -> str | None:
    """The built-in volatile patterns applied to an exact str of ASCII text, else ``None``."""

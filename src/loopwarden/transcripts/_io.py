"""Reading helpers shared by the importers: gzip-transparent opening, streamed JSONL, JSON docs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import IO, Any

from loopwarden._exact_json import FAST, NO_VALUE, fast_loads
from loopwarden.transcripts.model import TranscriptError, Usage

MAX_LINE_CHARS = 64 * 1024 * 1024
"""The longest line read from a JSONL transcript, in characters (64 Mi, without the newline).

Real transcript lines stay far below it (a tool result with an image is a few MB). A longer line,
such as a small ``.gz`` file that expands to one enormous line, is an input error naming the file
and the line, found after reading at most this many characters: the line is never held whole.
"""


def _gzip_text(path: Path) -> IO[str]:
    """``gzip.open`` as UTF-8 text, the module imported on the first ``.gz`` file: most runs
    read none, and the module (with zlib) is a share of every command's start-up."""
    import gzip

    return gzip.open(path, "rt", encoding="utf-8")


def _gzip_bytes(path: Path) -> bytes:
    """A ``.gz`` file's decompressed bytes (the module imported here, as in ``_gzip_text``)."""
    import gzip

    with gzip.open(path, "rb") as handle:
        return handle.read()


def open_text(path: Path) -> IO[str]:
    """Open a transcript as UTF-8 text; ``*.gz`` files are decompressed on the fly."""
    try:
        if path.suffix == ".gz":
            return _gzip_text(path)
        return path.open("r", encoding="utf-8")
    except OSError as exc:
        raise TranscriptError(str(path), f"cannot open: {exc.strerror or exc}") from exc


def iter_lines(handle: IO[str], path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, line)`` from an open transcript, each line at most
    :data:`MAX_LINE_CHARS` long; a longer one raises :class:`TranscriptError`.

    ``readline`` with a size reads in chunks and stops at the size, so memory stays bounded
    whatever the length of the line on disk (or once decompressed).
    """
    limit = MAX_LINE_CHARS  # read once: a test lowers the module constant
    lineno = 0
    while True:
        lineno += 1
        raw = handle.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit and not raw.endswith("\n"):
            raise TranscriptError(
                str(path),
                f"a line longer than {limit} characters; loopwarden reads transcript lines "
                f"up to {limit} characters (is the file corrupt, or not a transcript?)",
                lineno,
            )
        yield lineno, raw


READ_WARNINGS: ContextVar[list[str] | None] = ContextVar("loopwarden_read_warnings", default=None)
"""Where the readers put what they skipped without failing (a half-written last line); the
analyzer sets a list around each file and reports them. Unset: they are logged."""


def warn_read(message: str) -> None:
    """Report something a reader skipped: to the analyzer's list, else to the log."""
    found = READ_WARNINGS.get()
    if found is not None:
        found.append(message)
    else:
        from loopwarden.core._lazylog import get_logger

        get_logger("loopwarden").warning("%s", message)


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line, one line at a time.

    A line that is not a JSON object, or longer than :data:`MAX_LINE_CHARS`, raises
    :class:`TranscriptError` with its line number, so a corrupt archive is reported precisely
    instead of being half-analysed in silence. The one exception is a last line that has no
    newline and does not parse: an agent still writing the file. The complete lines are read,
    and that line is reported once (:func:`warn_read`); so is a ``.gz`` file cut short.
    """
    with open_text(path) as handle:
        lineno = 0
        try:
            for lineno, raw in iter_lines(handle, path):
                if not raw.strip():
                    continue
                try:
                    value = _parse_line(path, lineno, raw)
                except TranscriptError:
                    if raw.endswith("\n") or handle.readline(1):
                        raise
                    warn_read(
                        f"{path}:{lineno}: the last line is incomplete (is the agent still "
                        f"writing the file?); the {lineno - 1} complete lines were analysed"
                    )
                    return
                yield lineno, value
        except EOFError:
            # A compressed file cut short (a copy interrupted, a log still being compressed):
            # like a half-written last line, what was readable is analysed, and it is said once.
            warn_read(
                f"{path}:{lineno + 1}: the compressed file ends early (is it truncated?); the "
                f"{lineno} complete lines before it were analysed"
            )
        except (OSError, UnicodeDecodeError) as exc:
            raise TranscriptError(str(path), f"cannot read: {exc}", lineno + 1) from exc


def _parse_line(path: Path, lineno: int, raw: str) -> dict[str, Any]:
    value = fast_loads(raw)
    if value is NO_VALUE:  # orjson refuses NaN/Infinity, lone surrogates; reads big ints apart
        value = _stdlib_parse(path, lineno, raw)
    if not isinstance(value, dict):
        raise TranscriptError(
            str(path), f"expected a JSON object per line, got {type(value).__name__}", lineno
        )
    return value


def _stdlib_parse(path: Path, lineno: int, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        # json says "Unterminated string starting at": no second "at" after it.
        at = " " if exc.msg.endswith(" at") else " at "
        raise TranscriptError(
            str(path), f"not valid JSON ({exc.msg}{at}column {exc.colno})", lineno
        ) from exc


def load_json(path: Path) -> Any:
    """Load a whole-document JSON transcript (SWE-agent, mini-swe-agent, tau-bench, chat lists).

    The document is parsed with orjson when it gives the standard library's value
    (:func:`loads_exact`); anything else (an unreadable file, a parse error, a document
    orjson would read differently) goes through the standard library, whose value or error is
    the one reported.
    """
    if FAST:  # else reading the bytes first would be for nothing
        value = _fast_load(path)
        if value is not NO_VALUE:
            return value
    try:
        with open_text(path) as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise TranscriptError(str(path), f"not valid JSON ({exc.msg})", exc.lineno) from exc
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TranscriptError(str(path), f"cannot read: {exc}") from exc


def _fast_load(path: Path) -> Any:
    try:
        if path.suffix == ".gz":
            raw = _gzip_bytes(path)
        else:
            with path.open("rb") as handle:
                raw = handle.read()
    except (OSError, EOFError):
        return NO_VALUE  # reported by the standard library's read
    return fast_loads(raw)


def loads_exact(raw: str) -> Any:
    """``json.loads(raw)``, computed by orjson (the faster parser) when that gives the same value;
    raises :class:`json.JSONDecodeError` as the standard library does."""
    value = fast_loads(raw)
    return json.loads(raw) if value is NO_VALUE else value


def parse_arguments(raw: Any) -> Any:
    """Parse tool arguments that a format stores as a JSON string.

    Invalid or truncated JSON is kept as the raw string: it is still a stable
    identity for loop detection, and the call is not lost.
    """
    if not isinstance(raw, str):
        return {} if raw is None else raw
    try:
        return loads_exact(raw)
    except json.JSONDecodeError:
        return raw


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty dict (formats often omit optional objects)."""
    return value if isinstance(value, dict) else {}


def text_of(content: Any) -> str:
    """Join the text of a string or of a list of ``{type: "text", text}`` blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        ]
        return "\n".join(parts)
    return "" if content is None else str(content)


def epoch_seconds(value: Any) -> float | None:
    """A transcript timestamp as epoch seconds: epoch milliseconds (a number) or ISO 8601."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) / 1000.0
    if not isinstance(value, str) or not value:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def token_sum(usage: Any, *keys: str) -> int | None:
    """The sum of a usage object's integer counts under ``keys``; None when it has none."""
    if not isinstance(usage, dict):
        return None
    counts = [usage[key] for key in keys if type(usage.get(key)) is int]
    return sum(counts) if counts else None


def count(value: Any) -> int | None:
    """A token count as recorded: an int (not a bool), else None."""
    return value if type(value) is int else None


def money(value: Any) -> float | None:
    """An amount of money as recorded: a finite number (not a bool), else None."""
    if type(value) in (int, float) and value == value and abs(value) != float("inf"):
        return float(value)
    return None


def usage_of(
    input_tokens: Any = None, output_tokens: Any = None, cached_tokens: Any = None, cost: Any = None
) -> Usage | None:
    """A :class:`Usage` of the values that are recorded; None when none is."""
    usage = Usage(count(input_tokens), count(output_tokens), count(cached_tokens), money(cost))
    return None if usage.empty else usage


def total(values: Iterable[Any]) -> Any:
    """The sum of the numbers among ``values`` (bools and the rest left out); None if none."""
    known = [value for value in values if type(value) in (int, float)]
    return sum(known) if known else None

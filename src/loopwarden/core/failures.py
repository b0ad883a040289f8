"""The outcome model: whether a call failed, succeeded, or said nothing, and what makes two
failures the same failure.

An agent is stuck when the same *failure* keeps coming back, whatever it changes in its calls;
the same *acknowledgement* ("Email sent.") from many distinct calls is healthy bulk work. So the
recommended profile's same-outcome rule needs to know which outcomes are failures, and to
compare failures the way a person reads them: ``sed: can't read nofile3`` and ``sed: can't
read nofile7`` are one failure, quoting two different arguments.

What says a call failed, strongest signal first (the first that applies decides):

1. the runtime's own word: an ``error`` (a raised exception, an error text), or ``failed``
   given by the caller (``True``/``False``);
2. a result object's flag: MCP's ``isError``; an exec-style ``details.exitCode`` (non-zero) or
   ``details.status`` (``failed``/``error``/``timeout``); a plain JSON result whose ``ok`` or
   ``success`` is false, whose ``status`` is ``error``/``failed``, or that carries a non-empty
   ``error``;
3. an exit code written into the text: mini-swe-agent's ``<returncode>N</returncode>``, an
   ``Exit code: N`` / ``Exit Code: N`` line (Codex, Gemini CLI), ``Process exited with code N``;
4. a tool's own ``failurePattern`` (``toolPolicies``): its text matches, or it succeeded;
5. recognisable failure text, read only in the text's first and last lines (where a tool says
   that it failed): a line that starts with ``Error``, ``fatal``, ``Traceback (most recent call
   last)``, a Python exception (``FileNotFoundError: …``), ``Usage:``, ``Invalid``, an HTTP
   status 4xx/5xx with its reason, an editor's ``No replacement was performed``; a program's
   complaint (``bash: -c: line 1: syntax error …``, ``sed: can't read x``); a line that ends
   with ``command not found``, ``No such file or directory``, ``Permission denied``; or a short
   text (one or two lines) that says
   something could not be done (``not found``, ``does not exist``, ``cannot``, ``unable to``,
   ``denied``, ``unauthorized``, ``forbidden``, ``invalid``, ``timed out``).

Everything else is a success, unless it says nothing at all (empty output, an empty shell
wrapper, an empty list), which is *silent*.

Pure functions; the compiled build runs them natively.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from loopwarden.core.canonical import UNDEFINED, digest_stable, stable_stringify

FAILURE: Final = "failure"
SUCCESS: Final = "success"
SILENT: Final = "silent"

# Types that are never a Mapping. ``isinstance(x, Mapping)`` runs abc's __instancecheck__, an
# interpreted frame, whatever x is (even a dict): outcomes are nearly always plain JSON values
# or UNDEFINED, answered here without it.
_NOT_MAPPING = frozenset({str, int, float, bool, list, tuple, type(None), type(UNDEFINED)})


def is_mapping(value: object) -> bool:
    """``isinstance(value, Mapping)``, with the ABC asked only about uncommon types."""
    kind = type(value)
    if kind is dict:
        return True
    if kind in _NOT_MAPPING:
        return False
    return isinstance(value, Mapping)


def _given(error: Any) -> bool:
    return error is not None and error is not UNDEFINED


# -- which outcomes are failures ---------------------------------------------------------------

# An exit code in the text, as the shells' wrappers write it: mini-swe-agent's observation,
# Codex's and Gemini CLI's shell output, a process runner's last line.
_RETURNCODE = re.compile(r"\s*<returncode>\s*(-?\d+)\s*</returncode>")
_EXIT_LINE = re.compile(
    r"(?:exit code:?|process exited with code|command exited with code:?)[ \t]*(-?\d+)[ \t]*$",
    re.IGNORECASE,
)
# A line that starts the way a failure does (one pass over the text for all of these):
# ``Error: …``, ``fatal: …``, a traceback, a usage line, an HTTP status with its reason, an
# editor's refusal; a Python exception, matched with its case (``FileNotFoundError: …``); or a
# program's own complaint (``bash: -c: line 1: syntax error …``, ``sed: -e expression #1, char
# 3: unknown command``): its name, up to three ``context: `` parts, then a phrase that says it
# could not do it.
_FAILURE_LINE = re.compile(
    r"[ \t]*(?:"
    r"(?i:(?:error|fatal|failed|failure|exception)\b|traceback \(most recent call last\)"
    r"|usage:|no replacement was performed|your proposed edit has introduced new syntax error"
    r"|invalid\b|(?:http/\d(?:\.\d)?[ \t]+)?[45]\d\d[ \t]+(?:bad request|unauthori[sz]ed"
    r"|payment required|forbidden|not found|method not allowed|not acceptable|request timeout"
    r"|conflict|gone|unprocessable|too many requests|internal server error|not implemented"
    r"|bad gateway|service unavailable|gateway timeout)\b)"
    r"|(?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b(?::|$)"
    r"|(?i:[\w./-]+: (?:[^:\n]{0,80}: ){0,3}(?:syntax error|unexpected (?:eof|end of file|token)"
    r"|cannot|can't|could not|couldn't|unable to|invalid|unrecognized|unknown (?:command|option)"
    r"|illegal|missing|no such|not found|permission denied|(?:error|fatal)\b))"
    r")",
)
# A line that ends the way a shell's failure does.
_END_PHRASES = (
    "command not found",
    "no such file or directory",
    "permission denied",
    "not a directory",
    "is a directory",
)
# A short text that says something could not be done; the phrases are looked for as plain
# text first (an alternation tried at every character costs tens of microseconds).
_SAYS_FAILED_PHRASES = (
    "not found",
    "not exist",
    "n't exist",
    "could not",
    "couldn't",
    "cannot",
    "can't",
    "unable to",
    "no such",
    "denied",
    "unauthori",
    "forbidden",
    "invalid",
    "not allowed",
    "timed out",
    "failed",
)
_SAYS_FAILED = re.compile(
    r"\b(?:not found|does not exist|doesn't exist|do not exist|could not|couldn't|cannot"
    r"|can't|unable to|no such|denied|unauthori[sz]ed|forbidden|invalid|not allowed"
    r"|timed out|(?<!\b0 )failed)\b"
)
_SHORT_LINES = 2
_SHORT_CHARS = 300
# Failure text is looked for in the first and last few lines of a result only, where a tool
# says that it failed: a usage line or ``Error: …`` first, a traceback's exception or a shell's
# complaint last. A long output is not scanned end to end (most outcomes are successes).
_EDGE_LINES = 4
_EDGE_CHARS = 600
_FAILED_STATUS = frozenset({"failed", "error", "timeout", "failure"})


def outcome_kind(result: Any, error: Any, failed: bool | None, pattern: Any = None) -> str:
    """``FAILURE``, ``SUCCESS`` or ``SILENT`` for one call's outcome (see the module's rules).

    ``failed``: the runtime's own word, when it has one. ``pattern``: the tool's compiled
    ``failurePattern`` (anything with ``search``), or None. An error is a failure even when its
    text is empty; a result that says nothing is silent even when its exit code is not 0 (grep
    finding no match): there is nothing in it to compare.
    """
    if _given(error):
        return FAILURE
    if says_nothing(result):
        return SILENT
    return FAILURE if is_failure(result, error, failed, pattern) else SUCCESS


def is_failure(result: Any, error: Any, failed: bool | None = None, pattern: Any = None) -> bool:
    """Whether an outcome is a failure (:func:`outcome_kind`)."""
    if _given(error) or failed is True:
        return True
    if failed is False:
        return False
    if is_mapping(result):
        found = _object_flag(result)
        if found is not None:
            return found
    text = text_of(result)
    if not text:
        return False
    lines = _edge_lines(text)
    code = _exit_code(text, lines)
    if code is not None:
        return code != 0
    if pattern is not None:
        return pattern.search(text) is not None
    return _failure_text(text, lines)


def _object_flag(result: Mapping[Any, Any]) -> bool | None:
    is_error = result.get("isError")
    if type(is_error) is bool:
        return is_error
    details: Any = result.get("details")
    if is_mapping(details):
        code = details.get("exitCode")
        if type(code) is int:
            return code != 0
        if details.get("status") in _FAILED_STATUS:
            return True
    if "content" in result:
        return None  # an MCP-style result: its text decides
    for key in ("ok", "success"):
        if type(result.get(key)) is bool:
            return not result[key]
    status = result.get("status")
    if isinstance(status, str) and status.lower() in _FAILED_STATUS:
        return True
    error = result.get("error")
    if error:
        return True
    return None


def _exit_code(text: str, lines: list[str]) -> int | None:
    found = _RETURNCODE.match(text)
    if found is None:
        for line in lines:
            found = _EXIT_LINE.match(line)
            if found is not None:
                break
    return None if found is None else int(found.group(1))


def _edge_lines(text: str) -> list[str]:
    """The first and last ``_EDGE_LINES`` lines that say something (all of a short text)."""
    head = text[:_EDGE_CHARS].lstrip().split("\n", _EDGE_LINES)
    if len(head) <= _EDGE_LINES and len(text) <= _EDGE_CHARS:
        return head  # the whole text
    tail = text[-_EDGE_CHARS:].rstrip().rsplit("\n", _EDGE_LINES)
    return head[:_EDGE_LINES] + tail[-_EDGE_LINES:]


def _failure_text(text: str | None, lines: list[str]) -> bool:
    if not text:
        return False
    for line in lines:
        if _FAILURE_LINE.match(line) is not None:
            return True
        if line.rstrip(" .\t\r").lower().endswith(_END_PHRASES):
            return True
    if len(text) > 2 * _SHORT_CHARS:
        return False
    stripped = text.strip()
    if len(stripped) > _SHORT_CHARS or stripped.count("\n") >= _SHORT_LINES:
        return False
    lowered = stripped.lower()
    return any(phrase in lowered for phrase in _SAYS_FAILED_PHRASES) and bool(
        _SAYS_FAILED.search(lowered)
    )


def text_of(result: Any) -> str | None:
    """The text a result shows: a string, or its content items' text joined (else None)."""
    if isinstance(result, str):
        return result
    if not is_mapping(result):
        return None
    content = result.get("content")
    if not isinstance(content, list):
        return None
    texts = [
        item["text"] for item in content if is_mapping(item) and isinstance(item.get("text"), str)
    ]
    return "\n".join(texts)


# -- outcomes that say nothing ---------------------------------------------------------------

# An output that says nothing whatever the exit status (grep finding no match returns 1).
_EMPTY_TEXT = re.compile(
    r"\s*(?:<returncode>\s*-?\d+\s*</returncode>\s*<output>\s*</output>"
    r"|Your command ran successfully and did not produce any output\.?"
    r"|Output: \(empty\))?\s*"
)
# The longest text an empty output can be without padding (the empty shell wrapper).
_EMPTY_MAX_CORE = 96


def _empty_text(text: str) -> bool:
    # Padding is whitespace: a long text that neither starts nor ends with it is no wrapper.
    if len(text) > _EMPTY_MAX_CORE and not (text[0].isspace() or text[-1].isspace()):
        return False
    return _EMPTY_TEXT.fullmatch(text) is not None


def says_nothing(result: Any) -> bool:
    """No output at all, whatever the exit status: empty, blank, or an empty shell wrapper."""
    kind = type(result)
    if kind is str:
        return _empty_text(result)
    if result is None or result is UNDEFINED or (kind in (list, tuple, dict) and not result):
        return True
    if not is_mapping(result):
        return False
    if not result or result.get("structuredContent"):
        return not result
    details = result.get("details")
    if is_mapping(details) and details.get("aggregated"):
        return False
    content = result.get("content")
    return isinstance(content, list) and all(
        not is_mapping(item) or not isinstance(item.get("text"), str) or _empty_text(item["text"])
        for item in content
    )


# A success that only acknowledges: a line or two, whatever the tool ("Email sent.", "OK",
# "Successfully modified file: x.py (1 replacements).", {"status": "ok"}). Many distinct calls
# answered alike is bulk work, never a loop.
_ACK_MAX_CHARS = 300
_ACK_MAX_LINES = 3


def is_acknowledgement(result: Any) -> bool:
    """Whether a successful result is short: at most a few lines that say it worked."""
    text = text_of(result)
    if text is None:
        text = stable_stringify(result) if result is not UNDEFINED else ""
    text = text.strip()
    return len(text) <= _ACK_MAX_CHARS and text.count("\n") < _ACK_MAX_LINES


# -- the same failure across varied calls -------------------------------------------------------

ARG = "#"
"""What a quote of the call's own arguments reads as in a failure compared across calls: the
same as a number, so that a sequence of names and one of numbers read alike too."""

# How much of the call is looked at for quotes, and how long a quote must be: a bound on the
# work for a call with a huge argument, and no masking of one- and two-letter words.
_MAX_LEAVES = 32
_MAX_VALUE_CHARS = 4096
_MAX_TOKENS = 128
_MIN_TOKEN = 3
_WORD_SPLIT = re.compile(r"\s+")
_QUOTES = "\"'`()[]{}<>,;"
_PIECE_SPLIT = re.compile(r"[/?&=:@|]+")
_CARET_LINE = re.compile(r"^[ \t]*[\^~]+[ \t\^~]*$", re.MULTILINE)
_MAX_FAILURE_CHARS = 1200
_WRAPPER_TAGS = re.compile(r"<returncode>[^<]*</returncode>|</?(?:output|warning)>")


def _leaves(value: Any, out: list[str], depth: int = 0) -> None:
    """The call's string values (and numbers, as text), at most ``_MAX_LEAVES``."""
    if len(out) >= _MAX_LEAVES or depth > 16:
        return
    if isinstance(value, str):
        out.append(value[:_MAX_VALUE_CHARS])
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))
    elif is_mapping(value):
        for item in value.values():
            _leaves(item, out, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _leaves(item, out, depth + 1)


def quoted_tokens(params: Any, text: str | None = None) -> list[str]:
    """What a failure may quote of the call: each argument value whole, its words (split on
    white space, quotes and brackets stripped: the file of ``sed -n 1,10p nofile3``, the source
    of ``python3 -c "print(foo"``) and the pieces of a path or URL; longest first. With
    ``text``, their digits are masked as in a compared failure (``_numbers_masked``), and only
    those found in ``text`` are kept."""
    leaves: list[str] = []
    _leaves(params, leaves)
    tokens: set[str] = set()
    for leaf in leaves:
        whole = leaf if text is None else _numbers_masked(leaf)
        value = whole.strip()
        if len(value) >= _MIN_TOKEN:
            tokens.add(value)
            # Quoted with its own indentation (an editor's old_str): masked whole, or the
            # blanks left around the mask would tell two retries apart.
            if whole != value:
                tokens.add(whole)
        for word in _WORD_SPLIT.split(value):
            word = word.strip(_QUOTES)
            if len(word) < _MIN_TOKEN:
                continue
            tokens.add(word)
            for piece in _PIECE_SPLIT.split(word):
                piece = piece.strip(_QUOTES + ".")
                if len(piece) >= _MIN_TOKEN:
                    tokens.add(piece)
        if len(tokens) >= _MAX_TOKENS:
            break
    if text is not None:
        # A token of nothing but digits reads as a number already.
        tokens = {t for t in tokens if t in text and t.strip("#")}
    return sorted(tokens, key=lambda t: (-len(t), t))[:_MAX_TOKENS]


_DIGIT_TABLE = str.maketrans("0123456789", "##########")
_MARK_RUNS = re.compile("##+")


def _numbers_masked(text: str) -> str:
    """Every run of digits as one ``#`` (a translation, then runs of ``#`` folded: three times
    faster than one substitution of ``\\d+``)."""
    return _MARK_RUNS.sub("#", text.translate(_DIGIT_TABLE))


def failure_text(result: Any, error: Any) -> str:
    """A failure's text as a person reads it: the error's message, or the result's text."""
    if _given(error):
        if isinstance(error, BaseException):
            return str(error) or type(error).__name__
        if isinstance(error, str):
            return error
        value: Any = error
    else:
        value = result
    text = text_of(value)
    if text is None:
        text = stable_stringify(value)
    return text


def mask_failure(text: str, params: Any) -> str:
    """``text`` as a same-failure stretch compares it: every run of digits masked (``#``), the
    caret lines under a quoted source line made one, and, when ``params`` is given, what
    quotes the call's own arguments masked (``#``, like a number).

    Two failures that read alike once masked are the same failure: the agent changed the
    argument, not what went wrong. A long text is compared by its first and last
    ``_MAX_FAILURE_CHARS // 2`` characters, where a failure says what failed.
    """
    text = _comparable_failure(text)
    return text if params is None else _mask_quotes(text, quoted_tokens(params, text))


def _comparable_failure(text: str) -> str:
    if len(text) > _MAX_FAILURE_CHARS:
        half = _MAX_FAILURE_CHARS // 2
        text = text[:half] + "\n…\n" + text[-half:]
    if "<" in text:  # a shell wrapper's tags are no quote of the call
        text = _WRAPPER_TAGS.sub("\n", text)
    text = _numbers_masked(text)
    if "^" in text or "~" in text:
        text = _CARET_LINE.sub("^", text)
    return text.strip()


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _mask_quotes(text: str, tokens: list[str]) -> str:
    """Each whole-word occurrence of a token (longest first) replaced by ``ARG``: the agent's
    "look" is not masked inside the shell's "looking". Found by ``str.find``, not by one
    regular expression of every token, which would try them all at every character."""
    taken = bytearray(len(text))
    spans: list[tuple[int, int]] = []
    for token in tokens:
        at = text.find(token)
        if at < 0:
            continue
        check_start = _is_word_char(token[0])
        check_end = _is_word_char(token[-1])
        size = len(token)
        while at >= 0:
            end = at + size
            if (
                not (check_start and at > 0 and _is_word_char(text[at - 1]))
                and not (check_end and end < len(text) and _is_word_char(text[end]))
                and taken.find(1, at, end) < 0
            ):
                taken[at:end] = b"\x01" * size
                spans.append((at, end))
            at = text.find(token, at + 1)
    if not spans:
        return text
    spans.sort()
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts.append(text[last:start])
        parts.append(ARG)
        last = end
    parts.append(text[last:])
    return _MARK_RUNS.sub(ARG, "".join(parts))  # a quote next to a number reads as one


FAILURE_KEY_PREFIX: Final = "failure:"
"""How a failure's stretch key starts (a success's is its outcome hash, plain hex)."""


def failure_key(result: Any, error: Any, params: Any) -> str:
    """What a same-failure stretch compares: ``failure:<as it reads>:<quotes masked>``, the
    digests of the failure text with only its digits masked, and with the quotes of the call's
    arguments masked too (:func:`same_failure` matches either)."""
    text = _comparable_failure(failure_text(result, error))
    masked = _mask_quotes(text, quoted_tokens(params, text))
    plain = digest_stable(text)
    return f"{FAILURE_KEY_PREFIX}{plain}:{plain if masked is text else digest_stable(masked)}"


def same_failure(key: str, other: str) -> bool:
    """Whether two stretch keys name the same outcome: equal, or two failures that read alike
    as they are or once each masks its own call's quotes. Both halves are asked because each
    call masks its own arguments: a failure output that is the same for every call (a broken
    tool) can quote one call's argument words and not another's."""
    if key == other:
        return True
    if not (key.startswith(FAILURE_KEY_PREFIX) and other.startswith(FAILURE_KEY_PREFIX)):
        return False
    plain, _, masked = key[len(FAILURE_KEY_PREFIX) :].partition(":")
    other_plain, _, other_masked = other[len(FAILURE_KEY_PREFIX) :].partition(":")
    return plain == other_plain or masked == other_masked


_compiled: dict[str, Any] = {}


def compiled_pattern(pattern: str) -> Any:
    """A tool's ``failurePattern`` compiled by RE2 (linear time whatever the pattern), once a
    process; the config has checked it already."""
    found = _compiled.get(pattern)
    if found is None:
        from loopwarden.core.volatile import _compile_user

        found = _compiled[pattern] = _compile_user(pattern)
    return found

"""The hook's own work: one coding-CLI hook event in, that CLI's answer out.

    loopwarden hook claude-code|codex|gemini-cli [--config FILE] [--set K=V]... [--db FILE]
        [--scope user|project]

One hook event (JSON) on stdin; the answer in that CLI's format on stdout; exit code 0. It fails
open: a malformed or unknown event, a broken config or an unusable state file lets the tool
call proceed, with one line on stderr. The hook process (``_client``) calls :func:`main` when it
works alone, the resident server (``_server``) calls :func:`answer_for` for each event it is
handed, and ``loopwarden hook`` as the command line parses it (``cli/hook_cmd.py``, for
``--help`` and usage errors) calls :func:`run`: one code for all three.

It runs on every tool call, so it imports only what it needs (no argparse, no pydantic, no rich;
the rest when an event needs it): the config is resolved leniently here and checked strictly by
``hooks install`` and ``hooks status``.
"""

from __future__ import annotations

import os
import sys

from loopwarden.hooks._args import HookArgs, parse_args
from loopwarden.hooks._stdin import MAX_EVENT_BYTES, read_event

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, BinaryIO, Literal

    from loopwarden.core.config import ResolvedConfig
    from loopwarden.hooks._protocol import HookEvent
    from loopwarden.stores.sqlite import SQLiteStore

    _Unread = Literal["unread"]

__all__ = ["MAX_EVENT_BYTES", "HookArgs", "answer_for", "handle", "hook_config", "main", "run"]

DEFAULT_PROFILE = "recommended"
"""The profile the hooks use without a config file (why: docs/coding-agents.md)."""


def main(argv: list[str], data: bytes | _Unread | None = "unread") -> int:
    """``loopwarden hook ARGV`` in this process (the caller checked ``parse_args(argv)``).

    ``data``: the event, when the caller read stdin already (None: it was over the cap).
    """
    args = parse_args(argv)
    if args is None:  # the caller's check keeps this from happening; answer nothing
        return 0
    return run(args, data)


MAX_TEXT_CHARS = 256 * 1024
"""A longer string in an event is compared by its first characters and a digest of the whole."""


def run(args: HookArgs, data: bytes | _Unread | None = "unread") -> int:
    """Handle one event from stdin; always exit 0 (the answer, if any, is on stdout)."""
    from loopwarden.hooks._scope import skip

    if skip(args.agent, args.scope):  # switched off, or the project's own install decides
        sys.stdin.buffer.read()  # the CLI is writing the event: take it, never a broken pipe
        return 0
    from loopwarden.core import _lazylog

    _lazylog.on_first_use(_quiet_logging)  # logging only when it logs
    if data == "unread":
        try:
            data = read_event(sys.stdin.buffer)
        except OSError:
            data = b""  # no stdin: not JSON, said below
    _respond(args, data, sys.stdout.buffer)
    return 0


def serving() -> None:
    """Prepare this process to answer many events (the resident server): logging set up once,
    state files kept open."""
    from loopwarden.core import _lazylog

    _lazylog.on_first_use(_quiet_logging)
    _serving[:] = [True]


def answer_for(argv: list[str], data: bytes | None) -> bytes:
    """What ``loopwarden hook ARGV`` prints for the event ``data`` (the resident server's work).

    Its stderr lines go to ``sys.stderr`` as the caller set it for this event.
    """
    args = parse_args(argv)
    if args is None:  # the client sends only arguments it could read; nothing to answer
        return b""
    import io

    out = io.BytesIO()
    _respond(args, data, out)
    return out.getvalue()


def _respond(args: HookArgs, data: bytes | None, stream: BinaryIO) -> None:
    """Answer the event ``data`` on ``stream``; whatever happens, the tool call proceeds."""
    _agent[:] = [args.agent]
    _export_telemetry()
    try:
        write_answer(stream, handle(args.agent, data, args.config, args.overrides, args.db))
    except Exception as exc:
        from loopwarden.core._lazylog import get_logger

        get_logger("loopwarden.hooks").error(
            "internal error (%s); the call proceeds", _describe(exc)
        )


_telemetry_checked: list[bool] = []


def _export_telemetry() -> None:
    """Loop events to OTLP when ``OTEL_EXPORTER_OTLP_*`` names an endpoint (checked once per
    process: a hook alone or the resident server); the SDK loads at the first event only."""
    if _telemetry_checked:
        return
    _telemetry_checked.append(True)
    if any(name.startswith("OTEL_EXPORTER_OTLP") for name in os.environ):
        from loopwarden.otel import export_from_environment

        export_from_environment()


def write_answer(stream: BinaryIO, answer: str) -> None:
    """Print the answer as UTF-8 (as ASCII escapes if it holds what UTF-8 cannot carry)."""
    if not answer:
        return
    try:
        data = answer.encode("utf-8")
    except UnicodeEncodeError:
        import json

        data = json.dumps(json.loads(answer)).encode("ascii")
    stream.write(data + b"\n")
    stream.flush()


def handle(
    agent: str, text: str | bytes | None, config: str | None, overrides: list[str], db: str | None
) -> str:
    """The answer to print for one event (``""``: nothing); failures are logged, never raised."""
    import json

    from loopwarden.core._lazylog import get_logger
    from loopwarden.hooks._protocol import HookInputError, handles, parse_event

    log = get_logger("loopwarden.hooks")
    if text is None:
        log.error(
            "the hook event on stdin is larger than %d MiB; the call proceeds unchecked",
            MAX_EVENT_BYTES >> 20,
        )
        return ""
    if isinstance(text, bytes):  # the CLIs send UTF-8, whatever the locale says
        text = text.decode("utf-8", errors="replace")
    try:
        event = parse_event(agent, tame(json.loads(text), text))
    except RecursionError:
        log.error("the hook event on stdin is nested too deeply to read; the call proceeds")
        return ""
    except json.JSONDecodeError as exc:
        log.error("the hook event on stdin is not JSON (%s); the call proceeds", exc)
        return ""
    except HookInputError as exc:
        log.error("%s; the call proceeds", exc)
        return ""
    if event.kind == "ignored":
        if not handles(agent, event.name):
            log.error("ignoring hook event %r: loopwarden does not handle it", event.name)
        return ""
    try:
        resolved = hook_config(config, overrides)
    except (OSError, ValueError) as exc:
        log.error("config: %s; the call proceeds unguarded", exc)
        return ""
    return _guarded(agent, event, resolved, db)


def _guarded(agent: str, event: HookEvent, config: ResolvedConfig, db: str | None) -> str:
    """Run the event through the guard and its state; a problem with the state fails open."""
    from pathlib import Path

    from loopwarden.core.canonical import _set_fast_encoder
    from loopwarden.hooks._state import clear_problem, private_files
    from loopwarden.records import default_db_path

    _set_fast_encoder("stdlib")  # exact like orjson, and one import less for one or two hashes
    path = Path(db) if db else default_db_path()
    try:
        with private_files():
            answer = _keyed(agent, event, config, path, own_folder=not db)
    except Exception as exc:  # the guard never breaks a tool call because of its own state
        if _LOCKED in str(exc):  # another process held the lock too long: this call only
            _log_state(_describe(exc))
            return ""
        return _state_problem(agent, event, path, _describe(exc))
    clear_problem(path)
    return answer


def _keyed(
    agent: str, event: HookEvent, config: ResolvedConfig, path: Path, *, own_folder: bool
) -> str:
    """The answer, every digest keyed with the user's secret (the signatures it stores)."""
    from loopwarden.core.canonical import _set_hash_key
    from loopwarden.hooks._runner import HookRunner
    from loopwarden.hooks._state import prepare

    _set_hash_key(prepare(path, own_folder=own_folder))
    try:
        return HookRunner(agent, config, path, _kept_store(path)).handle(event).stdout
    finally:
        _set_hash_key(None)  # the library in this process hashes plainly again


# The resident server keeps each state file open between events: closing the last connection
# to a WAL database checkpoints it (a sync to disk), which would cost more than the event.
_serving: list[bool] = []
_stores: dict[Path, tuple[tuple[int, int] | None, SQLiteStore]] = {}


def _kept_store(path: Path) -> SQLiteStore | None:
    """The server's open store of ``path`` (None in a hook working alone: one event, then exit).

    Reopened when the file was replaced or removed (a user moving a broken file away).
    """
    if not _serving:
        return None
    from loopwarden.hooks._runner import state_store

    try:
        info = os.stat(path)
        identity: tuple[int, int] | None = (info.st_dev, info.st_ino)
    except OSError:
        identity = None
    kept = _stores.get(path)
    if kept is not None and identity is not None and kept[0] == identity:
        return kept[1]
    if kept is not None:
        kept[1].close()
    store = state_store(path)
    _stores[path] = (identity, store)
    return store


_LOCKED = "is locked by another process"  # how the store describes a lock wait that timed out


def _log_state(problem: str) -> None:
    from loopwarden.core._lazylog import get_logger

    get_logger("loopwarden.hooks").error("state: %s; the call proceeds", problem)


def _state_problem(agent: str, event: HookEvent, db: Path, problem: str) -> str:
    """Log the problem, record it for ``hooks status``, and tell the user once per session."""
    from loopwarden.hooks._protocol import notice
    from loopwarden.hooks._state import record_problem

    _log_state(problem)
    first = record_problem(db, agent, f"{agent}:{event.session_id}", problem)
    if first is None:  # nowhere to remember who was told: tell at each new prompt
        first = event.kind == "prompt"
    if not first:
        return ""
    return notice(
        f"loopwarden cannot use its state ({problem}). Tool calls are let through unchecked "
        "until this is fixed; 'loopwarden hooks status' shows the problem."
    ).stdout


def tame(payload: Any, text: str) -> Any:
    """The event with what loopwarden cannot store or would hash slowly made harmless.

    A lone surrogate (a ``\\ud800`` escape in the JSON) becomes U+FFFD, so the answer, the
    state and the records can carry it; a string longer than :data:`MAX_TEXT_CHARS` becomes
    its beginning and a digest of the whole: equal exactly when the strings are, and hashed
    in time however large the tool's output was. Untouched (no walk) when neither can occur.
    """
    if not isinstance(payload, (dict, list)):
        return payload
    if len(text) <= MAX_TEXT_CHARS and "\\ud" not in text and "\\uD" not in text:
        return payload
    stack: list[Any] = [payload]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(value, str):
                node[key] = _tame_text(value)
            elif isinstance(value, (dict, list)):
                stack.append(value)
    return payload


def _tame_text(value: str) -> str:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        data = value.encode("utf-8")
    if len(value) <= MAX_TEXT_CHARS:
        return value
    import hashlib

    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    head = value[: MAX_TEXT_CHARS // 4]
    return f"{head}\n[... {len(value)} characters in all, digest {digest}]"


def hook_config(path: str | None, overrides: list[str]) -> ResolvedConfig:
    """The resolved config of a hook: the file's block and ``--set``s.

    A config file means what it says, as in OpenClaw (its own profile, else ``openclaw``), so an
    OpenClaw config runs exactly; without a file the ``--set`` keys go over the default profile.
    Detection is on unless the file or a ``--set`` turns it off. Lenient like the runtime
    resolution everywhere (invalid values fall back to defaults); ``hooks install`` and
    ``hooks status`` check the same inputs strictly.
    """
    from loopwarden._overrides import apply_overrides
    from loopwarden.core.config import (
        effective_config,
        is_full_config,
        read_config_file,
        resolve_config,
    )

    block: dict[str, object] = {}
    if path:
        raw = read_config_file(path)
        if not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")
        block = dict(effective_config(raw, None) if is_full_config(raw) else raw)
    else:
        block["profile"] = DEFAULT_PROFILE  # a --set profile=... still wins
    block = apply_overrides(block, overrides)
    block.setdefault("enabled", True)
    return resolve_config(block)


def _describe(exc: BaseException) -> str:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return str(message).splitlines()[0]


_agent: list[str] = ["?"]  # the CLI of the event being answered (the server answers them all)


class _CurrentStderr:
    """Writes to whatever ``sys.stderr`` is now (the server points it at each event's own)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _quiet_logging() -> None:
    """Problems go to stderr as one line each; the loop events go to the run records only."""
    import logging

    from loopwarden._terminal import printable

    class OneLine(logging.Formatter):
        """``loopwarden hook AGENT: message`` on one line (a traceback would flood the CLI)."""

        def format(self, record: logging.LogRecord) -> str:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                text = f"{text}: {_describe(record.exc_info[1])}"
            # Escaped: a --db path or a name may hold ESC or BEL, which a terminal would obey.
            return printable(f"loopwarden hook {_agent[0]}: " + (text.splitlines() or [""])[0])

    handler = logging.StreamHandler(_CurrentStderr())
    handler.setFormatter(OneLine())
    handler.setLevel(logging.ERROR)
    # The guard's line per loop event ("loop %s: ..."), not its own failures ("loop state ...").
    handler.addFilter(lambda record: not str(record.msg).startswith("loop %s: "))
    root = logging.getLogger("loopwarden")
    root.addHandler(handler)
    root.propagate = False

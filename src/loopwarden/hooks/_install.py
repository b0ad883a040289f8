"""Where each coding CLI keeps its hooks, and merging loopwarden's entries into that file.

The merge functions are pure (a settings dict in, a new one out): they touch only the hook
entries whose command runs ``loopwarden hook AGENT``, keep every other hook and setting as it
was, and installing twice gives the same file as installing once.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopwarden.hooks._paths import user_settings

# Events each CLI must send to loopwarden, with the matcher of the entry ("" = no matcher).
_EVENTS: dict[str, tuple[tuple[str, str], ...]] = {
    "claude-code": (
        ("UserPromptSubmit", ""),
        ("PreToolUse", "*"),
        ("PostToolUse", "*"),
        ("PostToolUseFailure", "*"),
        ("PostCompact", ""),
        ("SessionStart", "compact"),  # only the start that follows a compaction
        ("Stop", ""),
        ("SubagentStop", ""),
        ("SessionEnd", ""),
    ),
    "codex": (
        ("UserPromptSubmit", ""),
        ("PreToolUse", "*"),
        ("PostToolUse", "*"),
        ("PostCompact", ""),
        ("SessionStart", ""),
        ("Stop", ""),
        ("SessionEnd", ""),
    ),
    "gemini-cli": (
        ("BeforeAgent", ""),
        ("BeforeTool", "*"),
        ("AfterTool", "*"),
        ("AfterAgent", ""),
        ("SessionEnd", ""),
    ),
}

_TIMEOUT_SECONDS = 30  # far above the hook's milliseconds; the CLI kills a hung hook after it
# Codex caps SessionEnd hooks at 3 s and says so on every run when asked for more.
_EVENT_TIMEOUTS = {"SessionEnd": 3}


class SettingsError(ValueError):
    """A settings file loopwarden will not rewrite; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    """One settings file of one CLI: where it is and which scope it is."""

    agent: str
    scope: str  # "user" or "project"
    path: Path


def settings_path(agent: str, project: Path | None) -> Target:
    """The settings file ``hooks install`` writes: the project's, or the user's (``None``)."""
    if project is not None:
        folder = {"claude-code": ".claude", "codex": ".codex", "gemini-cli": ".gemini"}[agent]
        name = "hooks.json" if agent == "codex" else "settings.json"
        return Target(agent, "project", project.resolve() / folder / name)
    return Target(agent, "user", Path(user_settings(agent)))


def hook_command(
    agent: str,
    options: list[str],
    program: list[str] | None = None,
    *,
    package: Path | None = None,
) -> str:
    """The command line the CLI runs: this loopwarden, by absolute path, whatever PATH it has.

    It fails open whatever breaks: the program runs with its stderr kept aside, and when it
    does not exit 0 (a program or interpreter gone, a damaged install: 126, 127, a traceback)
    the command still exits 0 with no answer and one short line on stderr, so the CLI goes on
    unguarded instead of refusing (Gemini CLI takes a hook that fails for a refusal of every
    prompt). When it runs, its answer (stdout) goes straight to the CLI and its stderr lines
    follow. ``package`` is unused (kept for callers of the older form).
    """
    words = [*(program or this_program()), "hook", agent, *options]
    return _fail_open(words, agent)


_FAILED = (
    "loopwarden hook {agent} could not run (exit $s), so the call proceeds unchecked: "
    "run loopwarden hooks status"
)


def _fail_open(words: list[str], agent: str) -> str:
    """``words`` run by a POSIX shell: stdout to the CLI, stderr held, exit 0 whatever happens."""
    message = _FAILED.format(agent=agent)
    return (
        f"{{ e=$({shlex.join(words)} 2>&1 >&3 3>&-); s=$?; }} 3>&1; "
        """if [ "$s" = 0 ]; then [ -z "$e" ] || printf '%s\\n' "$e" >&2; """
        f'else echo "{message}" >&2; fi; exit 0'
    )


def _guard(words: list[str], package: Path | None) -> str:
    """The shell test of the older form (``if [ -x PROGRAM ]; then exec ...; fi``)."""
    tests = [f"[ -x {shlex.quote(words[0])} ]"]
    if words[1:3] == ["-m", "loopwarden"]:
        folder = package or Path(__file__).resolve().parent.parent
        tests.append(f"[ -f {shlex.quote(str(folder / '__main__.py'))} ]")
    return " && ".join(tests)


def _wrap(words: list[str], guard: str) -> str:
    return f"if {guard}; then exec {shlex.join(words)}; fi"


def this_program() -> list[str]:
    """How to start the loopwarden that is running now, by absolute path.

    The interpreter is named as it was started, not with its symbolic links resolved: a virtual
    environment's ``bin/python`` is a link to the base interpreter, and only started through
    the link does it run with the environment's packages (loopwarden among them).
    """
    script = Path(sys.argv[0])
    if script.name == "loopwarden" and script.is_file():
        return [str(script.resolve())]
    return [os.path.abspath(sys.executable), "-m", "loopwarden"]


@dataclass(frozen=True)
class HookCommand:
    """A command ``hooks install`` wrote, read back: its program, agent, options, the files its
    guard tests for (older forms; empty for the bare one), and its form: ``fail-open`` (this
    loopwarden's), ``guarded`` (``if [ -x ... ]; then exec ...``) or ``bare``."""

    program: list[str]
    agent: str
    options: list[str]
    needs: list[str]
    form: str = "fail-open"


_WRAPPED = re.compile(r"if (?P<guard>.+?); then exec (?P<command>.+); fi", re.DOTALL)
_FAIL_OPEN = re.compile(
    r"\{ e=\$\((?P<command>.+?) 2>&1 >&3 3>&-\); s=\$\?; \} 3>&1; .*", re.DOTALL
)
_GUARD_TEST = re.compile(r"\[ -[xf] (?P<path>.+?) \]")
_OPTIONS = frozenset({"--config", "--set", "--db", "--scope"})


def parse_command(command: str) -> HookCommand | None:
    """The parts of a command exactly as ``hooks install`` writes it; ``None`` for any other
    command, including a user's own wrapper around ``loopwarden hook`` (never ours to touch)."""
    fail_open = _FAIL_OPEN.fullmatch(command)
    wrapped = None if fail_open else _WRAPPED.fullmatch(command)
    inner = fail_open or wrapped
    words = command_words(inner.group("command") if inner else command)
    if words[:1] and Path(words[0]).name == "loopwarden":
        program = words[:1]
    elif words[1:3] == ["-m", "loopwarden"]:
        program = words[:3]
    else:
        return None
    rest = words[len(program) :]
    if rest[:1] != ["hook"] or len(rest) < 2 or rest[1] not in _EVENTS:
        return None
    options = rest[2:]
    if len(options) % 2 or any(name not in _OPTIONS for name in options[::2]):
        return None
    if fail_open is not None:
        if _fail_open(words, rest[1]) != command:
            return None
        return HookCommand(program, rest[1], options, [words[0]])
    if wrapped is None:  # written by an older loopwarden: the bare command
        if shlex.join(words) != command:
            return None
        return HookCommand(program, rest[1], options, [], "bare")
    guard = wrapped.group("guard")
    needs = [(command_words(m.group("path")) or [""])[0] for m in _GUARD_TEST.finditer(guard)]
    expected = _guard(words, Path(needs[1]).parent if len(needs) > 1 else None)
    if not needs or needs[0] != words[0] or _wrap(words, expected) != command:
        return None
    return HookCommand(program, rest[1], options, needs, "guarded")


def is_ours(entry: object, agent: str) -> bool:
    """Whether a hook entry is loopwarden's for ``agent``, exactly as ``hooks install`` wrote it."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("command"), str):
        return False
    parsed = parse_command(entry["command"])
    return parsed is not None and parsed.agent == agent


def install(settings: Mapping[str, Any], agent: str, command: str) -> dict[str, Any]:
    """``settings`` with loopwarden's entries for ``agent`` (replacing any earlier ones)."""
    merged = uninstall(settings, agent)
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("its 'hooks' is not an object; fix or remove it, then install again")
    for event, matcher in _EVENTS[agent]:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsError(f"its 'hooks.{event}' is not a list; fix it, then install again")
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [_entry(agent, command, _EVENT_TIMEOUTS.get(event, _TIMEOUT_SECONDS))]
        groups.append(group)
    return merged


def _entry(agent: str, command: str, timeout: int) -> dict[str, Any]:
    if agent == "gemini-cli":  # milliseconds, and a name the CLI shows in its messages
        return {
            "type": "command",
            "command": command,
            "name": "loopwarden",
            "timeout": timeout * 1000,
        }
    return {"type": "command", "command": command, "timeout": timeout}


def uninstall(settings: Mapping[str, Any], agent: str) -> dict[str, Any]:
    """``settings`` without loopwarden's entries for ``agent``; everything else untouched."""
    result = _copy(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict) or not hooks:
        return dict(result)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list) or not groups:
            continue  # what was empty before stays (only what held loopwarden's goes)
        kept = [g for g in (_without_ours(g, agent) for g in groups) if g is not None]
        if kept:
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks:
        del result["hooks"]
    return dict(result)


def _without_ours(group: object, agent: str) -> object | None:
    """A matcher group without loopwarden's entries; None when only those were in it."""
    if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
        return group
    entries = group["hooks"]
    kept = [e for e in entries if not is_ours(e, agent)]
    if len(kept) == len(entries):
        return group
    return {**group, "hooks": kept} if kept else None


def installed(settings: Mapping[str, Any], agent: str) -> dict[str, list[str]]:
    """The commands of loopwarden's entries for ``agent``, by event."""
    found: dict[str, list[str]] = {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, Mapping):
        return found
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            entries = group.get("hooks") if isinstance(group, Mapping) else None
            for entry in entries if isinstance(entries, list) else []:
                if is_ours(entry, agent):
                    found.setdefault(str(event), []).append(str(entry["command"]))
    return found


def missing_events(found: Mapping[str, list[str]], agent: str) -> list[str]:
    """The events loopwarden needs that have no loopwarden entry."""
    return [event for event, _ in _EVENTS[agent] if event not in found]


def _copy(value: Any) -> Any:
    """A deep copy of parsed JSON (numbers stay :class:`_Number`, their own text)."""
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value


# -- the settings file itself ------------------------------------------------------------------
#
# The file is the user's: it is read and written back so that nothing in it changes but
# loopwarden's entries. Numbers keep their own text (``1e400`` stays ``1e400``, no digit of a
# long number is lost), the file's own indentation is kept, a symbolic link is followed (the
# file it points to changes, the link stays), a read-only file is left alone, and the bytes it
# had before loopwarden first changed it are kept next to it and put back by ``uninstall``.

BACKUP_SUFFIX = ".loopwarden-backup"


class _Number(str):
    """A JSON number's own text, written back exactly as it was read."""


@dataclass
class SettingsFile:
    """A settings file as read: where it really is, its bytes and its data."""

    path: Path  # as the CLI names it (perhaps a symbolic link)
    real: Path  # the file written (the link's target)
    raw: bytes | None  # None: there is no file
    data: dict[str, Any]

    @property
    def backup(self) -> Path:
        """Where the bytes from before loopwarden's first change are kept."""
        return self.real.with_name(self.real.name + BACKUP_SUFFIX)


def read_settings(path: Path) -> dict[str, Any]:
    """A settings file as a dict (``{}`` when absent); refuses what it could not write back."""
    return open_settings(path).data


def open_settings(path: Path) -> SettingsFile:
    """Read a settings file (absent: no bytes, ``{}``); :class:`SettingsError` says why not."""
    real = Path(os.path.realpath(path))
    try:
        raw = real.read_bytes()
    except FileNotFoundError:
        return SettingsFile(path, real, None, {})
    except OSError as exc:
        raise SettingsError(f"cannot read it: {exc.strerror or exc}") from None
    return SettingsFile(path, real, raw, parse_settings(raw))


def parse_settings(raw: bytes) -> dict[str, Any]:
    """The data of a settings file's bytes (``{}`` for an empty file)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"it is not UTF-8 text ({exc})") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(
            text,
            parse_float=_Number,
            parse_int=_Number,
            parse_constant=_no_constant,
            object_pairs_hook=_unique_keys,
        )
    except ValueError as exc:
        if isinstance(exc, SettingsError):
            raise
        raise SettingsError(
            f"it is not plain JSON ({exc}); loopwarden rewrites only plain JSON, so that "
            "comments or anything else in it are never lost: fix it, or add the entries "
            "`loopwarden hooks install --print` shows by hand"
        ) from None
    if not isinstance(data, dict):
        raise SettingsError(f"it holds a JSON {type(data).__name__}, not an object")
    return data


def _no_constant(name: str) -> Any:
    raise SettingsError(
        f"it holds {name}, which is not JSON (the CLI could not read the file either): fix it"
    )


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:  # the CLI keeps one of them: which is not loopwarden's to choose
            raise SettingsError(
                f"the key {key!r} appears twice in one object; keep the one you mean, "
                "then install again"
            )
        found[key] = value
    return found


def dump_settings(data: Mapping[str, Any], like: bytes | None = None) -> bytes:
    """``data`` as the file's bytes, formatted like ``like`` (the file's current bytes)."""
    text = like.decode("utf-8", "replace") if like else ""
    indent: str | None = "  "
    separators = (",", ": ")
    if text.strip() and "\n" not in text.strip():  # all on one line
        indent = None
        separators = (", ", ": ") if re.search(r'[,:] "', text) else (",", ":")
    else:
        found = re.search(r"\n([ \t]+)\S", text)
        if found:
            indent = found.group(1)
    numbers: list[str] = []
    token = f"loopwarden-number-{os.urandom(6).hex()}-"

    def swap(value: Any) -> Any:
        if isinstance(value, _Number):
            numbers.append(str(value))
            return f"{token}{len(numbers) - 1}"
        if isinstance(value, Mapping):
            return {key: swap(item) for key, item in value.items()}
        if isinstance(value, list):
            return [swap(item) for item in value]
        return value

    body = json.dumps(swap(data), indent=indent, separators=separators, ensure_ascii=False)
    body = re.sub(f'"{token}(\\d+)"', lambda m: numbers[int(m.group(1))], body)
    # A lone surrogate (read from a \\udXXX escape) cannot be UTF-8: write it escaped again.
    body = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", body)
    end = "\n" if not text or text.endswith("\n") else ""
    return (body + end).encode("utf-8")


def plain(data: Any) -> Any:
    """Parsed settings with every number as a Python number (for comparing two files)."""
    if isinstance(data, _Number):
        return json.loads(data, parse_constant=str)
    if isinstance(data, Mapping):
        return {key: plain(item) for key, item in data.items()}
    if isinstance(data, list):
        return [plain(item) for item in data]
    return data


def write_settings(file: SettingsFile, data: Mapping[str, Any], agent: str) -> None:
    """Write ``data`` into the settings file, keeping a backup of what it held before."""
    payload = dump_settings(data, file.raw)  # before touching anything: it may fail
    if payload == file.raw:
        return
    _check_writable(file)
    if file.raw is not None and not _backup_is_current(file, agent):
        _write_bytes(file.backup, file.raw, file)
    _write_bytes(file.real, payload, file)


def restore_settings(file: SettingsFile, data: Mapping[str, Any], agent: str) -> str:
    """Write ``data`` (the file without loopwarden's entries) as the user's bytes again.

    When the backup holds the same settings, its bytes go back exactly; a file loopwarden
    created (no backup) that holds nothing else is removed. Returns what was done.
    """
    _check_writable(file)
    if file.backup.is_file() and _backup_is_current(file, agent, data):
        _write_bytes(file.real, file.backup.read_bytes(), file)
        file.backup.unlink()
        return "restored"
    if not data and not file.backup.exists():
        try:
            file.real.unlink()
        except OSError as exc:
            raise _write_error(file, exc) from None
        return "removed"
    _write_bytes(file.real, dump_settings(data, file.raw), file)
    return "rewritten"


def _backup_is_current(
    file: SettingsFile, agent: str, without_ours: Mapping[str, Any] | None = None
) -> bool:
    """Whether the backup is the file as it was, but for loopwarden's entries."""
    try:
        kept = parse_settings(file.backup.read_bytes())
    except (OSError, SettingsError):
        return False
    if installed(kept, agent):
        return False
    current = uninstall(file.data, agent) if without_ours is None else without_ours
    return bool(plain(_settled(kept)) == plain(_settled(current)))


def _settled(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings without empty hook lists (an uninstall drops the lists it emptied)."""
    result = dict(settings)
    hooks = result.get("hooks")
    if isinstance(hooks, Mapping):
        kept = {event: groups for event, groups in hooks.items() if groups != []}
        if kept:
            result["hooks"] = kept
        else:
            del result["hooks"]
    return result


def _check_writable(file: SettingsFile) -> None:
    if file.raw is None:
        return
    mode = file.real.stat().st_mode
    if not mode & stat.S_IWUSR or not os.access(file.real, os.W_OK):
        raise SettingsError(
            f"it is read-only (mode {stat.S_IMODE(mode):04o}), so loopwarden leaves it as it "
            "is: make it writable (chmod u+w) and run the command again, or add the entries "
            "`loopwarden hooks install --print` shows by hand"
        )


def _write_bytes(target: Path, payload: bytes, file: SettingsFile) -> None:
    """Replace ``target`` atomically (a crash leaves the old file or the new one, never half)."""
    temporary = target.with_name(f".{target.name}.loopwarden-{os.getpid()}.tmp")
    mode = stat.S_IMODE(file.real.stat().st_mode) if file.raw is not None else 0o644
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            with os.fdopen(descriptor, "wb") as out:
                out.write(payload)
            os.chmod(temporary, mode)  # whatever the umask
            os.replace(temporary, target)
        finally:
            if temporary.exists():
                temporary.unlink()
    except OSError as exc:
        raise _write_error(file, exc) from None


def _write_error(file: SettingsFile, exc: OSError) -> SettingsError:
    folder = file.real.parent
    if isinstance(exc, PermissionError):
        return SettingsError(
            f"its folder {folder} is not writable ({exc.strerror}): give yourself write "
            "access to it, or add the entries `loopwarden hooks install --print` shows by hand"
        )
    return SettingsError(f"cannot write it in {folder}: {exc.strerror or exc}")


def command_words(command: str) -> list[str]:
    """A hook command split as a shell would (``[]`` when it cannot be read)."""
    try:
        return shlex.split(command)
    except ValueError:
        return []

"""Fast start: what a short-lived process (a coding-agent hook, ``--version``) imports.

A hook runs once per tool call, so each import it does not need is paid on every call. These
tests run real processes and read the modules they imported from ``python -X importtime``
(every import, stdlib or not, is one line on stderr). No timing is asserted here; the wall
times are measured by bench/bench_hook_start.py.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import loopwarden
from loopwarden.cli import _COMMANDS
from loopwarden.core._config_schema import block_problems
from loopwarden.core.config import PROFILES, RECOMMENDED_PROFILE, plainly_valid

from _support import wait_for_hook_server

# Strict validation, terminal output and JSON5: needed by humans checking configs, never by a
# hook answering a tool call.
HEAVY = frozenset({"pydantic", "pydantic_core", "rich", "json5", "loopwarden.core._config_schema"})
EVENTS = Path(__file__).parent / "data" / "coding_agents"


# Runs `-c CODE` or `-m MODULE` as python would, then writes sys.modules to a file at exit
# (atexit runs on SystemExit too). Not `-X importtime`: it misses importlib.import_module().
_WRAPPER = """
import atexit, json, runpy, sys
out, mode, target = sys.argv[1:4]
del sys.argv[1:4]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
if mode == "-m":
    sys.argv[0] = target
    runpy.run_module(target, run_name="__main__", alter_sys=True)
else:
    exec(compile(target, "<test>", "exec"), {"__name__": "__main__"})
"""


def imported(
    args: list[str], tmp_path: Path, stdin: str | None = None, env: dict[str, str] | None = None
) -> set[str]:
    """The modules in sys.modules when ``python ARGS`` (``-c CODE`` or ``-m MODULE``) exits 0."""
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(out), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    names: list[str] = json.loads(out.read_text())
    return set(names)


def test_import_loopwarden_loads_no_submodule(tmp_path: Path) -> None:
    names = imported(["-c", "import loopwarden"], tmp_path)
    assert "loopwarden" in names
    assert not names & HEAVY
    assert sorted(n for n in names if n.startswith("loopwarden.")) == ["loopwarden._version"]


def test_public_names_still_import_and_load_only_their_modules(tmp_path: Path) -> None:
    code = "from loopwarden import LoopGuard, resolve_config; resolve_config({'enabled': True})"
    names = imported(["-c", code], tmp_path)
    assert "loopwarden.guard" in names
    assert not names & HEAVY


def test_version_loads_no_command_module(tmp_path: Path) -> None:
    names = imported(["-m", "loopwarden", "--version"], tmp_path)
    assert not names & HEAVY
    assert "argparse" not in names  # a bare --version is answered before any parser is built
    assert not {n for n in names if n.startswith("loopwarden.cli.")}
    assert "loopwarden.guard" not in names


def test_version_says_what_argparse_says() -> None:
    """The bare --version answer matches argparse's version action (--version twice uses it)."""
    outputs = []
    for args in (["--version"], ["--version", "--version"]):
        done = subprocess.run(
            [sys.executable, "-m", "loopwarden", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, "")
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith(f"loopwarden {loopwarden.__version__} (")


def _state_env(tmp_path: Path, *, server: bool = False) -> dict[str, str]:
    return dict(
        os.environ,
        XDG_STATE_HOME=str(tmp_path / "state"),
        LOOPWARDEN_HOOK_SERVER="1" if server else "0",
    )


# What the hook does, in-process: the guard over the SQLite session store, with a config file
# read and validated as `--config FILE` does.
HOOK_WORK = """
import json, sys
from loopwarden.core.config import load_config
from loopwarden.guard import LoopGuard
from loopwarden.stores.sqlite import SQLiteStore
event = json.load(sys.stdin)
config = load_config(sys.argv[1]).resolve()
guard = LoopGuard(config, store=SQLiteStore())
decision = guard.before_tool_call(
    event["session_id"], event["tool_name"], event["tool_input"], run_id=event.get("prompt_id")
)
print(decision.action)
"""


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_guard_with_a_config_file_and_sqlite_state_loads_nothing_heavy(
    tmp_path: Path, agent: str
) -> None:
    config = tmp_path / "openclaw.json"
    block = {**RECOMMENDED_PROFILE, "profile": "recommended", "historySize": 40}
    config.write_text(json.dumps({"tools": {"loopDetection": block}}))
    event = (EVENTS / agent / "hook-events" / "PreToolUse.json").read_text()
    env = _state_env(tmp_path)
    for _ in range(2):  # the second run finds the state file the first one wrote
        names = imported(["-c", HOOK_WORK, str(config)], tmp_path, stdin=event, env=env)
        assert {"loopwarden.guard", "loopwarden.stores.sqlite", "sqlite3"} <= names
        assert not names & HEAVY, sorted(names & HEAVY)
    assert list((tmp_path / "state").rglob("*.db"))


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse"])
def test_the_hook_command_loads_nothing_heavy(tmp_path: Path, agent: str, event: str) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {"criticalThreshold": 6}}}))
    payload = (EVENTS / agent / "hook-events" / f"{event}.json").read_text()
    args = ["-m", "loopwarden", "hook", agent, "--config", str(config), "--set", "historySize=40"]
    env = _state_env(tmp_path)
    for _ in range(2):  # the second run finds the state file the first one wrote
        names = imported(args, tmp_path, stdin=payload, env=env)
        assert {"loopwarden.hooks._handler", "loopwarden.guard", "sqlite3"} <= names
        assert not names & HEAVY, sorted(names & HEAVY)
        # The hook's work lives in hooks/: the command line is not even imported.
        assert not {n for n in names if n.startswith("loopwarden.cli")}
        assert "argparse" not in names
    assert list((tmp_path / "state").rglob("*.db"))


# A hook process that hands its event to the resident server: the interpreter's own start-up
# modules (runpy's for `-m`), loopwarden's package and version, the client, the socket module.
CLIENT = frozenset(
    {
        "loopwarden",
        "loopwarden._version",
        "loopwarden.hooks",
        "loopwarden.hooks._client",
        "loopwarden.hooks._args",  # the arguments, read without argparse
        "loopwarden.hooks._stdin",
        # LOOPWARDEN_DISABLE and the user-level install standing aside: checked on every event.
        "loopwarden.hooks._scope",
        "loopwarden.hooks._paths",
    }
)


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_hook_answered_by_the_server_loads_only_the_client(tmp_path: Path, agent: str) -> None:
    config = tmp_path / "openclaw.json"
    config.write_text(json.dumps({"tools": {"loopDetection": {"criticalThreshold": 6}}}))
    payload = (EVENTS / agent / "hook-events" / "PreToolUse.json").read_text()
    args = ["-m", "loopwarden", "hook", agent, "--config", str(config), "--set", "historySize=40"]
    env = _state_env(tmp_path, server=True)
    first = imported(args, tmp_path, stdin=payload, env=env)  # alone; it starts the server
    assert "loopwarden.guard" in first
    wait_for_hook_server(tmp_path / "state")
    bare = imported(["-c", "pass"], tmp_path, env=env)
    names = imported(args, tmp_path, stdin=payload, env=env)
    assert {n for n in names - bare if n.startswith("loopwarden")} == CLIENT
    assert names - bare - CLIENT <= {
        "_socket",
        "runpy",
        "importlib.util",
        "importlib.machinery",
        "contextlib",
        "functools",
        "types",
        "collections",
        "keyword",
        "operator",
        "reprlib",
        "itertools",
        "_functools",
        "_collections",
        "_operator",
        "collections.abc",
        "_weakrefset",
        "importlib",
        "importlib._abc",
        "warnings",
        "pkgutil",
    }


def test_an_invalid_config_is_still_judged_by_the_strict_schema(tmp_path: Path) -> None:
    config = tmp_path / "bad.json5"
    config.write_text("{tools: {loopDetection: {historySize: 0, typo: 1}}}")
    code = (
        "import sys\nfrom loopwarden.core.config import ConfigError, load_config\n"
        "try:\n    load_config(sys.argv[1])\nexcept ConfigError as exc:\n    print(exc)\n"
    )
    names = imported(["-c", code, str(config)], tmp_path)
    assert {"pydantic", "loopwarden.core._config_schema"} <= names
    assert "json5" not in names  # plain JSON5 is rewritten to JSON (loopwarden._json5)


def test_help_still_lists_every_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for module in _COMMANDS:
        command = module.removesuffix("_cmd").replace("_", "-")
        assert re.search(rf"^    {command}\s", done.stdout, re.MULTILINE), module


def test_every_public_name_resolves_to_its_module() -> None:
    for name in loopwarden.__all__:
        assert getattr(loopwarden, name) is not None, name
    lazy: dict[str, str] = loopwarden._LAZY
    assert set(lazy) | {"__version__"} == set(loopwarden.__all__)
    with pytest.raises(AttributeError):
        _ = loopwarden.NoSuchName  # type: ignore[attr-defined]


def test_the_type_checking_imports_match_the_lazy_table() -> None:
    tree = ast.parse(Path(loopwarden.__file__).read_text())
    checking = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    static = {
        alias.name: str(node.module).removeprefix("loopwarden.")
        for node in checking.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert static == loopwarden._LAZY


# plainly_valid is the no-pydantic fast path of strict validation: it may say "not sure" about
# a valid block, but must never accept one the schema refuses.

_BOOL_KEYS = ["enabled", "countBlockedCalls", "normalizeVolatile", "toolAnnotations"]
_DETECTOR_KEYS = [
    "genericRepeat",
    "knownPollNoProgress",
    "pingPong",
    "consecutiveRepeat",
    "cycle",
    "repeatedError",
    "sameOutcome",
]
_INT_KEYS = {  # key: the smallest valid value
    "historySize": 1,
    "warningThreshold": 1,
    "criticalThreshold": 1,
    "unknownToolThreshold": 1,
    "globalCircuitBreakerThreshold": 1,
    "stopAfterBlocks": 0,
    "maxCyclePeriod": 2,
    "consecutiveWarningThreshold": 1,
    "consecutiveCriticalThreshold": 1,
    "consecutiveAnyResultThreshold": 1,
    "repeatedErrorThreshold": 1,
    "sameOutcomeThreshold": 1,
}

# Anything: right or wrong type, near the bounds, the int/bool/float confusions JSON allows.
_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=5),
    st.sampled_from([2**53, 2**53 + 1, 2**63, 2**70]),
    st.floats(allow_nan=True),
    st.sampled_from(["openclaw", "recommended", "Recommended", "10", ""]),
    st.lists(st.sampled_from(["a+", "(", r"\d+", 3]), max_size=3),
    st.just({}),
)


def _mostly_valid(key: str) -> st.SearchStrategy[Any]:
    """Values of ``key`` that are often valid and otherwise wrong in one small way."""
    if key in _BOOL_KEYS:
        valid: st.SearchStrategy[Any] = st.booleans()
    elif key in _INT_KEYS:
        valid = st.integers(min_value=_INT_KEYS[key], max_value=50)
    elif key == "profile":
        valid = st.sampled_from(["openclaw", "recommended"])
    elif key == "detectors":
        valid = st.dictionaries(st.sampled_from([*_DETECTOR_KEYS, "typo"]), st.booleans() | _leaf)
    elif key == "postCompactionGuard":
        valid = st.dictionaries(st.sampled_from(["windowSize", "typo"]), _leaf)
    elif key == "volatilePatterns":
        valid = st.lists(st.sampled_from([r"job-\d+", "(", "a+"]), max_size=3)
    elif key == "toolPolicies":
        policy = st.dictionaries(
            st.sampled_from(
                [
                    "poll",
                    "exempt",
                    "readOnly",
                    "warningThreshold",
                    "criticalThreshold",
                    "consecutiveWarningThreshold",
                    "consecutiveCriticalThreshold",
                    "typo",
                ]
            ),
            _leaf,
        )
        valid = st.dictionaries(st.sampled_from(["exec", "read"]), policy | _leaf, max_size=2)
    else:
        valid = _leaf
    return st.one_of(valid, _leaf)


_TOP_KEYS = [
    *_BOOL_KEYS,
    *_INT_KEYS,
    "profile",
    "detectors",
    "postCompactionGuard",
    "volatilePatterns",
    "toolPolicies",
    "typo",
]
_blocks = st.lists(st.sampled_from(_TOP_KEYS), max_size=4, unique=True).flatmap(
    lambda keys: st.fixed_dictionaries({k: _mostly_valid(k) for k in keys})
)


@settings(max_examples=1000, deadline=None)
@given(_blocks)
@example({"historySize": 0})
@example({"historySize": 2.5})
@example({"historySize": 3.0})
@example({"historySize": True})
@example({"historySize": 2**70})
@example({"stopAfterBlocks": -1})
@example({"maxCyclePeriod": 1})
@example({"enabled": 1})
@example({"profile": "Recommended"})
@example({"detectors": {"typo": True}})
@example({"detectors": None, "postCompactionGuard": {"windowSize": 0}})
@example({"volatilePatterns": ["("]})
@example({"volatilePatterns": [3]})
@example({"volatilePatterns": "a+"})
@example({"toolPolicies": {"exec": None}})
@example({"toolPolicies": {"exec": {"poll": 1}}})
@example({"toolPolicies": {"exec": {"warningThreshold": 0}}})
@example({"toolPolicies": {"exec": {"readOnly": 1}}})
@example({"toolPolicies": {"exec": {"consecutiveCriticalThreshold": 0}}})
@example({"toolAnnotations": 0})
@example({"typo": None})
def test_plainly_valid_never_accepts_what_the_schema_refuses(block: dict[str, Any]) -> None:
    if plainly_valid(block):
        assert block_problems(block, "tools.loopDetection") == [], block


@pytest.mark.parametrize(
    "block",
    [
        {},
        {"enabled": True},
        {**RECOMMENDED_PROFILE, "profile": "recommended"},
        {"profile": "recommended", "criticalThreshold": 5, "detectors": {"pingPong": False}},
        {"toolPolicies": {"exec": {"poll": True}, "read": {"warningThreshold": 4}}},
        {"toolAnnotations": False, "toolPolicies": {"rm": {"consecutiveCriticalThreshold": 2}}},
        {"volatilePatterns": [r"job-\d+"], "postCompactionGuard": {"windowSize": 5}},
    ],
)
def test_common_valid_blocks_take_the_fast_path(block: dict[str, Any]) -> None:
    assert plainly_valid(block)
    assert block_problems(block, "tools.loopDetection") == []


def test_every_profile_is_valid_both_ways() -> None:
    """A profile resolve_config knows is one the schema and the fast path both accept."""
    for name in PROFILES:
        assert plainly_valid({"profile": name}), name
        assert block_problems({"profile": name}, "tools.loopDetection") == [], name

"""Hatchling build hook: compile the hot modules with mypyc when building a regular wheel.

With them, the hand-written C extensions of C_EXTENSIONS (the volatile scanner), under the same
rules: built together or not at all.

Optional speed-up only; the .py files stay in the wheel and are what runs whenever the
compiled modules are absent:

- editable installs (``pip install -e``) are never compiled, so the working tree's .py files
  stay what runs in development;
- ``LOOPWARDEN_PURE=1`` switches compilation off (a pure-Python ``py3-none-any`` wheel);
- if compilation fails (no C compiler, a type error under the build's mypy...), the build
  warns and produces the pure-Python wheel instead of failing; ``LOOPWARDEN_REQUIRE_COMPILED=1``
  makes it fail instead (for release builds and anyone who must not get the slow engine).

Nothing is written into the source tree: mypy's cache, the C sources, the object files and the
extension modules live in a temporary directory that is removed when the wheel is written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import types
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# Compiled together into one extension group (calls between them stay native).
COMPILED = [
    "src/loopwarden/core/_engine.py",
    "src/loopwarden/core/canonical.py",
    "src/loopwarden/core/detectors.py",
    "src/loopwarden/core/failures.py",
    "src/loopwarden/core/history.py",
    "src/loopwarden/core/outcome.py",
    # The guard's decision about each call: compiled, the shell's share of a call runs native
    # too (docs/performance.md, the layers). core/session.py is not: its classes stay plain
    # Python objects (a compiled class has no __dict__, and Python classes cannot subclass it).
    "src/loopwarden/core/step.py",
    # The recommended profile's extra detectors and outcome comparison, run on every call of
    # that profile (docs/performance.md).
    "src/loopwarden/core/patterns.py",
    "src/loopwarden/core/tool_call.py",
    # Walks every result of the recommended profile; compiled, its walk and gates cost about 15 %
    # less (docs/performance.md). Its regular expressions run in C in both builds.
    "src/loopwarden/core/volatile.py",
    # The shell's per-call path (LoopGuard's sync before/after, MemoryStore's update), native
    # bases of those two Python classes: a tool call runs no interpreted frame between the
    # caller and the engine (docs/performance.md, the layers).
    "src/loopwarden/_per_call.py",
    # The check that orjson read a document as the standard library would: a walk over every
    # value of every transcript document `loopwarden analyze` reads (and of every message the
    # MCP proxy parses); compiled, a third of its cost (docs/performance.md, analyze).
    "src/loopwarden/_exact_json.py",
]
# Hand-written C extensions built with them (the same rules: all or none, a failure gives the
# pure wheel): module name and source. The C scanner of the built-in volatile patterns over
# ASCII text (docs/performance.md); core/volatile.py falls back to its Python path without it.
C_EXTENSIONS = [
    ("loopwarden.core._volatile_scan", "src/loopwarden/core/_volatile_scan.c"),
]
# Build-only requirements of the compiled variant (the runtime dependencies are added too: mypy
# follows the compiled modules' imports into config.py, pydantic, json5 and orjson).
BUILD_REQUIRES = ["mypy==2.4.1", "setuptools>=70"]

_COMPILE = textwrap.dedent(
    """
    import os
    import sys
    from setuptools import Distribution, Extension
    from mypyc.build import mypycify

    work, config, c_extensions, *paths = sys.argv[1:]
    extensions = mypycify(
        ["--config-file", config, "--cache-dir", work + "/mypy_cache", *paths],
        target_dir=work + "/c",
        # The shared library is loopwarden__mypyc.*.so at the top level: mypyc derives the
        # modules' __file__ from its location and expects it there.
        group_name="loopwarden",
    )
    for spec in c_extensions.split(";") if c_extensions else []:
        name, source = spec.split("=", 1)
        flags = [] if os.name == "nt" else ["-std=c99"]
        extensions.append(Extension(name, [source], extra_compile_args=flags))
    dist = Distribution({"name": "loopwarden-mypyc", "ext_modules": extensions})
    dist.script_args = ["build_ext", "--build-lib", work + "/lib", "--build-temp", work + "/tmp"]
    dist.parse_command_line()
    dist.run_commands()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skips tearing down mypy's objects at exit: about 10 s
    """
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _pure_requested() -> bool:
    return _flag("LOOPWARDEN_PURE")


def _missing_compiler() -> str | None:
    """The C compiler setuptools would run, when it is not installed (None: found, or MSVC)."""
    if os.name == "nt":
        return None
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    name = shlex.split(command)[0]
    return None if shutil.which(name) else name


def _resolving_editable_requires() -> bool:
    # get_requires_for_build_editable() cannot tell the hook it is asking for an editable build;
    # its frame on the stack does.
    frame: types.FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code.co_name == "get_requires_for_build_editable":
            return True
        frame = frame.f_back
    return False


class MypycHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        if _pure_requested() or _resolving_editable_requires() or _missing_compiler():
            return []
        return [*BUILD_REQUIRES, *self.metadata.core.dependencies]

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._work: str | None = None
        if self.target_name != "wheel" or version == "editable" or _pure_requested():
            return
        compiler = _missing_compiler()
        if compiler is not None:
            self._fall_back(f"no C compiler ({compiler})")
            return
        work = tempfile.mkdtemp(prefix="loopwarden-mypyc-")
        self._work = work
        root = Path(self.root)
        command = [
            sys.executable,
            "-c",
            _COMPILE,
            work,
            str(root / "pyproject.toml"),
            ";".join(f"{name}={root / source}" for name, source in C_EXTENSIONS),
            *(str(root / path) for path in COMPILED),
        ]
        # cwd outside the project: setuptools must not read the project's pyproject.toml.
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
        built = sorted(Path(work, "lib").rglob("*.so")) + sorted(Path(work, "lib").rglob("*.pyd"))
        if done.returncode != 0 or len(built) != len(COMPILED) + 1 + len(C_EXTENSIONS):
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            self._fall_back(f"compilation (mypyc, C extensions) failed:\n{tail}")
            return
        for path in built:
            build_data["force_include"][str(path)] = path.relative_to(Path(work, "lib")).as_posix()
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _fall_back(self, why: str) -> None:
        if _flag("LOOPWARDEN_REQUIRE_COMPILED"):
            raise RuntimeError(
                f"loopwarden: LOOPWARDEN_REQUIRE_COMPILED is set, but the engine cannot be "
                f"compiled: {why}\nInstall a C compiler (e.g. apt-get install gcc python3-dev), "
                "or unset LOOPWARDEN_REQUIRE_COMPILED to accept the pure-Python build."
            )
        self.app.display_warning(
            f"loopwarden: {why}\nbuilding the pure-Python wheel instead (LOOPWARDEN_PURE=1 skips "
            "the attempt; LOOPWARDEN_REQUIRE_COMPILED=1 makes this an error)"
        )

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work:
            shutil.rmtree(work, ignore_errors=True)

"""`loopwarden --version` names the build that runs: the mypyc-compiled engine or pure Python.

The expectation is computed here from the imported modules themselves (their files and
loaders), not through the CLI's own helper, so the test holds in both builds: the editable
install (pure) and a regular wheel (compiled, tested by the second pass of .ci/run).
"""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import loopwarden as lw
from loopwarden.core import _engine, canonical, detectors, history, outcome

# The modules hatch_build.py compiles (all of them or none: one extension group).
HOT: tuple[types.ModuleType, ...] = (_engine, canonical, detectors, history, outcome)


def _is_extension(module: types.ModuleType) -> bool:
    path = Path(str(module.__file__))
    by_suffix = any(path.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)
    by_loader = isinstance(module.__spec__.loader, importlib.machinery.ExtensionFileLoader)
    assert by_suffix == by_loader, (path, module.__spec__.loader)
    return by_suffix


def _compiled() -> bool:
    builds = {module.__name__: _is_extension(module) for module in HOT}
    assert len(set(builds.values())) == 1, f"a mixed build: {builds}"
    compiled = builds["loopwarden.core.history"]
    # Compiled functions are builtins; the .py files' are Python functions.
    assert isinstance(history.record_call, types.FunctionType) is not compiled
    return compiled


def _scanner() -> bool:
    # The C volatile scanner: built with the compiled modules, never without them.
    try:
        from loopwarden.core import _volatile_scan
    except ImportError:
        return False
    assert _is_extension(_volatile_scan)
    return True


def test_version_names_the_build_that_runs() -> None:
    compiled = _compiled()
    assert _scanner() is compiled
    expected = "compiled engine: mypyc, C volatile scanner" if compiled else "pure Python"
    done = subprocess.run(
        [sys.executable, "-m", "loopwarden", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loopwarden {lw.__version__} ({expected})"


def test_the_build_ci_means_to_test() -> None:
    """CI says which build each pass must test and where loopwarden must come from."""
    build = os.environ.get("LOOPWARDEN_EXPECT_BUILD")
    if build is None:
        pytest.skip("LOOPWARDEN_EXPECT_BUILD not set (.ci/run sets it for each pass)")
    assert build in ("pure", "compiled"), build
    assert _compiled() is (build == "compiled"), f"expected the {build} build: {history.__file__}"
    assert _scanner() is (build == "compiled"), f"expected the {build} build: no C volatile scanner"
    where = os.environ.get("LOOPWARDEN_EXPECT_FROM")
    if where:
        package = Path(lw.__file__).resolve().parent
        assert package == Path(where).resolve() / "loopwarden", package
        for name, module in sys.modules.items():
            if name.split(".")[0] == "loopwarden" and getattr(module, "__file__", None):
                assert Path(module.__file__).resolve().is_relative_to(package), (name, module)

"""The package's layout shows its architecture: the functional core in ``loopwarden.core``
imports nothing from the shell around it, and no two modules import each other.

Every import counts, including those under ``TYPE_CHECKING`` and inside functions: a lazy
import is still a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import loopwarden

PACKAGE = Path(loopwarden.__file__).resolve().parent
SOURCES = PACKAGE.parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(SOURCES).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """The loopwarden modules ``path`` imports (``from pkg import sub`` names the submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            named = [sub for sub in subs if sub in MODULES]
            names.update(named)
            if len(named) < len(subs):
                names.add(node.module)
    return {name for name in names if name in MODULES}


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_the_imports_it_must() -> None:
    # The checks below are only as good as the graph: it must see known edges of every kind.
    assert "loopwarden.core.history" in GRAPH["loopwarden.core.detectors"]  # module level
    assert "loopwarden.records" in GRAPH["loopwarden.guard"]  # inside a function
    assert "loopwarden.core.tool_call" in GRAPH["loopwarden.core.history"]
    assert "loopwarden.core.config" in GRAPH["loopwarden"]  # under TYPE_CHECKING


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert _cycles(GRAPH) == []


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("loopwarden.core")))
def test_core_imports_only_the_core(module: str) -> None:
    shell = sorted(t for t in GRAPH[module] if not t.startswith("loopwarden.core"))
    assert shell == [], f"{module} imports the shell: {shell}"


def test_the_core_is_what_the_architecture_page_says() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md").read_text("utf-8")
    core = sorted(m.rsplit(".", 1)[1] for m in MODULES if m.startswith("loopwarden.core."))
    missing = [name for name in core if f"core/{name}.py" not in page]
    assert missing == [], f"docs/ARCHITECTURE.md does not describe {missing}"


@pytest.mark.parametrize(
    "module",
    sorted(m for m in MODULES if not m.startswith(("loopwarden.cli", "loopwarden.__main__"))),
)
def test_only_the_command_line_imports_the_command_line(module: str) -> None:
    # The analyzer, the hooks and the rest are libraries the commands use, not the other way.
    # `loopwarden hook` too: its process starts in hooks._client, its work is hooks._handler,
    # and cli/hook_cmd.py only gives it its place in the command line's help.
    cli = sorted(t for t in GRAPH[module] if t.startswith("loopwarden.cli"))
    assert cli == [], f"{module} reaches up into the command line: {cli}"

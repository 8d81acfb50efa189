"""The import graph of ``src/tidings``, read from the source with ``ast``: no
cycles (imports inside functions and under ``TYPE_CHECKING`` included), and a
pure core that imports nothing from the other layers."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidings

ROOT = Path(tidings.__file__).parent


def module_name(path: Path) -> str:
    parts = ["tidings", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in ROOT.rglob("*.py")}


def imported(name: str, path: Path) -> Iterator[str]:
    """The tidings modules ``name`` imports, wherever the import statement is."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                # ``from tidings.core import ids`` imports the module tidings.core.ids.
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:
                    yield submodule
                elif base in MODULES:
                    yield base


# A package's __init__ runs before any of its modules, but that is Python
# finding the module, not a dependency of the importer: edges name modules only.
GRAPH = {name: sorted(set(imported(name, path)) - {name}) for name, path in MODULES.items()}


def test_the_graph_sees_the_whole_package() -> None:
    assert "tidings.engine" in GRAPH
    # `from tidings.core import ids` is an edge to the module tidings.core.ids.
    assert "tidings.core.ids" in GRAPH["tidings.core.activity"]


def test_no_import_cycles() -> None:
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            cycles.append([*stack[stack.index(name) :], name])
            return
        if name in done:
            return
        for target in GRAPH[name]:
            visit(target, [*stack, name])
        done.add(name)

    for name in sorted(GRAPH):
        visit(name, [])
    assert cycles == []


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if n.startswith("tidings.core")))
def test_the_core_imports_only_the_core(name: str) -> None:
    outside = [t for t in GRAPH[name] if not t.startswith("tidings.core")]
    assert outside == [], f"{name} imports {outside}"


BANNED_IN_CORE = {"socket", "sqlalchemy", "redis", "celery", "fastapi", "starlette", "httpx"}


@pytest.mark.parametrize("name", sorted(n for n in GRAPH if n.startswith("tidings.core")))
def test_the_core_does_no_io(name: str) -> None:
    tree = ast.parse(MODULES[name].read_text())
    roots = {
        alias.name.partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and not node.level
    }
    assert roots & BANNED_IN_CORE == set()

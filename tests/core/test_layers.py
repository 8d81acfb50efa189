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


# -- the layers: every import goes down --------------------------------------------

#: The layers of the package, lowest first (DESIGN.md, "Layers"). A module
#: belongs to the first entry whose name is it or a package holding it; it may
#: import its own package and the layers below its own, never beside or above.
LAYERS: list[tuple[str, int]] = [
    ("tidings.core", 0),  # pure: no I/O
    # Read once at the edge and handed down; and the fork hooks that every
    # object holding a thread registers with (the standard library only).
    ("tidings.settings", 1),
    ("tidings.forks", 1),
    ("tidings.canonical", 2),  # the SQL truth
    ("tidings.stores", 3),  # materialised feeds (the SQL ones share canonical's database)
    ("tidings.delivery", 4),
    ("tidings.reading", 4),
    ("tidings.bus", 4),
    # Allowed exception: the delivery child process's main (``python -m
    # tidings.task_runners.child``) builds an engine from settings, as ``tidings
    # worker`` does: an entry point that lives beside the runner that starts it.
    ("tidings.task_runners.child", 10),
    ("tidings.task_runners", 5),  # task runners carry out the deliverer's work
    # The writes behind the public verbs: canonical store, then the deliverer.
    ("tidings.writes", 5),
    ("tidings.services", 6),
    ("tidings.wiring", 7),  # builds and connects every part below it
    ("tidings.engine", 8),
    # The HTTP layer's pieces (auth, problems, routes), the web app (a router
    # that uses them), then the app that mounts both and the process factory.
    ("tidings.http.app", 11),
    ("tidings.http.server", 12),
    ("tidings.http", 9),
    ("tidings.webapp", 10),
    ("tidings.cli", 13),
    # The Django app: an entry point as the CLI is, imported only by a Django project.
    ("tidings.contrib", 13),
]
#: Package modules that re-export from above their own package (``from
#: tidings.http import create_app``): they sit at the top of it.
EXACT = {"tidings": 14, "tidings.http": 12}


def layer_of(name: str) -> tuple[str, int]:
    if name in EXACT:
        return name, EXACT[name]
    for prefix, rank in LAYERS:
        if name == prefix or name.startswith(prefix + "."):
            return prefix, rank
    raise AssertionError(f"{name} is in no layer: add it to LAYERS")


def test_every_module_is_in_a_layer() -> None:
    for name in GRAPH:
        layer_of(name)


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_imports_only_go_down(name: str) -> None:
    own, rank = layer_of(name)
    upward = [
        target
        for target in GRAPH[name]
        if layer_of(target)[0] != own and layer_of(target)[1] >= rank
    ]
    assert upward == [], f"{name} (layer {own}) imports beside or above it: {upward}"

"""No module imports itself through others: the import graph of ``stm_memory/`` and of
every integration package under ``integrations/`` has no circle.

The graph is read from the source with ``ast``, one node per ``.py`` file (a package's
``__init__.py`` is the node named after the package). Every import statement counts,
wherever it is: module level, a function body, a ``try`` block, an ``if TYPE_CHECKING:``
block. A circle hidden in a function or behind ``TYPE_CHECKING`` still makes the modules
depend on each other for a reader, so it is still a circle here.

The one rule for which node an import points at: **the most specific module it
names.**

- ``import a.b.c`` and ``from a.b.c import name`` point at ``a.b.c``; the packages
  ``a`` and ``a.b`` are not counted, although Python runs their ``__init__`` first.
  Their code is already running (or done) when a module inside them loads, and a module
  that only asks for ``a.b.c`` needs nothing that ``__init__`` defines, so the package
  is no part of a circle it closes.
- ``from a.b import name`` points at the submodule ``a.b.name`` when there is one, and
  at ``a.b`` itself (its ``__init__.py``) when ``name`` is not a submodule: then the
  name is read from the package's ``__init__``, which must have run to its end.
- Relative imports resolve against the importing module's package (for an
  ``__init__.py``, the package itself) with the same rule: ``from . import x``,
  ``from .x import y``, ``from ..a import b``.
- Only modules of the scanned tree are nodes; the standard library and third-party
  packages are left out (they cannot import ours).

Names imported by string (``importlib.import_module``, the lazy ``__getattr__`` of a
package) are not import statements and are not read.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTEGRATIONS = ROOT / "integrations"

Graph = Mapping[str, set[str]]


def _packages() -> list[tuple[Path, Path]]:
    """(package directory, the directory it is imported from) for every scanned package."""
    integrations = sorted(p for p in INTEGRATIONS.iterdir() if (p / "__init__.py").is_file())
    return [(ROOT / "stm_memory", ROOT), *((p, INTEGRATIONS) for p in integrations)]


def _module_name(path: Path, base: Path) -> str:
    parts = path.relative_to(base).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules_of(packages: Iterable[tuple[Path, Path]]) -> dict[str, Path]:
    """Module name → file, for every ``.py`` file under the given packages."""
    return {
        _module_name(path, base): path
        for package, base in packages
        for path in sorted(package.rglob("*.py"))
    }


def _resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The absolute module a ``from … import`` reads from (``None``: above the top)."""
    if node.level == 0:
        return node.module
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if node.level - 1 >= len(parts):
        return None
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The scanned modules ``module`` imports, by the rule in this file's docstring."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve_from(node, module, is_package)
            if base is None:
                continue
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif base in known:
                    found.add(base)
    return found


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    return {
        name: imports_of(path.read_text(encoding="utf-8"), name, path.name == "__init__.py", known)
        for name, path in modules.items()
    }


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = []
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work.append((root, iter(sorted(graph.get(root, ())))))
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _shortest_cycle(graph: Graph, start: str, members: set[str]) -> list[str]:
    """The shortest path ``start → … → start`` inside one component (breadth first)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, set()) & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{start} is on no cycle of its component")


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle through each module that is on a cycle, without repeats
    (a cycle is listed once, starting from its first module in sorted order)."""
    found: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for component in strongly_connected(graph):
        members = set(component)
        if len(component) == 1 and component[0] not in graph.get(component[0], ()):
            continue
        for start in component:
            path = _shortest_cycle(graph, start, members)
            ring = path[:-1]
            first = ring.index(min(ring))
            key = tuple(ring[first:] + ring[:first])
            if key not in seen:
                seen.add(key)
                found.append([*key, key[0]])
    return found


def _report(found: list[list[str]]) -> str:
    return "import cycles:\n" + "\n".join("  " + " → ".join(path) for path in found)


# -- the tree ---------------------------------------------------------------------------


def test_no_import_cycles() -> None:
    found = cycles(import_graph(modules_of(_packages())))
    assert not found, _report(found)


def test_the_tree_is_scanned() -> None:
    modules = modules_of(_packages())
    assert {"stm_memory", "stm_memory.kit", "stm_memory.kit.turn"} <= set(modules)
    assert {name.split(".")[0] for name in modules} == {
        "stm_memory",
        "stm_memory_anthropic",
        "stm_memory_langchain",
        "stm_memory_openai",
        "stm_memory_openai_agents",
    }
    graph = import_graph(modules)
    imported = {
        target
        for name, targets in graph.items()
        if name.startswith("stm_memory_")
        for target in targets
    }
    # The integrations import the root and the kit (their __init__s, the public doors),
    # and their own private modules by relative imports.
    assert {"stm_memory", "stm_memory.kit", "stm_memory_langchain._scope"} <= imported


# -- the checker can fail -----------------------------------------------------------------


def test_the_cycle_finder_reports_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c", "a"], ["e", "e"]]
    assert "a → b → c → a" in _report(cycles(graph))


def test_the_cycle_finder_lists_each_cycle_of_a_component() -> None:
    # One component, two circles sharing b: both are listed.
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"b"}}
    assert cycles(graph) == [["a", "b", "a"], ["b", "c", "b"]]


def test_the_cycle_finder_passes_a_tree_without_one() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a"}}
    assert cycles(graph) == []
    assert len(strongly_connected(graph)) == 4


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_cycle_in_files_is_reported(tmp_path: Path) -> None:
    # Lazy, type-only and relative imports all close the circle pkg.a → pkg.sub.b → pkg.a.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from .a import A\n",
            "pkg/a.py": "def f():\n    from .sub import b\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/b.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import A\n"
            ),
        },
    )
    graph = import_graph(modules_of([(tmp_path / "pkg", tmp_path)]))
    assert graph == {
        "pkg": {"pkg.a"},
        "pkg.a": {"pkg.sub.b"},
        "pkg.sub": set(),
        "pkg.sub.b": {"pkg.a"},
    }
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_a_tree_of_files_without_a_cycle_passes(tmp_path: Path) -> None:
    # A package's __init__ imports its modules, and they import each other by their full
    # name: that is no circle through the __init__ (see the rule in the docstring).
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\nfrom . import b\n",
            "pkg/a.py": "import pkg.b\nfrom pkg import b\n",
            "pkg/b.py": "import os\nfrom collections import deque\n",
        },
    )
    graph = import_graph(modules_of([(tmp_path / "pkg", tmp_path)]))
    assert graph == {"pkg": {"pkg.a", "pkg.b"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert cycles(graph) == []


def test_a_name_from_a_package_imports_its_init(tmp_path: Path) -> None:
    # ``from pkg import A`` (A no submodule) reads the __init__, which imports a: a circle.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.a import A\n",
            "pkg/a.py": "try:\n    from pkg import A\nexcept ImportError:\n    pass\n",
        },
    )
    graph = import_graph(modules_of([(tmp_path / "pkg", tmp_path)]))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg"}}
    assert cycles(graph) == [["pkg", "pkg.a", "pkg"]]

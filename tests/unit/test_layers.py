"""The tree is the architecture: subpackages import each other in one direction only.

Read from the source with ``ast`` (``TYPE_CHECKING`` imports included: a type-level cycle
is still a cycle for a reader). A new import that closes a cycle between two layers fails
here, with the path it closes.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import stm_memory

ROOT = Path(stm_memory.__file__).parent

# Layers at the bottom: they import no other part of the package but each other.
FOUNDATION = {"errors", "config", "model", "bulk"}


def _layer(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        layer = _layer(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "stm_memory" and len(parts) > 1 and parts[1] != layer:
                    graph[layer].add(parts[1])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_layers_import_each_other_in_one_direction() -> None:
    cycle = _cycle(_imports())
    assert cycle is None, "import cycle between layers: " + " → ".join(cycle or [])


def test_the_foundation_imports_nothing_above_it() -> None:
    graph = _imports()
    above = {layer: graph[layer] - FOUNDATION for layer in FOUNDATION if graph[layer] - FOUNDATION}
    assert above == {}


def test_the_cycle_check_sees_a_cycle() -> None:
    # The check itself can fail: a two-layer loop is reported with its path.
    assert _cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]

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
# ``wire`` (the message formats' codecs) is one: the model reads dialogue through it.
FOUNDATION = {"errors", "config", "model", "bulk", "wire"}

# The core's generic layers work on any message format through the wire codecs, so
# they import no framework or provider SDK, not even lazily: only the LangChain codec
# (wire/langchain.py) does.
FRAMEWORKS = {"langchain", "langgraph", "openai", "anthropic", "agents"}
FRAMEWORK_FREE = ("model", "prompt", "wire")
FRAMEWORK_CODECS = {ROOT / "wire" / "langchain.py"}


def _layer(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imported(source: str) -> list[str]:
    """Every absolute module name ``source`` imports, wherever the import is (a function
    body, a ``TYPE_CHECKING`` block, a ``try``), in ``ast.walk`` order."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for path in ROOT.rglob("*.py"):
        layer = _layer(path)
        for name in _imported(path.read_text(encoding="utf-8")):
            parts = name.split(".")
            if parts[0] == "stm_memory" and len(parts) > 1 and parts[1] != layer:
                graph[layer].add(parts[1])
    return graph


def _framework_imports(source: str) -> list[str]:
    """The framework and SDK modules among what ``source`` imports."""
    return [
        name
        for name in _imported(source)
        if (top := name.split(".")[0]) in FRAMEWORKS or top.startswith("langchain_")
    ]


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


def test_the_core_imports_no_framework() -> None:
    offenders = {
        str(path.relative_to(ROOT)): found
        for layer in FRAMEWORK_FREE
        for path in sorted((ROOT / layer).rglob("*.py"))
        if path not in FRAMEWORK_CODECS
        and (found := _framework_imports(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_framework_check_sees_every_import() -> None:
    # The check itself can fail: module level, lazy, type-only and aliased imports.
    source = """
from typing import TYPE_CHECKING
import json
from stm_memory.wire import codec_of
from . import sibling
import langchain_core.messages as lc
if TYPE_CHECKING:
    from openai.types import Response
def f():
    import anthropic
    from langchain.agents import create_agent
    from agents import Session
"""
    assert _framework_imports(source) == [
        "langchain_core.messages",
        "openai.types",
        "anthropic",
        "langchain.agents",
        "agents",
    ]


# The integration kit and what builds on it sit above the engine: nothing below them
# imports them (a back-edge would make the engine depend on its own integrations).
ABOVE_THE_ENGINE = {"kit", "providers", "testing", "cli", "evaluation"}


def _back_edges(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {
        layer: found
        for layer, imported in graph.items()
        if layer not in ABOVE_THE_ENGINE
        and layer != "__init__"  # the root: checked at run time below
        and (found := imported & ABOVE_THE_ENGINE)
    }


def test_nothing_below_the_kit_imports_it() -> None:
    assert _back_edges(_imports()) == {}


def test_the_back_edge_check_sees_one() -> None:
    assert _back_edges({"engine": {"kit", "model"}, "kit": {"engine"}}) == {"engine": {"kit"}}


def test_the_root_imports_no_layer_above_the_engine() -> None:
    # Its kit names (MemoryTurn, TurnOptions) load on first use, not at import time.
    import subprocess
    import sys

    code = (
        "import sys, stm_memory\n"
        "above = sorted(m for m in sys.modules if m.split('.')[1:2] and "
        f"m.split('.')[1] in {sorted(ABOVE_THE_ENGINE)!r} and m.startswith('stm_memory.'))\n"
        "print(above)\n"
        "from stm_memory import MemoryTurn, TurnOptions\n"
        "assert MemoryTurn.__module__ == 'stm_memory.kit.turn'\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

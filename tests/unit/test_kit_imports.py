"""The integrations build on the public surface only: ``stm_memory`` and the kit
``stm_memory.kit`` (plus their own private modules and third-party packages)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stm_memory.kit as kit

ROOT = Path(__file__).resolve().parents[2]
INTEGRATIONS = ROOT / "integrations"
ALLOWED = frozenset({"stm_memory", "stm_memory.kit"})
FILES = sorted(INTEGRATIONS.rglob("*.py"))


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in ``tree``, ``from x import y`` as ``x``
    and also as ``x.y`` (so ``from stm_memory import engine`` is caught too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if node.module in ALLOWED:
                found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _private_core(module: str, names: frozenset[str]) -> bool:
    if module in ALLOWED:
        return False
    if module.startswith("stm_memory."):
        # ``from stm_memory import X`` names a public re-export, not a module.
        parent, _, name = module.rpartition(".")
        return not (parent in ALLOWED and name in names)
    return False


def _other_integration(module: str, own: str) -> bool:
    top = module.split(".")[0]
    return top.startswith("stm_memory_") and top != own


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INTEGRATIONS)))
def test_integrations_import_only_the_public_root_and_the_kit(path: Path) -> None:
    import stm_memory

    public = frozenset({*stm_memory.__all__, *kit.__all__})
    own = path.relative_to(INTEGRATIONS).parts[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    wrong = [
        f"line {line}: {module}"
        for line, module in _imported(tree)
        if _private_core(module, public) or _other_integration(module, own)
    ]
    assert not wrong, f"{path.relative_to(ROOT)} imports private modules: {wrong}"


def test_every_integration_file_is_checked() -> None:
    assert len(FILES) >= 10
    assert {p.relative_to(INTEGRATIONS).parts[0] for p in FILES} == {
        "stm_memory_anthropic",
        "stm_memory_langchain",
        "stm_memory_openai",
        "stm_memory_openai_agents",
    }


def test_the_checker_catches_a_private_import() -> None:
    tree = ast.parse(
        "from stm_memory.prompt.placement import MemoryContext\n"
        "import stm_memory.engine\n"
        "from stm_memory import ShortTermMemory\n"
        "from stm_memory.kit import drive\n"
    )
    public = frozenset({"ShortTermMemory", "drive"})
    flagged = [m for _, m in _imported(tree) if _private_core(m, public)]
    assert flagged == ["stm_memory.prompt.placement", "stm_memory.engine"]
    assert _other_integration("stm_memory_openai._responses", "stm_memory_openai_agents")
    assert not _other_integration("stm_memory_openai._responses", "stm_memory_openai")


# -- nothing behind the turn: the turn runs the cut, placement and the memory call ----

#: Steps behind the turn: names an integration must not import (the turn runs them).
BEHIND_THE_TURN = frozenset(
    {
        "run_memory_call",  # MemoryTurn.memory_call
        "dialogue_for_capture",  # MemoryTurn.finish
        "needs_previous",
        "build_tool",  # MemoryTurn.tool
        "place_request",  # MemoryTurn.prepare
        "place_view",  # MemoryTurn.view
        "cut_history",
        "check_tool_call",  # the memory call's vetting
        "CAPTURE_WINDOW",  # MemoryTurn.capture_window / finish: the one capture window
        "capture_read",
        "capture_start",
    }
)

#: What a capture window is computed from: an integration that reads it sizes its own
#: window (MemoryTurn.finish and capture_window decide it).
CAPTURE_WINDOW_ATTRS = frozenset({"messages_kept"})

#: Placement and cut methods: an integration never calls them on what the turn handed
#: it (a MemoryContext); it asks the turn (prepare, place, view).
PLACEMENT_CALLS = frozenset(
    {"apply", "apply_anthropic", "cut", "injections", "for_request", "without_memory"}
)


def _around_the_turn(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ALLOWED:
            found += [f"imports {a.name}" for a in node.names if a.name in BEHIND_THE_TURN]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in PLACEMENT_CALLS
        ):
            found.append(f"line {node.lineno}: calls .{node.func.attr}()")
        elif isinstance(node, ast.Attribute) and node.attr in CAPTURE_WINDOW_ATTRS:
            found.append(f"line {node.lineno}: reads .{node.attr}")
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(INTEGRATIONS)))
def test_integrations_run_no_step_behind_the_turn(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert _around_the_turn(tree) == []


def test_the_public_doors_export_no_step_behind_the_turn() -> None:
    import stm_memory

    assert set(kit.__all__) & BEHIND_THE_TURN == {"CAPTURE_WINDOW"}  # for tests to size reads
    assert set(stm_memory.__all__) & BEHIND_THE_TURN == set()


def test_the_checker_catches_a_way_around_the_turn() -> None:
    tree = ast.parse(
        "from stm_memory.kit import MemoryTurn, drive, run_memory_call\n"
        "def build(turn, messages):\n"
        "    return turn.context.apply(messages, provider='openai')\n"
        "def view(turn, items):\n"
        "    return turn.place(items)\n"
        "def window(self, added):\n"
        "    return added + 4 * self.memory.limits.messages_kept\n"
    )
    assert _around_the_turn(tree) == [
        "imports run_memory_call",
        "line 3: calls .apply()",
        "line 7: reads .messages_kept",
    ]

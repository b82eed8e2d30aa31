"""The integrations build on the public surface only: ``stm_memory``, the kit
``stm_memory.kit`` and the wire modules of their own APIs (plus their own private
modules and third-party packages), and
decide nothing the turn decides: no step behind the turn (the cut, placement, the
memory call, the capture window), no cache hint, no tool offer. Each check is shown
able to fail on a synthetic module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import stm_memory.kit as kit

ROOT = Path(__file__).resolve().parents[2]
INTEGRATIONS = ROOT / "integrations"
ALLOWED = frozenset({"stm_memory", "stm_memory.kit"})
#: Each integration's APIs: their wire modules hold their values and rules.
WIRES = {
    "stm_memory_anthropic": frozenset({"stm_memory.wire.anthropic"}),
    "stm_memory_openai": frozenset({"stm_memory.wire.openai_chat", "stm_memory.wire.responses"}),
    "stm_memory_openai_agents": frozenset(
        {"stm_memory.wire.openai_chat", "stm_memory.wire.responses"}
    ),
    "stm_memory_langchain": frozenset[str](),
}
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


def _private_core(module: str, names: frozenset[str], wires: frozenset[str] = frozenset()) -> bool:
    if module in ALLOWED or module in wires:
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
        if _private_core(module, public, WIRES[own]) or _other_integration(module, own)
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
    # A wire module is its own API's integration's, no other's.
    assert not _private_core("stm_memory.wire.anthropic", public, WIRES["stm_memory_anthropic"])
    assert _private_core("stm_memory.wire.anthropic", public, WIRES["stm_memory_openai"])
    assert _other_integration("stm_memory_openai._responses", "stm_memory_openai_agents")
    assert not _other_integration("stm_memory_openai._responses", "stm_memory_openai")


# -- nothing behind the turn: the turn runs the cut, placement and the memory call ----

#: Steps behind the turn: names an integration must not import (the turn runs them).
BEHIND_THE_TURN = frozenset(
    {
        "run_memory_call",  # MemoryTurn.memory_call
        "dialogue_for_capture",  # MemoryTurn.finish
        "needs_previous",
        "build_tool",  # the engine's tool (mem.tool): the turn's is stm_memory_langchain._tool
        "place_messages",  # a wire's placement: MemoryTurn.prepare / view
        "view_messages",
        "system_placed",
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
#: it (a MemoryContext); it asks the turn (prepare, view).
PLACEMENT_CALLS = frozenset(
    {"apply", "place", "top", "cut", "injections", "for_request", "without_memory"}
)


#: The cache-hint writers: which hints a request gets, and where, is the turn's decision
#: (``PreparedRequest.hints`` / ``.breakpoints``); an integration maps what it prepared.
HINT_WRITERS = frozenset(
    {
        "prompt_cache_key",
        "anthropic_breakpoints",
        "dialogue_breakpoint",
        "breakpoint_marker",
        "breakpoint_budget",
        "agreed_ttl",
        "MAX_BREAKPOINTS",
    }
)

#: Request keys of a cache hint: an integration never writes one of its own (it merges
#: the prepared hints, or applies the prepared breakpoints).
HINT_KEYS = frozenset({"prompt_cache_key", "cache_control"})

#: The tool-offer policy: ``MemoryTurn.prepare`` / ``request_tools`` decide the offer
#: and its ``tool_choice``; an integration sends what they decided.
OFFER_CALLS = frozenset({"_tool_offer"})

#: Engine methods that run a memory call or capture past the turn (its ``memory_call``
#: and ``finish`` run them), called on the engine (``memory``, ``self.memory`` …).
ENGINE_BYPASS = frozenset({"update", "aupdate", "tool", "capture", "acapture", "commit", "acommit"})
ENGINE_NAMES = frozenset({"memory", "mem", "engine"})


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant | ast.Dict)


def _key(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _on_the_engine(call: ast.Call) -> bool:
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in ENGINE_BYPASS:
        return False
    owner = func.value
    name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
    return name in ENGINE_NAMES


def _writes(node: ast.AST) -> list[str]:
    """Hint keys and literal ``tool_choice`` values ``node`` writes."""
    found: list[str] = []
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Subscript):
                key = _key(target.slice)
                if key in HINT_KEYS or (key == "tool_choice" and _literal(node.value)):
                    found.append(f"line {node.lineno}: writes [{key!r}]")
    elif isinstance(node, ast.Dict):
        for key_node, value in zip(node.keys, node.values, strict=True):
            key = _key(key_node)
            if key in HINT_KEYS or (key == "tool_choice" and _literal(value)):
                found.append(f"line {node.lineno}: writes {{{key!r}: …}}")
    elif isinstance(node, ast.Call):
        for keyword in node.keywords:
            if keyword.arg in HINT_KEYS or (
                keyword.arg == "tool_choice" and _literal(keyword.value)
            ):
                found.append(f"line {node.lineno}: passes {keyword.arg}=")
    return found


def _around_the_turn(tree: ast.AST) -> list[str]:
    found: list[str] = []
    for node in ast.walk(tree):
        found += _writes(node)
        if isinstance(node, ast.ImportFrom) and (
            node.module in ALLOWED or (node.module or "").startswith("stm_memory.wire")
        ):
            found += [
                f"imports {a.name}"
                for a in node.names
                if a.name in BEHIND_THE_TURN or a.name in HINT_WRITERS
            ]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr in PLACEMENT_CALLS or attr in OFFER_CALLS or attr in HINT_WRITERS:
                found.append(f"line {node.lineno}: calls .{attr}()")
            elif _on_the_engine(node):
                found.append(f"line {node.lineno}: runs .{attr}() on the engine")
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
        "    return turn.prepare(items)\n"
        "def window(self, added):\n"
        "    return added + 4 * self.memory.limits.messages_kept\n"
    )
    assert _around_the_turn(tree) == [
        "imports run_memory_call",
        "line 3: calls .apply()",
        "line 7: reads .messages_kept",
    ]


def test_the_checker_catches_a_hint_an_offer_a_memory_call_and_a_capture_window() -> None:
    """Each way an integration could decide what the turn decides, on a synthetic module:
    a cache hint written (a writer imported or called, a hint key set), the tool offer
    decided (the policy called, a literal ``tool_choice`` written), a memory call or a
    capture run on the engine past the turn, a capture window sized."""
    tree = ast.parse(
        "from stm_memory.kit import MemoryTurn, prompt_cache_key\n"
        "from stm_memory.wire.anthropic import dialogue_breakpoint\n"
        "import stm_memory.kit as kit\n"
        "def request(self, turn, body, others):\n"
        "    body['prompt_cache_key'] = prompt_cache_key(turn.scope)\n"
        "    body['messages'][-1]['content'][-1]['cache_control'] = {'type': 'ephemeral'}\n"
        "    offer = turn._tool_offer(other_tools=others, tool_traffic=True, provider=None)\n"
        "    if offer == 'describe':\n"
        "        body['tool_choice'] = {'type': 'none'}\n"
        "    return model.bind(prompt_cache_key=kit.prompt_cache_key(turn.scope))\n"
        "def settings(scope):\n"
        "    return ModelSettings(extra_args={'prompt_cache_key': 'k'}, tool_choice='none')\n"
        "async def call(self, turn, arguments):\n"
        "    return await self.memory.aupdate(turn.state, arguments)\n"
        "def tool(memory, turn):\n"
        "    return memory.tool(turn.state)\n"
        "def window(self, added):\n"
        "    return added + 4 * self.memory.limits.messages_kept\n"
        "def end(self, scope, items):\n"
        "    self.memory.capture(scope, items)\n"
    )
    assert sorted(_around_the_turn(tree)) == sorted(
        [
            # a cache hint written
            "imports prompt_cache_key",
            "imports dialogue_breakpoint",
            "line 5: writes ['prompt_cache_key']",
            "line 6: writes ['cache_control']",
            "line 10: passes prompt_cache_key=",
            "line 10: calls .prompt_cache_key()",
            "line 12: writes {'prompt_cache_key': …}",
            # the tool offer decided
            "line 7: calls ._tool_offer()",
            "line 9: writes ['tool_choice']",
            "line 12: passes tool_choice=",
            # a memory call run past the turn
            "line 14: runs .aupdate() on the engine",
            "line 16: runs .tool() on the engine",
            # a capture window computed, a capture run past the turn
            "line 18: reads .messages_kept",
            "line 20: runs .capture() on the engine",
        ]
    )


def test_mapping_what_the_turn_prepared_passes_the_checker() -> None:
    """What an integration does instead: it maps the prepared request, reads the
    caller's hints, and sends the turn's tool_choice (a value, not a literal)."""
    tree = ast.parse(
        "def request(self, turn, body, tools):\n"
        "    prepared = turn.prepare(body['messages'], wire=CHAT_WIRE, ask=Ask(settings=body))\n"
        "    body.update(prepared.hints)\n"
        "    body['tool_choice'] = prepared.tool_choice\n"
        "    automatic = bool(body.get('cache_control'))\n"
        "    result = yield from turn.memory_call('{}')\n"
        "    return prepared.with_breakpoints(body), settings.update(extra)\n"
    )
    assert _around_the_turn(tree) == []

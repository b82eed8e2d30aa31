"""Deprecated alias of :mod:`stm_memory.kit` (the integration kit's former name).

Importing it warns once (``DeprecationWarning``); every name and submodule of the kit
resolves here too, so ``from stm_memory.providers.turn import MemoryTurn`` keeps
working. It goes in 0.3.0: import :mod:`stm_memory.kit`.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from typing import Any

from stm_memory.kit import *  # noqa: F403  (the alias re-exports the kit whole)
from stm_memory.kit import __all__ as __all__

warnings.warn(
    "stm_memory.providers is deprecated and goes in 0.3.0: import stm_memory.kit",
    DeprecationWarning,
    stacklevel=2,
)

#: The kit's submodules, importable under the old name.
_SUBMODULES = (
    "cache_hints",
    "capture",
    "checks",
    "endpoints",
    "guards",
    "loop",
    "memory_call",
    "ops",
    "options",
    "placing",
    "replies",
    "requests",
    "shell",
    "turn",
    "wire_anthropic",
    "wire_chat",
    "wire_responses",
)
for _name in _SUBMODULES:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"stm_memory.kit.{_name}")


#: Names the kit no longer exports, where they live now (still resolved here).
_MOVED = {
    "build_tool": "stm_memory.tool.memory_tool",
    "check_tool_call": "stm_memory.tool.vetting",
    "message_role": "stm_memory.wire",
    "message_text": "stm_memory.model.messages",
    "tool_description": "stm_memory.tool.schema",
    "tool_parameters": "stm_memory.tool.schema",
}
#: Names that are gone, and what replaced them.
_REPLACED = {
    "place_memory": "MemoryTurn.prepare(items, form='responses')",
    "place_with_instructions": "MemoryTurn.prepare(items, form='responses', system=...)",
    "last_user_text": "stm_memory.kit.current_user_text",
    "anthropic_user_text": "stm_memory.kit.current_user_text",
}


def __getattr__(name: str) -> Any:
    # A name the kit no longer exports from its root but a submodule still defines
    # (run_memory_call, dialogue_for_capture …), or one that moved elsewhere.
    for sub in _SUBMODULES:
        module = sys.modules[f"stm_memory.kit.{sub}"]
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    if name in _REPLACED:
        raise AttributeError(
            f"stm_memory.providers.{name} was removed: use {_REPLACED[name]} (the turn "
            "builds what a request sends)"
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

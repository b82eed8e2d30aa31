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
    "requests",
    "shell",
    "turn",
    "wire_anthropic",
    "wire_chat",
    "wire_responses",
)
for _name in _SUBMODULES:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"stm_memory.kit.{_name}")


def __getattr__(name: str) -> Any:
    # A name the kit no longer exports from its root but a submodule still defines
    # (run_memory_call, dialogue_for_capture …).
    for sub in _SUBMODULES:
        module = sys.modules[f"stm_memory.kit.{sub}"]
        if name in getattr(module, "__all__", ()):
            return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

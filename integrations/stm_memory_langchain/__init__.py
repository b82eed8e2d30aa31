"""LangChain integration of stm-memory.

- :class:`ShortTermMemoryMiddleware`: middleware for ``langchain.agents.create_agent``
  (needs ``pip install "stm-memory[langchain]"``).
- :class:`ShortTermMemoryBuffer`: a classic ``BaseMemory`` for chains (needs
  ``pip install "stm-memory[classic]"``).

Both are imported on first use, so either works without the other's extra; a missing
extra raises :class:`ImportError` naming the ``pip install`` that fixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._scope import ScopeResolver, ScopeSource, resolve_scope

if TYPE_CHECKING:
    from ._buffer import ShortTermMemoryBuffer
    from ._middleware import ShortTermMemoryMiddleware, ShortTermMemoryState

__all__ = [
    "ScopeResolver",
    "ScopeSource",
    "ShortTermMemoryBuffer",
    "ShortTermMemoryMiddleware",
    "ShortTermMemoryState",
    "resolve_scope",
]

_LAZY = {
    "ShortTermMemoryMiddleware": "._middleware",
    "ShortTermMemoryState": "._middleware",
    "ShortTermMemoryBuffer": "._buffer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""LangChain integration of stm-memory.

- :class:`ShortTermMemoryMiddleware`: middleware for ``langchain.agents.create_agent``
  (needs ``pip install "stm-memory[langchain]"``).
- :class:`ShortTermMemoryBuffer`: a classic ``BaseMemory`` for chains (needs
  ``pip install "stm-memory[classic]"``).
- :class:`ShortTermMemoryHistory`: a ``BaseChatMessageHistory`` for LCEL chains under
  ``RunnableWithMessageHistory`` (``ShortTermMemoryHistory.factory(...)`` is their
  ``get_session_history``), and :func:`with_short_term_memory`, which gives the
  chain's chat model the memory tool (langchain-core only); :class:`HistoryTurn` is
  a history's open turn, as that wrapper (or a model loop of your own) drives it.

Each is imported on first use, so one works without another's extra; a missing
extra raises :class:`ImportError` naming the ``pip install`` that fixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._scope import ScopeResolver, ScopeSource, resolve_scope

if TYPE_CHECKING:
    from ._buffer import ShortTermMemoryBuffer
    from ._chain import ShortTermMemoryChatModel, with_short_term_memory
    from ._history import HistoryTurn, ShortTermMemoryHistory, ShortTermMemoryHistoryFactory
    from ._middleware import ShortTermMemoryMiddleware, ShortTermMemoryState

__all__ = [
    "HistoryTurn",
    "ScopeResolver",
    "ScopeSource",
    "ShortTermMemoryBuffer",
    "ShortTermMemoryChatModel",
    "ShortTermMemoryHistory",
    "ShortTermMemoryHistoryFactory",
    "ShortTermMemoryMiddleware",
    "ShortTermMemoryState",
    "resolve_scope",
    "with_short_term_memory",
]

_LAZY = {
    "ShortTermMemoryMiddleware": "._middleware",
    "ShortTermMemoryState": "._middleware",
    "ShortTermMemoryBuffer": "._buffer",
    "ShortTermMemoryHistory": "._history",
    "HistoryTurn": "._history",
    "ShortTermMemoryHistoryFactory": "._history",
    "ShortTermMemoryChatModel": "._chain",
    "with_short_term_memory": "._chain",
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

"""Testing kit for users of stm-memory.

- :class:`FrozenClock`: a frozen, advanceable clock for ``ShortTermMemory(clock=...)``.
- Assertion helpers with clear failure messages: :func:`assert_memory_contains`,
  :func:`assert_tool_offered`, :func:`assert_tool_not_offered`,
  :func:`assert_request_carries_memory`, :func:`assert_request_lacks_memory` (and
  :func:`injected_memory`, :func:`offered_tools` to look for yourself).
- The deterministic offline model (answers from a script, calls
  ``update_short_term_memory`` when the nudge asks): :class:`OfflineModel`, as a
  LangChain chat model (:class:`OfflineChatModel`), as OpenAI / Anthropic response
  bodies (:func:`openai_chat_body`, :func:`anthropic_message_body`) and as real SDK
  clients answered in-process (:func:`offline_openai_client`,
  :func:`offline_anthropic_client`; they need the ``openai`` / ``anthropic`` extra).
- The providers' prompt caches, modelled from their documentation (reads, writes and
  expiry of a shared prefix, priced per model): :class:`PromptCache`,
  :class:`CacheProfile` (:data:`CACHE_PROFILES`), :class:`CacheUsage`, :func:`request_parts`,
  :func:`count_text_tokens`. The offline clients report their usage with it.
- The pytest plugin (:mod:`stm_memory.testing.plugin`, loaded through the ``pytest11``
  entry point): the fixtures ``stm_clock``, ``stm_memory``, ``stm_memory_factory``,
  ``stm_scope`` and ``stm_assert``.
- The storage seams' conformance suites (:mod:`stm_memory.testing.contract`):
  ``LiveCacheContract`` and ``MemoryStoreContract``, for a cache or store backend of
  your own to subclass and pass, as every backend shipped here does.

Everything but :class:`FrozenClock` is imported on first use, so importing this package
needs no optional extra.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from stm_memory.testing.clock import FrozenClock

if TYPE_CHECKING:
    from stm_memory.testing.assertions import (
        MemoryPart,
        StmAssertions,
        assert_memory_contains,
        assert_request_carries_memory,
        assert_request_lacks_memory,
        assert_tool_not_offered,
        assert_tool_offered,
        injected_memory,
        offered_tools,
    )
    from stm_memory.testing.chat_model import OfflineChatModel
    from stm_memory.testing.clients import offline_anthropic_client, offline_openai_client
    from stm_memory.testing.offline import (
        OfflineModel,
        OfflineReply,
        anthropic_message_body,
        openai_chat_body,
    )
    from stm_memory.testing.plugin import MemoryFactory
    from stm_memory.testing.prompt_cache import (
        ANTHROPIC_LOOKBACK_BLOCKS,
        ANTHROPIC_MAX_BREAKPOINTS,
        CACHE_PROFILES,
        CacheProfile,
        CacheUsage,
        Part,
        PromptCache,
        count_text_tokens,
        detect_api,
        request_parts,
    )

__all__ = [
    "ANTHROPIC_LOOKBACK_BLOCKS",
    "ANTHROPIC_MAX_BREAKPOINTS",
    "CACHE_PROFILES",
    "CacheProfile",
    "CacheUsage",
    "FrozenClock",
    "MemoryFactory",
    "MemoryPart",
    "OfflineChatModel",
    "OfflineModel",
    "OfflineReply",
    "Part",
    "PromptCache",
    "StmAssertions",
    "anthropic_message_body",
    "assert_memory_contains",
    "assert_request_carries_memory",
    "assert_request_lacks_memory",
    "assert_tool_not_offered",
    "assert_tool_offered",
    "count_text_tokens",
    "detect_api",
    "injected_memory",
    "offered_tools",
    "offline_anthropic_client",
    "offline_openai_client",
    "openai_chat_body",
    "request_parts",
]

# name → submodule that defines it (imported on first access).
_LAZY = {
    "MemoryPart": "assertions",
    "StmAssertions": "assertions",
    "assert_memory_contains": "assertions",
    "assert_request_carries_memory": "assertions",
    "assert_request_lacks_memory": "assertions",
    "assert_tool_not_offered": "assertions",
    "assert_tool_offered": "assertions",
    "injected_memory": "assertions",
    "offered_tools": "assertions",
    "OfflineChatModel": "chat_model",
    "offline_anthropic_client": "clients",
    "offline_openai_client": "clients",
    "OfflineModel": "offline",
    "OfflineReply": "offline",
    "anthropic_message_body": "offline",
    "openai_chat_body": "offline",
    "MemoryFactory": "plugin",  # the type of the stm_memory_factory fixture
    "ANTHROPIC_LOOKBACK_BLOCKS": "prompt_cache",
    "ANTHROPIC_MAX_BREAKPOINTS": "prompt_cache",
    "CACHE_PROFILES": "prompt_cache",
    "CacheProfile": "prompt_cache",
    "CacheUsage": "prompt_cache",
    "Part": "prompt_cache",
    "PromptCache": "prompt_cache",
    "count_text_tokens": "prompt_cache",
    "detect_api": "prompt_cache",
    "request_parts": "prompt_cache",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

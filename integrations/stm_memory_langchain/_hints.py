"""Prompt-cache hints for LangChain chat models (the middleware and the LCEL chain).

The same hints the loops send (:mod:`stm_memory.providers.cache_hints`), through what a
LangChain chat model takes: ``ChatOpenAI`` gets ``prompt_cache_key`` as a model setting
(a key the caller bound or set in ``model_kwargs`` wins); ``ChatAnthropic`` gets one
``cache_control`` breakpoint, on the last block before the current user message (the
end of the dialogue since the cut, which the next turn reads back). One, not the loops'
three: a middleware that runs inside ours (langchain-anthropic's
``AnthropicPromptCachingMiddleware`` tags the system prompt, the last tool and the
request) adds its own after we counted, and the API refuses a fifth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from stm_memory.providers import MAX_BREAKPOINTS, prompt_cache_key

from ._binding import base_model

__all__ = [
    "OPENAI_PROVIDERS",
    "anthropic_dialogue_breakpoint",
    "breakpoints_in",
    "cache_settings",
]

OPENAI_PROVIDERS = frozenset({"openai", "azure", "azure_openai"})
_BREAKPOINT = {"type": "ephemeral"}
M = TypeVar("M", bound=BaseMessage)


def cache_settings(
    model: Any, provider: str | None, live_key: str, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """Model settings to add for ``provider`` (empty when the caller's own key is set
    or the provider takes no key)."""
    if provider not in OPENAI_PROVIDERS or "prompt_cache_key" in settings:
        return {}
    base = base_model(model) if model is not None else None
    if "prompt_cache_key" in (getattr(base, "model_kwargs", None) or {}):
        return {}
    return {"prompt_cache_key": prompt_cache_key(live_key)}


def _marked(block: Any) -> bool:
    return isinstance(block, Mapping) and bool(block.get("cache_control"))


def _count(content: Any) -> int:
    return sum(1 for b in content if _marked(b)) if isinstance(content, list) else 0


def breakpoints_in(
    messages: Sequence[BaseMessage],
    *,
    system: BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: Mapping[str, Any] | None = None,
) -> int:
    """The ``cache_control`` breakpoints a LangChain request already carries."""
    count = 1 if (settings or {}).get("cache_control") else 0
    count += sum(_count(m.content) for m in messages)
    count += _count(system.content) if system is not None else 0
    for tool in tools:
        extras = tool.get("cache_control") if isinstance(tool, Mapping) else None
        extras = extras or (getattr(tool, "extras", None) or {}).get("cache_control")
        count += 1 if extras else 0
    return count


#: What ``AnthropicPromptCachingMiddleware`` adds (system, last tool, the automatic
#: one): room for it is kept while the request has no automatic breakpoint yet.
_CACHING_MIDDLEWARE_BREAKPOINTS = 3


def anthropic_dialogue_breakpoint(
    messages: Sequence[M], *, existing: int, automatic: bool
) -> list[M]:
    """``messages`` with a breakpoint on the last block before the current user
    message, when the request stays within the limit (``existing`` breakpoints, plus
    a caching middleware's while no ``automatic`` one is set) and that block can carry
    one."""
    out = list(messages)
    pending = 0 if automatic else _CACHING_MIDDLEWARE_BREAKPOINTS
    if existing + 1 + pending > MAX_BREAKPOINTS:
        return out
    current = next((i for i in range(len(out) - 1, -1, -1) if out[i].type == "human"), None)
    if not current:
        return out
    previous = out[current - 1]
    content = previous.content
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    )
    if not blocks or not isinstance(blocks[-1], Mapping) or _marked(blocks[-1]):
        return out
    last = blocks[-1]
    if last.get("type") != "text" or not last.get("text"):
        return out  # tool_use blocks come from tool_calls; empty text is refused
    blocks[-1] = {**last, "cache_control": dict(_BREAKPOINT)}
    out[current - 1] = previous.model_copy(update={"content": blocks})
    return out

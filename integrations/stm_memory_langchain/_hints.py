"""Prompt-cache hints for LangChain chat models (the middleware and the LCEL chain).

The same hints the loops send (:mod:`stm_memory.providers.cache_hints`), through what a
LangChain chat model takes: ``ChatOpenAI`` gets ``prompt_cache_key`` as a model setting
(a key the caller bound or set in ``model_kwargs`` wins); ``ChatAnthropic`` gets one
``cache_control`` breakpoint, on the user's own last block of the current message, ahead
of the briefings placed after it (the next turn reads it back). One, not the loops'
three: a middleware that runs inside ours (langchain-anthropic's
``AnthropicPromptCachingMiddleware`` tags the system prompt, the last tool and the
request) adds its own after we counted, and the API refuses a fifth. Ours takes the TTL
of the breakpoints it can see; one added later, inside ours, it cannot: list a caching
middleware with a 1-hour TTL before ``ShortTermMemoryMiddleware``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from stm_memory.providers import (
    MAX_BREAKPOINTS,
    is_marked,
    mark_own_last,
    own_blocks,
    prompt_cache_key,
)

from ._binding import base_model

__all__ = [
    "OPENAI_PROVIDERS",
    "anthropic_dialogue_breakpoint",
    "breakpoints_in",
    "cache_settings",
    "caller_ttl",
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


def _count(content: Any) -> int:
    return sum(1 for b in content if is_marked(b)) if isinstance(content, list) else 0


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


def caller_ttl(
    messages: Sequence[BaseMessage],
    *,
    system: BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: Mapping[str, Any] | None = None,
) -> str | None:
    """The TTL the request's breakpoints use when they agree (ours then use it too: the
    API refuses a shorter TTL before a longer one)."""
    markers: list[Any] = [(settings or {}).get("cache_control")]
    for content in [*(m.content for m in messages), system.content if system else None]:
        if isinstance(content, list):
            markers += [b.get("cache_control") for b in content if isinstance(b, Mapping)]
    for tool in tools:
        extras = tool if isinstance(tool, Mapping) else getattr(tool, "extras", None) or {}
        markers.append(extras.get("cache_control"))
    found = {m.get("ttl") for m in markers if isinstance(m, Mapping)}
    return found.pop() if len(found) == 1 else None


def anthropic_dialogue_breakpoint(
    messages: Sequence[M],
    *,
    existing: int,
    automatic: bool,
    injected: Sequence[str] = (),
    ttl: str | None = None,
) -> list[M]:
    """``messages`` with a breakpoint on the user's own last block of the current
    message (ahead of the ``injected`` texts placement appended to it), else on the
    message before it, when the request stays within the limit (``existing``
    breakpoints, plus a caching middleware's while no ``automatic`` one is set) and
    that block can carry one."""
    out = list(messages)
    pending = 0 if automatic else _CACHING_MIDDLEWARE_BREAKPOINTS
    if existing + 1 + pending > MAX_BREAKPOINTS:
        return out
    current = next((i for i in range(len(out) - 1, -1, -1) if out[i].type == "human"), None)
    if current is None:
        return out
    marker = {**_BREAKPOINT, "ttl": ttl} if ttl else dict(_BREAKPOINT)
    for index in (current, current - 1):
        if index < 0:
            break
        # Tool calls of an AI message travel in ``tool_calls``, not its content: only a
        # text block here is sure to reach the wire as a block that carries a breakpoint.
        own = own_blocks(out[index].content, injected)
        if own and isinstance(own[-1], Mapping) and own[-1].get("type") == "text":
            content = mark_own_last(out[index].content, marker, injected)
            if content is not None:
                out[index] = out[index].model_copy(update={"content": content})
                return out
        if index == current and own:
            break  # its own last block cannot carry one: no further back
    return out

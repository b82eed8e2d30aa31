"""Prompt-cache hints for LangChain chat models (the middleware and the LCEL chain).

The same hints the loops send (:mod:`stm_memory.kit.cache_hints`), through what a
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

from stm_memory import Scope
from stm_memory.kit import (
    MAX_BREAKPOINTS,
    agreed_ttl,
    breakpoint_marker,
    dialogue_breakpoint,
    prompt_cache_key,
)

from ._binding import base_model

__all__ = [
    "OPENAI_PROVIDERS",
    "anthropic_dialogue_breakpoint",
    "breakpoints_in",
    "cache_settings",
]

OPENAI_PROVIDERS = frozenset({"openai", "azure", "azure_openai"})
M = TypeVar("M", bound=BaseMessage)


def model_kwargs(model: Any) -> dict[str, Any]:
    """The provider settings a chat model was built with (``ChatOpenAI(model_kwargs=)``
    and the like): where a caller asks for ``prompt_cache_retention``."""
    base = base_model(model) if model is not None else None
    kwargs = getattr(base, "model_kwargs", None)
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def cache_settings(
    model: Any, provider: str | None, scope: Scope, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """Model settings to add for ``provider`` (empty when the caller's own key is set
    or the provider takes no key)."""
    if provider not in OPENAI_PROVIDERS or "prompt_cache_key" in settings:
        return {}
    if "prompt_cache_key" in model_kwargs(model):
        return {}
    return {"prompt_cache_key": prompt_cache_key(scope)}


def breakpoints_in(
    messages: Sequence[BaseMessage],
    *,
    system: BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: Mapping[str, Any] | None = None,
) -> list[Any]:
    """Every ``cache_control`` marker a LangChain request already carries: in the model
    settings (the automatic one), on message and system blocks, on tools (a dict's own
    key, a ``BaseTool``'s ``extras``)."""
    found = [(settings or {}).get("cache_control")]
    contents = [m.content for m in messages] + ([system.content] if system is not None else [])
    for content in contents:
        if isinstance(content, list):
            found += [b.get("cache_control") for b in content if isinstance(b, Mapping)]
    for tool in tools:
        extras = tool if isinstance(tool, Mapping) else getattr(tool, "extras", None) or {}
        found.append(extras.get("cache_control"))
    return [marker for marker in found if marker]


#: What ``AnthropicPromptCachingMiddleware`` adds (system, last tool, the automatic
#: one): room for it is kept while the request has no automatic breakpoint yet.
_CACHING_MIDDLEWARE_BREAKPOINTS = 3


def anthropic_dialogue_breakpoint(
    messages: Sequence[M],
    *,
    markers: Sequence[Any],
    automatic: bool,
    injected: Sequence[str] = (),
) -> list[M]:
    """``messages`` with a breakpoint on the user's own last block of the current
    message (ahead of the ``injected`` texts placement appended to it), else on the
    message before it (:func:`~stm_memory.kit.dialogue_breakpoint`), with the TTL
    the request's ``markers`` agree on, when the request stays within the limit (those
    markers, plus a caching middleware's while no ``automatic`` one is set)."""
    out = list(messages)
    pending = 0 if automatic else _CACHING_MIDDLEWARE_BREAKPOINTS
    if len(markers) + 1 + pending > MAX_BREAKPOINTS:
        return out
    current = next((i for i in range(len(out) - 1, -1, -1) if out[i].type == "human"), None)
    if current is None:
        return out
    marker = breakpoint_marker(agreed_ttl(markers))
    contents = [m.content for m in out]
    found = dialogue_breakpoint(contents, current, marker, injected, text_only=True)
    if found is not None:
        index, content = found
        out[index] = out[index].model_copy(update={"content": content})
    return out

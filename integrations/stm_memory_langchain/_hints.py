"""Prompt-cache hints for LangChain chat models (the middleware and the LCEL chain):
what the turn decided (``PreparedRequest``: :mod:`stm_memory.kit.cache_hints` says what
a hint is and where it goes), mapped onto what a LangChain chat model takes. Nothing
here decides a hint.

``ChatOpenAI`` gets the turn's ``prompt_cache_key`` as a model setting
(``PreparedRequest.hints``; the turn leaves it out when the caller bound one or set it
in ``model_kwargs``, :func:`request_settings`); ``ChatAnthropic`` gets one
``cache_control`` breakpoint, on the user's own last block of the current message,
ahead of the briefings placed after it (the next turn reads it back):
``Breakpoints.on_dialogue`` says where, within the one budget. One, not the loops'
three: a middleware that runs inside ours (langchain-anthropic's
``AnthropicPromptCachingMiddleware`` tags the system prompt, the last tool and the
request) adds its own after we counted, and the API refuses a fifth, so its three are
kept in reserve while the request has no automatic breakpoint yet. Ours takes the TTL
of the breakpoints it can see; one added later, inside ours, it cannot: list a caching
middleware with a 1-hour TTL before ``ShortTermMemoryMiddleware``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from stm_memory.kit import PreparedRequest

from ._binding import base_model

__all__ = ["breakpoints_in", "hinted", "model_kwargs", "request_settings", "with_breakpoint"]

M = TypeVar("M", bound=BaseMessage)

#: What ``AnthropicPromptCachingMiddleware`` adds (system, last tool, the automatic
#: one): kept in reserve while the request has no automatic breakpoint yet.
_CACHING_MIDDLEWARE_BREAKPOINTS = 3


def model_kwargs(model: Any) -> dict[str, Any]:
    """The provider settings a chat model was built with (``ChatOpenAI(model_kwargs=)``
    and the like): where a caller asks for ``prompt_cache_retention`` or sets its own
    ``prompt_cache_key``."""
    base = base_model(model) if model is not None else None
    kwargs = getattr(base, "model_kwargs", None)
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def request_settings(model: Any, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's settings of a request, as the turn reads them (its own cache hints,
    its retention): the chat model's ``model_kwargs`` under the request's ``settings``
    (the model settings, or the keyword arguments bound to the model)."""
    return {**model_kwargs(model), **(settings or {})}


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


def with_breakpoint(
    prepared: PreparedRequest,
    messages: Sequence[M],
    *,
    system: BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: Mapping[str, Any],
) -> list[M]:
    """``messages`` with the breakpoint the turn prepared for this request
    (``prepared.breakpoints``; none: unchanged), where
    :meth:`~stm_memory.kit.Breakpoints.on_dialogue` puts it: the current message's own
    last text block (the last human message), else the message before it, with the TTL
    the request's markers agree on (:func:`breakpoints_in`: on its messages, ``system``,
    ``tools`` and model ``settings``), while the budget has room (a caching
    middleware's three kept in reserve until the settings set an automatic one). The
    one mapping of the middleware and the chain."""
    out = list(messages)
    if prepared.breakpoints is None:
        return out
    markers = breakpoints_in(out, system=system, tools=tools, settings=settings)
    automatic = bool(settings.get("cache_control"))
    current = next((i for i in range(len(out) - 1, -1, -1) if out[i].type == "human"), None)
    found = prepared.breakpoints.on_dialogue(
        [m.content for m in out],
        current,
        markers=markers,
        reserved=0 if automatic else _CACHING_MIDDLEWARE_BREAKPOINTS,
    )
    if found is not None:
        index, content = found
        out[index] = out[index].model_copy(update={"content": content})
    return out


def hinted(
    prepared: PreparedRequest,
    messages: Sequence[M],
    *,
    system: BaseMessage | None = None,
    tools: Sequence[Any] = (),
    settings: Mapping[str, Any],
) -> tuple[dict[str, Any], list[M]]:
    """The one mapping of the turn's cache hints onto a LangChain request (the
    middleware's and the chain's): the model settings to add (OpenAI's key) and the
    messages to send (with Anthropic's breakpoint, :func:`with_breakpoint`)."""
    if prepared.hints:
        return dict(prepared.hints), list(messages)
    return {}, with_breakpoint(prepared, messages, system=system, tools=tools, settings=settings)

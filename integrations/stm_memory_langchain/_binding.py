"""The chat model inside a chain and the tools bound to it: finding it under
``bind``/``bind_tools`` layers, and binding the memory tool beside the caller's own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.tools import BaseTool

from stm_memory import TOOL_NAME
from stm_memory.kit import tool_name

__all__ = ["base_model", "bindings", "own_tools", "with_tools"]


def base_model(runnable: Runnable[Any, Any]) -> BaseChatModel | None:
    """The chat model inside ``runnable`` (itself, or under ``bind``/``bind_tools``)."""
    while isinstance(runnable, RunnableBinding):
        runnable = runnable.bound
    return runnable if isinstance(runnable, BaseChatModel) else None


def bindings(runnable: Runnable[Any, Any]) -> tuple[dict[str, Any], list[RunnableConfig]]:
    """The keyword arguments and configs bound around the chat model, outermost last."""
    kwargs: dict[str, Any] = {}
    configs: list[RunnableConfig] = []
    chain: list[RunnableBinding[Any, Any]] = []
    while isinstance(runnable, RunnableBinding):
        chain.append(runnable)
        runnable = runnable.bound
    for binding in reversed(chain):  # inner bindings first, outer ones override
        kwargs.update(binding.kwargs)
        if binding.config:
            configs.append(binding.config)
    return kwargs, configs


def with_tools(
    model: Runnable[Any, Any], tools: Sequence[BaseTool], tool_choice: Any = None
) -> Runnable[Any, Any]:
    """``model`` with our ``tools`` beside the tools it already has (its own options
    win, but for a ``tool_choice`` given here)."""
    if not tools:
        return model
    base = base_model(model)
    if base is None:  # pragma: no cover - with_short_term_memory checked it
        return model
    kwargs, configs = bindings(model)
    ours = (
        base.bind_tools(list(tools), tool_choice=tool_choice)
        if tool_choice
        else base.bind_tools(list(tools))
    )
    own_kwargs = ours.kwargs if isinstance(ours, RunnableBinding) else {}
    names = {t.name for t in tools}
    theirs = [t for t in kwargs.get("tools") or [] if tool_name(t) not in names]
    merged = {**own_kwargs, **kwargs, "tools": [*theirs, *own_kwargs.get("tools", [])]}
    if tool_choice and "tool_choice" in own_kwargs:
        merged["tool_choice"] = own_kwargs["tool_choice"]
    bound: Runnable[Any, Any] = base.bind(**merged)
    for config in configs:
        bound = bound.with_config(config)
    return bound


def own_tools(model: Runnable[Any, Any]) -> bool:
    """Whether the caller bound tools of their own to ``model``."""
    tools = bindings(model)[0].get("tools") or []
    return any(tool_name(t) != TOOL_NAME for t in tools)

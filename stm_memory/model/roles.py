"""Normalised message roles across OpenAI Chat dicts, Responses items, Anthropic dicts and
LangChain messages: the one reader placement and the history cut share."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import BaseMessage

__all__ = ["ROLE_ALIASES", "has_block", "message_role"]

ROLE_ALIASES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


def has_block(content: Any, kind: str) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == kind for b in content
    )


def message_role(message: Any) -> str:
    """Normalised role: system, user, assistant, tool (a tool result), reasoning or other."""
    if isinstance(message, BaseMessage):
        kind = message.type
        if kind == "chat":
            kind = str(getattr(message, "role", ""))
        return ROLE_ALIASES.get(kind, "other")
    if isinstance(message, Mapping):
        role = message.get("role")
        if role is None:
            item = str(message.get("type", ""))
            if item.endswith("_call_output"):
                return "tool"
            if item == "reasoning":
                return "reasoning"
            return "assistant" if item.endswith("_call") else "other"
        mapped = ROLE_ALIASES.get(str(role), "other")
        if mapped == "user" and has_block(message.get("content"), "tool_result"):
            return "tool"
        return mapped
    if isinstance(message, tuple) and message:
        return ROLE_ALIASES.get(str(message[0]), "other")
    return "user" if isinstance(message, str) else "other"

"""OpenAI Chat Completions wire helpers: tool calls read from an assistant message,
tool results sent back as ``role: "tool"`` messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stm_memory.kit.replies import ToolCall

__all__ = ["chat_tool_call", "chat_tool_results", "function_call"]


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A Chat ``tool_calls`` entry of type ``function``."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_tool_call(raw: Mapping[str, Any], truncated: bool) -> ToolCall:
    """One ``tool_calls`` entry: a function call (JSON text arguments), or a caller's
    custom (free-text) tool, whose input becomes ``{"input": text}``."""
    if raw.get("type") == "custom":
        custom = raw.get("custom") or {}
        args = {"input": custom.get("input", "")}
        return ToolCall(str(raw.get("id")), str(custom.get("name", "")), args, truncated)
    function = raw.get("function") or {}
    return ToolCall(
        str(raw.get("id")), str(function.get("name", "")), function.get("arguments"), truncated
    )


def chat_tool_results(results: Sequence[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
    """One ``role: "tool"`` message per call, in the calls' order."""
    return [
        {"role": "tool", "tool_call_id": call.id, "content": content} for call, content in results
    ]

"""OpenAI Chat Completions dicts: calls in an assistant message's ``tool_calls``, results
in ``role: "tool"`` messages, injections as messages of their own; the calls read off a
reply, the results sent back and a tool's ``tools=[...]`` entry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

from stm_memory.wire.base import ToolCall, ToolSpec, is_empty, merged_content
from stm_memory.wire.dicts import DictReader

__all__ = [
    "CHAT",
    "ChatCodec",
    "calls_without",
    "chat_tool",
    "chat_tool_call",
    "chat_tool_results",
    "function_call",
    "tool_call_ids",
]


def tool_call_ids(calls: Any, tool: str) -> set[str]:
    """Ids of the ``tool_calls`` entries (``{"id", "function": {"name"}}``) of ``tool``.
    LangChain keeps the same list in an ``AIMessage``'s ``additional_kwargs``."""
    if not isinstance(calls, list):
        return set()
    return {
        str(c.get("id"))
        for c in calls
        if isinstance(c, Mapping)
        and isinstance(c.get("function"), Mapping)
        and c["function"].get("name") == tool
    }


def calls_without(calls: list[Any], ids: Set[str]) -> list[Any]:
    """``tool_calls`` entries whose id is not in ``ids``."""
    return [c for c in calls if not (isinstance(c, Mapping) and str(c.get("id")) in ids)]


class ChatCodec(DictReader):
    """Chat messages. Memory and briefings become messages of their own: system ones
    (``developer`` when the list opens with one), or user ones with string content,
    which Chat and Responses alike accept several of in a row."""

    name = "openai_chat"

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        if message.get("role") != "assistant":
            return set()
        return tool_call_ids(message.get("tool_calls"), tool)

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if message.get("role") == "tool":
            return None if str(message.get("tool_call_id")) in ids else message
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            return message
        rest = calls_without(calls, ids)
        if len(rest) == len(calls):
            return message
        new = {**message, "tool_calls": rest}
        if not rest:
            del new["tool_calls"]
            if is_empty(new.get("content")):
                return None
        return new

    def system_at(self, top: bool) -> bool:
        return True

    def system_message(self, text: str, messages: Sequence[Any]) -> Any:
        first = messages[0] if messages else None
        developer = isinstance(first, Mapping) and first.get("role") == "developer"
        return {"role": "developer" if developer else "system", "content": text}

    def user_message(self, texts: Sequence[str]) -> Any:
        return {"role": "user", "content": "\n\n".join(texts)}

    # Chat and Responses content parts differ, so injected text is never merged into a
    # message of the caller's: it is a user message of its own.
    def can_prepend(self, message: Any) -> bool:
        return False

    def can_append(self, message: Any) -> bool:
        return False

    def prepend(self, message: Any, texts: Sequence[str]) -> Any:
        return message

    def append(self, message: Any, texts: Sequence[str]) -> Any:
        return message

    #: The content part type text goes in (Responses input messages say input_text).
    part = "text"

    def merged(self, message: Any, texts: Sequence[str], *, before: bool = False) -> Any:
        content = merged_content(message.get("content"), texts, part=self.part, before=before)
        return {**message, "content": content}


CHAT = ChatCodec()


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


def chat_tool(spec: ToolSpec) -> dict[str, Any]:
    """Chat Completions ``tools=[...]`` entry."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.schema(),
            "strict": True,
        },
    }

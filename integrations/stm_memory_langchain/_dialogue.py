"""Pure helpers over LangChain messages, tools and model results (langchain-core only,
no ``langchain`` import, so the classic buffer and the LCEL history can share them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from stm_memory import TOOL_NAME
from stm_memory.kit import (
    answered_then_remembered,
    current_user_index,
    is_truncated,
    text_of,
    tool_result_text,
)

__all__ = [
    "ai_messages",
    "cut_short",
    "memory_calls",
    "memory_result",
    "provider_of",
    "remembered_after_answering",
    "start_index",
    "without_invalid_memory_calls",
]


def start_index(messages: Sequence[Any], start_id: str | None) -> int:
    """Index of this turn's first message: the message whose id ``before_agent``
    remembered; if another middleware rewrote history since, the last human message."""
    if start_id is not None:
        for i in range(len(messages) - 1, -1, -1):
            if getattr(messages[i], "id", None) == start_id:
                return i
    found = current_user_index(messages)
    return 0 if found is None else found


def remembered_after_answering(messages: Sequence[Any], start: int) -> bool:
    """The model's last message answered the user *and* called only the memory tool,
    whose results are in: the turn is over (the memory call was the epilogue of an
    answer the user already has), no further model call is needed."""
    for i in range(len(messages) - 1, start - 1, -1):
        message = messages[i]
        kind = getattr(message, "type", None)
        if kind == "tool":
            continue
        if kind != "ai":
            return False
        calls = getattr(message, "tool_calls", None) or []
        names = [str(c.get("name")) for c in calls]
        if not answered_then_remembered(text_of(message), names):
            return False
        answered = {getattr(m, "tool_call_id", None) for m in messages[i + 1 :]}
        return all(c.get("id") in answered for c in calls)
    return False


def provider_of(model: Any) -> str | None:
    """The chat model's LangSmith provider name (``openai``, ``anthropic`` …)."""
    try:
        provider = model._get_ls_params().get("ls_provider")
    except Exception:
        return None
    return provider if isinstance(provider, str) else None


def memory_calls(message: Any) -> list[dict[str, Any]]:
    """The ``update_short_term_memory`` calls of a LangChain AI message (parsed ones)."""
    calls = getattr(message, "tool_calls", None) or []
    return [dict(c) for c in calls if c.get("name") == TOOL_NAME]


def memory_result(call: Mapping[str, Any], result: Mapping[str, Any]) -> ToolMessage:
    """The ``ToolMessage`` answering a memory ``call`` with the tool's ``result``."""
    return ToolMessage(
        content=tool_result_text(result), tool_call_id=call.get("id") or "", name=TOOL_NAME
    )


def ai_messages(response: Any) -> list[AIMessage]:
    """The assistant messages of a model call's result (``ModelResponse``, an
    ``ExtendedModelResponse`` around one, or a bare ``AIMessage``)."""
    if isinstance(response, AIMessage):
        return [response]
    response = getattr(response, "model_response", response)
    result = getattr(response, "result", None) or []
    return [m for m in result if isinstance(m, AIMessage)]


def cut_short(message: AIMessage) -> bool:
    """The provider stopped this message at the output-token limit."""
    meta = message.response_metadata or {}
    details = meta.get("incomplete_details")
    return is_truncated(
        finish_reason=meta.get("finish_reason"),
        stop_reason=meta.get("stop_reason"),
        incomplete_reason=details.get("reason") if isinstance(details, Mapping) else None,
    )


def without_invalid_memory_calls(message: AIMessage) -> AIMessage:
    # A memory call whose arguments did not parse is never executed; kept, the provider
    # would be sent a call without a result on the next turn.
    invalid = [c for c in message.invalid_tool_calls if c.get("name") == TOOL_NAME]
    if not invalid:
        return message
    ids = {c.get("id") for c in invalid}
    kwargs = dict(message.additional_kwargs)
    raw = kwargs.get("tool_calls")
    if isinstance(raw, list):
        rest = [c for c in raw if not (isinstance(c, Mapping) and c.get("id") in ids)]
        if rest:
            kwargs["tool_calls"] = rest
        else:
            kwargs.pop("tool_calls")
    content = message.content
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("id") in ids)
        ]
    return message.model_copy(
        update={
            "invalid_tool_calls": [c for c in message.invalid_tool_calls if c not in invalid],
            "additional_kwargs": kwargs,
            "content": content,
        }
    )

"""Pure helpers over LangChain messages, tools and model results (no ``langchain``
import, so the classic buffer can share them)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool

from stm_memory import TOOL_NAME, StoredMessage
from stm_memory.model.messages import message_text
from stm_memory.tool.vetting import is_truncated

__all__ = [
    "ai_messages",
    "cut_short",
    "dialogue_for_capture",
    "is_summary_message",
    "last_human_index",
    "memory_updated",
    "names_memory_tool",
    "needs_previous",
    "provider_of",
    "remembered_after_answering",
    "start_index",
    "text_of",
    "tool_name",
]

log = logging.getLogger("stm_memory.langchain")


def text_of(message: Any) -> str:
    """Visible text of a message (string content or the text blocks of a list)."""
    try:
        return message_text(getattr(message, "content", None))
    except Exception:  # exotic content is simply not dialogue
        return ""


def is_summary_message(message: Any) -> bool:
    """A message ``SummarizationMiddleware`` wrote, not something the user said."""
    extra = getattr(message, "additional_kwargs", None)
    return isinstance(extra, Mapping) and extra.get("lc_source") == "summarization"


def _is_human(message: Any) -> bool:
    return getattr(message, "type", None) == "human" and not is_summary_message(message)


def last_human_index(messages: Sequence[Any]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if _is_human(messages[i]):
            return i
    return None


def start_index(messages: Sequence[Any], start_id: str | None) -> int:
    """Index of this turn's first message: the message whose id ``before_agent``
    remembered; if another middleware rewrote history since, the last human message."""
    if start_id is not None:
        for i in range(len(messages) - 1, -1, -1):
            if getattr(messages[i], "id", None) == start_id:
                return i
    found = last_human_index(messages)
    return 0 if found is None else found


def _is_dialogue(message: Any) -> bool:
    return (
        getattr(message, "type", None) in ("human", "ai")
        and not is_summary_message(message)
        and bool(text_of(message).strip())
    )


def _stored_as_dicts(messages: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.content, "name": m.name} for m in messages]


def dialogue_for_capture(
    messages: Sequence[Any], start: int, previous: Sequence[StoredMessage] = ()
) -> list[Any]:
    """What to hand to ``ShortTermMemory.capture`` (which keeps the last turns).

    Capture *replaces* the channel's recent messages, so the list must hold the recent
    dialogue, not only this turn: a checkpointed thread already does. When nothing
    precedes this turn (no checkpointer, a fresh thread, or history summarised away)
    the channel's previously stored messages are put in front of it instead.
    Summaries written by ``SummarizationMiddleware`` are not dialogue and are dropped.
    """
    if not needs_previous(messages, start):
        return [m for m in messages if not is_summary_message(m)]
    current = [m for m in messages[start:] if not is_summary_message(m)]
    return [*_stored_as_dicts(previous), *current]


def needs_previous(messages: Sequence[Any], start: int) -> bool:
    """True when :func:`dialogue_for_capture` would use the stored messages."""
    return not any(_is_dialogue(m) for m in messages[:start])


def remembered_after_answering(messages: Sequence[Any], start: int) -> bool:
    """The model's last message answered the user *and* called only the memory tool,
    whose results are in: the turn is over (SPEC §8), no further model call is needed."""
    for i in range(len(messages) - 1, start - 1, -1):
        message = messages[i]
        kind = getattr(message, "type", None)
        if kind == "tool":
            continue
        if kind != "ai":
            return False
        calls = getattr(message, "tool_calls", None) or []
        if not calls or any(c.get("name") != TOOL_NAME for c in calls):
            return False
        answered = {getattr(m, "tool_call_id", None) for m in messages[i + 1 :]}
        return all(c.get("id") in answered for c in calls) and bool(text_of(message).strip())
    return False


def memory_updated(messages: Sequence[Any], start: int) -> bool:
    """Whether this turn's messages hold a successful ``update_short_term_memory``
    result (used when a run resumes in a process that did not see the update)."""
    for message in messages[start:]:
        if getattr(message, "type", None) != "tool" or getattr(message, "name", None) != TOOL_NAME:
            continue
        try:
            result = json.loads(text_of(message))
        except ValueError:
            continue
        if isinstance(result, Mapping) and result.get("status") == "completed":
            return True
    return False


def tool_name(tool: BaseTool | Mapping[str, Any]) -> str | None:
    """Name of a tool in ``ModelRequest.tools``: a ``BaseTool`` or a provider dict."""
    if isinstance(tool, BaseTool):
        return tool.name
    function = tool.get("function")
    name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
    return name if isinstance(name, str) else None


def names_memory_tool(choice: Any) -> bool:
    """``tool_choice`` forcing the memory tool: its name, or an OpenAI/Anthropic dict."""
    if choice == TOOL_NAME:
        return True
    return isinstance(choice, Mapping) and tool_name(choice) == TOOL_NAME


def provider_of(model: Any) -> str | None:
    """The chat model's LangSmith provider name (``openai``, ``anthropic`` …)."""
    try:
        provider = model._get_ls_params().get("ls_provider")
    except Exception:
        return None
    return provider if isinstance(provider, str) else None


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

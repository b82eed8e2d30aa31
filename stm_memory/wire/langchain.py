"""LangChain messages: the one module of the package's lower layers that imports
``langchain_core``. Calls are an ``AIMessage``'s ``tool_calls`` (and, from partner
models, OpenAI's raw list in ``additional_kwargs`` or Anthropic's ``tool_use`` blocks in
the content), results are ``ToolMessage`` objects. Injections are ``SystemMessage`` and
``HumanMessage`` objects, so a LangChain list stays one; the chat model's binding
converts them for its provider.

:mod:`stm_memory.wire` imports this module only when a list holds objects (not dicts,
tuples or strings), so the dict formats never load LangChain through it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately

from stm_memory.wire.base import (
    MessageView,
    Role,
    content_text,
    is_empty,
    is_memory_block,
    marked_content,
    merged_content,
    normal_role,
    result_text,
    text_parts,
    tool_use_ids,
)
from stm_memory.wire.openai_chat import calls_without, tool_call_ids

__all__ = [
    "LANGCHAIN",
    "LEADING_SYSTEM_ONLY",
    "SEPARATE_USER",
    "LangChainCodec",
    "approximate_tokens",
]


def is_message(message: Any) -> bool:
    return isinstance(message, BaseMessage)


def approximate_tokens(message: Any) -> int:
    """LangChain's estimate for one message of any format it converts (about four
    characters a token plus a few per message); raises on a shape it does not take."""
    return count_tokens_approximately([message])


def _join(content: Any, texts: Sequence[str], *, before: bool) -> Any:
    if isinstance(content, str) and before:
        return "\n\n".join(p for p in [*texts, content] if p)
    # Appended text (the briefings after the current user message) becomes blocks of
    # its own, so the user's words stay a block the next turn sends unchanged: a prefix
    # the provider's cache serves, and where a cache breakpoint can end.
    blocks = text_parts(texts)
    own = (text_parts([content]) if content else []) if isinstance(content, str) else list(content)
    return [*blocks, *own] if before else [*own, *blocks]


class LangChainCodec:
    """``leading_system_only``: the chat model's provider takes system messages only
    at the start of the list, so injections further down become user text.
    ``separate_user``: the provider takes consecutive user messages (OpenAI), so user
    text goes in a message of its own, as the OpenAI loops send it, instead of joining
    the user's own message (which every provider takes)."""

    name = "langchain"
    system_apart = False

    def __init__(self, *, leading_system_only: bool = False, separate_user: bool = False) -> None:
        self.leading_system_only = leading_system_only
        self.separate_user = separate_user

    def role(self, message: Any) -> Role:
        kind = message.type
        if kind == "chat":  # a ChatMessage names its role
            kind = str(getattr(message, "role", ""))
        return normal_role(kind)

    def text(self, message: Any) -> str:
        return content_text(message.content)

    def view(self, message: Any) -> MessageView | None:
        tool_calls = getattr(message, "tool_calls", None)
        return MessageView(message.type, message.name or "", message.content, tool_calls or None)

    def user_words(self, message: Any) -> bool:
        return self.role(message) == "user"

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        if not isinstance(message, AIMessage):
            return set()
        ids = {str(c.get("id")) for c in message.tool_calls if c.get("name") == tool}
        ids |= tool_call_ids(message.additional_kwargs.get("tool_calls"), tool)
        return ids | tool_use_ids(message.content, tool)

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if isinstance(message, ToolMessage):
            return None if message.tool_call_id in ids else message
        if not isinstance(message, AIMessage):
            return message
        calls = [c for c in message.tool_calls if str(c.get("id")) not in ids]
        content = message.content
        if isinstance(content, list):
            content = [b for b in content if not is_memory_block(b, ids)]
        kwargs = dict(message.additional_kwargs)
        raw = kwargs.get("tool_calls")
        if isinstance(raw, list):
            if rest := calls_without(raw, ids):
                kwargs["tool_calls"] = rest
            else:
                kwargs.pop("tool_calls")
        unchanged = len(calls) == len(message.tool_calls) and content == message.content
        if unchanged and kwargs == message.additional_kwargs:
            return message
        if not calls and is_empty(content):
            return None
        return message.model_copy(
            update={"tool_calls": calls, "content": content, "additional_kwargs": kwargs}
        )

    def calls(self, message: Any) -> list[tuple[str, str]]:
        if not isinstance(message, AIMessage):
            return []
        return [(str(c.get("id")), str(c.get("name") or "")) for c in message.tool_calls]

    def results(self, message: Any) -> list[tuple[str, str]]:
        if not isinstance(message, ToolMessage):
            return []
        text = result_text(message.content)
        return [] if text is None else [(str(message.tool_call_id), text)]

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        if not isinstance(message, ToolMessage):
            return message
        text = texts.get(str(message.tool_call_id))
        return message if text is None else message.model_copy(update={"content": text})

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if not isinstance(message, AIMessage):
            return None
        calls = [c for c in message.tool_calls if str(c.get("id")) in ids]
        if not calls:
            return None
        content = message.content
        kept: str | list[Any] = (
            [b for b in content if is_memory_block(b, ids)] if isinstance(content, list) else ""
        )
        kwargs = dict(message.additional_kwargs)
        raw = kwargs.get("tool_calls")
        if isinstance(raw, list):
            kwargs["tool_calls"] = [c for c in raw if c not in calls_without(raw, ids)]
        # The same id: a LangGraph state update replaces the message in place.
        return message.model_copy(
            update={"tool_calls": calls, "content": kept, "additional_kwargs": kwargs}
        )

    def follows_reasoning(self, message: Any) -> bool:
        return False

    def system_at(self, top: bool) -> bool:
        return top or not self.leading_system_only

    def system_message(self, text: str, messages: Sequence[Any]) -> Any:
        return SystemMessage(text)

    def user_message(self, texts: Sequence[str]) -> Any:
        return HumanMessage("\n\n".join(texts))

    def can_prepend(self, message: Any) -> bool:
        return isinstance(message, HumanMessage) and not self.separate_user

    def can_append(self, message: Any) -> bool:
        return isinstance(message, HumanMessage) and not self.separate_user

    def prepend(self, message: Any, texts: Sequence[str]) -> Any:
        return message.model_copy(update={"content": _join(message.content, texts, before=True)})

    def append(self, message: Any, texts: Sequence[str]) -> Any:
        return message.model_copy(update={"content": _join(message.content, texts, before=False)})

    def merged(self, message: Any, texts: Sequence[str], *, before: bool = False) -> Any:
        content = merged_content(message.content, texts, before=before)
        return message.model_copy(update={"content": content})

    def marked(self, message: Any, marker: Mapping[str, str]) -> Any | None:
        # langchain-openai sends a text block's prompt_cache_breakpoint as it is.
        if not isinstance(message, SystemMessage | HumanMessage):
            return None
        content = marked_content(message.content, marker, part="text")
        return message.model_copy(update={"content": content}) if content is not None else None


LANGCHAIN = LangChainCodec()
LEADING_SYSTEM_ONLY = LangChainCodec(leading_system_only=True)
SEPARATE_USER = LangChainCodec(separate_user=True)

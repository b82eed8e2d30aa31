"""Reading a request the way stm-memory writes it: which of its messages are system,
memory, user, assistant or tool, in every format (OpenAI Chat ``messages``, Responses
``input`` and ``instructions``, Anthropic ``system`` and ``messages``, LangChain message
lists), and which tools it offers. The testing kit's assertions and the integrations
read requests through these functions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from stm_memory.model.messages import message_text
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.wire import codec_of, message_role
from stm_memory.wire.base import has_tool_blocks

__all__ = [
    "MessageKind",
    "RequestMessage",
    "content_texts",
    "current_user_index",
    "current_user_text",
    "forces_tool",
    "has_tool_traffic",
    "is_request_body",
    "is_summary_message",
    "offered_tool_names",
    "read_request",
    "text_of",
    "tool_choice_none",
    "tool_name",
]

MessageKind = Literal["system", "memory", "user", "assistant", "tool", "reasoning", "other"]

# Keys of which at least one marks a dict as a request body (any of the three APIs).
_BODY_KEYS = ("messages", "input", "tools", "system", "instructions")


@dataclass(frozen=True, slots=True)
class RequestMessage:
    """One text-bearing place of a request: the ``system``/``instructions`` parameter,
    or message ``index`` with its ``role`` as written."""

    where: str
    role: str
    kind: MessageKind
    texts: tuple[str, ...]
    index: int | None = None

    @property
    def label(self) -> str:
        return self.where if self.index is None else f"message {self.index} ({self.role})"


def content_texts(content: Any) -> list[str]:
    """The text parts of a message's content (a string, strings, ``text`` blocks)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        for block in content:
            if isinstance(block, str):
                out.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


def text_of(message: Any) -> str:
    """Visible text of one message (a dict, an SDK item or a LangChain message); ""
    for content that is not dialogue."""
    content = (
        message.get("content")
        if isinstance(message, Mapping)
        else getattr(message, "content", None)
    )
    try:
        return message_text(content)
    except Exception:  # exotic content is simply not dialogue
        return ""


def is_summary_message(message: Any) -> bool:
    """A message LangChain's ``SummarizationMiddleware`` wrote, not something said."""
    extra = getattr(message, "additional_kwargs", None)
    return isinstance(extra, Mapping) and extra.get("lc_source") == "summarization"


def current_user_index(messages: Sequence[Any]) -> int | None:
    """Index of the current user message, in any format: the last user message with
    words of its own, where placement puts what is this turn's alone
    (:func:`~stm_memory.prompt.placement.current_turn_index`: an Anthropic user turn
    that only carries tool results is not one), a summary LangChain's
    ``SummarizationMiddleware`` wrote skipped. None when there is none. The one finder
    every entry point asks (the turn's start, the intent guard, cache breakpoints)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if codec_of(message).user_words(message) and not is_summary_message(message):
            return index
    return None


def current_user_text(messages: Sequence[Any]) -> str | None:
    """Text of the current user message (:func:`current_user_index`); None when there
    is none, or it has no text."""
    index = current_user_index(messages)
    return None if index is None else (text_of(messages[index]) or None)


def _kind(role: str, message: Any, texts: Sequence[str]) -> MessageKind:
    if any(CONTENT_HEADER in t for t in texts):
        return "memory"
    normal = message_role(message)
    if normal in ("system", "user", "assistant", "tool", "reasoning"):
        return normal
    return "user" if role == "message" else "other"


def _message(index: int, message: Any) -> RequestMessage | None:
    role: str
    content: Any
    if isinstance(message, Mapping):
        if "role" in message:
            role, content = str(message["role"]), message.get("content")
        elif message.get("type") == "message":
            role, content = "message", message.get("content")
        else:
            return None  # a call item, a reasoning item …: no text of its own
    elif isinstance(message, tuple) and len(message) == 2:
        role, content = str(message[0]), message[1]
    elif isinstance(message, str):
        role, content = "user", message
    elif (view := codec_of(message).view(message)) is not None:  # a LangChain message
        role, content = view.label, view.content
    else:
        return None
    texts = content_texts(content)
    return RequestMessage(
        f"message {index}", role, _kind(role, message, texts), tuple(texts), index
    )


def read_request(request: Mapping[str, Any] | Sequence[Any]) -> list[RequestMessage]:
    """Every text-bearing place of a request body (or of a bare message list), in
    order: ``system`` and ``instructions`` first, then the messages or input items."""
    out: list[RequestMessage] = []
    if isinstance(request, Mapping):
        for key in ("system", "instructions"):
            texts = content_texts(request.get(key))
            if texts:
                kind: MessageKind = (
                    "memory" if any(CONTENT_HEADER in t for t in texts) else "system"
                )
                out.append(RequestMessage(key, key, kind, tuple(texts)))
        items = request.get("messages", request.get("input"))
        if isinstance(items, str):
            items = [items]
    else:
        items = request
    for i, item in enumerate(items or ()):
        parsed = _message(i, item)
        if parsed is not None:
            out.append(parsed)
    return out


def is_request_body(value: Any) -> bool:
    """A dict shaped like a request body of one of the three APIs."""
    return isinstance(value, Mapping) and any(k in value for k in _BODY_KEYS)


def tool_name(tool: Any) -> str | None:
    """Name of a tool definition: a Chat ``{"function": {"name"}}`` dict, a Responses
    or Anthropic ``{"name"}`` dict, a LangChain tool, or a plain function."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and "name" in function:
            name = function["name"]
        else:
            name = tool.get("name")
        return name if isinstance(name, str) else None
    name = getattr(tool, "name", None)
    if isinstance(name, str):
        return name
    name = getattr(tool, "__name__", None)
    return name if isinstance(name, str) else None


def offered_tool_names(tools: Sequence[Any] | None) -> list[str]:
    """The names of ``tools`` (definitions without a readable name left out)."""
    return [n for n in map(tool_name, tools or ()) if n is not None]


def tool_choice_none(body: Mapping[str, Any]) -> bool:
    """``tool_choice`` says no tool may be called (``"none"`` or ``{"type": "none"}``)."""
    choice = body.get("tool_choice")
    if choice == "none":
        return True
    return isinstance(choice, Mapping) and choice.get("type") == "none"


def forces_tool(choice: Any, name: str) -> bool:
    """``tool_choice`` forcing the tool ``name``: the name itself, or a dict naming it
    (OpenAI Chat ``{"type": "function", "function": {"name"}}``, Responses
    ``{"type": "function", "name"}``, Anthropic ``{"type": "tool", "name"}``)."""
    if choice == name:
        return True
    return isinstance(choice, Mapping) and tool_name(choice) == name


def _is_call_kind(kind: Any) -> bool:
    return isinstance(kind, str) and kind.endswith(("_call", "_call_output"))


def has_tool_traffic(messages: Sequence[Any]) -> bool:
    """Some message of a request is a tool call or a tool result, in any format: an
    Anthropic ``tool_use``/``tool_result`` block, an OpenAI Chat ``tool_calls`` or
    ``role: "tool"`` message, a Responses call or call-output item (a dict or the SDK's
    object), a LangChain ``ToolMessage`` or an AI message with tool calls."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return False
    if has_tool_blocks(messages):
        return True
    for message in messages:
        if isinstance(message, Mapping):
            if message.get("role") == "tool" or message.get("tool_calls"):
                return True
            if _is_call_kind(message.get("type")):
                return True
            continue
        kind = getattr(message, "type", None)
        if kind == "tool" or _is_call_kind(kind) or getattr(message, "tool_calls", None):
            return True
    return False

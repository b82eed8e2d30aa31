"""Pure conversion of provider/LangChain dialogue messages into stored turns."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .arguments import storage_safe
from .errors import ValidationError
from .types import Role, StoredMessage

__all__ = ["message_text", "to_stored_messages"]

_ROLE_ALIASES: dict[str, Role] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
}


def message_text(content: Any) -> str:
    """Visible text of a message's content: a string, or the text parts of a block list
    (OpenAI ``text``/``input_text``/``output_text`` parts, Anthropic ``text`` blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") in (
                "text",
                "input_text",
                "output_text",
            ):
                parts.append(str(block.get("text") or ""))
        return "\n".join(p for p in parts if p)
    raise ValidationError(f"unsupported message content of type {type(content).__name__}")


def _fields(message: Any) -> tuple[str, Any, str | None]:
    if isinstance(message, Mapping):
        return str(message.get("role", "")), message.get("content"), message.get("name")
    kind = getattr(message, "type", None)  # LangChain BaseMessage
    if kind is None:
        raise ValidationError(
            f"a message must be a dict with 'role' and 'content' or a LangChain message, "
            f"got {type(message).__name__}"
        )
    return str(kind), getattr(message, "content", None), getattr(message, "name", None)


def to_stored_messages(
    messages: Sequence[Any], *, now: datetime, keep: int
) -> tuple[StoredMessage, ...]:
    """The last ``keep`` user/assistant turns with visible text. Tool traffic, system
    prompts and empty assistant turns (pure tool calls) are not dialogue and are skipped."""
    if isinstance(messages, str | bytes | Mapping):
        raise ValidationError("messages must be a list of messages")
    out: list[StoredMessage] = []
    for message in messages:
        role, content, name = _fields(message)
        mapped = _ROLE_ALIASES.get(role)
        if mapped is None:
            continue
        text = storage_safe(message_text(content)).strip()
        if not text:
            continue
        out.append(
            StoredMessage(
                role=mapped,
                content=text,
                timestamp=now,
                name=storage_safe(name) if isinstance(name, str) and name else None,
            )
        )
    return tuple(out[-keep:])

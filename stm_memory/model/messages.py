"""Pure conversion of provider/LangChain dialogue messages into stored turns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from stm_memory.errors import ValidationError
from stm_memory.model import Role, StoredMessage
from stm_memory.model.text import storage_safe
from stm_memory.wire.base import ROLE_ALIASES
from stm_memory.wire.base import content_text as message_text

__all__ = ["all_dialogue", "dialogue_of", "message_text", "without_speaker_ids"]

# Dialogue is what users and the assistant say; the one role table decides who is who.
_DIALOGUE: dict[str, Role] = {
    alias: "user" if role == "user" else "assistant"
    for alias, role in ROLE_ALIASES.items()
    if role in ("user", "assistant")
}


def _fields(message: Any) -> tuple[str, Any, str | None, Any]:
    """``(role, content, name, user_id)``. The speaker's id is a dict's ``"user_id"``;
    a LangChain message carries it in ``additional_kwargs["user_id"]`` (which the
    partner chat models do not send to the provider)."""
    if isinstance(message, Mapping):
        return (
            str(message.get("role", "")),
            message.get("content"),
            message.get("name"),
            message.get("user_id"),
        )
    kind = getattr(message, "type", None)  # LangChain BaseMessage
    if kind is None:
        raise ValidationError(
            f"a message must be a dict with 'role' and 'content' or a LangChain message, "
            f"got {type(message).__name__}"
        )
    extra = getattr(message, "additional_kwargs", None) or {}
    return (
        str(kind),
        getattr(message, "content", None),
        getattr(message, "name", None),
        extra.get("user_id"),
    )


def all_dialogue(
    messages: Sequence[Any], *, now: datetime, user_id: str | None = None
) -> tuple[StoredMessage, ...]:
    """Every user/assistant turn with visible text, each user turn with its speaker's id
    (``user_id`` when the message names none; None leaves it to the caller, which
    knows whether the channel already holds that turn). Tool traffic, system
    prompts and empty assistant turns (pure tool calls) are not dialogue and are
    skipped; the caller keeps the last ones it stores."""
    if isinstance(messages, str | bytes | Mapping):
        raise ValidationError("messages must be a list of messages")
    out: list[StoredMessage] = []
    for message in messages:
        role, content, name, speaker = _fields(message)
        mapped = _DIALOGUE.get(role)
        if mapped is None:
            continue
        text = storage_safe(message_text(content)).strip()
        if not text:
            continue
        if mapped == "user":
            if speaker is not None and not isinstance(speaker, str):
                raise ValidationError(f"user_id must be a string, got {type(speaker).__name__}")
            speaker = storage_safe(speaker) if speaker else user_id
        else:
            speaker = None
        out.append(
            StoredMessage(
                role=mapped,
                content=text,
                timestamp=now,
                name=storage_safe(name) if isinstance(name, str) and name else None,
                user_id=speaker,
            )
        )
    return tuple(out)


def dialogue_of(message: Any) -> tuple[Role, str] | None:
    """A message's ``(role, text)`` as :func:`all_dialogue` stores it; None when it is
    not dialogue (tool traffic, a system prompt, a pure tool call)."""
    role, content, _, _ = _fields(message)
    mapped = _DIALOGUE.get(role)
    if mapped is None:
        return None
    text = storage_safe(message_text(content)).strip()
    return (mapped, text) if text else None


def without_speaker_ids(messages: Sequence[Any]) -> list[Any]:
    """``messages`` as a provider takes them: a dict's ``"user_id"`` (ours, for capture
    and erasure) is not an API field, and the APIs refuse unknown fields."""
    return [
        {k: v for k, v in m.items() if k != "user_id"}
        if isinstance(m, Mapping) and "user_id" in m
        else m
        for m in messages
    ]

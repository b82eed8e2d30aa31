"""What a chat history or a session hands to ``ShortTermMemory.capture`` at the end of
a turn, in every message format (LangChain messages, OpenAI / Anthropic dicts,
Responses items).

Capture *replaces* the channel's recent messages, so the list must hold the recent
dialogue, not only this turn: a record that already holds earlier dialogue gives it;
when nothing precedes this turn (a fresh thread, history summarised away) the
channel's stored messages are put in front of it instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stm_memory.kit.requests import is_summary_message, text_of
from stm_memory.model import StoredMessage
from stm_memory.wire import message_role

__all__ = [
    "dialogue_for_capture",
    "is_dialogue",
    "is_summary_message",
    "needs_previous",
    "stored_as_dicts",
]


def is_dialogue(message: Any) -> bool:
    """A user or assistant message with visible text (what capture keeps)."""
    return (
        message_role(message) in ("user", "assistant")
        and not is_summary_message(message)
        and bool(text_of(message).strip())
    )


def needs_previous(messages: Sequence[Any], start: int) -> bool:
    """Nothing before this turn (``messages[start:]``) is dialogue: capture needs the
    stored messages put in front."""
    return not any(is_dialogue(m) for m in messages[:start])


def stored_as_dicts(messages: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """Stored messages as capture takes them back (their speakers kept)."""
    return [
        {"role": m.role, "content": m.content, "name": m.name, "user_id": m.user_id}
        for m in messages
    ]


def dialogue_for_capture(
    messages: Sequence[Any], start: int, previous: Sequence[StoredMessage] = ()
) -> list[Any]:
    """What to hand to ``ShortTermMemory.capture`` (which keeps the last turns): the
    record when it holds dialogue before this turn (``messages[start:]``), else the
    channel's stored messages (``previous``) followed by this turn. Summaries of
    earlier history are not dialogue and are dropped."""
    if not needs_previous(messages, start):
        return [m for m in messages if not is_summary_message(m)]
    current = [m for m in messages[start:] if not is_summary_message(m)]
    return [*stored_as_dicts(previous), *current]

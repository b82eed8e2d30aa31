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
    "CAPTURE_WINDOW",
    "MARGIN",
    "capture_read",
    "capture_start",
    "dialogue_for_capture",
    "is_dialogue",
    "is_summary_message",
    "needs_previous",
    "stored_as_dicts",
]


#: Items read back from the end of a record (a session's) for capture, at least: a
#: turn's own items, and enough before them for ``messages_kept`` dialogue messages in
#: all but tool-heavy records (:func:`capture_read`).
CAPTURE_WINDOW = 80
#: The window holds this many times the dialogue messages capture keeps: capture drops
#: the words of users in full privacy before it keeps the last ones, so a group
#: channel's window must reach further back than ``messages_kept``.
MARGIN = 4


# -- the one capture window ---------------------------------------------------------------
#
# Capture keeps the channel's last ``messages_kept`` dialogue messages and replaces what
# was stored, so what it is handed must reach back that far: a window too short would
# silently replace stored dialogue with less. Every entry point takes its window from
# here, through MemoryTurn (capture_start for a record in memory, capture_read for one
# read from its end).


def capture_start(messages: Sequence[Any], start: int, kept: int) -> int:
    """Where to start reading ``messages`` (this turn from ``start``) for capture: early
    enough to hold ``kept`` dialogue messages before this turn, so a long record is not
    walked (0 when the record holds fewer)."""
    start = max(0, min(start, len(messages)))
    seen = 0
    for i in range(start - 1, -1, -1):
        if is_dialogue(messages[i]):
            seen += 1
            if seen >= kept:
                return i
    return 0


def capture_read(added: int, kept: int, tail: Sequence[Any] | None = None) -> int | None:
    """How many items to read from the end of a record for capture, when this turn
    added ``added``: first (``tail`` None) a window; then, given the ``tail`` that read
    returned, None (read the whole record) when it filled the window yet holds fewer
    than ``kept`` dialogue messages before this turn, else ``len(tail)`` (enough)."""
    window = max(CAPTURE_WINDOW, added + MARGIN * kept)
    if tail is None:
        return window
    before = len(tail) - added
    if len(tail) >= window and sum(map(is_dialogue, tail[: max(0, before)])) < kept:
        return None
    return len(tail)


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

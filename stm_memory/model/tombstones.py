"""Tombstones: what erasure leaves of a message instead of its words. Pure.

A caller's own history (a checkpointer thread, a chat history, ``result.messages`` fed
back) may still hold an erased user's messages, and one channel's thread may be shared
by several users. So that capture never stores them again and no request of ours sends
them again, each captured message carries a *mark*: a keyed digest (HMAC-SHA256) of
its role, its text and the text of the dialogue message said just before it. Erasure
keeps the marks of the messages it removes (``MemoryEntry.forgotten``), no text; the
key lives apart from them (the store's secrets table, or ``STM_ERASURE_KEY``), so a
copy of the cache or of the rows alone cannot test a guess of what was said.

Why the message before it: two users may say the same words ("yes") in two turns of
one thread; what precedes them tells them apart, and it is the same wherever the thread
is read again (a caller's history is append-only). Capture computes a mark over the
caller's sequence, and a request computes it over the same sequence, so the two meet.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from stm_memory.model.dialogue import StoredMessage

__all__ = ["Forgetting", "mark_of", "marked"]

# Hex digits kept of the digest: 128 bits, no collision among a channel's messages.
_MARK_LENGTH = 32


def mark_of(key: bytes, role: str, content: str, before: str) -> str:
    """The mark of a dialogue message ``content`` said as ``role`` after ``before``
    (the previous dialogue message's text; ``""`` for the first)."""
    text = f"{role}\x1f{before}\x1f{content}".encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()[:_MARK_LENGTH]


def marked(messages: Sequence[StoredMessage], key: bytes) -> tuple[StoredMessage, ...]:
    """``messages`` (one dialogue, in order) each with its mark; a message that has
    one keeps it (it was marked where it was first captured), and one credited to
    nobody gets none (it is never stored: capture drops it)."""
    out: list[StoredMessage] = []
    before = ""
    for m in messages:
        if m.mark is None and m.user_id is not None:
            m = replace(m, mark=mark_of(key, m.role, m.content, before))
        out.append(m)
        before = m.content
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Forgetting:
    """The marks a channel's erasures left, with the key that makes them: what a
    request leaves out of the caller's history (:func:`stm_memory.prompt.cut.cut_history`)."""

    key: bytes
    marks: frozenset[str]

    def __bool__(self) -> bool:
        return bool(self.marks)

    def forgotten(self, dialogue: Iterable[tuple[str, str] | None]) -> list[bool]:
        """For each message of a caller's sequence, given as its dialogue ``(role,
        text)`` (None: not dialogue — tool traffic, a pure tool call, a system note),
        whether it is an erased message."""
        out: list[bool] = []
        before = ""
        for said in dialogue:
            if said is None:
                out.append(False)
                continue
            role, text = said
            out.append(mark_of(self.key, role, text, before) in self.marks)
            before = text
        return out

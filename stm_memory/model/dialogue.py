"""One captured dialogue turn, as the live cache holds it (rows keep no raw turns)."""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, TypeAlias

__all__ = ["Role", "StoredMessage", "turn_start", "with_stored_speakers"]

Role: TypeAlias = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """One captured dialogue turn."""

    role: Role
    content: str
    timestamp: datetime
    # Display name, for rendering; two people may share one.
    name: str | None = None
    # Who said it (a user message), or whose turn it answered (an assistant message:
    # a reply is derived from its turn's words): what erasure and full privacy go by.
    user_id: str | None = None
    # The message's keyed digest as said in its caller's sequence (model/tombstones.py):
    # what erasure keeps of it, so the caller's copy is recognised later.
    mark: str | None = None
    # The cached form this turn was decoded from or last encoded as. Why: every capture
    # writes the channel's whole window back, and most of its turns are the ones it
    # read; each keeps its cached dict instead of formatting it again. Not a field of
    # the turn (no init, no comparison): ``replace`` starts a copy without it.
    _cached: dict[str, Any] | None = field(
        default=None, init=False, repr=False, compare=False, hash=False
    )

    def to_dict(self) -> dict[str, Any]:
        """The cached form; shared, like every cached value, so never mutated."""
        cached = self._cached
        if cached is None:
            cached = {
                "role": self.role,
                "content": self.content,
                "timestamp": self.timestamp.isoformat(),
                "name": self.name,
                "user_id": self.user_id,
            }
            if self.mark is not None:  # unmarked turns keep the form they always had
                cached["mark"] = self.mark
            object.__setattr__(self, "_cached", cached)
        return cached

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredMessage:
        message = cls(
            role="assistant" if data["role"] == "assistant" else "user",
            content=str(data["content"]),
            timestamp=datetime.fromisoformat(data["timestamp"]),
            name=data.get("name"),
            user_id=data.get("user_id"),
            mark=data.get("mark"),
        )
        if (
            type(data) is dict
            and (data.keys() == _KEYS or data.keys() == _MARKED)
            and data["role"] == message.role
            and data["content"] is message.content
        ):
            # Only a dict this class wrote is the cached form (an older value may lack
            # keys, a hand-made one may hold what decoding normalised).
            object.__setattr__(message, "_cached", data)
        return message


_KEYS = {"role", "content", "timestamp", "name", "user_id"}
_MARKED = {*_KEYS, "mark"}


def _same_turn(new: StoredMessage, old: StoredMessage) -> bool:
    """``new`` can be ``old`` said again: same role and text, and no name or speaker
    id that contradicts the stored one (an explicit different speaker is someone else
    saying the same words)."""
    return (
        new.role == old.role
        and new.content == old.content
        and (new.name is None or old.name is None or new.name == old.name)
        and (new.user_id is None or old.user_id is None or new.user_id == old.user_id)
    )


def _repeated_run(
    said: Sequence[StoredMessage], stored: Sequence[StoredMessage]
) -> tuple[int, int]:
    """``(start, length)`` of the longest suffix of ``stored`` that ``said`` repeats,
    at its earliest place in ``said``; length 0 when not even the last stored turn is
    there."""
    best_start, best_length = 0, 0
    for end in range(len(said), 0, -1):
        length = 0
        while length < min(end, len(stored)) and _same_turn(
            said[end - 1 - length], stored[-1 - length]
        ):
            length += 1
        # ">=" while walking backwards: of equally long runs, the earliest wins.
        if length and length >= best_length:
            best_start, best_length = end - length, length
    return best_start, best_length


def _alignment(
    said: Sequence[StoredMessage], stored: Sequence[StoredMessage]
) -> dict[int, StoredMessage]:
    """Which stored turn each turn of ``said`` repeats, matched as a sequence.

    A later transcript is (part of) the earlier one plus what was said since, so the
    stored list reappears as a run that ends where the new turns begin: the longest
    suffix of the stored list found in ``said`` is the anchor, and it must hold the
    last stored turn (without it, equal words said anew would pass for stored ones).
    Equal texts (two users both saying "yes") are told apart by their place in that
    run, not looked up one by one. Of equally long runs the earliest is taken: new
    turns come after the repeated ones. Before the anchor, the rest of the stored list
    is matched the same way, so a turn the store never held (a private speaker's) or
    one the caller no longer passes splits the run without ending the match.
    """
    pairs: dict[int, StoredMessage] = {}
    said_end, stored_end = len(said), len(stored)
    while said_end and stored_end:
        start, length = _repeated_run(said[:said_end], stored[:stored_end])
        if not length:
            if stored_end == len(stored):
                break  # the transcript does not repeat the stored list's end
            stored_end -= 1  # a stored turn the caller no longer passes
            continue
        for offset in range(length):
            pairs[start + offset] = stored[stored_end - length + offset]
        said_end, stored_end = start, stored_end - length
    return pairs


def turn_start(said: Sequence[StoredMessage]) -> int:
    """Where the last turn of ``said`` begins: the run of user messages before its
    last replies (a group's several messages before one answer are one turn, as the
    cut counts turns); 0 when it holds no user message."""
    i = len(said)
    while i and said[i - 1].role != "user":
        i -= 1
    while i and said[i - 1].role == "user":
        i -= 1
    return i


def with_stored_speakers(
    said: Sequence[StoredMessage],
    stored: Sequence[StoredMessage],
    *,
    default: str | None,
    current: int | None = None,
) -> tuple[StoredMessage, ...]:
    """``said`` with a speaker on every message: a user message's speaker, an
    assistant message's whose turn it answered.

    A message the channel's store (``stored``, the live entry's turns) already holds
    keeps the speaker and mark it was stored with; a new user message from ``current``
    on (this turn's; None: the last turn of ``said``) is ``default``'s (the user whose
    turn captures it); a new one before it is nobody's (None): capture cannot tell who
    said it, and never credits it to this turn's user (SPEC §5, §7). A new assistant
    message answers the user message before it. A message that names its speaker
    keeps it.
    """
    n = len(stored)
    begin, owner = 0, None
    if n and len(said) >= n and all(map(operator.is_, said[:n], stored)):
        # The stored turns themselves, then this turn (how MemoryTurn.finish captures):
        # stored with a speaker each, they stay as they are; only what follows is read.
        begin = n
        owner = next((m.user_id for m in reversed(stored) if m.role == "user"), None)
        repeats: dict[int, StoredMessage] = {}
    elif n and len(said) >= n and all(map(_same_turn, said[:n], stored)):
        # The transcript starts with the stored list, turn for turn (a turn passed alone
        # after the stored ones): that is the longest run the alignment can find, and
        # the earliest, so it is its answer.
        repeats = dict(enumerate(stored))
    else:
        repeats = _alignment(said, stored) if stored else {}
    if current is None:
        current = turn_start(said)
    out = list(said)
    for i in range(begin, len(said)):
        m = said[i]
        old = repeats.get(i)
        if old is not None:
            kept = (m.user_id or old.user_id, m.name or old.name, m.mark or old.mark)
            if kept != (m.user_id, m.name, m.mark):
                # A copy only when something is added: the stored turn keeps its cached
                # form (capture writes the whole window back every turn).
                m = replace(m, user_id=kept[0], name=kept[1], mark=kept[2])
        if m.user_id is None:
            if m.role == "assistant":
                m = replace(m, user_id=owner)
            elif i >= current:
                m = replace(m, user_id=default)
        if m.role == "user":
            owner = m.user_id
        out[i] = m
    return tuple(out)

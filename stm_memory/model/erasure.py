"""What erasing a user changes in an entry (``clear_user``). Pure.

An entry holds a user's words in three places: the captured turns they spoke and the
replies of their turns (removed one by one, leaving their marks behind; other users'
turns stay), the briefing copies of other channels whose
provenance holds them (removed whole), and the distilled memory (summary, categories),
which the model wrote from a dialogue their words may have been in. Which users that
may be is the entry's provenance; the distilled memory of an entry whose provenance
holds the user is cleared whole, because nothing can tell which sentence came from
whom. The provenance then falls back to the speakers of the turns left.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from stm_memory.model import MemoryEntry, StoredMessage
from stm_memory.model.shown import ShownState

__all__ = ["cleared_shown", "erase_user", "speakers", "unknown_provenance", "without_kept_of"]


def speakers(messages: Iterable[StoredMessage]) -> frozenset[str]:
    """The users who said any of ``messages``."""
    return frozenset(m.user_id for m in messages if m.user_id is not None)


def erase_user(entry: MemoryEntry, user_id: str) -> dict[str, Any] | None:
    """The changes that remove ``user_id``'s words from ``entry``; None when it holds none."""
    spoke = any(m.user_id == user_id for m in (*entry.messages, *entry.kept))
    reached = user_id in entry.provenance
    copies = tuple(b for b in entry.briefings if user_id not in b.provenance)
    copied = len(copies) != len(entry.briefings)
    if not spoke and not reached and not copied:
        return None
    kept = tuple(m for m in entry.messages if m.user_id != user_id)
    # Briefing copies of other channels that may hold the user's words go whole (a
    # copy's provenance is its source's: nothing tells which line is whose).
    changes: dict[str, Any] = {"messages": kept, "briefings": copies}
    # What leaves (her messages, and the replies of her turns) leaves its mark behind:
    # the caller's own history may still hold it (model/tombstones.py).
    marks = {m.mark for m in entry.messages if m.user_id == user_id and m.mark is not None}
    if marks - entry.forgotten:
        changes["forgotten"] = entry.forgotten | marks
    if reached:
        changes |= {
            "summary": None,
            "categories": {},
            "kept": (),
            "provenance": speakers(kept),
            "shown": cleared_shown(entry),
        }
    else:
        # Kept excerpts of the user's turns go one by one, like their captured turns.
        changes |= {"provenance": entry.provenance, **without_kept_of(entry, {user_id})}
    return changes


def without_kept_of(entry: MemoryEntry, users: Collection[str]) -> dict[str, Any]:
    """The changes that remove ``users``' words from the excerpts kept beside the
    memory, in the entry and in the copy its requests show (at once: a later swap id,
    as :func:`cleared_shown` gives, so no turn in flight stores its copy back); empty
    when it holds none."""
    shown = entry.shown
    in_shown = shown is not None and any(m.user_id in users for m in shown.kept)
    if not in_shown and not any(m.user_id in users for m in entry.kept):
        return {}
    changes: dict[str, Any] = {"kept": tuple(m for m in entry.kept if m.user_id not in users)}
    if shown is not None and in_shown:
        changes["shown"] = replace(
            shown,
            kept=tuple(m for m in shown.kept if m.user_id not in users),
            swap=shown.swap + 1,
        )
    return changes


def cleared_shown(entry: MemoryEntry) -> ShownState:
    """The shown form once the entry's distilled memory is cleared: a swap to it, at
    once (erasure never waits for the bill). A later swap id than any form a turn in
    flight read, so none of them stores its copy over this one (model/changes.py
    ``counted``): a held copy of the erased words is never sent again."""
    old = entry.shown
    return ShownState(
        epoch=entry.last_refreshed_turn,
        turns=entry.turns_since_refresh,
        swap=(old.swap if old is not None else 0) + 1,
        at=old.at if old is not None else None,
    )


def unknown_provenance(value: Mapping[str, Any]) -> dict[str, Any] | None:
    """The changes for a cached value written before provenance was kept: it may hold
    anyone's words, so its distilled memory goes on any erasure (it is short-term: a
    day at most). None for a value that knows its provenance or has no memory."""
    if "provenance" in value or not (value.get("summary") or value.get("categories")):
        return None
    shown = value.get("shown") or {}
    return {
        "summary": None,
        "categories": {},
        "kept": (),
        "shown": ShownState(swap=int(shown.get("swap") or 0) + 1),
    }

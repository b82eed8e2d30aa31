"""What each write changes in an entry, as pure functions of the entry it starts from.

The engine runs them inside the live cache's atomic write (``LiveEntries.mutate``), so
each sees the entry as it is at that moment, on every retry. They return the fields to
replace; the revision is moved on by ``mutate``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.categories import merge_categories
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.entry import MemoryEntry
from stm_memory.model.shown import ShownState

__all__ = ["captured", "counted", "refreshed"]


def _one_more_turn_since_reset(entry: MemoryEntry) -> dict[str, int]:
    """The reset count after one more turn (it stays unknown when it is unknown)."""
    since = entry.turns_since_reset
    return {} if since is None else {"turns_since_reset": since + 1}


def refreshed(
    entry: MemoryEntry,
    *,
    summary: str | None,
    categories: Mapping[str, str] | None,
    order: Sequence[str],
    sources: Collection[str],
    now: datetime,
    live_key: str,
) -> dict[str, Any]:
    """The model wrote the memory: a new summary or merged category values. What it
    wrote can hold the words of everyone in ``sources`` (this turn's user and the
    provenance of the briefings it was shown). The live key's counter starts again."""
    fields: dict[str, Any] = {
        "last_updated": now,
        "refreshed_at": now,
        "provenance": entry.provenance | frozenset(sources),
    }
    if summary is not None:
        fields["summary"] = summary
    if categories is not None:
        fields["categories"] = merge_categories(entry.categories, categories, order)
    if entry.key == live_key:
        fields["turns_since_refresh"] = 0
        fields["last_refreshed_turn"] = entry.last_refreshed_turn + 1
        # end_turn does not count a turn that refreshed; this turn still happened
        # since the reset.
        fields |= _one_more_turn_since_reset(entry)
    return fields


def _first_seen(message: StoredMessage, before: StoredMessage | None) -> StoredMessage:
    """``message`` with the timestamp of ``before`` (the stored turn with the same role,
    text and name), if any."""
    if before is None or before.timestamp == message.timestamp:
        return message
    if before.user_id == message.user_id:
        # Every field equal to the copy we would make: the stored turn itself, no copy
        # (capture passes the whole window back every turn, so this is most turns).
        return before
    return replace(message, timestamp=before.timestamp)


def captured(
    entry: MemoryEntry,
    *,
    stored: Sequence[StoredMessage],
    voices: Collection[str],
    now: datetime,
) -> dict[str, Any]:
    """The channel's last dialogue turns were captured."""
    # Turns seen before keep their first timestamp: callers pass the whole window every
    # turn, and "recent since the last refresh" depends on it.
    seen = {(m.role, m.content, m.name): m for m in entry.messages}
    messages = tuple(_first_seen(m, seen.get((m.role, m.content, m.name))) for m in stored)
    # Everyone whose words the model was shown can be in what it writes next, private
    # speakers included (their words are in the caller's history).
    return {
        "messages": messages,
        "last_updated": now,
        "provenance": entry.provenance | frozenset(voices),
    }


def counted(
    entry: MemoryEntry,
    *,
    briefings: tuple[BriefingCopy, ...] | None = None,
    epoch: int | None = None,
    shown: ShownState | None = None,
    base: int = 0,
    at: datetime | None = None,
    refreshed: bool = False,
) -> dict[str, Any]:
    """One more turn passed (without a refresh, unless ``refreshed``: that turn's write
    restarted the counter already). ``shown``: the form its requests showed, read
    against the stored swap ``base``; stored (a turn later, at ``at``) unless the
    stored form moved on meanwhile — another process swapped, or an erasure did — when
    the stored one wins and only counts the turn: every process then follows one
    form. ``briefings``: the copies the requests carried, for swap ``epoch``; kept only
    with the form they were planned for."""
    fields: dict[str, Any] = {}
    if not refreshed:
        fields["turns_since_refresh"] = entry.turns_since_refresh + 1
        fields |= _one_more_turn_since_reset(entry)
    stored = entry.shown
    ours = shown is not None and (stored.swap if stored is not None else 0) == base
    if shown is not None:
        after = shown if ours else stored
        if after is not None:
            fields["shown"] = after.later(at or entry.last_updated)
    if briefings is not None and (
        ours if shown is not None else epoch == entry.last_refreshed_turn
    ):
        fields |= {"briefings": briefings, "briefings_epoch": epoch}
    return fields

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
from stm_memory.model.entry import MemoryEntry, turns_after
from stm_memory.model.erasure import without_kept_of
from stm_memory.model.kept import Reconciled, just_before, reconcile, rewritten, written
from stm_memory.model.receipt import TurnBill, add_to_receipt
from stm_memory.model.shown import ShownState

__all__ = ["UNCHECKED_KEPT", "captured", "counted", "refreshed"]

#: Capture keeps the turns said since the memory was last written (the ones the next
#: write checks, :func:`refreshed`) up to this many times ``messages_kept``: a model
#: that writes at the cadence's nudge leaves 12 or so; one that writes after more than
#: 40 messages has its oldest turns since the write dropped unchecked (a documented
#: miss). The price: a channel whose model stopped writing keeps 40 messages in the
#: live cache (middleware_overhead_vs_floor 2.61 at 1x, 2.7 here).
UNCHECKED_KEPT = 4


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
    detail_budget: int,
) -> dict[str, Any]:
    """The model wrote the memory: a new summary or merged category values. What it
    wrote can hold the words of everyone in ``sources`` (this turn's user and the
    provenance of the briefings it was shown). The live key's counter starts again.

    What the turns captured since the last write (the ones this write lets the history
    cut drop) said that the memory does not carry is kept beside it, within
    ``detail_budget`` code points (stm_memory/model/kept.py ``reconcile``); when those
    turns alone pass the budget, the first that does not fit and every turn after it
    stay raw: the counter starts from them instead of from zero, so the cut keeps them
    and the next write checks them again."""
    fields: dict[str, Any] = {
        "last_updated": now,
        "refreshed_at": now,
        "provenance": entry.provenance | frozenset(sources),
    }
    if summary is not None:
        fields["summary"] = summary
    if categories is not None:
        fields["categories"] = merge_categories(entry.categories, categories, order)
    summary_now = fields.get("summary", entry.summary)
    values = fields.get("categories", entry.categories)
    # At the write's instant too: a write's own turn is captured after it, at the same
    # instant on a clock that did not move (one turn too many rather than one too few).
    dropped = turns_after(entry.messages, entry.refreshed_at, at=True)
    # The values this write replaces (one it writes again unchanged replaces nothing).
    previous = [entry.summary or ""] if summary not in (None, entry.summary) else []
    previous += [
        entry.categories.get(slug, "")
        for slug, value in (categories or {}).items()
        if value != entry.categories.get(slug)
    ]
    # Kept on the live key only: the one whose requests show it.
    kept = (
        reconcile(
            entry.kept,
            dropped,
            written(summary_now, values.values(), elsewhere=_briefed(entry)),
            budget=detail_budget,
            replaced=rewritten(previous, entry.refreshed_at),
        )
        if entry.key == live_key
        else Reconciled(())
    )
    fields["kept"] = kept.kept
    held = 0
    if kept.held_from is not None:
        # From the start of the turn that did not fit: the cut keeps whole turns.
        first = _turn_start(dropped, kept.held_from)
        fields["refreshed_at"] = just_before(first.timestamp)
        held = _turn_count(turns_after(dropped, fields["refreshed_at"], at=True))
    if entry.key == live_key:
        fields["turns_since_refresh"] = held
        fields["last_refreshed_turn"] = entry.last_refreshed_turn + 1
        fields["no_writer"] = False  # a write: somebody writes it
        # end_turn does not count a turn that refreshed; this turn still happened
        # since the reset.
        fields |= _one_more_turn_since_reset(entry)
    return fields


def _briefed(entry: MemoryEntry) -> str:
    """The other channels' briefings this channel's requests carry."""
    return "\n".join(copy.text for copy in entry.briefings)


def _turn_count(messages: Sequence[StoredMessage]) -> int:
    """The turns ``messages`` hold: a turn starts at a user message that follows a
    non-user one (or opens the list), as the history cut counts them."""
    count, previous = 0, None
    for m in messages:
        if m.role == "user" and previous != "user":
            count += 1
        previous = m.role
    return count


def _turn_start(messages: Sequence[StoredMessage], message: StoredMessage) -> StoredMessage:
    """The message that opens the turn ``message`` is part of."""
    at = next(i for i, m in enumerate(messages) if m is message)
    while at > 0 and not (messages[at].role == "user" and messages[at - 1].role != "user"):
        at -= 1
    return messages[at]


def _unchecked_kept(
    messages: tuple[StoredMessage, ...],
    held: Collection[tuple[str, str, str | None]],
    since: datetime | None,
    kept: int,
) -> tuple[StoredMessage, ...]:
    """The last ``kept`` of ``messages``, and the run before them of turns the entry
    ``held`` already (by role, text and name) that were said ``since`` its last write (a
    caller's older turns, never captured, are not taken up)."""
    start = len(messages) - kept
    # Back over the turns the entry held, to the earliest said since the write (a
    # repeated reply keeps its first time: an older one among them does not end it).
    at = start
    while (
        at > 0 and (messages[at - 1].role, messages[at - 1].content, messages[at - 1].name) in held
    ):
        at -= 1
        if since is None or messages[at].timestamp >= since:
            start = at
    return messages[start:]


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
    messages_kept: int | None = None,
    private: Collection[str] = (),
    fresh: int = 0,
) -> dict[str, Any]:
    """The channel's last dialogue turns were captured: the last ``messages_kept`` of
    ``stored`` (all when None), and before them those the channel already held that
    were said since its memory was last written (the next write checks them). The
    excerpts kept beside the memory lose those of ``private`` speakers (users in full
    privacy), as the captured turns do. A message erasure removed from the channel
    (its mark is among ``entry.forgotten``) is not stored again, unless it is one of
    the last ``fresh`` (this turn's own, said anew)."""
    if entry.forgotten:
        last = len(stored) - fresh
        stored = [m for i, m in enumerate(stored) if i >= last or m.mark not in entry.forgotten]
    # Turns seen before keep their first timestamp: callers pass the whole window every
    # turn, and "recent since the last refresh" depends on it.
    seen = {(m.role, m.content, m.name): m for m in entry.messages}
    messages = tuple(_first_seen(m, seen.get((m.role, m.content, m.name))) for m in stored)
    if messages_kept is not None and len(messages) > messages_kept:
        messages = _unchecked_kept(messages, seen, entry.refreshed_at, messages_kept)
    # Everyone whose words the model was shown can be in what it writes next, private
    # speakers included (their words are in the caller's history).
    fields: dict[str, Any] = {
        "messages": messages,
        "last_updated": now,
        "provenance": entry.provenance | frozenset(voices),
    }
    if private:
        fields |= without_kept_of(entry, private)
    return fields


def counted(
    entry: MemoryEntry,
    *,
    briefings: tuple[BriefingCopy, ...] | None = None,
    epoch: int | None = None,
    shown: ShownState | None = None,
    base: int = 0,
    at: datetime | None = None,
    refreshed: bool = False,
    bill: TurnBill | None = None,
    no_writer: bool = False,
    cleared: Sequence[str] = (),
) -> dict[str, Any]:
    """One more turn passed (without a refresh, unless ``refreshed``: that turn's write
    restarted the counter already). ``shown``: the form its requests showed, read
    against the stored swap ``base``; stored (a turn later, at ``at``) unless the
    stored form moved on meanwhile — another process swapped, or an erasure did — when
    the stored one wins and only counts the turn: every process then follows one
    form. ``briefings``: the copies the requests carried, for swap ``epoch``; kept only
    with the form they were planned for. ``bill``: what the turn's requests were
    billed, added to the day's receipt; a miss where a hit was predicted is kept on the
    form, for the next decision. ``no_writer``: nobody could write the memory this
    turn (``MemoryEntry.no_writer``). ``cleared``: the ids of the tool results its
    requests left out, kept with the form (``ShownState.cleared``)."""
    fields: dict[str, Any] = {}
    if no_writer != entry.no_writer:
        fields["no_writer"] = no_writer
    if not refreshed:
        fields["turns_since_refresh"] = entry.turns_since_refresh + 1
        fields |= _one_more_turn_since_reset(entry)
    stored = entry.shown
    ours = shown is not None and (stored.swap if stored is not None else 0) == base
    if shown is not None:
        after = shown if ours else stored
        if after is not None:
            # A miss counts only from a provider seen to report its cache reads on
            # this channel: one that reports none would read as a miss at every turn.
            missed = (
                ours
                and bill is not None
                and bill.missed
                and any(day.cached_tokens for day in entry.receipt.values())
            )
            fields["shown"] = after.later(at or entry.last_updated, missed=missed, cleared=cleared)
    if bill is not None:
        fields["receipt"] = add_to_receipt(entry.receipt, (at or entry.last_updated).date(), bill)
    if briefings is not None and (
        ours if shown is not None else epoch == entry.last_refreshed_turn
    ):
        fields |= {"briefings": briefings, "briefings_epoch": epoch}
    return fields

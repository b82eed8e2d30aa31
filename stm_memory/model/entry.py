"""The live memory of one key: :class:`MemoryEntry`, and the revision clock."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from stm_memory.model import _codec
from stm_memory.model._codec import check_fields
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.receipt import DayTotals
from stm_memory.model.scope import Scope, ScopeKind
from stm_memory.model.shown import ShownState

__all__ = ["CACHE_ONLY_FIELDS", "MemoryEntry", "check_fields", "next_rev", "turns_after"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """The live memory of one key (the user's or the server's entry of a channel).

    Replace it with :func:`dataclasses.replace`. See ``docs/design.md#two-keys-per-scope``.

    Each form an entry is kept in says, per field, how it keeps it: the cache
    (``model/_codec.py`` ``CACHED``) and SQL rows (``store/sql.py`` ``ROW``, or
    :data:`CACHE_ONLY_FIELDS`). Both are checked against these fields at import: a new
    field fails there, naming it, until each form declares it. The fields' order is the
    cached form's key order: moving one changes the bytes entries are cached as.
    """

    key: str
    kind: ScopeKind
    channel_id: str
    server_id: str | None = None
    user_id: str | None = None
    persona_id: str | None = None
    parent_channel_id: str | None = None
    channel_name: str | None = None
    server_name: str | None = None
    # A tuple, or a lazily decoded Messages (entries read from the cache).
    messages: Sequence[StoredMessage] = ()
    summary: str | None = None
    # slug → value, in the server's category order (dicts keep insertion order).
    categories: Mapping[str, str] = field(default_factory=dict)
    # What the dialogue said that the written memory leaves out: excerpts of turns the
    # cut dropped, kept verbatim beside the memory until a write carries them
    # (stm_memory/model/kept.py). Part of the distilled memory: cleared with it.
    kept: Sequence[StoredMessage] = ()
    turns_since_refresh: int = 0
    last_refreshed_turn: int = 0
    # Turns counted since the channel was reset (clear_channel), or None when dialogue
    # from before this entry may exist: the history cut never sends turns from before
    # a reset (stm_memory.prompt.cut).
    turns_since_reset: int | None = None
    # Provenance: the users whose words are in this entry's dialogue or could have
    # reached its distilled memory (the speakers captured since the memory was last
    # cleared, and the provenance of the briefings shown when it was written), so
    # clear_user can erase what they said wherever it went.
    provenance: frozenset[str] = frozenset()
    last_updated: datetime = field(default_factory=lambda: datetime.fromtimestamp(0, UTC))
    # When the model last wrote distilled memory here: raw turns captured after it are
    # the "recent" ones that the summary does not cover yet.
    refreshed_at: datetime | None = None
    # Other channels' briefings as this channel's requests carry them (live key only),
    # and the memory rewrite (``last_refreshed_turn``) they were fixed for: see
    # stm_memory/model/briefings.py. None: no set yet (the next turn starts one).
    briefings: tuple[BriefingCopy, ...] = ()
    briefings_epoch: int | None = None
    # What this channel's requests show (live key only): the written memory, the cut
    # and the briefing set as of the last swap (stm_memory/model/shown.py). None: not
    # known (a new entry, a flushed cache, an erasure): the next request swaps.
    shown: ShownState | None = None
    # Revision: raised by every cache mutation (a hybrid logical clock, see next_rev
    # below and docs/design.md#revisions). SQL keeps a row's revision and refuses an
    # older snapshot, so writes that reach SQL out of order, twice, or late from an
    # outbox replay can never overwrite what the live cache holds.
    rev: int = 0
    # What the memory did to this channel's bill, per UTC day (ISO date → totals; live
    # key only; stm_memory/model/receipt.py): the turn's count writes it.
    receipt: Mapping[str, DayTotals] = field(default_factory=dict)
    # The marks of the messages erasure removed from this channel (model/tombstones.py):
    # keyed digests, no text, so that the caller's own copy of them is never captured
    # again nor sent. Kept with the row; a channel's clear drops them with it.
    forgotten: frozenset[str] = frozenset()
    # Nobody could write this memory at the channel's last turn: its model was offered
    # no tool (``tool_calling=False``, or it writes its tool calls as text) and no
    # ``writer=`` wrote instead. Its writing status is then ``off``, not ``not_writing``.
    no_writer: bool = False

    @classmethod
    def empty(cls, scope: Scope, key: str, now: datetime) -> MemoryEntry:
        kind = scope.kind_of(key)
        return cls(
            key=key,
            kind=kind,
            channel_id=scope.channel_id,
            server_id=scope.server_id,
            user_id=scope.user_id if kind == "user" else None,
            persona_id=scope.persona_id,
            parent_channel_id=scope.parent_channel_id,
            channel_name=scope.channel_name,
            server_name=scope.server_name,
            last_updated=now,
        )

    @property
    def has_summary(self) -> bool:
        return bool(self.summary and self.summary.strip())

    @property
    def has_distilled(self) -> bool:
        return (
            self.has_summary or any(v.strip() for v in self.categories.values()) or bool(self.kept)
        )

    def expires_at(self, *, summary_ttl: timedelta, bare_ttl: timedelta) -> datetime:
        return self.last_updated + (summary_ttl if self.has_summary else bare_ttl)

    def with_scope_names(self, scope: Scope) -> MemoryEntry:
        """Refresh display names and the parent channel from the current scope."""
        if (
            (scope.parent_channel_id is None or scope.parent_channel_id == self.parent_channel_id)
            and (scope.channel_name is None or scope.channel_name == self.channel_name)
            and (scope.server_name is None or scope.server_name == self.server_name)
        ):
            return self  # nothing new: skip the copy on the write hot path
        return replace(
            self,
            parent_channel_id=scope.parent_channel_id or self.parent_channel_id,
            channel_name=scope.channel_name or self.channel_name,
            server_name=scope.server_name or self.server_name,
        )

    def evolve(self, changes: Mapping[str, Any]) -> MemoryEntry:
        """A copy with ``changes`` applied (what :func:`dataclasses.replace` does)."""
        return _codec.evolve(self, changes)

    def value_after(
        self, source: Mapping[str, Any] | None, changes: Mapping[str, Any]
    ) -> dict[str, Any]:
        """This entry's cached form, given that it is ``source`` with ``changes`` applied."""
        return _CODEC.value_after(self, source, changes)

    def to_dict(self) -> dict[str, Any]:
        return _CODEC.encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryEntry:
        return _CODEC.decode(cls, data)


# Planned once, here: raises TypeError, naming the field, if a field of MemoryEntry is
# not declared in the codec's CACHED table.
_CODEC = _codec.EntryCodec(MemoryEntry)

#: The fields that live in the live cache only: SQL rows never hold the captured turns,
#: the briefing copies (other channels' words, see model/briefings.py) nor the shown
#: state (model/shown.py), and an entry hydrated from SQL starts without them.
CACHE_ONLY_FIELDS = frozenset({"messages", "briefings", "briefings_epoch", "shown"})


def turns_after(
    messages: Sequence[StoredMessage], since: datetime | None, *, at: bool = False
) -> tuple[StoredMessage, ...]:
    """The turns captured after ``since`` (all when None; with ``at``, at it too), in
    order. Captured turns decode only as far as the ones chosen."""
    if isinstance(messages, _codec.Messages):
        return messages.after(since, at=at)
    return tuple(
        m for m in messages if since is None or m.timestamp > since or (at and m.timestamp == since)
    )


def next_rev(previous: int, now: datetime) -> int:
    """The revision after ``previous`` at ``now``: a hybrid logical clock (the wall
    clock in microseconds, or one more than before when that is not ahead), so
    revisions only grow per key, and an entry rebuilt from nothing while the database
    was unreachable still outranks the older row it could not read."""
    return max(previous + 1, int(now.timestamp() * 1_000_000))

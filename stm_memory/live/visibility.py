"""What hydration may show while writes and deletes still wait in this host's outbox.

A queued write is newer than its row; a queued delete, summary clear or erasure will
change a row that SQL still holds. Rows read from SQL are shown as SQL will hold them
once the outbox drains, so nothing deleted comes back in between.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from stm_memory.durability.outbox import Outbox
from stm_memory.errors import DatabaseError
from stm_memory.model import MemoryEntry, next_rev
from stm_memory.model.erasure import erase_user
from stm_memory.store.base import MemoryStore

__all__ = ["OutboxView"]

log = logging.getLogger("stm_memory")


class OutboxView:
    def __init__(self, outbox: Outbox, store: MemoryStore) -> None:
        self._outbox = outbox
        self._store = store

    def with_queued(
        self, keys: Sequence[str], rows: dict[str, MemoryEntry]
    ) -> tuple[dict[str, MemoryEntry], dict[str, int]]:
        """``rows`` with each key's latest queued write where it is newer, and the outbox
        item each such entry came from."""
        queued_at: dict[str, int] = {}
        if not self._outbox.has_pending():
            return rows, queued_at
        rows = dict(rows)
        for key in keys:
            found = self._outbox.latest_snapshot(key)
            if found is None:
                continue
            item_id, snapshot = found
            # As SQL will hold it: rows keep no captured turns.
            queued = replace(MemoryEntry.from_dict(snapshot), messages=())
            stored = rows.get(key)
            if stored is None or queued.rev >= stored.rev:
                rows[key] = queued
                queued_at[key] = item_id
        return rows, queued_at

    def shown(
        self, entries: Iterable[MemoryEntry], queued_at: Mapping[str, int] | None = None
    ) -> list[MemoryEntry]:
        """Rows as hydration may show them: a deletion still queued in the outbox wins
        over the row it will delete (left out), and a queued summary clear over the
        summary and categories it will null. An entry taken from a queued write
        (``queued_at``: its outbox item) only yields to deletes queued after it. One
        outbox check per batch, not per row."""
        if not self._outbox.has_pending():
            return list(entries)
        forgets = self._outbox.pending_forgets()
        shown = []
        for entry in entries:
            after = (queued_at or {}).get(entry.key, 0)
            for _item, user in (f for f in forgets if f[0] > after):
                # As SqlStore.forget_user will write it (rows keep no captured turns).
                changes = erase_user(entry, user)
                if changes is not None:
                    entry = entry.evolve({**changes, "messages": ()})
            blocking = self._outbox.blocking_delete(
                row_key=entry.key,
                channel_id=entry.channel_id,
                user_id=entry.user_id if entry.kind == "user" else None,
                after=after,
            )
            if blocking is not None:
                kind, at = blocking
                if kind in ("delete_channel", "delete_user", "forget_user"):
                    continue
                if kind == "clear_summary" and at is not None:
                    # As SqlStore.clear_summary will write it.
                    entry = replace(
                        entry,
                        summary=None,
                        categories={},
                        kept=(),
                        last_updated=at,
                        rev=next_rev(entry.rev, at),
                    )
            shown.append(entry)
        return shown

    def channel_was_reset(self, channel_id: str) -> bool:
        """Whether ``clear_channel`` reset the channel: a delete still queued in this
        host's outbox, or the reset SQL recorded. False (earlier dialogue unknown)
        when the database cannot say; only the safety cap then bounds the history."""
        if self._outbox.has_pending():
            queued = self._outbox.blocking_delete(row_key="", channel_id=channel_id, user_id=None)
            if queued is not None and queued[0] == "delete_channel":
                return True
        try:
            return self._store.channel_reset_at(channel_id) is not None
        except DatabaseError as exc:
            log.warning("stm-memory: reading the reset of %s failed: %s", channel_id, exc)
            return False

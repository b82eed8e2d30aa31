"""Persist-or-queue: every SQL write goes through here, so failures land in the outbox."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from stm_memory.durability.outbox import Outbox, OutboxItem, OutboxKind
from stm_memory.errors import DatabaseError, RejectedWriteError
from stm_memory.model import MemoryEntry
from stm_memory.store.base import MemoryStore

__all__ = ["Persister"]

log = logging.getLogger("stm_memory")

#: The cache-only fields (model/entry.py CACHE_ONLY_FIELDS) an outboxed row blanks.
_CACHE_ONLY_EMPTY: dict[str, Any] = {"briefings": [], "shown": None}


def _row_match(entry: MemoryEntry) -> dict[str, str | None]:
    # user_id is recorded only for user-scope rows: that is what clear_user deletes.
    return {
        "row_key": entry.key,
        "channel_id": entry.channel_id,
        "user_id": entry.user_id if entry.kind == "user" else None,
    }


class Persister:
    """Runs store operations now, or queues them durably when the database fails.

    Order matters (a queued delete must not be overtaken by a later write), so while
    anything is queued new writes go behind it instead of straight to the database.
    """

    def __init__(self, store: MemoryStore, outbox: Outbox, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.outbox = outbox
        self._clock = clock
        self._flush_lock = threading.Lock()
        # Checked on the hot path instead of querying the outbox on every write.
        self._dirty = outbox.has_pending()

    # -- dispatch -------------------------------------------------------------------

    def apply(self, kind: OutboxKind, payload: dict[str, Any], op_id: str | None) -> int:
        """Run a queued operation (its JSON payload) against the store."""
        store = self.store
        if kind == "put_rows":
            entries = [MemoryEntry.from_dict(e) for e in payload["entries"]]
            # A snapshot the row has already passed is not written; it still counts
            # as landed (the row holds it or something newer).
            store.put_rows(entries, datetime.fromisoformat(payload["at"]))
            return len(entries)
        if kind == "delete_channel":
            at = datetime.fromisoformat(payload["at"]) if payload.get("at") else None
            return store.delete_channel(payload["channel_id"], op_id=op_id, at=at)
        if kind == "delete_user":
            return store.delete_user(payload["user_id"], op_id=op_id)
        if kind == "forget_user":
            at = datetime.fromisoformat(payload["at"])
            return store.forget_user(payload["user_id"], at, op_id=op_id)
        if kind == "clear_summary":
            at = datetime.fromisoformat(payload["at"])
            return store.clear_summary(payload["keys"], at, op_id=op_id)
        raise ValueError(f"unknown outbox operation {kind!r}")

    # -- writes: try now, queue on failure -------------------------------------------

    def write(self, entries: list[MemoryEntry], at: datetime) -> bool:
        """Write the entries' snapshots to their rows; on failure queue them, one outbox
        item per row, so a later per-user or per-channel purge can drop exactly the
        rows it deletes. The hot path passes entries straight through; only a queued
        item is serialised. No op_id is needed: a snapshot that already landed (say,
        the commit went through but its acknowledgement was lost) is refused by the
        row's revision when replayed."""
        if self._dirty and not self.flush_all():
            self._queue_rows(entries, at)
            return False
        try:
            self.store.put_rows(entries, at)
            return True
        except RejectedWriteError as exc:
            # Queueing it would only block the queue: the data itself is refused.
            log.error("stm-memory: row write refused by the database, not retried: %s", exc)
            return False
        except DatabaseError as exc:
            log.warning("stm-memory: row write failed, queued in the outbox: %s", exc)
            self._queue_rows(entries, at)
            return False

    def _queue_rows(self, entries: list[MemoryEntry], at: datetime) -> None:
        stamp = at.isoformat()
        for entry in entries:
            # Briefing copies and the shown state are the live cache's (rows never
            # hold them): an outbox on disk keeps no second copy of other channels'
            # words, nor of a memory as it was shown.
            payload = {"at": stamp, "entries": [entry.to_dict() | _CACHE_ONLY_EMPTY]}
            self.outbox.enqueue("put_rows", payload, at=at, **_row_match(entry))
        self._dirty = True

    # -- deletes: queue first, so hydration sees them until they land ----------------

    def begin_delete(
        self, kind: OutboxKind, payload: dict[str, Any], **match: str | None
    ) -> OutboxItem:
        item = self.outbox.enqueue(kind, payload, at=self._clock(), **match)
        self._dirty = True
        return item

    def finish_delete(self, item: OutboxItem) -> int | None:
        """Apply a queued delete now if nothing is ahead of it; None when it stays queued."""
        if not self.flush_all(until=item.id):
            return None
        try:
            count = self.apply(item.kind, item.payload, item.op_id)
        except RejectedWriteError as exc:
            log.error("stm-memory: %s refused by the database, dropped: %s", item.kind, exc)
            self.outbox.remove(item.id)
            self._dirty = self.outbox.has_pending()
            return None
        except DatabaseError as exc:
            log.warning("stm-memory: %s queued for retry: %s", item.kind, exc)
            self.outbox.mark_attempt(item.id)
            return None
        self.outbox.remove(item.id)
        self._dirty = self.outbox.has_pending()
        return count

    # -- replay ---------------------------------------------------------------------

    def flush(self, *, before: int | None = None) -> int:
        """Replay queued operations in order (only those queued before item ``before``,
        when given); returns how many landed."""
        with self._flush_lock:
            landed = 0
            for item in self.outbox.pending():
                if before is not None and item.id >= before:
                    break
                try:
                    self.apply(item.kind, item.payload, item.op_id)
                except RejectedWriteError as exc:
                    # Skipped, not retried: it would hold back everything behind it.
                    log.error(
                        "stm-memory: outbox item %d (%s of %s) refused by the database,"
                        " dropped: %s",
                        item.id,
                        item.kind,
                        item.row_key or item.channel_id or item.user_id,
                        exc,
                    )
                    self.outbox.remove(item.id)
                    continue
                except DatabaseError as exc:
                    log.info("stm-memory: outbox replay stopped, database still failing: %s", exc)
                    self.outbox.mark_attempt(item.id)
                    break
                self.outbox.remove(item.id)
                landed += 1
            self._dirty = self.outbox.has_pending()
            return landed

    def flush_all(self, *, until: int | None = None) -> bool:
        """Flush; True when nothing (before ``until``) is left waiting."""
        if not self._dirty:
            return True
        self.flush(before=until)
        pending = self.outbox.pending(limit=1)
        return not pending or (until is not None and pending[0].id >= until)

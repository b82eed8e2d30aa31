"""Repair: bring the live cache and SQL back to one state after a crash.

Why: the write path mutates the cache, then writes SQL. A process killed between the
two (an OOM kill, a power cut) leaves the cache ahead of its row with nothing queued
in the outbox, and no later step would notice. Recording an intent before every write
would cost a durable write on the hot path; instead the engine compares the two sides
at start-up and on every janitor run. Revisions (``MemoryEntry.rev``) make that safe
while other processes keep writing: each side is only ever moved forward, to a
revision the other side already holds.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime

from stm_memory.bulk import CACHE_BATCH, REPAIR_CACHED, Tally, batched
from stm_memory.cache.base import CacheValue, Write
from stm_memory.errors import StorageError
from stm_memory.live.entries import LiveEntries
from stm_memory.live.indexes import ranked_write
from stm_memory.live.scan import cached_entry_keys
from stm_memory.model import MemoryEntry

__all__ = ["Repaired", "repair_cache"]

log = logging.getLogger("stm_memory")


@dataclass(frozen=True, slots=True)
class Repaired:
    """What a repair changed."""

    checked: int = 0
    #: Rows moved forward to the cache's newer snapshot (a write that never landed).
    rows_advanced: int = 0
    #: Cache entries moved forward to their newer row.
    entries_advanced: int = 0
    #: Cache entries whose row does not exist, dropped from the cache.
    entries_dropped: int = 0


def repair_cache(live: LiveEntries, at: datetime, *, batch: int = CACHE_BATCH) -> Repaired:
    """Compare every cached entry with its row, in batches drawn from the cache's scan
    as they are needed, and move the older side on.

    - cache ahead of its row: the row takes the cached snapshot (update only, so a row
      deleted meanwhile stays deleted);
    - row ahead of the cache: the entry takes the row's persisted fields and keeps its
      messages (SQL holds none);
    - no row at all: the entry is dropped from the cache, which is what a delete that
      raced this check would have done, and a write that never landed for a new scope
      is given up rather than risk resurrecting deleted data.

    Callers run it only with an empty outbox: queued writes are newer than their rows.
    Progress (see :mod:`stm_memory.bulk`): the entries checked, after every batch.
    """
    checked = rows_advanced = entries_advanced = dropped = 0
    # Entries without a row, dropped once a batch of them has gathered: re-checked
    # then, a while after they were read, as a first write in flight may have landed.
    orphans: list[str] = []
    tally = Tally(REPAIR_CACHED)
    try:
        for chunk in batched(cached_entry_keys(live.cache), batch):
            cached = {k: MemoryEntry.from_dict(v) for k, v in live.cache.get_many(chunk).items()}
            rows = live.store.load_many(list(cached))
            checked += len(cached)
            ahead = [e for k, e in cached.items() if k in rows and e.rev > rows[k].rev]
            if ahead:
                rows_advanced += live.store.advance_rows(ahead, at)
            behind = {k: r for k, r in rows.items() if k in cached and r.rev > cached[k].rev}
            if behind:
                entries_advanced += _adopt(live, behind)
            orphans.extend(k for k in cached if k not in rows)
            if len(orphans) >= batch:
                dropped += _drop_orphans(live, orphans)
                orphans = []
            tally.add(len(chunk))
    except StorageError as exc:
        log.warning("stm-memory: repair stopped early: %s", exc)
    dropped += _drop_orphans(live, orphans)
    tally.end()
    repaired = Repaired(checked, rows_advanced, entries_advanced, dropped)
    if rows_advanced or entries_advanced or dropped:
        log.warning("stm-memory: cache and SQL disagreed; repaired: %s", repaired)
    return repaired


def _adopt(live: LiveEntries, rows: Mapping[str, MemoryEntry]) -> int:
    """Move cache entries forward to their rows, unless a writer moved them first (and
    their place in the owner's index with them). One atomic write per channel: the
    keys of one channel are what a Redis Cluster can update together."""
    by_channel: dict[str, dict[str, MemoryEntry]] = {}
    for key, row in rows.items():
        by_channel.setdefault(row.channel_id, {})[key] = row
    adopted = 0
    for group in by_channel.values():
        taken = 0

        def take(
            current: Mapping[str, CacheValue | None], group: dict[str, MemoryEntry] = group
        ) -> dict[str, Write]:
            nonlocal taken
            taken = 0
            writes = {}
            for key, row in group.items():
                value = current[key]
                if value is None or int(value.get("rev") or 0) >= row.rev:
                    continue
                entry = replace(row, messages=MemoryEntry.from_dict(value).messages)
                writes[key] = ranked_write(entry, entry.to_dict(), live.native_ttl(entry))
                taken += 1
            return writes

        live.cache.atomic(list(group), take)
        adopted += taken
    return adopted


def _drop_orphans(live: LiveEntries, keys: list[str]) -> int:
    """Evict entries that still have no row (re-checked: a first write may have
    landed since the batch was read)."""
    if not keys:
        return 0
    try:
        landed = live.store.load_many(keys)
    except StorageError as exc:
        log.warning("stm-memory: repair left orphaned entries: %s", exc)
        return 0
    return live.evict([k for k in keys if k not in landed])

"""Live entries: reads with hydration, atomic mutations, and the per-owner ordered indexes.

Each server and user has an ordered index (``shortterm:index:{server|user}:{id}``, a
:meth:`~stm_memory.cache.base.LiveCache.ranked` index) of its entry keys scored by
``last_updated``, so the newest other channels are read in O(entries shown), however
many channels the owner has. Every write that moves an entry's ``last_updated`` moves
its score in the same transaction. A value under the same key marks the index
complete (``{"ranked": 1}``): an index that is not is first filled from SQL (a warm),
otherwise the first write after a restart would leave older channels unlisted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from stm_memory.cache.base import CacheValue, LiveCache, Rank, Write
from stm_memory.config import Limits
from stm_memory.durability.bulk import CACHE_BATCH, batched, cached_entry_keys
from stm_memory.durability.outbox import Outbox
from stm_memory.errors import DatabaseError
from stm_memory.model import (
    MemoryEntry,
    Scope,
    ScopeKind,
    index_key,
    next_rev,
    parse_index_key,
    parse_key,
)
from stm_memory.model.erasure import erase_user, unknown_provenance
from stm_memory.store.base import MemoryStore

__all__ = ["LiveEntries"]

log = logging.getLogger("stm_memory")

# What a mutation changes in an entry: the fields to replace (mutate() adds the new
# revision and builds the entry once).
Change = Callable[[MemoryEntry], dict[str, Any]]


@lru_cache(maxsize=4096)
def owner_index(entry_key: str) -> str:
    # Memoised: every write that moves an entry names its index (the keys of a busy
    # host are few and hot).
    kind, owner, _channel, _persona = parse_key(entry_key)
    return index_key(kind, owner)


def score(entry: MemoryEntry) -> float:
    """An entry's place in its owner's ordered index: newest first."""
    return entry.last_updated.timestamp()


def ranked_write(entry: MemoryEntry, value: CacheValue, ttl: float) -> Write:
    return Write(value, ttl, rank=Rank(owner_index(entry.key), score(entry)))


# The value that marks an ordered index complete (older caches held a member list
# under the same key: not complete in this sense, so it is warmed once).
_COMPLETE: CacheValue = {"ranked": 1}


def unrank(cache: LiveCache, keys: Iterable[str]) -> None:
    """Remove entry keys from their owners' ordered indexes."""
    by_index: dict[str, dict[str, float | None]] = {}
    for key in keys:
        by_index.setdefault(owner_index(key), {})[key] = None
    for ikey, members in by_index.items():
        cache.rank_many(ikey, members)


def evict_deleted(cache: LiveCache, deletions: Sequence[tuple[str, str]]) -> None:
    """Evict from ``cache`` what channel and user deletions made elsewhere reached (its
    copies are older than the deletions): a deleted channel's entries; a forgotten
    user's own entries, and every entry holding their words or naming them in its
    provenance (or not knowing its provenance). Evicted, not rewritten: SQL holds
    the erased state, and the next read hydrates it."""
    channels = {target for kind, target in deletions if kind == "channel"}
    users = {target for kind, target in deletions if kind == "user"}
    for batch in batched(cached_entry_keys(cache), CACHE_BATCH):
        doomed: list[str] = []
        kept: list[str] = []
        for key in batch:
            kind, owner, channel, _persona = parse_key(key)
            if channel in channels or (kind == "user" and owner in users):
                doomed.append(key)
            else:
                kept.append(key)
        if users and kept:
            for key, raw in cache.get_many(kept).items():
                entry = MemoryEntry.from_dict(raw)
                legacy = unknown_provenance(raw) is not None
                if legacy or any(erase_user(entry, u) is not None for u in users):
                    doomed.append(key)
        if doomed:
            cache.delete_many(doomed)
            unrank(cache, doomed)


class _NeedsLoad(Exception):
    """Raised inside an atomic write to leave it and load missing keys first."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys


class LiveEntries:
    def __init__(
        self,
        cache: LiveCache,
        store: MemoryStore,
        outbox: Outbox,
        limits: Limits,
        clock: Callable[[], datetime],
    ) -> None:
        self.cache = cache
        self.store = store
        self.outbox = outbox
        self.limits = limits
        self.clock = clock
        self._inflight: dict[str, Future[MemoryEntry | None]] = {}
        self._inflight_lock = threading.Lock()

    # -- expiry ---------------------------------------------------------------------

    def native_ttl(self, entry: MemoryEntry) -> float:
        # A day of margin: the engine's clock decides what is live; the native TTL
        # only reclaims space, and must never drop an entry the clock still shows.
        ttl = self.limits.ttl_for(has_summary=entry.has_summary)
        return ttl.total_seconds() + 86400.0

    def is_live(self, entry: MemoryEntry, now: datetime) -> bool:
        ttl = self.limits.ttl_for(has_summary=entry.has_summary)
        return now - entry.last_updated < ttl

    # -- reads ----------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """Entries by key (expired ones included), hydrating misses from SQL."""
        raw = self.cache.get_many(keys)
        out = {k: MemoryEntry.from_dict(v) for k, v in raw.items()}
        missing = [k for k in keys if k not in raw]
        if missing:
            out.update(self.hydrate(missing))
        return out

    def hydrate(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """Load keys from SQL into the cache. Concurrent misses of a key share one load."""
        mine: list[str] = []
        waits: dict[str, Future[MemoryEntry | None]] = {}
        with self._inflight_lock:
            for key in keys:
                if key in self._inflight:
                    waits[key] = self._inflight[key]
                else:
                    fut: Future[MemoryEntry | None] = Future()
                    self._inflight[key] = fut
                    mine.append(key)
        out: dict[str, MemoryEntry] = {}
        try:
            loaded = self._load(mine) if mine else {}
            out.update(loaded)
        finally:
            with self._inflight_lock:
                for key in mine:
                    fut = self._inflight.pop(key)
                    fut.set_result(out.get(key))
        for key, fut in waits.items():
            entry = fut.result()
            if entry is not None:
                out[key] = entry
        return out

    def _load(self, keys: list[str]) -> dict[str, MemoryEntry]:
        try:
            rows = self.store.load_many(keys)
        except DatabaseError as exc:
            # Writes this host queued still tell what SQL will hold; the rest is blind.
            log.warning("stm-memory: hydration failed, continuing without: %s", exc)
            rows = {}
        queued_at: dict[str, int] = {}
        if self.outbox.has_pending():
            # Writes still queued are newer than their rows: show what SQL will hold
            # (which has no messages: a hydrated entry never has any).
            for key in keys:
                found = self.outbox.latest_snapshot(key)
                if found is None:
                    continue
                item_id, snapshot = found
                queued = replace(MemoryEntry.from_dict(snapshot), messages=())
                stored = rows.get(key)
                if stored is None or queued.rev >= stored.rev:
                    rows[key] = queued
                    queued_at[key] = item_id
        rows = {e.key: e for e in self._shown(rows.values(), queued_at)}
        if not rows:
            return {}
        # Ranked as they are added: a cached entry is always listed in its index (a
        # complete index holds every entry; an incomplete one is warmed when needed).
        self.cache.add_many(
            {k: ranked_write(e, e.to_dict(), self.native_ttl(e)) for k, e in rows.items()}
        )
        # Re-read: a concurrent writer may have won, and its value is the live one.
        return {k: MemoryEntry.from_dict(v) for k, v in self.cache.get_many(list(rows)).items()}

    def _shown(
        self, entries: Iterable[MemoryEntry], queued_at: Mapping[str, int] | None = None
    ) -> list[MemoryEntry]:
        """Rows as hydration may show them: a deletion still queued in the outbox wins
        over the row it will delete (left out), and a queued summary clear over the
        summary and categories it will null. An entry taken from a queued write
        (``queued_at``: its outbox item) only yields to deletes queued after it. One
        outbox check per batch, not per row."""
        if not self.outbox.has_pending():
            return list(entries)
        forgets = self.outbox.pending_forgets()
        shown = []
        for entry in entries:
            after = (queued_at or {}).get(entry.key, 0)
            for _item, user in (f for f in forgets if f[0] > after):
                # As SqlStore.forget_user will write it (rows keep no captured turns).
                changes = erase_user(entry, user)
                if changes is not None:
                    entry = entry.evolve({**changes, "messages": ()})
            blocking = self.outbox.blocking_delete(
                row_key=entry.key,
                channel_id=entry.channel_id,
                user_id=entry.user_id if entry.kind == "user" else None,
                after=(queued_at or {}).get(entry.key, 0),
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
                        last_updated=at,
                        rev=next_rev(entry.rev, at),
                    )
            shown.append(entry)
        return shown

    def warm(self, kind: ScopeKind, owner_id: str) -> int:
        """Bulk-load an owner's rows into the cache (never overwriting a live key), rank
        them in its ordered index and mark the index complete. Returns how many
        entries were added."""
        try:
            rows = (
                self.store.load_server(owner_id)
                if kind == "server"
                else self.store.load_user(owner_id)
            )
        except DatabaseError as exc:
            # Not marked complete: the next read tries again.
            log.warning("stm-memory: warm of %s %s failed: %s", kind, owner_id, exc)
            return 0
        rows = self._shown(rows)
        added = self.cache.add_many({e.key: Write(e.to_dict(), self.native_ttl(e)) for e in rows})
        ikey = index_key(kind, owner_id)
        # Higher scores win: an entry written since its row keeps its newer place.
        self.cache.rank_many(ikey, {e.key: score(e) for e in rows})
        self.cache.add_many({ikey: Write(_COMPLETE)})
        return added

    def _complete_indexes(
        self, owners: Sequence[tuple[ScopeKind, str]], markers: Mapping[str, CacheValue]
    ) -> None:
        for kind, owner_id in owners:
            ikey = index_key(kind, owner_id)
            marker = markers.get(ikey)
            if marker is not None and "ranked" in marker:
                continue
            if marker is not None:  # an index of an older release: replaced whole
                self.cache.delete_many([ikey])
            self.warm(kind, owner_id)

    def get_with_indexes(
        self, key: str, owners: Sequence[tuple[ScopeKind, str]]
    ) -> MemoryEntry | None:
        """The entry of ``key`` (hydrated on a miss, expired or not) after making the
        owners' ordered indexes complete: one cache read for all of it when warm."""
        found = self.cache.get_many([key, *(index_key(k, o) for k, o in owners)])
        self._complete_indexes(owners, found)
        raw = found.get(key)
        if raw is not None:
            return MemoryEntry.from_dict(raw)
        return self.hydrate([key]).get(key)

    def newest(
        self, kind: ScopeKind, owner_id: str, *, offset: int, count: int
    ) -> list[tuple[str, float]]:
        """A page of the owner's entry keys, newest first, with their scores (the
        index is complete once :meth:`get_with_indexes` or a write saw to it)."""
        return self.cache.ranked(index_key(kind, owner_id), offset=offset, count=count)

    # -- writes ---------------------------------------------------------------------

    def fresh_or_live(
        self, raw: CacheValue | None, scope: Scope, key: str, now: datetime
    ) -> tuple[MemoryEntry, bool]:
        """The entry a write starts from, and whether it is ``raw`` decoded as it is
        (then the write patches ``raw`` rather than encoding the entry whole)."""
        if raw is None:
            return MemoryEntry.empty(scope, key, now), False
        entry = MemoryEntry.from_dict(raw)
        if self.is_live(entry, now):
            named = entry.with_scope_names(scope)
            return named, named is entry
        # Expired content is gone (and with it its provenance: nobody's words are left);
        # the turn counters are bookkeeping and carry on, and so does the revision (SQL
        # must take what replaces the expired content).
        empty = replace(
            MemoryEntry.empty(scope, key, now),
            turns_since_refresh=entry.turns_since_refresh,
            last_refreshed_turn=entry.last_refreshed_turn,
            turns_since_reset=entry.turns_since_reset,
            rev=entry.rev,
        )
        return empty, False

    def mutate(
        self,
        scope: Scope,
        keys: Sequence[str],
        change: Change,
        *,
        existing_only: bool = False,
    ) -> dict[str, MemoryEntry]:
        """Apply ``change`` to the entries of ``keys`` atomically (one transaction),
        moving each entry's revision on, and its score in its owner's ordered index
        when its ``last_updated`` moved (or the entry is new).

        Hot path: every entry is cached, so only the entry keys are read and written.
        A missing entry is hydrated from SQL and its owner's index completed first,
        then the write runs again, so a write never starts from a blank that hides
        stored data, and a new entry joins a complete index. With ``existing_only``
        (erasure), entries not in the cache are left alone: nothing is loaded or
        created, and only the entries changed are returned.
        """
        loaded = False
        # A new entry of a channel that was reset counts its turns from the reset.
        after_reset = False
        # The entries fn computed on its last (winning) run: returned as they are, so
        # nothing is decoded again from what was just written.
        computed: dict[str, MemoryEntry] = {}
        while True:
            now = self.clock()

            def fn(
                current: Mapping[str, CacheValue | None],
                now: datetime = now,
                loaded: bool = loaded,
                after_reset: bool = after_reset,
            ) -> dict[str, Write]:
                if not loaded and not existing_only:
                    missing = [k for k in keys if current.get(k) is None]
                    if missing:
                        raise _NeedsLoad(missing)
                writes: dict[str, Write] = {}
                computed.clear()
                for key in keys:
                    raw = current.get(key)
                    if raw is None and existing_only:
                        continue
                    base, as_is = self.fresh_or_live(raw, scope, key, now)
                    if raw is None and after_reset:
                        base = replace(base, turns_since_reset=0)
                    fields = {**change(base), "rev": next_rev(base.rev, now)}
                    entry = base.evolve(fields)
                    computed[key] = entry
                    value = entry.value_after(raw if as_is else None, fields)
                    ttl = self.native_ttl(entry)
                    moved = raw is None or entry.last_updated != base.last_updated or not as_is
                    writes[key] = ranked_write(entry, value, ttl) if moved else Write(value, ttl)
                return writes

            try:
                self.cache.atomic(keys, fn)
            except _NeedsLoad as need:
                new = self._load_missing(need.keys)
                # Only an entry created here needs to know (an SQL read otherwise spent
                # on every cold write of an existing scope).
                after_reset = bool(new) and self.channel_was_reset(scope.channel_id)
                loaded = True
                continue
            return dict(computed)

    def channel_was_reset(self, channel_id: str) -> bool:
        """Whether ``clear_channel`` reset the channel: a delete still queued in this
        host's outbox, or the reset SQL recorded. False (earlier dialogue unknown)
        when the database cannot say; only the safety cap then bounds the history."""
        if self.outbox.has_pending():
            queued = self.outbox.blocking_delete(row_key="", channel_id=channel_id, user_id=None)
            if queued is not None and queued[0] == "delete_channel":
                return True
        try:
            return self.store.channel_reset_at(channel_id) is not None
        except DatabaseError as exc:
            log.warning("stm-memory: reading the reset of %s failed: %s", channel_id, exc)
            return False

    def _load_missing(self, keys: list[str]) -> set[str]:
        """Hydrate the entry keys and complete their owners' indexes; returns the keys
        that exist nowhere (new entries)."""
        found = self.hydrate(keys)
        ikeys = sorted({owner_index(k) for k in keys})
        self._complete_indexes([parse_index_key(k) for k in ikeys], self.cache.get_many(ikeys))
        return set(keys) - set(found)

    def evict(self, keys: Sequence[str]) -> int:
        """Remove entries from the cache and from their owners' indexes."""
        if not keys:
            return 0
        removed = self.cache.delete_many(keys)
        unrank(self.cache, keys)
        return removed

"""Live entries: the engine's one view of the live cache.

Reads hydrate misses from SQL (:mod:`~stm_memory.live.loading`), shown as the outbox
will leave them (:mod:`~stm_memory.live.visibility`); writes are atomic per scope and
keep the owners' ordered indexes exact (:mod:`~stm_memory.live.indexes`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from stm_memory.cache.base import CacheValue, LiveCache, Write
from stm_memory.config import Limits
from stm_memory.durability.outbox import Outbox
from stm_memory.live.indexes import OwnerIndexes, ranked_write, unrank
from stm_memory.live.loading import Hydrator
from stm_memory.live.visibility import OutboxView
from stm_memory.model import MemoryEntry, Scope, ScopeKind, index_key, next_rev
from stm_memory.store.base import MemoryStore

__all__ = ["Change", "LiveEntries"]

# What a mutation changes in an entry: the fields to replace (mutate() adds the new
# revision and builds the entry once).
Change = Callable[[MemoryEntry], dict[str, Any]]

#: How many decoded entries are kept for reuse (see LiveEntries._decode): one turn
#: reads the same few keys several times (assembly, capture's reads, the write).
DECODED_KEPT = 128


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
        self.limits = limits
        self.clock = clock
        self._view = OutboxView(outbox, store)
        self._indexes = OwnerIndexes(cache, store, self._view, self.native_ttl)
        self._hydrator = Hydrator(cache, store, self._view, self.native_ttl)
        # key -> (the cached value last decoded, the entry decoded from it).
        self._decoded: dict[str, tuple[CacheValue, MemoryEntry]] = {}
        self._decoded_lock = threading.Lock()

    def _decode(self, key: str, raw: CacheValue) -> MemoryEntry:
        """``raw`` (the cached value of ``key``) as an entry, reusing the entry decoded
        last time when the value is equal.

        Why: a turn reads the channel's entries up to four times (assembly, capture's
        two reads, the write's own read inside its transaction) and every turn reads
        the other channels' entries again, mostly unchanged. Comparing two values is a
        C-level walk, several times cheaper than decoding one, and the reused entry
        keeps its captured turns decoded (``Messages``). Entries are immutable and
        equal values decode to equal entries, so sharing one is invisible; the cached
        value kept is this object's own copy, which nothing mutates."""
        known = self._decoded.get(key)
        # The same object first: the cache's read_many hands out one value per stored
        # form, so an unchanged entry is recognised without walking it.
        if known is not None and (known[0] is raw or known[0] == raw):
            return known[1]
        entry = MemoryEntry.from_dict(raw)
        self._remember(key, raw, entry)
        return entry

    def _remember(self, key: str, raw: CacheValue, entry: MemoryEntry) -> None:
        with self._decoded_lock:
            decoded = self._decoded
            decoded.pop(key, None)  # re-inserted last: the oldest goes first
            decoded[key] = (raw, entry)
            if len(decoded) > DECODED_KEPT:
                del decoded[next(iter(decoded))]

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
        out = self.cached(keys)
        missing = [k for k in keys if k not in out]
        if missing:
            out.update(self._hydrator.hydrate(missing))
        return out

    def cached(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """The entries the cache holds of ``keys`` (expired ones included); a miss is
        left out, never loaded from SQL."""
        return {k: self._decode(k, v) for k, v in self.cache.read_many(keys).items()}

    def hydrate(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """Load keys from SQL into the cache. Concurrent misses of a key share one load."""
        return self._hydrator.hydrate(keys)

    def warm(self, kind: ScopeKind, owner_id: str) -> int:
        """Bulk-load an owner's rows into the cache and complete its ordered index;
        returns how many entries were added."""
        return self._indexes.warm(kind, owner_id)

    def get_with_indexes(
        self, key: str, owners: Sequence[tuple[ScopeKind, str]]
    ) -> MemoryEntry | None:
        """The entry of ``key`` (hydrated on a miss, expired or not) after making the
        owners' ordered indexes complete: one cache read for all of it when warm."""
        found = self.cache.read_many([key, *(index_key(k, o) for k, o in owners)])
        self._indexes.complete(owners, found)
        raw = found.get(key)
        if raw is not None:
            return self._decode(key, raw)
        return self._hydrator.hydrate([key]).get(key)

    def newest(
        self, kind: ScopeKind, owner_id: str, *, offset: int, count: int
    ) -> list[tuple[str, float]]:
        """A page of the owner's entry keys, newest first, with their scores (the
        index is complete once :meth:`get_with_indexes` or a write saw to it)."""
        return self._indexes.newest(kind, owner_id, offset=offset, count=count)

    def channel_was_reset(self, channel_id: str) -> bool:
        """Whether ``clear_channel`` reset the channel (see :class:`OutboxView`)."""
        return self._view.channel_was_reset(channel_id)

    # -- writes ---------------------------------------------------------------------

    def fresh_or_live(
        self, raw: CacheValue | None, scope: Scope, key: str, now: datetime
    ) -> tuple[MemoryEntry, bool]:
        """The entry a write starts from, and whether it is ``raw`` decoded as it is
        (then the write patches ``raw`` rather than encoding the entry whole)."""
        if raw is None:
            return MemoryEntry.empty(scope, key, now), False
        entry = self._decode(key, raw)
        if self.is_live(entry, now):
            named = entry.with_scope_names(scope)
            return named, named is entry
        # Expired content is gone (and with it its provenance: nobody's words are left);
        # the turn counters are bookkeeping and carry on, and so does the revision (SQL
        # must take what replaces the expired content), and the marks of what erasure
        # removed (no text: the caller's own history may still hold those words).
        empty = replace(
            MemoryEntry.empty(scope, key, now),
            turns_since_refresh=entry.turns_since_refresh,
            last_refreshed_turn=entry.last_refreshed_turn,
            turns_since_reset=entry.turns_since_reset,
            rev=entry.rev,
            forgotten=entry.forgotten,
            no_writer=entry.no_writer,
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
        run = _Mutation(self, scope, keys, change, existing_only=existing_only)
        while True:
            now = self.clock()
            self.cache.atomic(keys, partial(run.writes, now=now))
            if not run.missing:
                # Committed: what was written is what the next read of these keys
                # finds (unless another writer came first; then the values differ
                # and the read decodes). Remembered, the next turn's reads of the
                # channel's entries, and the user's, which only writes touch,
                # decode nothing.
                for key, entry in run.computed.items():
                    self._remember(key, run.values[key], entry)
                return dict(run.computed)
            found = self._hydrator.hydrate(run.missing)
            self._indexes.complete_for(run.missing)
            # Only an entry created here needs to know (an SQL read otherwise spent on
            # every cold write of an existing scope).
            new = set(run.missing) - set(found)
            run.after_reset = bool(new) and self._view.channel_was_reset(scope.channel_id)
            run.loaded = True
            run.missing.clear()

    def evict(self, keys: Sequence[str]) -> int:
        """Remove entries from the cache and from their owners' indexes."""
        if not keys:
            return 0
        removed = self.cache.delete_many(keys)
        unrank(self.cache, keys)
        with self._decoded_lock:  # nothing evicted stays decoded in this process
            for key in keys:
                self._decoded.pop(key, None)
        return removed


class _Mutation:
    """One :meth:`LiveEntries.mutate`: the writes its transaction makes, and what a run
    of it found (the cache may run the function again on a conflict, so each run starts
    from the same inputs and only its last run's results count)."""

    def __init__(
        self,
        entries: LiveEntries,
        scope: Scope,
        keys: Sequence[str],
        change: Change,
        *,
        existing_only: bool,
    ) -> None:
        self.entries = entries
        self.scope = scope
        self.keys = keys
        self.change = change
        self.existing_only = existing_only
        # Hydrated already: a key still missing is a new entry, not a cold one.
        self.loaded = False
        # A new entry of a channel that was reset counts its turns from the reset.
        self.after_reset = False
        # Keys found missing on a cold write: it writes nothing, they are loaded outside
        # the transaction (an SQL read must not hold the cache's lock), and the write
        # runs again.
        self.missing: list[str] = []
        # The entries the last (winning) run computed: returned as they are, so nothing
        # is decoded again from what was just written.
        self.computed: dict[str, MemoryEntry] = {}
        # The cached values those entries were written as (kept for LiveEntries._decode).
        self.values: dict[str, CacheValue] = {}

    def writes(self, current: Mapping[str, CacheValue | None], now: datetime) -> dict[str, Write]:
        writes: dict[str, Write] = {}
        if not self.loaded and not self.existing_only:
            self.missing[:] = [k for k in self.keys if current.get(k) is None]
            if self.missing:
                return writes
        self.computed.clear()
        self.values.clear()
        live = self.entries
        for key in self.keys:
            raw = current.get(key)
            if raw is None and self.existing_only:
                continue
            base, as_is = live.fresh_or_live(raw, self.scope, key, now)
            if raw is None and self.after_reset:
                base = replace(base, turns_since_reset=0)
            fields = {**self.change(base), "rev": next_rev(base.rev, now)}
            entry = base.evolve(fields)
            self.computed[key] = entry
            value = entry.value_after(raw if as_is else None, fields)
            self.values[key] = value
            ttl = live.native_ttl(entry)
            moved = raw is None or entry.last_updated != base.last_updated or not as_is
            writes[key] = ranked_write(entry, value, ttl) if moved else Write(value, ttl)
        return writes

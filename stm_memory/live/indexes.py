"""The per-owner ordered indexes: which index an entry is in, its score there, and
making an owner's index complete.

Each server and user has an ordered index (a
:meth:`~stm_memory.cache.base.LiveCache.ranked` index under
:func:`~stm_memory.model.index_key`) of its entry keys scored by ``last_updated``, so
the newest other channels are read in O(entries shown), however many channels the
owner has. Every write that moves an entry's ``last_updated`` moves its score in the
same transaction. A value under the index key marks the index complete
(``{"ranked": 1}``): an index that is not is first filled from SQL (a warm), otherwise
the first write after a restart would leave older channels unlisted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from stm_memory.cache.base import CacheValue, LiveCache, Rank, Write
from stm_memory.errors import DatabaseError
from stm_memory.live.visibility import OutboxView
from stm_memory.model import MemoryEntry, ScopeKind, index_key, parse_index_key, parse_key
from stm_memory.store.base import MemoryStore

__all__ = ["OwnerIndexes", "owner_index", "ranked_write", "score", "unrank"]

log = logging.getLogger("stm_memory")

# The value that marks an ordered index complete (older caches held a member list
# under the same key: not complete in this sense, so it is warmed once).
_COMPLETE: CacheValue = {"ranked": 1}


@lru_cache(maxsize=4096)
def owner_index(entry_key: str) -> str:
    """The index an entry key is listed in. Memoised: every write that moves an entry
    names its index, and the keys of a busy host are few and hot."""
    kind, owner, _channel, _persona = parse_key(entry_key)
    return index_key(kind, owner)


def score(entry: MemoryEntry) -> float:
    """An entry's place in its owner's ordered index: newest first."""
    return entry.last_updated.timestamp()


def ranked_write(entry: MemoryEntry, value: CacheValue, ttl: float) -> Write:
    """A cache write of ``entry`` that also moves its score in its owner's index."""
    return Write(value, ttl, rank=Rank(owner_index(entry.key), score(entry)))


def unrank(cache: LiveCache, keys: Iterable[str]) -> None:
    """Remove entry keys from their owners' ordered indexes."""
    by_index: dict[str, dict[str, float | None]] = {}
    for key in keys:
        by_index.setdefault(owner_index(key), {})[key] = None
    for ikey, members in by_index.items():
        cache.rank_many(ikey, members)


class OwnerIndexes:
    """Completes owners' indexes from SQL, and reads them a page at a time."""

    def __init__(
        self,
        cache: LiveCache,
        store: MemoryStore,
        view: OutboxView,
        native_ttl: Callable[[MemoryEntry], float],
    ) -> None:
        self._cache = cache
        self._store = store
        self._view = view
        self._native_ttl = native_ttl

    def warm(self, kind: ScopeKind, owner_id: str) -> int:
        """Bulk-load an owner's rows into the cache (never overwriting a live key), rank
        them in its ordered index and mark the index complete. Returns how many
        entries were added."""
        try:
            rows = (
                self._store.load_server(owner_id)
                if kind == "server"
                else self._store.load_user(owner_id)
            )
        except DatabaseError as exc:
            # Not marked complete: the next read tries again.
            log.warning("stm-memory: warm of %s %s failed: %s", kind, owner_id, exc)
            return 0
        rows = self._view.shown(rows)
        added = self._cache.add_many({e.key: Write(e.to_dict(), self._native_ttl(e)) for e in rows})
        ikey = index_key(kind, owner_id)
        # Higher scores win: an entry written since its row keeps its newer place.
        self._cache.rank_many(ikey, {e.key: score(e) for e in rows})
        self._cache.add_many({ikey: Write(_COMPLETE)})
        return added

    def complete(
        self, owners: Sequence[tuple[ScopeKind, str]], markers: Mapping[str, CacheValue]
    ) -> None:
        """Warm each owner whose index ``markers`` (the values read under the index
        keys) do not show complete."""
        for kind, owner_id in owners:
            ikey = index_key(kind, owner_id)
            marker = markers.get(ikey)
            if marker is not None and "ranked" in marker:
                continue
            if marker is not None:  # an index of an older release: replaced whole
                self._cache.delete_many([ikey])
            self.warm(kind, owner_id)

    def complete_for(self, entry_keys: Iterable[str]) -> None:
        """Complete the indexes the entry keys are listed in (one read of their markers)."""
        ikeys = sorted({owner_index(k) for k in entry_keys})
        self.complete([parse_index_key(k) for k in ikeys], self._cache.get_many(ikeys))

    def newest(
        self, kind: ScopeKind, owner_id: str, *, offset: int, count: int
    ) -> list[tuple[str, float]]:
        """A page of the owner's entry keys, newest first, with their scores."""
        return self._cache.ranked(index_key(kind, owner_id), offset=offset, count=count)

"""Scans of the live cache's entries, for the operations that go through all of them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from stm_memory.bulk import CACHE_BATCH, EVICT_CACHED, Tally, batched
from stm_memory.cache.base import LiveCache
from stm_memory.model.scope import ENTRY_PREFIX, INDEX_PREFIX, RESULTS_PREFIX

__all__ = ["cached_entry_keys", "evict_in_batches"]


def cached_entry_keys(cache: LiveCache, prefix: str = ENTRY_PREFIX) -> Iterator[str]:
    """The live cache's entry keys starting with ``prefix`` (owner indexes and kept
    tool results skipped), as the cache's scan yields them."""
    return (
        k
        for k in cache.iter_keys(prefix)
        if not k.startswith(INDEX_PREFIX) and not k.startswith(RESULTS_PREFIX)
    )


def evict_in_batches(evict: Callable[[list[str]], object], keys: Iterable[str]) -> None:
    """Evict ``keys``, drawn as they are needed, :data:`CACHE_BATCH` at a time
    (reported as :data:`EVICT_CACHED`: the keys gone through)."""
    tally = Tally(EVICT_CACHED)
    for batch in batched(keys, CACHE_BATCH):
        evict(batch)
        tally.add(len(batch))
    tally.end()

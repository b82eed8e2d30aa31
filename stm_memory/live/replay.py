"""Deletions made elsewhere, replayed on a cache whose copies are older than them (the
drain after degraded mode)."""

from __future__ import annotations

from collections.abc import Sequence

from stm_memory.bulk import CACHE_BATCH, batched
from stm_memory.cache.base import LiveCache
from stm_memory.live.indexes import unrank
from stm_memory.live.results import delete_results
from stm_memory.live.scan import cached_entry_keys
from stm_memory.model import MemoryEntry, parse_key
from stm_memory.model.erasure import erase_user, unknown_provenance

__all__ = ["evict_deleted"]


def evict_deleted(cache: LiveCache, deletions: Sequence[tuple[str, str]]) -> None:
    """Evict from ``cache`` what channel and user deletions made elsewhere reached: a
    deleted channel's entries; a forgotten user's own entries, and every entry holding
    their words or naming them in its provenance (or not knowing its provenance); the
    tool results either kept (``live/results.py``).
    Evicted, not rewritten: SQL holds the erased state, and the next read hydrates it."""
    channels = {target for kind, target in deletions if kind == "channel"}
    users = {target for kind, target in deletions if kind == "user"}
    delete_results(cache, users=frozenset(users), channels=frozenset(channels))
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

"""Hydration: loading entries from SQL into the live cache, one load per key at a time."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from stm_memory.cache.base import LiveCache
from stm_memory.errors import DatabaseError
from stm_memory.live.indexes import ranked_write
from stm_memory.live.visibility import OutboxView
from stm_memory.model import MemoryEntry
from stm_memory.store.base import MemoryStore

__all__ = ["Hydrator"]

log = logging.getLogger("stm_memory")


class Hydrator:
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
        self._inflight: dict[str, Future[MemoryEntry | None]] = {}
        self._inflight_lock = threading.Lock()

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
            rows = self._store.load_many(keys)
        except DatabaseError as exc:
            # Writes this host queued still tell what SQL will hold; the rest is blind.
            log.warning("stm-memory: hydration failed, continuing without: %s", exc)
            rows = {}
        rows, queued_at = self._view.with_queued(keys, rows)
        rows = {e.key: e for e in self._view.shown(rows.values(), queued_at)}
        if not rows:
            return {}
        # Ranked as they are added: a cached entry is always listed in its index (a
        # complete index holds every entry; an incomplete one is warmed when needed).
        self._cache.add_many(
            {k: ranked_write(e, e.to_dict(), self._native_ttl(e)) for k, e in rows.items()}
        )
        # Re-read: a concurrent writer may have won, and its value is the live one.
        return {k: MemoryEntry.from_dict(v) for k, v in self._cache.get_many(list(rows)).items()}

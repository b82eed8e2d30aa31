"""diskcache backend: the embedded default, safe for many processes on one host."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

import diskcache

from ..errors import CacheError
from .base import AtomicFn, CacheValue, LiveCache, Write

__all__ = ["DiskLiveCache"]

log = logging.getLogger("stm_memory")


class DiskLiveCache(LiveCache):
    """Live cache in a diskcache directory.

    Multi-step writes run inside ``Cache.transact()`` (``BEGIN IMMEDIATE``), which
    serialises writers across threads *and* processes sharing the directory, so a
    counter increment or a category merge is never lost.
    """

    def __init__(self, directory: str | os.PathLike[str], *, timeout: float = 60.0) -> None:
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not os.access(path, os.W_OK | os.X_OK):
                raise PermissionError(f"cache directory {path} is not writable")
            self._cache = diskcache.Cache(
                str(path),
                timeout=timeout,
                # Culling runs a query on every set; our entries are small and expire
                # natively, so the janitor calls expire() instead of paying per write.
                cull_limit=0,
                # No eviction bookkeeping on reads: the hot read path stays one SELECT.
                eviction_policy="none",
                statistics=False,
                tag_index=False,
            )
            # Touch the database so a corrupt file fails here, not mid-turn.
            self._cache.get("shortterm:probe")
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot open the diskcache directory {path}: {exc}") from exc
        self.directory = path

    def _read(self, key: str) -> CacheValue | None:
        try:
            value: CacheValue | None = self._cache.get(key)
        except sqlite3.Error as exc:
            raise CacheError(f"live cache read failed in {self.directory}: {exc}") from exc
        except Exception as exc:  # an unreadable (corrupt) value
            # A cache is disposable: drop the value and let the caller reload it from
            # SQL, instead of failing every turn that touches this key.
            log.warning("stm-memory: dropping unreadable cache value %r: %s", key, exc)
            with suppress(Exception):
                self._cache.delete(key)
            return None
        return value

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        out: dict[str, CacheValue] = {}
        for key in keys:
            value = self._read(key)
            if value is not None:
                out[key] = value
        return out

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        cache = self._cache
        try:
            with cache.transact(retry=True):
                current: dict[str, CacheValue | None] = {k: self._read(k) for k in keys}
                writes = fn(current)
                for key, write in writes.items():
                    if write.value is None:
                        cache.delete(key)
                    else:
                        cache.set(key, write.value, expire=write.ttl)
                    current[key] = write.value
        except sqlite3.Error as exc:
            raise CacheError(f"live cache write failed in {self.directory}: {exc}") from exc
        return current

    def add_many(self, items: Mapping[str, Write]) -> int:
        added = 0
        with self._cache.transact(retry=True):
            for key, write in items.items():
                if write.value is not None and self._cache.add(key, write.value, expire=write.ttl):
                    added += 1
        return added

    def delete_many(self, keys: Sequence[str]) -> int:
        removed = 0
        with self._cache.transact(retry=True):
            for key in keys:
                if self._cache.delete(key):
                    removed += 1
        return removed

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        for key in list(self._cache.iterkeys()):
            if isinstance(key, str) and key.startswith(prefix) and key in self._cache:
                yield key

    def expire(self) -> int:
        return int(self._cache.expire())

    def close(self) -> None:
        self._cache.close()

    def stats(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "volume_bytes": self._cache.volume()}

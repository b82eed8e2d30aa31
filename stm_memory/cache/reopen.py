"""A primary live cache that could not be opened yet (degraded mode from the start).

When the diskcache directory of the embedded default cannot be opened (a file where
the directory should be, a corrupt database, a full disk), the memory still starts:
:class:`~stm_memory.cache.resilient.ResilientCache` runs it on the SQL live cache and
calls this primary every ``retry_after`` seconds; each call tries to open the
directory again, and once it opens, the SQL cache is drained into it as after any
outage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence

from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Write

__all__ = ["ReopeningCache"]


class ReopeningCache(LiveCache):
    """Delegates to the cache ``opener`` returns, calling it until it succeeds (it
    raises :class:`~stm_memory.errors.CacheError` meanwhile)."""

    def __init__(self, opener: Callable[[], LiveCache]) -> None:
        self._opener = opener
        self._cache: LiveCache | None = None
        self._lock = threading.Lock()

    @property
    def opened(self) -> LiveCache | None:
        return self._cache

    def _target(self) -> LiveCache:
        cache = self._cache
        if cache is None:
            with self._lock:
                if self._cache is None:
                    self._cache = self._opener()
                cache = self._cache
        return cache

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._target().get_many(keys)

    def read_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._target().read_many(keys)

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        return self._target().atomic(keys, fn)

    def add_many(self, items: Mapping[str, Write]) -> int:
        return self._target().add_many(items)

    def delete_many(self, keys: Sequence[str]) -> int:
        return self._target().delete_many(keys)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        return self._target().iter_keys(prefix)

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        return self._target().ranked(index, offset=offset, count=count)

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        self._target().rank_many(index, members)

    def expire(self) -> int:
        return self._target().expire()

    def compact(self) -> None:
        if self._cache is not None:
            self._cache.compact()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()

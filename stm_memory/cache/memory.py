"""In-memory reference backend: one process, for tests and notebooks."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

from .base import AtomicFn, CacheValue, LiveCache, Write

__all__ = ["InMemoryLiveCache"]


class InMemoryLiveCache(LiveCache):
    """A dict behind a lock. Values are deep-copied in and out, like a real store."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[CacheValue, float | None]] = {}
        self._lock = threading.RLock()

    def _live(self, key: str, now: float) -> CacheValue | None:
        item = self._data.get(key)
        if item is None:
            return None
        value, deadline = item
        if deadline is not None and deadline <= now:
            del self._data[key]
            return None
        return value

    def _put(self, key: str, write: Write, now: float) -> None:
        if write.value is None:
            self._data.pop(key, None)
        else:
            deadline = None if write.ttl is None else now + write.ttl
            self._data[key] = (copy.deepcopy(write.value), deadline)

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        now = time.monotonic()
        with self._lock:
            out = {k: self._live(k, now) for k in keys}
            return {k: copy.deepcopy(v) for k, v in out.items() if v is not None}

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        now = time.monotonic()
        with self._lock:
            current = {k: copy.deepcopy(self._live(k, now)) for k in keys}
            for key, write in fn(current).items():
                self._put(key, write, now)
                current[key] = copy.deepcopy(write.value)
            return current

    def add_many(self, items: Mapping[str, Write]) -> int:
        now = time.monotonic()
        added = 0
        with self._lock:
            for key, write in items.items():
                if write.value is not None and self._live(key, now) is None:
                    self._put(key, write, now)
                    added += 1
        return added

    def delete_many(self, keys: Sequence[str]) -> int:
        with self._lock:
            now = time.monotonic()
            present = [k for k in keys if self._live(k, now) is not None]
            for key in present:
                del self._data[key]
            return len(present)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        now = time.monotonic()
        with self._lock:
            # A snapshot: _live() deletes expired keys, which must not happen while
            # iterating the dict itself.
            keys = [
                k
                for k in list(self._data)
                if k.startswith(prefix) and self._live(k, now) is not None
            ]
        yield from keys

    def expire(self) -> int:
        now = time.monotonic()
        with self._lock:
            dead = [k for k, (_, d) in self._data.items() if d is not None and d <= now]
            for key in dead:
                del self._data[key]
            return len(dead)

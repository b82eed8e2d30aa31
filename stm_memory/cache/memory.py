"""In-memory reference backend: one process, for tests and notebooks."""

from __future__ import annotations

import bisect
import copy
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Rank, Write

__all__ = ["InMemoryLiveCache"]


class InMemoryLiveCache(LiveCache):
    """A dict behind a lock. Values are deep-copied in and out, like a real store."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[CacheValue, float | None]] = {}
        # Ordered indexes: each a sorted list of (-score, member) — the order ranked()
        # returns — and the member's current score to find its place in the list.
        self._ranks: dict[str, tuple[list[tuple[float, str]], dict[str, float]]] = {}
        self._lock = threading.RLock()

    def _rank(self, rank: Rank, member: str, *, higher_only: bool = False) -> None:
        order, scores = self._ranks.setdefault(rank.index, ([], {}))
        old = scores.get(member)
        if rank.score is not None and old is not None and higher_only and rank.score <= old:
            return
        if old is not None:
            del order[bisect.bisect_left(order, (-old, member))]
            del scores[member]
        if rank.score is not None:
            bisect.insort(order, (-rank.score, member))
            scores[member] = rank.score
        elif not scores:
            del self._ranks[rank.index]

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
        if write.rank is not None:
            self._rank(write.rank, key)
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
            writes = fn(current)  # computed whole before anything is applied
            for key, write in writes.items():
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

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        with self._lock:
            order, _scores = self._ranks.get(index, ([], {}))
            return [(member, -neg) for neg, member in order[offset : offset + max(0, count)]]

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        with self._lock:
            for member, score in members.items():
                self._rank(Rank(index, score), member, higher_only=True)

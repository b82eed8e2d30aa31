"""The live-cache seam: one base class, sync methods and ``a``-prefixed async twins.

Values are JSON-able dicts (an entry's ``to_dict()`` or an index). The one write
primitive is :meth:`LiveCache.atomic`: read a set of keys, let a pure function
decide the new values, write them back, all-or-nothing and isolated from other
writers (threads, processes, hosts). Counters, merges and the two-key write of an
update are all expressed through it, so a backend only has to get one thing right.

Expiry that *matters* (what is rendered) is decided by the engine from its
injectable clock; the ``ttl`` given here is a native TTL for cleanup only.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ["AtomicFn", "CacheValue", "LiveCache", "Write"]

CacheValue: TypeAlias = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Write:
    """A new value for a key (``None`` deletes it) and its native TTL in seconds."""

    value: CacheValue | None
    ttl: float | None = None


AtomicFn: TypeAlias = Callable[[Mapping[str, CacheValue | None]], Mapping[str, Write]]


class LiveCache(ABC):
    """Base class of live-cache backends."""

    @abstractmethod
    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        """Values of the keys that exist; missing keys are left out."""

    @abstractmethod
    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        """Read ``keys``, apply ``fn`` to their values and write what it returns.

        ``fn`` may be called more than once (optimistic backends retry on conflict), so
        it must be pure. Returns the value of every key after the write.
        """

    @abstractmethod
    def add_many(self, items: Mapping[str, Write]) -> int:
        """Set each key that does not exist yet; never overwrite. Returns how many were added."""

    @abstractmethod
    def delete_many(self, keys: Sequence[str]) -> int:
        """Delete the keys; returns how many existed."""

    @abstractmethod
    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        """Every live key starting with ``prefix`` (administrative use; may be slow)."""

    def expire(self) -> int:
        """Drop natively expired values now; returns how many. Backends with native
        expiry (Redis) need not do anything."""
        return 0

    def compact(self) -> None:  # noqa: B027 - optional hook: most backends keep no log
        """Make deleted values leave the backend's files (after an erasure): an
        embedded backend checkpoints and truncates its write-ahead log."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release connections and file handles."""

    # -- shared conveniences -------------------------------------------------------

    def get(self, key: str) -> CacheValue | None:
        return self.get_many((key,)).get(key)

    def count(self, prefix: str = "") -> int:
        return sum(1 for _ in self.iter_keys(prefix))

    # -- async twins: a thread hop by default; a native-async backend overrides -----

    async def aget_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return await asyncio.to_thread(self.get_many, keys)

    async def aget(self, key: str) -> CacheValue | None:
        return await asyncio.to_thread(self.get, key)

    async def aatomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        return await asyncio.to_thread(self.atomic, keys, fn)

    async def aadd_many(self, items: Mapping[str, Write]) -> int:
        return await asyncio.to_thread(self.add_many, items)

    async def adelete_many(self, keys: Sequence[str]) -> int:
        return await asyncio.to_thread(self.delete_many, keys)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

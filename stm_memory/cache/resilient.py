"""Keep turns going while a shared cache (Redis) is unreachable.

While the primary fails, operations go to a process-local in-memory cache that
hydrates from SQL like any cold cache, so merges and counters start from the durable
rows. A circuit breaker stops every call from paying the connect timeout. When the
primary answers again, the keys written meanwhile are deleted from it (its copies
are stale); the next read hydrates them from SQL. That is the "heal".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from ..errors import CacheError
from .base import AtomicFn, CacheValue, LiveCache, Write
from .memory import InMemoryLiveCache

__all__ = ["ResilientCache"]

log = logging.getLogger("stm_memory")
T = TypeVar("T")


class ResilientCache(LiveCache):
    """Wrap ``primary``; fall back to a local cache while it raises :class:`CacheError`."""

    def __init__(
        self,
        primary: LiveCache,
        *,
        retry_after: float = 5.0,
        probe: Callable[[], object] | None = None,
    ) -> None:
        self.primary = primary
        self.fallback = InMemoryLiveCache()
        self.retry_after = retry_after
        self._down_since: float | None = None
        self._dirty: set[str] = set()
        self._deleted_while_down = False
        self._lock = threading.Lock()
        if probe is not None:
            try:
                probe()
            except CacheError as exc:
                self._trip(exc, "start-up")

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    def _trip(self, exc: CacheError, action: str) -> None:
        with self._lock:
            first = self._down_since is None
            self._down_since = time.monotonic()
        if first:
            log.warning(
                "stm-memory: live cache unreachable during %s (%s); turns continue on SQL "
                "with a local cache until it returns",
                action,
                exc,
            )

    def _heal(self) -> None:
        """Drop from the primary whatever changed while it was away; raises CacheError
        (and keeps every record) if it is still unreachable."""
        with self._lock:
            dirty = sorted(self._dirty)
            wipe = self._deleted_while_down
        if wipe:
            # A channel/user deletion ran against the local cache only; the primary may
            # hold copies of any matching entry. SQL is the source of truth, so start
            # the primary cold rather than let deleted memory come back.
            dirty = sorted(set(dirty) | set(self.primary.iter_keys("shortterm:")))
        if dirty:
            self.primary.delete_many(dirty)
        with self._lock:
            self._dirty.clear()
            self._deleted_while_down = False
            self._down_since = None
        self.fallback = InMemoryLiveCache()
        log.warning("stm-memory: live cache is back; %d stale key(s) dropped", len(dirty))

    def _call(
        self,
        action: str,
        on_primary: Callable[[LiveCache], T],
        *,
        writes: Sequence[str] = (),
    ) -> T:
        down = self._down_since
        if down is None or time.monotonic() - down >= self.retry_after:
            try:
                if down is not None:
                    self._heal()
                return on_primary(self.primary)
            except CacheError as exc:
                self._trip(exc, action)
        with self._lock:
            self._dirty.update(writes)
        return on_primary(self.fallback)

    # -- LiveCache -----------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._call("read", lambda c: c.get_many(keys))

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        return self._call("write", lambda c: c.atomic(keys, fn), writes=keys)

    def add_many(self, items: Mapping[str, Write]) -> int:
        return self._call("write", lambda c: c.add_many(items), writes=list(items))

    def delete_many(self, keys: Sequence[str]) -> int:
        # A delete during an outage must also reach the primary once it is back.
        return self._call("delete", lambda c: c.delete_many(keys), writes=keys)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        keys = self._call("scan", lambda c: list(c.iter_keys(prefix)))
        if self.degraded:
            # A scan of the local cache misses the primary's keys, and scans serve
            # deletions (clear_channel, clear_user): start the primary cold on return.
            with self._lock:
                self._deleted_while_down = True
        return iter(keys)

    def expire(self) -> int:
        return self._call("expire", lambda c: c.expire())

    def compact(self) -> None:
        self.primary.compact()

    def close(self) -> None:
        self.primary.close()

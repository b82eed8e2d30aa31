"""Keep every host right while the shared live cache (Redis) is unreachable.

Degraded mode moves the live cache into the rows database (:class:`SqlLiveCache`),
which every host shares: counters stay exact across hosts, a summary one host stored
is what the next host reads and extends, and a deletion is seen by all. A per-host
cache cannot promise any of that (hosts would count the same channel apart, and the
newest-revision rule in SQL would let one host's stale copy overwrite another's
summary), so it is only the last resort, used while the database is unreachable too.

The switch is coordinated in SQL. A host that fails to reach the primary sets the
degraded flag there and calls the SQL cache; every SQL-cache call reads the flag in
its own transaction. When a host reaches the primary again, it *drains* the SQL cache
into it under the flag's row lock: deletions made meanwhile are replayed on the
primary's copies (``replay``, supplied by the engine), values and tombstones are
moved over, the tables emptied and the flag cleared. A host still degraded sees the
cleared flag on its next call and goes back to the primary — no write lands in SQL
after the drain. A circuit breaker (``retry_after``) keeps calls from paying the
connect timeout while the primary is away.

Partial outages (one node of a cluster down, a host cut off from Redis alone): hosts
that still reach Redis read the flag at most every ``check_every`` seconds (one SQL
read) and join degraded mode when another host set it, so every host moves to SQL.
A drain moves every value the SQL cache holds, so it cannot succeed while any of
them is unreachable: nobody leaves degraded mode before the outage is over. What is
not covered is the first ``check_every`` seconds of an outage, in which a host that
has not failed yet may still write to Redis a key another host already writes in
SQL; the drain then keeps the SQL copy.

The last resort, when SQL fails as well: a process-local cache that hydrates from
whatever can be read; the keys written there are deleted from the primary and the SQL
cache on the way back (their copies there are older), and a deletion made there
starts the primary cold, because a scan of a local cache cannot see the primary's keys.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Write
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.cache.sql import Deletion, PrimaryHealed, SqlLiveCache
from stm_memory.errors import CacheError, ConfigurationError
from stm_memory.model import KEY_PREFIX

__all__ = ["ReplayFn", "ResilientCache"]

log = logging.getLogger("stm_memory")
T = TypeVar("T")

#: Evicts from a cache what the given channel/user deletions removed elsewhere.
ReplayFn = Callable[[LiveCache, Sequence[Deletion]], None]


def _no_replay(_cache: LiveCache, _deletions: Sequence[Deletion]) -> None:
    return None


class ResilientCache(LiveCache):
    """Wrap ``primary``; while it raises :class:`CacheError`, use ``shared`` (the SQL
    live cache every host uses), and a local cache only while ``shared`` fails too."""

    def __init__(
        self,
        primary: LiveCache,
        *,
        shared: SqlLiveCache | None = None,
        retry_after: float = 5.0,
        check_every: float = 1.0,
        probe: Callable[[], object] | None = None,
        replay: ReplayFn | None = None,
    ) -> None:
        if shared is not None and not shared.fenced:
            raise ConfigurationError("the shared degraded-mode cache must be fenced")
        self.primary = primary
        self.shared = shared
        self.local = InMemoryLiveCache()
        self.retry_after = retry_after
        self.check_every = check_every
        self.replay: ReplayFn = replay or _no_replay
        self._down_since: float | None = None
        self._checked = time.monotonic()
        self._local_warned = False
        # What the local cache did, to undo on the way back (see the module docstring).
        self._dirty: set[str] = set()
        self._deleted_locally = False
        self._lock = threading.Lock()
        try:
            if probe is not None:
                probe()
        except CacheError as exc:
            self._trip(exc, "start-up")
        else:
            self._join_degraded()

    @property
    def degraded(self) -> bool:
        return self._down_since is not None

    def _join_degraded(self) -> None:
        # The primary answers, but the hosts may be degraded (it has just returned, or
        # this host started meanwhile): the first call then drains before using it.
        try:
            if self.shared is not None and self.shared.is_degraded():
                self._down_since = time.monotonic() - self.retry_after
        except CacheError:
            pass

    def _poll(self) -> float | None:
        """Join degraded mode if another host set the flag (read every ``check_every``
        seconds); returns when this host went down, None while it is not."""
        if self.shared is None:
            return None
        now = time.monotonic()
        if now - self._checked < self.check_every:
            return None
        self._checked = now
        try:
            degraded = self.shared.is_degraded()
        except CacheError:
            return None
        if not degraded:
            return None
        with self._lock:
            if self._down_since is None:
                self._down_since = now
        log.warning(
            "stm-memory: another host lost the live cache; this host uses the live cache "
            "on SQL too until it returns"
        )
        return self._down_since

    def _trip(self, exc: CacheError, action: str) -> None:
        with self._lock:
            first = self._down_since is None
            self._down_since = time.monotonic()
        if self.shared is not None:
            try:
                self.shared.mark_degraded()
            except CacheError as sql_exc:
                log.warning("stm-memory: cannot record degraded mode in SQL: %s", sql_exc)
        if first:
            where = "on SQL (shared by every host)" if self.shared is not None else "locally"
            log.warning(
                "stm-memory: live cache unreachable during %s (%s); turns continue with "
                "the live cache %s until it returns",
                action,
                exc,
                where,
            )

    def _heal(self) -> None:
        """Bring the primary up to date; raises CacheError (keeping every record) if it,
        or the SQL cache that must be drained into it, is unreachable."""
        with self._lock:
            dirty = sorted(self._dirty)
            wipe = self._deleted_locally
        if wipe:
            dirty = sorted(set(dirty) | set(self.primary.iter_keys(f"{KEY_PREFIX}:")))
        if dirty:
            self.primary.delete_many(dirty)
        moved = 0
        if self.shared is not None:
            try:
                if dirty:
                    self.shared.delete_many(dirty)
                moved = self.shared.drain_into(self.primary, self.replay)
            except PrimaryHealed:
                pass  # another host drained it first
        with self._lock:
            self._dirty.clear()
            self._deleted_locally = False
            self._down_since = None
            self._local_warned = False
        self.local = InMemoryLiveCache()
        log.warning(
            "stm-memory: live cache is back; %d value(s) moved from SQL, %d stale key(s) dropped",
            moved,
            len(dirty),
        )

    def _call(
        self,
        action: str,
        on_cache: Callable[[LiveCache], T],
        *,
        writes: Sequence[str] = (),
    ) -> T:
        # Two rounds at most: a call the SQL cache turns away (another host drained it)
        # goes to the primary, and fails over again only if the primary fails again.
        for _ in range(2):
            down = self._down_since
            if down is None:
                down = self._poll()
            if down is None or time.monotonic() - down >= self.retry_after:
                try:
                    if down is not None:
                        self._heal()
                    return on_cache(self.primary)
                except CacheError as exc:
                    self._trip(exc, action)
            if self.shared is not None:
                try:
                    return on_cache(self.shared)
                except PrimaryHealed:
                    with self._lock:
                        self._down_since = None
                    continue
                except CacheError as exc:
                    if not self._local_warned:
                        self._local_warned = True
                        log.warning(
                            "stm-memory: the SQL live cache is unreachable too (%s); this "
                            "host continues on a local cache",
                            exc,
                        )
            with self._lock:
                self._dirty.update(writes)
            return on_cache(self.local)
        return on_cache(self.local)  # pragma: no cover - the primary failed twice over

    # -- LiveCache -----------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._call("read", lambda c: c.get_many(keys))

    def read_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._call("read", lambda c: c.read_many(keys))

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        return self._call("write", lambda c: c.atomic(keys, fn), writes=keys)

    def add_many(self, items: Mapping[str, Write]) -> int:
        return self._call("write", lambda c: c.add_many(items), writes=list(items))

    def delete_many(self, keys: Sequence[str]) -> int:
        # A delete during an outage must also reach the primary once it is back.
        return self._call("delete", lambda c: c.delete_many(keys), writes=keys)

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        return iter(self._call("scan", lambda c: list(c.iter_keys(prefix))))

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        return self._call("index read", lambda c: c.ranked(index, offset=offset, count=count))

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        self._call("index write", lambda c: c.rank_many(index, members))

    def record_deletion(self, kind: str, target: str) -> None:
        if not self.degraded:
            return
        if self.shared is not None:
            try:
                self.shared.record_deletion(kind, target)
                return
            except PrimaryHealed:
                return  # drained meanwhile: the caller's scan reaches the primary
            except CacheError:
                pass
        with self._lock:
            self._deleted_locally = True

    def expire(self) -> int:
        return self._call("expire", lambda c: c.expire())

    def compact(self) -> None:
        self.primary.compact()

    def close(self) -> None:
        self.primary.close()

"""diskcache backend: the embedded default, safe for many processes on one host."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import diskcache

from stm_memory.cache._disk_rows import CacheRows, Row, SchemaMismatch, Transaction, live_at
from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Write
from stm_memory.errors import CacheError
from stm_memory.model import KEY_PREFIX

__all__ = ["DiskLiveCache"]

T = TypeVar("T")

#: How many keys' last pickled form and value :meth:`DiskLiveCache.read_many` keeps.
SHARED_KEPT = 256

log = logging.getLogger("stm_memory")


class DiskLiveCache(LiveCache):
    """Live cache in a diskcache directory.

    :meth:`atomic` runs inside one ``BEGIN IMMEDIATE`` transaction, which serialises
    writers across threads *and* processes sharing the directory, so a counter
    increment or a category merge is never lost. Reads, writes and key scans go
    straight to diskcache's table (one SELECT for all keys, one UPDATE per key; see
    ``_disk_rows``); opening the directory and ``expire`` use ``diskcache.Cache``.
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
                # Deleted and rewritten values are overwritten with zeros, so an erased
                # user's words do not linger in free pages (diskcache applies it to its
                # connections and records it; _disk_rows applies it to ours).
                sqlite_secure_delete=1,
            )
            # Touch the database so a corrupt file fails here, not mid-turn.
            self._cache.get(f"{KEY_PREFIX}:probe")
            self._rows = CacheRows(self._cache)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(f"cannot open the diskcache directory {path}: {exc}") from exc
        except SchemaMismatch as exc:
            raise CacheError(f"cannot use the diskcache directory {path}: {exc}") from exc
        self.directory = path
        # key -> (the pickled form last read or written, its value): what read_many
        # and atomic hand out again while the row holds those same bytes.
        self._shared: dict[str, tuple[bytes, CacheValue]] = {}
        self._shared_lock = threading.Lock()

    def _decode(
        self, key: str, row: Row | None, now: float, *, shared: bool = False
    ) -> tuple[CacheValue | None, bool]:
        """A row's value, None for no row or a natively expired one, and whether the
        value was unreadable (then the caller drops it). ``shared``: the value may be
        the one handed out before for the same stored bytes (see :meth:`read_many`)."""
        if row is None or not live_at(row, now):
            return None, False
        stored = self._rows.pickled(row) if shared else None
        if stored is not None:
            known = self._shared.get(key)
            # Equal bytes, one C-level comparison: the value they were decoded to.
            if known is not None and known[0] == stored:
                return known[1], False
        try:
            value: CacheValue = self._rows.fetch(row)
        except Exception as exc:  # a corrupt value, or its file gone
            # A cache is disposable: drop the value and let the caller reload it from
            # SQL, instead of failing every turn that touches this key.
            log.warning("stm-memory: dropping unreadable cache value %r: %s", key, exc)
            return None, True
        if stored is not None:
            self._share({key: (stored, value)})
        return value, False

    def _share(self, values: Mapping[str, tuple[bytes, CacheValue]]) -> None:
        with self._shared_lock:
            shared = self._shared
            for key, known in values.items():
                shared.pop(key, None)  # re-inserted last: the oldest goes first
                shared[key] = known
            while len(shared) > SHARED_KEPT:
                del shared[next(iter(shared))]

    def _unshare(self, keys: Iterable[str]) -> None:
        # A deleted value (an erasure among them) is not kept in this process either.
        with self._shared_lock:
            for key in keys:
                self._shared.pop(key, None)

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._read(keys, shared=False)

    def read_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        return self._read(keys, shared=True)

    def _read(self, keys: Sequence[str], *, shared: bool) -> dict[str, CacheValue]:
        try:
            found = self._rows.select(keys)
        except sqlite3.Error as exc:
            raise CacheError(f"live cache read failed in {self.directory}: {exc}") from exc
        now = time.time()
        out: dict[str, CacheValue] = {}
        for key, row in found.items():
            value, unreadable = self._decode(key, row, now, shared=shared)
            if value is not None:
                out[key] = value
            elif unreadable:
                self._drop(key, row)
        return out

    def _drop(self, key: str, seen: Row) -> None:
        """Delete an unreadable value, unless a writer has replaced it since it was read."""

        def body(tx: Transaction) -> None:
            row = tx.select([key]).get(key)
            if row is not None and row[1:] == seen[1:]:
                tx.delete(row)

        self._unshare([key])
        with suppress(CacheError):  # best effort: the next read tries again
            self._write(body)

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        # What the transaction wrote, shared once it commits (the next turn reads it).
        written: dict[str, tuple[bytes, CacheValue]] = {}
        deleted: list[str] = []

        def body(tx: Transaction) -> dict[str, CacheValue | None]:
            found = tx.select(keys)
            current: dict[str, CacheValue | None] = {}
            unreadable: list[str] = []
            for key in keys:
                # fn is pure (never changes its input): shared values are safe to give.
                current[key], bad = self._decode(key, found.get(key), tx.now, shared=True)
                if bad:
                    unreadable.append(key)
            writes = fn(current)
            extra = [k for k in writes if k not in current]
            if extra:
                found.update(tx.select(extra))
            ranks: list[tuple[str, str, float]] = []
            for key, write in writes.items():
                row = found.get(key)
                if write.value is not None:
                    stored = tx.put(key, row, write.value, write.ttl)
                    if stored is not None:
                        written[key] = (stored, write.value)
                elif row is not None:
                    tx.delete(row)
                    deleted.append(key)
                rank = write.rank
                if rank is not None:
                    if rank.score is None:
                        tx.rank(rank.index, key, None, higher_only=False)
                    else:
                        ranks.append((rank.index, key, rank.score))
                current[key] = write.value
            tx.set_ranks(ranks)
            for key in unreadable:
                if key not in writes:
                    tx.delete(found[key])
                    deleted.append(key)
            return current

        try:
            result = self._write(body)
        except BaseException:
            self._unshare(keys)
            raise
        self._unshare(deleted)
        self._share(written)
        return result

    def add_many(self, items: Mapping[str, Write]) -> int:
        def body(tx: Transaction) -> int:
            found = tx.select(list(items))
            added = 0
            for key, write in items.items():
                row = found.get(key)
                # As Cache.add: a key whose native TTL ran out counts as absent.
                if write.value is None or (row is not None and live_at(row, tx.now)):
                    continue
                tx.put(key, row, write.value, write.ttl)
                if write.rank is not None:
                    tx.rank(write.rank.index, key, write.rank.score, higher_only=False)
                added += 1
            return added

        return self._write(body)

    def delete_many(self, keys: Sequence[str]) -> int:
        self._unshare(keys)

        def body(tx: Transaction) -> int:
            found = tx.select(keys)
            for row in found.values():
                tx.delete(row)
            # Counted as Cache.delete counts: rows whose native TTL had not run out.
            return sum(1 for row in found.values() if live_at(row, tx.now))

        return self._write(body)

    def _write(self, body: Callable[[Transaction], T]) -> T:
        try:
            return self._rows.write(body)
        except sqlite3.Error as exc:
            raise CacheError(f"live cache write failed in {self.directory}: {exc}") from exc

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        try:
            keys = self._rows.keys(prefix, time.time())
        except sqlite3.Error as exc:
            raise CacheError(f"live cache scan failed in {self.directory}: {exc}") from exc
        yield from keys

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        if count <= 0:
            return []
        try:
            return self._rows.ranked(index, offset, count)
        except sqlite3.Error as exc:
            raise CacheError(f"live cache index read failed in {self.directory}: {exc}") from exc

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        def body(tx: Transaction) -> None:
            for member, score in members.items():
                tx.rank(index, member, score, higher_only=True)

        if members:
            self._write(body)

    def expire(self) -> int:
        return int(self._cache.expire())

    def compact(self) -> None:
        try:
            self._rows.checkpoint()
        except sqlite3.Error as exc:
            raise CacheError(f"checkpointing {self.directory} failed: {exc}") from exc

    def close(self) -> None:
        self._rows.close()
        self._cache.close()

    def stats(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "volume_bytes": self._cache.volume()}

"""Backends from URLs: which rows database, which live cache and where the outbox lives.

The one place that turns ``ShortTermMemory.from_url``'s arguments into the three
objects the engine is built on. The engine itself takes them ready-made, so tests and
callers with their own backends skip this module entirely.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from stm_memory.cache.base import LiveCache
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.cache.reopen import ReopeningCache
from stm_memory.cache.sql import SqlLiveCache
from stm_memory.durability.outbox import Outbox
from stm_memory.errors import CacheError, DatabaseError
from stm_memory.live.replay import evict_deleted
from stm_memory.model import KEY_PREFIX
from stm_memory.store.sql import SqlStore, create_sql_engine

__all__ = ["Backends", "open_backends"]


@dataclass(frozen=True, slots=True)
class Backends:
    store: SqlStore
    cache: LiveCache
    outbox: Outbox

    def close(self) -> None:
        """Close all three, in the engine's order; one that fails to close does not
        keep the others open (the outbox holds a file handle and a WAL)."""
        try:
            self.cache.close()
        finally:
            try:
                self.outbox.close()
            finally:
                self.store.close()


def open_backends(
    database_url: str,
    *,
    cache_dir: str | os.PathLike[str] | None,
    redis_url: str | None,
    outbox_path: str | os.PathLike[str] | None,
    clock: Callable[[], datetime] | None,
    timeout: float,
) -> Backends:
    """Rows in SQLite or PostgreSQL; the live cache in Redis (``redis_url``), else a
    diskcache directory beside the database, else process memory for an in-memory
    SQLite database; the outbox beside the database file."""
    engine = create_sql_engine(database_url, timeout=timeout)
    sqlite = engine.url.get_backend_name() == "sqlite"
    db_path = engine.url.database if sqlite else None
    in_memory_db = sqlite and db_path in (None, "", ":memory:")
    if db_path and not in_memory_db and cache_dir is None and redis_url is None:
        folder = Path(db_path).expanduser().parent
        if not folder.is_dir():
            # The cache beside the file would make the folder: a typo in a path must
            # not leave directories behind. (A cache_dir you name is yours to make.)
            engine.dispose()
            raise DatabaseError(
                f"database_url: the folder {str(folder)!r} of {database_url!r} does not "
                "exist; create it, or name a file in a folder that does"
            )
    store = SqlStore(engine, clock=clock, timeout=timeout)
    # Derived paths for a server database: a stable name per URL in the state directory.
    digest = hashlib.sha256(database_url.encode()).hexdigest()[:16]
    cache: LiveCache
    try:
        if redis_url is not None:
            cache = _redis_cache(redis_url, store)
        elif in_memory_db and cache_dir is None:
            cache = InMemoryLiveCache()
        else:
            if cache_dir is None:
                cache_dir = f"{db_path}.stm-cache" if db_path else _state_dir() / f"cache-{digest}"
            cache = _disk_cache(cache_dir, store)
    except BaseException:
        # A bad redis_url or cache directory: the rows database opened already.
        store.close()
        raise
    if outbox_path is None:
        # Not inside the cache directory: people wipe caches, and the outbox holds
        # queued deletes whose loss would let deleted data come back.
        if in_memory_db:
            outbox_path = ":memory:"
        elif db_path:
            outbox_path = f"{db_path}.stm-outbox.sqlite3"
        else:
            outbox_path = _state_dir() / f"outbox-{digest}.sqlite3"
    try:
        return Backends(store=store, cache=cache, outbox=Outbox(os.fspath(outbox_path)))
    except BaseException:
        cache.close()
        store.close()
        raise


def _redis_cache(url: str, store: SqlStore) -> LiveCache:
    from stm_memory.cache.redis import RedisLiveCache  # redis is an optional extra

    redis_cache = RedisLiveCache.from_url(url, ping=False)
    return _degradable(redis_cache, store, probe=lambda: redis_cache.get(f"{KEY_PREFIX}:probe"))


def _degradable(primary: LiveCache, store: SqlStore, *, probe: Callable[[], object]) -> LiveCache:
    """``primary`` behind degraded mode: while it is unreachable, the live cache lives
    in the rows database, shared by every host (docs/design.md#degraded-mode)."""
    from stm_memory.cache.resilient import ResilientCache

    # The SQL live cache's tables must exist before the first call can fail over.
    store.setup()
    shared = SqlLiveCache(store.engine, fenced=True, serial=store.serial)
    return ResilientCache(primary, shared=shared, probe=probe, replay=evict_deleted)


def _disk_cache(directory: str | os.PathLike[str], store: SqlStore) -> LiveCache:
    """The diskcache directory; if it cannot be opened, degraded mode until it can (the
    memory starts and loses nothing; the directory is tried again every few seconds)."""
    try:
        return DiskLiveCache(directory)
    except CacheError as exc:
        failure = exc

    def probe() -> None:
        raise failure

    return _degradable(ReopeningCache(lambda: DiskLiveCache(directory)), store, probe=probe)


def _state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "stm-memory"

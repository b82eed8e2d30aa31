"""The published live-cache contract (:mod:`stm_memory.testing.contract`) on every live
cache stm-memory ships: in-memory, diskcache, Redis, Redis Cluster, and the SQL live
cache of degraded mode on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stm_memory.cache.base import LiveCache
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.cache.redis import RedisLiveCache
from stm_memory.cache.sql import SqlLiveCache
from stm_memory.store.sql import SqlStore, create_sql_engine
from stm_memory.testing.contract import LiveCacheContract, opened_handles

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("disk", id="disk"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("redis-cluster", id="redis-cluster", marks=pytest.mark.redis),
    # Degraded mode's live cache in the rows database (cache/sql.py), unfenced here.
    pytest.param("sql-sqlite", id="sql-sqlite"),
    pytest.param("sql-postgres", id="sql-postgres", marks=pytest.mark.postgres),
]


class _ClosingSql(SqlLiveCache):
    """The SQL live cache on its own store's engine, disposed with it."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store.engine)
        self._store = store

    def close(self) -> None:
        self._store.close()


def _sql_cache(url: str) -> LiveCache:
    store = SqlStore(create_sql_engine(url))
    store.setup()  # a handle per open: each its own engine, as hosts have
    return _ClosingSql(store)


def _redis_cache(url: str, *, cluster: bool) -> LiveCache:
    cache = RedisLiveCache.from_url(url)
    assert cache.cluster is cluster  # detected, not forced
    return cache


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class TestShippedLiveCaches(LiveCacheContract):
    @pytest.fixture
    def open_live_cache(
        self, backend: str, request: pytest.FixtureRequest, tmp_path: Path
    ) -> Iterator[Callable[[], LiveCache]]:
        """Opens handles on one shared store (one directory / one Redis db / one dict)."""
        shared_memory = InMemoryLiveCache()

        def open_one() -> LiveCache:
            if backend == "memory":
                return shared_memory
            if backend == "disk":
                return DiskLiveCache(tmp_path / "cache")
            if backend == "sql-sqlite":
                return _sql_cache(f"sqlite:///{tmp_path / 'rows.db'}")
            if backend == "sql-postgres":
                return _sql_cache(request.getfixturevalue("postgres_url"))
            cluster = backend == "redis-cluster"
            url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
            return _redis_cache(url, cluster=cluster)

        with opened_handles(open_one) as opener:
            yield opener

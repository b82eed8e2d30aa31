"""Builds memories on one test's temporary paths (the ``make_mem`` fixture)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stm_memory import ShortTermMemory
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.config import Limits
from stm_memory.durability.outbox import Outbox
from stm_memory.store.sql import SqlStore, create_sql_engine
from stm_memory.testing import FrozenClock

__all__ = ["MemFactory"]


class MemFactory:
    """Builds memories on one test's paths; everything it built is closed afterwards."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path, clock: FrozenClock) -> None:
        self._request = request
        self.tmp_path = tmp_path
        self.clock = clock
        self.sqlite_path = tmp_path / "stm.db"
        self.cache_dir = tmp_path / "cache"
        self.outbox_path = tmp_path / "outbox.sqlite3"
        self._postgres_url: str | None = None
        self._redis_url: str | None = None
        self._opened: list[ShortTermMemory] = []

    @property
    def postgres_url(self) -> str:
        if self._postgres_url is None:
            self._postgres_url = str(self._request.getfixturevalue("postgres_url"))
            # This fixture was requested after make_mem, so it is torn down first:
            # close the memories before their schema is dropped.
            self._request.getfixturevalue("postgres_schemas").before_drop.append(self.close_all)
        return self._postgres_url

    @property
    def redis_url(self) -> str:
        if self._redis_url is None:
            self._redis_url = str(self._request.getfixturevalue("redis_url"))
        return self._redis_url

    def database_url(self, backend: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{self.sqlite_path}"
        if backend == "sqlite-memory":
            return "sqlite://"
        if backend == "postgres":
            return self.postgres_url
        raise ValueError(f"unknown backend {backend!r}")

    def __call__(
        self,
        backend: str = "sqlite",
        cache: str = "disk",
        *,
        database_url: str | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        outbox_path: str | os.PathLike[str] | None = None,
        clock: Callable[[], Any] | None = None,
        **kw: Any,
    ) -> ShortTermMemory:
        url = database_url or self.database_url(backend)
        clock = clock or self.clock
        outbox = outbox_path or (":memory:" if backend == "sqlite-memory" else self.outbox_path)
        if cache == "memory":
            timeout = kw.pop("timeout", 5.0)
            passthrough = ("intent_detector", "settings_ttl", "excluded_providers")
            extra: dict[str, Any] = {k: kw.pop(k) for k in passthrough if k in kw}
            mem = ShortTermMemory(
                store=SqlStore(create_sql_engine(url, timeout=timeout), timeout=timeout),
                cache=InMemoryLiveCache(),
                outbox=Outbox(os.fspath(outbox)),
                clock=clock,
                limits=Limits.from_env(**kw),
                **extra,
            )
        elif cache in ("disk", "redis"):
            redis_url = self.redis_url if cache == "redis" else None
            mem = ShortTermMemory.from_url(
                url,
                cache_dir=None if redis_url else (cache_dir or self.cache_dir),
                redis_url=redis_url,
                outbox_path=outbox,
                clock=clock,
                **kw,
            )
        else:
            raise ValueError(f"unknown cache {cache!r}")
        self._opened.append(mem)
        return mem

    def close_all(self) -> None:
        while self._opened:
            self._opened.pop().close()

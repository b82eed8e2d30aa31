"""Fixtures of the hardening suite, on top of tests/conftest.py (which it reuses):
proxies in front of the real servers, memories built on arbitrary URLs, child-process
hosts and an admin connection to PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers.deployment import Deployment, OpenMem
from helpers.host import Host, HostFactory
from helpers.proxy import Proxied, proxied
from helpers.services import base_postgres_url

from stm_memory import ShortTermMemory
from stm_memory.cache.resilient import ResilientCache
from stm_memory.testing import FrozenClock


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[Proxied]:
    """This test's Redis database, reached through a proxy the test can stop."""
    yield from proxied(redis_url, 6379)


@pytest.fixture
def pg_proxy(postgres_url: str) -> Iterator[Proxied]:
    """This test's PostgreSQL schema, reached through a proxy the test can stop."""
    yield from proxied(postgres_url, 5432)


@pytest.fixture
def pg_admin(postgres_url: str) -> Iterator[sa.Engine]:
    """A separate administrative connection to the PostgreSQL server."""
    engine = sa.create_engine(base_postgres_url(), connect_args={"connect_timeout": 2})
    yield engine
    engine.dispose()


@pytest.fixture
def open_mem(tmp_path: Path, fake_clock: FrozenClock) -> Iterator[OpenMem]:
    """``open_mem(database_url, **from_url_kwargs)`` with the fake clock; closed after the
    test. A Redis-backed memory gets ``retry_after = 0`` so a returning server is used
    by the very next call."""
    opened: list[ShortTermMemory] = []

    def factory(database_url: str, **kw: Any) -> ShortTermMemory:
        kw.setdefault("clock", fake_clock)
        if "redis_url" not in kw:
            kw.setdefault("cache_dir", tmp_path / "cache")
        kw.setdefault("outbox_path", tmp_path / f"outbox-{len(opened)}.sqlite3")
        mem = ShortTermMemory.from_url(database_url, **kw)
        if isinstance(mem._cache, ResilientCache):
            mem._cache.retry_after = 0.0
        opened.append(mem)
        return mem

    yield factory
    for mem in reversed(opened):
        mem.close()


@pytest.fixture
def hosts(fake_clock: FrozenClock) -> Iterator[HostFactory]:
    """``hosts(database_url=..., cache_dir=... | redis_url=..., outbox_path=...)`` starts a
    child-process host on the fake clock's current time; all are stopped afterwards."""
    started: list[Host] = []

    def factory(**config: Any) -> Host:
        config.setdefault("now", fake_clock().isoformat())
        config = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in config.items()}
        host = Host(**config)
        started.append(host)
        return host

    yield factory
    for host in started:
        host.close()


@pytest.fixture(
    params=[
        "sqlite+disk",
        pytest.param("postgres+redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    ]
)
def deployment(request: pytest.FixtureRequest, tmp_path: Path, open_mem: OpenMem) -> Deployment:
    if request.param == "sqlite+disk":
        settings = {
            "database_url": f"sqlite:///{tmp_path / 'stm.db'}",
            "cache_dir": tmp_path / "cache",
            "outbox_path": tmp_path / "outbox.sqlite3",
        }
        return Deployment(request.param, settings, open_mem)
    redis_url = str(request.getfixturevalue("redis_url"))
    settings = {
        "database_url": request.getfixturevalue("postgres_url"),
        "redis_url": redis_url,
        "outbox_path": tmp_path / "outbox.sqlite3",
    }
    return Deployment(request.param, settings, open_mem, redis_url)

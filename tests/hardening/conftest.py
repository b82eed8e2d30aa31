"""Fixtures of the hardening suite, on top of tests/conftest.py (which it reuses):
proxies in front of the real servers, memories built on arbitrary URLs, child-process
hosts and an admin connection to PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import sqlalchemy as sa
from helpers.clock import FakeClock
from helpers.proxy import TcpProxy
from helpers.services import base_postgres_url

from stm_memory import ShortTermMemory
from stm_memory.cache.resilient import ResilientCache

from ._support import Host


@dataclass
class Proxied:
    """A server behind a stoppable proxy: ``url`` goes through ``proxy``."""

    proxy: TcpProxy
    url: str


class NoDelayProxy(TcpProxy):
    """helpers.proxy.TcpProxy with TCP_NODELAY on both legs. Without it, Nagle's
    algorithm plus delayed ACKs stall every psycopg pipeline round trip (executemany)
    by ~40 ms, which makes PostgreSQL through the proxy 10x slower than without."""

    def _spawn(self, target: object, *args: object) -> None:
        for arg in args:
            if isinstance(arg, socket.socket) and arg.type == socket.SOCK_STREAM:
                with contextlib.suppress(OSError):
                    arg.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super()._spawn(target, *args)


def _proxied(url: str, default_port: int) -> Iterator[Proxied]:
    parts = urlsplit(url)
    proxy = NoDelayProxy(parts.hostname or "127.0.0.1", parts.port or default_port).start()
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo + '@' if userinfo else ''}127.0.0.1:{proxy.port}"
    try:
        yield Proxied(proxy, urlunsplit(parts._replace(netloc=netloc)))
    finally:
        proxy.stop()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[Proxied]:
    """This test's Redis database, reached through a proxy the test can stop."""
    yield from _proxied(redis_url, 6379)


@pytest.fixture
def pg_proxy(postgres_url: str) -> Iterator[Proxied]:
    """This test's PostgreSQL schema, reached through a proxy the test can stop."""
    yield from _proxied(postgres_url, 5432)


@pytest.fixture
def pg_admin(postgres_url: str) -> Iterator[sa.Engine]:
    """A separate administrative connection to the PostgreSQL server."""
    engine = sa.create_engine(base_postgres_url(), connect_args={"connect_timeout": 2})
    yield engine
    engine.dispose()


OpenMem = Callable[..., ShortTermMemory]


@pytest.fixture
def open_mem(tmp_path: Path, fake_clock: FakeClock) -> Iterator[OpenMem]:
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


HostFactory = Callable[..., Host]


@pytest.fixture
def hosts(fake_clock: FakeClock) -> Iterator[HostFactory]:
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


@dataclass
class Deployment:
    """One storage layout: ``sqlite+disk`` (embedded default) or ``postgres+redis``
    (scale-out). ``open()`` builds a memory on it; ``open(fresh_cache=True)`` is a
    restart whose live cache starts empty."""

    name: str
    settings: dict[str, Any]
    _open: OpenMem
    _redis_url: str | None = None
    _restarts: int = 0

    def open(self, *, fresh_cache: bool = False, **kw: Any) -> ShortTermMemory:
        settings = dict(self.settings)
        if fresh_cache:
            self._restarts += 1
            if self._redis_url is not None:
                import redis

                client = redis.Redis.from_url(self._redis_url)
                client.flushdb()
                client.close()
            else:
                settings["cache_dir"] = Path(settings["cache_dir"]).with_name(
                    f"cache-{self._restarts}"
                )
        return self._open(**(settings | kw))


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

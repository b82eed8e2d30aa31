"""Shared fixtures: a fake clock, isolated PostgreSQL/Redis, and memory factories
(see tests/README.md). Their plumbing lives in ``helpers/``, which this file puts on
``sys.path`` so every test imports it as ``from helpers.X import ...``.

``make_mem(backend=..., cache=..., **kw)`` builds a :class:`ShortTermMemory` on this
test's temporary paths with the fake clock and closes it after the test:

- ``backend``: ``"sqlite"`` (file), ``"sqlite-memory"`` or ``"postgres"`` (isolated schema)
- ``cache``: ``"disk"`` (diskcache dir), ``"memory"`` (in-process) or ``"redis"`` (db 15)
- ``**kw``: anything :meth:`ShortTermMemory.from_url` takes (``timeout=``, limits such as
  ``summary_ttl=``, ``janitor_first_run=`` …) plus ``database_url``/``cache_dir``/
  ``outbox_path`` overrides. Calling it twice with the same arguments reopens the same
  files (a restart); pass a new ``cache_dir`` for an empty cache.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from stm_memory import ShortTermMemory
from stm_memory.config import ENV_VARS
from stm_memory.testing import FrozenClock

TESTS_DIR = Path(__file__).resolve().parent
if str(TESTS_DIR) not in sys.path:  # helpers/ is importable in every test module
    sys.path.insert(0, str(TESTS_DIR))

from helpers.factory import MemFactory  # noqa: E402
from helpers.services import (  # noqa: E402
    PostgresSchemas,
    base_postgres_url,
    base_redis_url,
    exclusive_redis_db,
    postgres_problem,
    redis_problem,
    service_missing,
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test that asks for a server fixture carries its marker, so that
    # ``-m "not postgres"`` / ``-m "not redis"`` deselect it reliably.
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "postgres_url" in names or "postgres_schemas" in names:
            item.add_marker(pytest.mark.postgres)
        if "redis_url" in names or "redis_cluster_url" in names:
            item.add_marker(pytest.mark.redis)


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A developer's STM_* variables must not change test outcomes, and nothing may
    write under the real home directory."""
    for name in ENV_VARS.values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def fake_clock(stm_clock: FrozenClock) -> FrozenClock:
    """The testing kit's ``stm_clock`` (a FrozenClock at 2026-01-05 12:00 UTC;
    ``fake_clock.advance(hours=1)`` moves it). One object under both names, so a test
    that mixes ``make_mem`` with the kit's fixtures has one clock."""
    return stm_clock


# -- PostgreSQL --------------------------------------------------------------------------


@pytest.fixture
def postgres_schemas() -> Iterator[PostgresSchemas]:
    url = base_postgres_url()
    problem = postgres_problem(url)
    if problem:
        service_missing(
            f"PostgreSQL not reachable at {sa.make_url(url).render_as_string()} ({problem}): "
            "start it or set STM_TEST_POSTGRES_URL"
        )
    schemas = PostgresSchemas(url)
    yield schemas
    schemas.drop_all()


@pytest.fixture
def postgres_url(postgres_schemas: PostgresSchemas) -> str:
    """A PostgreSQL URL whose connections use a fresh schema, dropped after the test."""
    return postgres_schemas.new_url()


# -- Redis -------------------------------------------------------------------------------


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A Redis URL on a database number that no other test session on this machine is
    using right now (an inter-process lock per number), flushed before and after."""
    url = base_redis_url()
    problem = redis_problem(url)
    if problem:
        service_missing(
            f"Redis not reachable at {url} ({problem}): start it or set STM_TEST_REDIS_URL"
        )
    import redis

    with exclusive_redis_db(url) as isolated:
        client = redis.Redis.from_url(isolated, socket_timeout=5)
        client.flushdb()
        try:
            yield isolated
        finally:
            client.flushdb()
            client.close()


# -- memories ----------------------------------------------------------------------------


@pytest.fixture
def make_mem(
    request: pytest.FixtureRequest, tmp_path: Path, fake_clock: FrozenClock
) -> Iterator[MemFactory]:
    """Factory: ``make_mem(backend="sqlite"|"sqlite-memory"|"postgres",
    cache="disk"|"memory"|"redis", **from_url_kwargs)``."""
    factory = MemFactory(request, tmp_path, fake_clock)
    yield factory
    factory.close_all()


@pytest.fixture
def mem(make_mem: MemFactory) -> ShortTermMemory:
    """The embedded default: SQLite file + diskcache directory, fake clock."""
    return make_mem()


# -- Redis Cluster -----------------------------------------------------------------------


@pytest.fixture
def redis_cluster_url() -> Iterator[str]:
    """The URL of the local Redis Cluster (three primaries, started by ``.ci/run``),
    held by this test alone (test sessions take turns: a cluster has only database 0)
    and flushed on every primary before and after."""
    from helpers.services import (
        base_redis_cluster_url,
        exclusive_redis_cluster,
        redis_cluster_problem,
    )

    url = base_redis_cluster_url()
    problem = redis_cluster_problem(url)
    if problem:
        service_missing(
            f"Redis Cluster not reachable at {url} ({problem}): start it (.ci/run does) "
            "or set STM_TEST_REDIS_CLUSTER_URL"
        )
    with exclusive_redis_cluster(url) as held:
        yield held


@pytest.fixture
def open_memory(tmp_path: Path, stm_clock: FrozenClock) -> Iterator[Callable[[], ShortTermMemory]]:
    """Opens a ShortTermMemory on this test's SQLite file and cache directory with the
    frozen clock; calling it again reopens the same files (a restart). All are closed
    after the test."""
    opened: list[ShortTermMemory] = []

    def open_() -> ShortTermMemory:
        memory = ShortTermMemory.from_url(
            f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache", clock=stm_clock
        )
        opened.append(memory)
        return memory

    yield open_
    for memory in reversed(opened):
        memory.close()

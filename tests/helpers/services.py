"""Reachability checks and per-test isolation for the PostgreSQL and Redis servers and
the local Redis Cluster (three primaries on 127.0.0.1:7101-7103, started by ``.ci/run``).

A missing server skips its tests with a hint, except under ``STM_REQUIRE_SERVICES=1``
(CI), where it fails them: a green CI must mean the server tests really ran.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
import sqlalchemy as sa

__all__ = [
    "DEFAULT_POSTGRES_URL",
    "DEFAULT_REDIS_CLUSTER_URL",
    "DEFAULT_REDIS_URL",
    "PostgresSchemas",
    "base_postgres_url",
    "base_redis_cluster_url",
    "base_redis_url",
    "exclusive_redis_cluster",
    "exclusive_redis_db",
    "new_schema_name",
    "postgres_problem",
    "redis_cluster_problem",
    "redis_problem",
    "service_missing",
    "with_query",
    "with_search_path",
]

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
DEFAULT_REDIS_CLUSTER_URL = "redis://127.0.0.1:7101/0"


def base_postgres_url() -> str:
    return os.environ.get("STM_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL


def base_redis_url() -> str:
    return os.environ.get("STM_TEST_REDIS_URL") or DEFAULT_REDIS_URL


def base_redis_cluster_url() -> str:
    return os.environ.get("STM_TEST_REDIS_CLUSTER_URL") or DEFAULT_REDIS_CLUSTER_URL


def service_missing(message: str) -> None:
    """Skip, or fail when the environment requires the services (CI)."""
    if os.environ.get("STM_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{message} (STM_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(message)


@cache
def postgres_problem(url: str) -> str | None:
    """None when the server answers, else why not (checked once per session)."""
    engine = sa.create_engine(url, connect_args={"connect_timeout": 2})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    finally:
        engine.dispose()
    return None


@cache
def redis_problem(url: str) -> str | None:
    try:
        import redis
    except ImportError:
        return 'the redis package is missing: pip install "stm-memory[redis]"'
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.ping()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    return None


@cache
def redis_cluster_problem(url: str) -> str | None:
    """None when ``url`` reaches a formed Redis Cluster that redis-py can run
    transactions on, else why not (checked once per session)."""
    try:
        import redis
        from redis.cluster import RedisCluster
    except ImportError:
        return 'the redis package is missing: pip install "stm-memory[redis]"'
    try:
        client = RedisCluster.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        state = client.cluster_info().get("cluster_state")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()
    if state != "ok":
        return f"cluster_state is {state!r}, not 'ok'"
    if not hasattr(redis.cluster, "TransactionStrategy"):
        return f"redis-py {redis.__version__} has no cluster transactions (6.1 or later needed)"
    return None


@contextmanager
def exclusive_redis_cluster(url: str) -> Iterator[str]:
    """``url``, held exclusively by this process and flushed on every primary before
    and after.

    A cluster has only database 0, so there are no spare numbers to move to as
    :func:`exclusive_redis_db` does: test sessions on the machine take turns instead
    (a blocking file lock per cluster address).
    """
    from redis.cluster import RedisCluster

    parts = urlsplit(url)
    where = f"{parts.hostname or 'localhost'}-{parts.port or 6379}"
    path = os.path.join(tempfile.gettempdir(), f"stm-memory-test-redis-cluster-{where}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        client = RedisCluster.from_url(url, socket_timeout=5)
        try:
            client.flushall(target_nodes=RedisCluster.PRIMARIES)
            try:
                yield url
            finally:
                client.flushall(target_nodes=RedisCluster.PRIMARIES)
        finally:
            client.close()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextmanager
def exclusive_redis_db(url: str, spare: int = 8) -> Iterator[str]:
    """``url`` moved to a database number that this process holds exclusively.

    Every test session on the machine (xdist workers, several developers, CI) would
    otherwise flush and write the same database under each other's feet. Candidates
    are the URL's number and up to ``spare - 1`` below it (never below 1 unless the
    URL says 0); each is claimed with a non-blocking file lock, and when all are
    taken the first is waited for.
    """
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    candidates = [base, *range(base - 1, max(base - spare, 0), -1)]
    where = f"{parts.hostname or 'localhost'}-{parts.port or 6379}"
    lock_dir = tempfile.gettempdir()
    for attempt, db in enumerate([*candidates, candidates[0]]):
        path = os.path.join(lock_dir, f"stm-memory-test-redis-{where}-{db}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        blocking = attempt == len(candidates)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield urlunsplit(parts._replace(path=f"/{db}"))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        return


def with_query(url: str, **params: str) -> str:
    """``url`` with ``params`` added to its query (e.g. ``application_name``)."""
    parsed = sa.make_url(url)
    return parsed.update_query_dict(params).render_as_string(hide_password=False)


def new_schema_name() -> str:
    return f"stm_t_{uuid.uuid4().hex[:12]}"


def with_search_path(url: str, schema: str, *, timezone: str | None = None) -> str:
    """``url`` whose connections use ``schema`` (libpq ``options``), and optionally a
    session time zone."""
    options = f"-csearch_path={schema}"
    if timezone:
        options += f" -ctimezone={timezone}"
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options={quote(options)}"


@dataclass
class PostgresSchemas:
    """Creates isolated schemas on the test server and drops them afterwards."""

    base_url: str
    created: list[str] = field(default_factory=list)
    # Called before the schemas are dropped (to close engines that use them).
    before_drop: list[Callable[[], None]] = field(default_factory=list)

    def admin(self) -> sa.Engine:
        return sa.create_engine(self.base_url, connect_args={"connect_timeout": 2})

    def new_url(self, *, timezone: str | None = None) -> str:
        schema = new_schema_name()
        engine = self.admin()
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        finally:
            engine.dispose()
        self.created.append(schema)
        return with_search_path(self.base_url, schema, timezone=timezone)

    def drop_all(self) -> None:
        for hook in self.before_drop:
            hook()
        self.before_drop.clear()
        if not self.created:
            return
        engine = self.admin()
        try:
            with engine.begin() as conn:
                # A connection a test forgot to close must not hang the whole run.
                conn.execute(sa.text("SET LOCAL lock_timeout = '5s'"))
                for schema in self.created:
                    conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        finally:
            engine.dispose()
            self.created.clear()

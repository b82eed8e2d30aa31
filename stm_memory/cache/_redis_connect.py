"""Reaching Redis for the live cache: URLs, single-server and cluster clients, and
redis-py's errors translated into :class:`~stm_memory.errors.CacheError`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeAlias

import redis
import redis.cluster
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.connection import parse_url
from redis.exceptions import RedisClusterException
from redis.retry import Retry

from stm_memory.errors import CacheError, ConfigurationError

__all__ = ["Client", "Connector", "describe", "translated"]

Client: TypeAlias = "redis.Redis | RedisCluster"


@contextmanager
def translated(where: str, action: str) -> Iterator[None]:
    """Raise redis-py's errors as :class:`CacheError` (``WatchError`` passes: the
    optimistic loop retries on it)."""
    # Only redis-py's own errors are translated: an exception from the caller's
    # atomic function (the engine uses one for control flow) passes through as is.
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise CacheError(f"cannot reach Redis at {where} ({action}): {exc}") from exc
    except redis.WatchError:
        raise
    except (redis.RedisError, RedisClusterException) as exc:
        # RedisClusterException (cluster unreachable at start-up, cross-slot command)
        # does not derive from RedisError.
        raise CacheError(f"Redis {action} failed at {where}: {exc}") from exc


def describe(client: Client) -> str:
    """Where the cache lives, for error messages; never includes credentials."""
    if isinstance(client, RedisCluster):
        node = client.get_default_node()  # type: ignore[no-untyped-call]
        return f"{node.host}:{node.port} (cluster)"
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    return f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"


def _cluster_retry() -> Retry:
    # redis-py's default retries a failed node three times with exponential backoff
    # and a topology refresh between tries: about 4 s per call while a node is down.
    # One immediate retry still rides out a failover's refresh; beyond that the
    # resilient wrapper's degraded mode is the better answer than a stalled turn.
    return Retry(NoBackoff(), 1)


@dataclass(frozen=True, slots=True)
class Connector:
    """What :meth:`RedisLiveCache.from_url` needs to open the client, now or later."""

    url: str
    options: dict[str, Any]
    cluster: bool | None
    db: int
    where: str
    unix: bool

    @classmethod
    def parse(cls, url: str, options: dict[str, Any], cluster: bool | None) -> Connector:
        try:
            parsed = parse_url(url)  # type: ignore[no-untyped-call]
        except ValueError as exc:
            raise ConfigurationError(f"invalid Redis URL: {exc}") from exc
        db = int(parsed.get("db", options.get("db", 0)) or 0)
        unix = "path" in parsed
        if unix:
            where = f"unix://{parsed['path']}?db={db}"
        else:
            where = f"{parsed.get('host', 'localhost')}:{parsed.get('port', 6379)}/{db}"
        connector = cls(url, options, cluster, db, where, unix)
        if cluster:
            connector.check_cluster()
        return connector

    def check_cluster(self) -> None:
        """Refuse what a cluster cannot do, before connecting to it."""
        if self.db != 0:
            raise self._only_db_0()
        if self.unix:
            raise ConfigurationError(
                f"Redis Cluster is reached over TCP (redis:// or rediss://), not {self.where}"
            )
        if not hasattr(redis.cluster, "TransactionStrategy"):
            raise ConfigurationError(
                "Redis Cluster needs redis-py 6.1 or later (cluster transactions); "
                f"{redis.__version__} is installed: pip install -U redis"
            )

    def _only_db_0(self) -> ConfigurationError:
        return ConfigurationError(
            f"a Redis Cluster has only database 0, and {self.where} names database "
            f"{self.db}: point the URL at database 0 (prefix= keeps deployments apart)"
        )

    def open(self) -> Client:
        with translated(self.where, "connect"):
            if self.cluster is not True:
                client = redis.Redis.from_url(self.url, **self.options)
                if not self._is_cluster_node(client):
                    return client
                client.close()
                self.check_cluster()
            options = {"retry": _cluster_retry(), **self.options}
            return RedisCluster.from_url(self.url, **options)

    def _is_cluster_node(self, client: redis.Redis) -> bool:
        """Connect ``client`` and, unless told, ask whether it reached a cluster node
        (``client`` is closed when that fails)."""
        try:
            if self.cluster is None:
                return bool(client.info("cluster").get("cluster_enabled"))
            client.ping()
            return False
        except BaseException as exc:
            client.close()
            # A cluster node refuses the connection's SELECT of a database other than
            # 0 ("SELECT is not allowed in cluster mode") before INFO can run.
            if isinstance(exc, redis.ResponseError) and self.db and "cluster mode" in str(exc):
                raise self._only_db_0() from exc
            raise

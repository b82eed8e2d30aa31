"""Redis backend: the live cache shared by many hosts (``pip install "stm-memory[redis]"``).

Values are compact UTF-8 JSON with native TTLs (``SET … PX``). :meth:`atomic` is
optimistic: ``WATCH`` the keys, read them, let the pure function decide, write under
``MULTI``/``EXEC``; a concurrent writer aborts the ``EXEC`` and the attempt is rerun.

The sync and asyncio paths are thin shells around the same pure parts (encoding, the
write plan of an attempt, command queueing, backoff), so a fix lands in both at once.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..errors import CacheError, ConfigurationError

try:
    import redis
    import redis.asyncio
    from redis.asyncio.client import Pipeline as AsyncPipeline
    from redis.client import Pipeline as SyncPipeline
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'The Redis live cache needs the redis package: pip install "stm-memory[redis]"'
    ) from exc

from .base import AtomicFn, CacheValue, LiveCache, Write

__all__ = ["RedisLiveCache"]

#: Applied by :meth:`RedisLiveCache.from_url` unless the URL or keyword arguments say
#: otherwise: redis-py's own default (5 s) is long for a call made inside a chat turn.
DEFAULT_SOCKET_TIMEOUT = 2.0
#: Optimistic attempts before :meth:`RedisLiveCache.atomic` gives up on a hot key.
DEFAULT_MAX_ATTEMPTS = 100

_GLOB_SPECIALS = frozenset("*?[]\\")


# -- pure helpers shared by the sync and async paths -----------------------------------


def _encode(value: CacheValue) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _decode(key: str, raw: bytes | str | None) -> CacheValue | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both land here
        raise CacheError(f"Redis key {key!r} does not hold a JSON value: {exc}") from exc
    if not isinstance(value, dict):
        raise CacheError(f"Redis key {key!r} holds {type(value).__name__}, not a JSON object")
    return value


def _ttl_ms(ttl: float | None) -> int | None:
    # PX rejects 0 and negatives; a TTL that has already run out becomes "expire at
    # once" (1 ms), matching the other backends where such a value is never read back.
    if ttl is None:
        return None
    return max(1, math.ceil(ttl * 1000))


def _escape_glob(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _GLOB_SPECIALS else ch for ch in text)


def _backoff(attempt: int) -> float:
    # Full jitter, capped: contenders spread out instead of colliding again in lockstep.
    return random.uniform(0.0, min(0.05, 0.001 * 2**attempt))


@dataclass(slots=True)
class _Plan:
    """Commands to queue (prefixed key, JSON bytes, TTL in ms; keys to delete) and the
    values the caller sees afterwards."""

    sets: list[tuple[str, bytes, int | None]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    result: dict[str, CacheValue | None] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.sets and not self.deletes


class RedisLiveCache(LiveCache):
    """Live cache in Redis, shared by every process and host that points at it.

    ``prefix`` namespaces the keys (several deployments in one database); it is added
    on the way in and stripped on the way out, so callers never see it.
    ``async_client`` backs the ``a*`` twins; without one they hop to a thread.
    """

    def __init__(
        self,
        client: redis.Redis,
        *,
        async_client: redis.asyncio.Redis | None = None,
        prefix: str = "",
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        self._client = client
        self._async = async_client
        # redis-py's asyncio connections belong to the event loop that opened them.
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._closing: set[asyncio.Future[None]] = set()
        self.prefix = prefix
        self.max_attempts = max_attempts
        self._where = _describe(client)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "", ping: bool = True, **kwargs: Any
    ) -> RedisLiveCache:
        """Sync and asyncio clients for ``url`` (``redis://``, ``rediss://``, ``unix://``).

        ``kwargs`` go to both clients; query-string options in the URL win over them.
        Socket timeouts default to :data:`DEFAULT_SOCKET_TIMEOUT` seconds. ``ping=False``
        skips the connection check (the engine's resilient wrapper probes on its own).
        """
        options: dict[str, Any] = {
            "socket_timeout": DEFAULT_SOCKET_TIMEOUT,
            "socket_connect_timeout": DEFAULT_SOCKET_TIMEOUT,
            **kwargs,
        }
        try:
            client = redis.Redis.from_url(url, **options)
            async_client = redis.asyncio.Redis.from_url(url, **options)
        except ValueError as exc:
            raise ConfigurationError(f"invalid Redis URL: {exc}") from exc
        cache = cls(client, async_client=async_client, prefix=prefix)
        if not ping:
            return cache
        try:
            # Connect now, like the disk backend opens its file: an unreachable server
            # fails at construction rather than in the middle of a turn.
            with cache._errors("connect"):
                client.ping()
        except CacheError:
            cache.close()
            raise
        return cache

    # -- keys and errors -----------------------------------------------------------------

    def _k(self, key: str) -> str:
        return self.prefix + key

    def _unprefix(self, raw: bytes | str) -> str:
        key = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return key[len(self.prefix) :]

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        # Only redis-py's own errors are translated: an exception from the caller's
        # atomic function (the engine uses one for control flow) passes through as is.
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise CacheError(f"cannot reach Redis at {self._where} ({action}): {exc}") from exc
        except redis.WatchError:
            raise
        except redis.RedisError as exc:
            raise CacheError(f"Redis {action} failed at {self._where}: {exc}") from exc

    def _plan(self, keys: Sequence[str], raws: Sequence[bytes | str | None], fn: AtomicFn) -> _Plan:
        current = {k: _decode(k, raw) for k, raw in zip(keys, raws, strict=True)}
        plan = _Plan(result=dict(current))
        for key, write in fn(current).items():
            if write.value is None:
                plan.deletes.append(self._k(key))
            else:
                plan.sets.append((self._k(key), _encode(write.value), _ttl_ms(write.ttl)))
            plan.result[key] = write.value
        return plan

    def _additions(self, items: Mapping[str, Write]) -> _Plan:
        sets = [
            (self._k(key), _encode(w.value), _ttl_ms(w.ttl))
            for key, w in items.items()
            if w.value is not None
        ]
        return _Plan(sets=sets)

    def _exhausted(self, keys: Sequence[str]) -> CacheError:
        return CacheError(
            f"Redis atomic update of {list(keys)!r} lost {self.max_attempts} races in a row "
            f"at {self._where}; the keys are too contended"
        )

    # -- sync ----------------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        if not keys:
            return {}
        with self._errors("read"):
            raws = self._client.mget([self._k(k) for k in keys])
        return _present(keys, raws)

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        full = [self._k(k) for k in keys]
        for attempt in range(self.max_attempts):
            # The pipeline's __exit__ sends UNWATCH and returns the connection even
            # when fn raises, so an aborted attempt leaves nothing behind.
            with self._errors("atomic update"), self._client.pipeline() as pipe:
                try:
                    raws: list[bytes | str | None] = []
                    if full:
                        pipe.watch(*full)  # type: ignore[no-untyped-call]  # redis-py stub gap
                        raws = pipe.mget(full)
                    plan = self._plan(keys, raws, fn)
                    if not plan.empty:
                        pipe.multi()
                        _queue_writes(pipe, plan)
                        pipe.execute()
                    return plan.result
                except redis.WatchError:
                    pass
            time.sleep(_backoff(attempt))
        raise self._exhausted(keys)

    def add_many(self, items: Mapping[str, Write]) -> int:
        plan = self._additions(items)
        if plan.empty:
            return 0
        with self._errors("add"):
            pipe = self._client.pipeline(transaction=False)
            _queue_writes(pipe, plan, only_new=True)
            return sum(1 for ok in pipe.execute() if ok)

    def delete_many(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        with self._errors("delete"):
            return self._client.delete(*(self._k(k) for k in keys))

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        pattern = _escape_glob(self._k(prefix)) + "*"
        with self._errors("scan"):
            for raw in self._client.scan_iter(match=pattern, count=1000):
                yield self._unprefix(raw)

    def expire(self) -> int:
        return 0  # Redis expires keys natively

    def close(self) -> None:
        """Close the sync client, and the asyncio one as far as a sync caller can: its
        connections can only be closed on their own event loop (prefer :meth:`aclose`)."""
        self._client.close()
        loop, self._aloop = self._aloop, None
        if self._async is not None and loop is not None and not loop.is_closed():
            self._close_async_on(loop, self._async)

    def _close_async_on(self, loop: asyncio.AbstractEventLoop, client: redis.asyncio.Redis) -> None:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # close() called from async code: finish in the background
            task = loop.create_task(client.aclose())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        elif loop.is_running():  # the loop runs in another thread
            asyncio.run_coroutine_threadsafe(client.aclose(), loop)
        elif running is None:
            loop.run_until_complete(client.aclose())
        else:  # a stopped loop while another one runs here: drop its connections
            client.connection_pool.reset()  # type: ignore[no-untyped-call]

    # -- async: native asyncio when an async client was given ----------------------------

    def _aclient(self) -> redis.asyncio.Redis | None:
        if self._async is None:
            return None
        loop = asyncio.get_running_loop()
        if self._aloop is not loop:
            if self._aloop is not None:
                # A new loop (a second asyncio.run, a new test loop): the pooled
                # connections of the old one are unusable there, so start afresh.
                self._async.connection_pool.reset()  # type: ignore[no-untyped-call]
            self._aloop = loop
        return self._async

    async def aget_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        client = self._aclient()
        if client is None:
            return await super().aget_many(keys)
        if not keys:
            return {}
        with self._errors("read"):
            raws = await client.mget([self._k(k) for k in keys])
        return _present(keys, raws)

    async def aget(self, key: str) -> CacheValue | None:
        return (await self.aget_many((key,))).get(key)

    async def aatomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        client = self._aclient()
        if client is None:
            return await super().aatomic(keys, fn)
        full = [self._k(k) for k in keys]
        for attempt in range(self.max_attempts):
            with self._errors("atomic update"):
                async with client.pipeline() as pipe:
                    try:
                        raws: list[bytes | str | None] = []
                        if full:
                            await pipe.watch(*full)
                            raws = await pipe.mget(full)
                        plan = self._plan(keys, raws, fn)
                        if not plan.empty:
                            pipe.multi()  # type: ignore[no-untyped-call]
                            _queue_writes(pipe, plan)
                            await pipe.execute()
                        return plan.result
                    except redis.WatchError:
                        pass
            await asyncio.sleep(_backoff(attempt))
        raise self._exhausted(keys)

    async def aadd_many(self, items: Mapping[str, Write]) -> int:
        client = self._aclient()
        if client is None:
            return await super().aadd_many(items)
        plan = self._additions(items)
        if plan.empty:
            return 0
        with self._errors("add"):
            pipe = client.pipeline(transaction=False)
            _queue_writes(pipe, plan, only_new=True)
            return sum(1 for ok in await pipe.execute() if ok)

    async def adelete_many(self, keys: Sequence[str]) -> int:
        client = self._aclient()
        if client is None:
            return await super().adelete_many(keys)
        if not keys:
            return 0
        with self._errors("delete"):
            return await client.delete(*(self._k(k) for k in keys))

    async def aclose(self) -> None:
        """Close both clients. The asyncio client's connections belong to the event
        loop that opened them, so they are released here rather than in :meth:`close`."""
        if self._async is not None and self._aloop is asyncio.get_running_loop():
            self._aloop = None
            await self._async.aclose()
        self.close()


# -- module helpers -------------------------------------------------------------------


def _present(keys: Sequence[str], raws: Sequence[bytes | str | None]) -> dict[str, CacheValue]:
    out: dict[str, CacheValue] = {}
    for key, raw in zip(keys, raws, strict=True):
        value = _decode(key, raw)
        if value is not None:
            out[key] = value
    return out


def _queue_writes(
    pipe: SyncPipeline | AsyncPipeline, plan: _Plan, *, only_new: bool = False
) -> None:
    # Buffered (MULTI or a plain pipeline), both pipeline flavours only queue
    # commands, so this is synchronous for the asyncio one too; the caller awaits
    # execute(). ``only_new`` is SET NX: never overwrite a live key.
    for key, data, ttl_ms in plan.sets:
        pipe.set(key, data, px=ttl_ms, nx=only_new)
    if plan.deletes:
        pipe.delete(*plan.deletes)


def _describe(client: redis.Redis) -> str:
    # Where the cache lives, for error messages; never includes credentials.
    kw = client.connection_pool.connection_kwargs
    if "path" in kw:
        return f"unix://{kw['path']}?db={kw.get('db', 0)}"
    return f"{kw.get('host', 'localhost')}:{kw.get('port', 6379)}/{kw.get('db', 0)}"

"""Redis backend: the live cache shared by many hosts (``pip install "stm-memory[redis]"``).

Values are compact UTF-8 JSON with native TTLs (``SET … PX``). :meth:`atomic` is
optimistic: ``WATCH`` the keys, read them, let the pure function decide, write under
``MULTI``/``EXEC``; a concurrent writer aborts the ``EXEC`` and the attempt is rerun.
An ordered index is a sorted set holding ``-score``: Redis orders equal scores by
member ascending, so one ascending ``ZRANGE`` reads "highest score first, ties by
member ascending", and "a higher score wins" is ``ZADD LT``.

Where each key lives (hash tags that keep a scope's two keys in one Redis Cluster
slot) is ``_redis_layout``'s business; URLs, clients and error translation are
``_redis_connect``'s.

Redis Cluster (detected by :meth:`RedisLiveCache.from_url`, or forced) keeps each
atomic update inside one slot: an update whose keys span slots is a
:class:`~stm_memory.errors.ValidationError` (a caller's mistake, not an outage), never a
silently non-atomic write. A ``Write.rank`` whose index lies in another slot than the
update's keys cannot join its ``MULTI``; it is sent right after ``EXEC``, all such
ranks of the call in one pipeline: one more round trip for a call that carries them,
nothing for calls without. What remains guaranteed: the values are as atomic as on
a single server, and the index follows one command later; a process that dies in between
leaves the member at its previous score (or absent) until the entry's next write ranks
it again. If that follow-up fails, the call raises :class:`CacheError` although the
values were written (the uncertainty of an ``EXEC`` whose reply is lost), which the
resilient wrapper handles as an outage. On a single server the ranks always join the
``MULTI``. ``add_many`` with ranks takes the same path (a watched transaction per
slot), so a rank is only placed with a value that was really added.

There is no asyncio path: the engine's async methods run the sync one in a thread.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeAlias, cast

from stm_memory.errors import CacheError, ConfigurationError, ValidationError
from stm_memory.model import KEY_PREFIX

try:
    import redis
    from redis.client import Pipeline as SyncPipeline
    from redis.cluster import ClusterPipeline, RedisCluster
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'The Redis live cache needs the redis package: pip install "stm-memory[redis]"'
    ) from exc

from stm_memory.cache._redis_connect import Client, Connector, describe, translated
from stm_memory.cache._redis_layout import logical_key, rank_key, redis_key, scan_pattern
from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Rank, Write

__all__ = ["RedisLiveCache", "redis_key"]

#: Applied by :meth:`RedisLiveCache.from_url` unless the URL or keyword arguments say
#: otherwise: redis-py's own default (5 s) is long for a call made inside a chat turn.
DEFAULT_SOCKET_TIMEOUT = 2.0
#: Optimistic attempts before :meth:`RedisLiveCache.atomic` gives up on a hot key.
DEFAULT_MAX_ATTEMPTS = 100

_Raw: TypeAlias = "bytes | str | None"
#: (physical index key, member, stored score = -score; None removes the member)
_RankOp: TypeAlias = tuple[str, str, float | None]


# -- pure helpers ---------------------------------------------------------------------


def _encode(value: CacheValue) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _decode(key: str, raw: _Raw) -> CacheValue | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError both land here
        raise CacheError(f"Redis key {key!r} does not hold a JSON value: {exc}") from exc
    if not isinstance(value, dict):
        raise CacheError(f"Redis key {key!r} holds {type(value).__name__}, not a JSON object")
    return value


def _text(raw: bytes | str) -> str:
    return raw.decode("utf-8") if isinstance(raw, bytes) else raw


def _ttl_ms(ttl: float | None) -> int | None:
    # PX rejects 0 and negatives; a TTL that has already run out becomes "expire at
    # once" (1 ms), matching the other backends where such a value is never read back.
    if ttl is None:
        return None
    return max(1, math.ceil(ttl * 1000))


def _backoff(attempt: int) -> float:
    # Full jitter, capped: contenders spread out instead of colliding again in lockstep.
    return random.uniform(0.0, min(0.05, 0.001 * 2**attempt))


def _stored(score: float) -> float:
    # Checked before anything is queued: Redis would refuse NaN only when EXEC runs
    # the ZADD, after the values of the same transaction were written.
    if math.isnan(score):
        raise ValidationError("an index score must be a number, not NaN")
    return -score


@dataclass(slots=True)
class _Plan:
    """Commands to queue (prefixed key, JSON bytes, TTL in ms; keys to delete; index
    moves), the index moves that must wait for ``EXEC`` (another slot of a cluster),
    and the values the caller sees afterwards."""

    sets: list[tuple[str, bytes, int | None]] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    ranks: list[_RankOp] = field(default_factory=list)
    later: list[_RankOp] = field(default_factory=list)
    result: dict[str, CacheValue | None] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.sets and not self.deletes and not self.ranks


class RedisLiveCache(LiveCache):
    """Live cache in Redis or a Redis Cluster, shared by every process and host that
    points at it.

    Give ``client``, or ``connect``, which opens it on first use: :meth:`from_url`
    with ``ping=False`` passes one, so a cache built while Redis is down still finds
    out, once it answers, whether it talks to a cluster.

    ``prefix`` namespaces the keys (several deployments in one database); it is added
    on the way in and stripped on the way out, so callers never see it.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        connect: Callable[[], Client] | None = None,
        prefix: str = "",
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> None:
        if (client is None) == (connect is None):
            raise ConfigurationError("RedisLiveCache needs either a client or connect")
        if max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        if "{" in prefix or "}" in prefix:
            # Redis Cluster hashes the first {…} of a key: braces in the prefix would
            # take the place of the tag that keeps a scope's keys in one slot.
            raise ConfigurationError(f"a Redis key prefix must not contain braces: {prefix!r}")
        self._client: Client | None = None
        self._connect = connect
        self._opening = threading.Lock()
        self.prefix = prefix
        self.max_attempts = max_attempts
        self._where = "(not connected yet)"
        if client is not None:
            self._bind(client)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str = "",
        ping: bool = True,
        cluster: bool | None = None,
        **kwargs: Any,
    ) -> RedisLiveCache:
        """A cache on ``url`` (``redis://``, ``rediss://``, ``unix://``), a single
        server or any node of a Redis Cluster.

        ``cluster=None`` asks the server (``INFO cluster``) when connecting; ``True`` or
        ``False`` skips the question. A cluster has only database 0, so a URL naming
        another one is a :class:`ConfigurationError`. ``kwargs`` go to the client;
        query-string options in the URL win over them. Socket timeouts default to
        :data:`DEFAULT_SOCKET_TIMEOUT` seconds. ``ping=False`` connects on first use
        instead of now (the engine's resilient wrapper probes on its own).
        """
        options: dict[str, Any] = {
            "socket_timeout": DEFAULT_SOCKET_TIMEOUT,
            "socket_connect_timeout": DEFAULT_SOCKET_TIMEOUT,
            **kwargs,
        }
        connector = Connector.parse(url, options, cluster)
        cache = cls(connect=connector.open, prefix=prefix)
        cache._where = connector.where
        if ping:
            # Connect now, like the disk backend opens its file: an unreachable server
            # fails at construction rather than in the middle of a turn.
            cache._sync()
        return cache

    # -- client, keys and errors ------------------------------------------------------

    def _bind(self, client: Client) -> None:
        self._where = describe(client)
        self._client = client  # last: _sync() reads it without the lock

    def _sync(self) -> Client:
        client = self._client
        if client is not None:
            return client
        with self._opening:
            if self._client is None:
                assert self._connect is not None  # the constructor ensures one or the other
                with self._errors("connect"):
                    self._bind(self._connect())
            assert self._client is not None
            return self._client

    @property
    def cluster(self) -> bool:
        """Whether this cache talks to a Redis Cluster (connects first if need be)."""
        return isinstance(self._sync(), RedisCluster)

    def _k(self, key: str) -> str:
        return redis_key(key, self.prefix)

    def _rank_key(self, index: str) -> str:
        return rank_key(index, self.prefix)

    def _errors(self, action: str) -> AbstractContextManager[None]:
        return translated(self._where, action)

    def _slot(self, physical: str) -> int | None:
        # None on a single server: every key may join every transaction there.
        client = self._sync()
        if not isinstance(client, RedisCluster):
            return None
        return int(client.keyslot(physical))  # type: ignore[no-untyped-call]

    def _one_slot(self, what: str, keys: Sequence[str]) -> int | None:
        """The one slot of ``keys`` on a cluster (None on a single server, or no keys)."""
        if not isinstance(self._sync(), RedisCluster):
            return None
        slots = {self._slot(self._k(key)) for key in keys}
        if len(slots) > 1:
            # Not a CacheError: the caller asked for something no cluster can do, and
            # the resilient wrapper would take a CacheError for an outage and degrade.
            raise ValidationError(
                f"Redis Cluster at {self._where} cannot {what} {list(keys)!r} atomically: "
                "the keys lie in different hash slots (the keys of one channel share one, "
                f"and so do all keys outside the {KEY_PREFIX}: entry and index schemes)"
            )
        return next(iter(slots), None)

    def _place(self, plan: _Plan, slot: int | None, key: str, rank: Rank) -> None:
        stored = None if rank.score is None else _stored(rank.score)
        op = (self._rank_key(rank.index), key, stored)
        inline = slot is None or self._slot(op[0]) == slot
        (plan.ranks if inline else plan.later).append(op)

    def _plan(self, keys: Sequence[str], fn: AtomicFn, raws: Sequence[_Raw]) -> _Plan:
        current = {k: _decode(k, raw) for k, raw in zip(keys, raws, strict=True)}
        plan = _Plan(result=dict(current))
        writes = fn(current)
        slot = self._one_slot("update", [*keys, *(k for k in writes if k not in current)])
        for key, write in writes.items():
            if write.value is None:
                plan.deletes.append(self._k(key))
            else:
                plan.sets.append((self._k(key), _encode(write.value), _ttl_ms(write.ttl)))
            if write.rank is not None:
                self._place(plan, slot, key, write.rank)
            plan.result[key] = write.value
        return plan

    def _additions(
        self, keys: Sequence[str], items: Mapping[str, Write], raws: Sequence[_Raw]
    ) -> _Plan:
        # Presence, not content, decides: a foreign value is never overwritten either.
        plan = _Plan()
        slot = self._one_slot("add", keys)
        for key, raw in zip(keys, raws, strict=True):
            write = items[key]
            if raw is not None or write.value is None:
                continue
            plan.sets.append((self._k(key), _encode(write.value), _ttl_ms(write.ttl)))
            if write.rank is not None:
                self._place(plan, slot, key, write.rank)
        return plan

    def _blind_additions(self, items: Mapping[str, Write]) -> _Plan:
        # Without ranks an add needs no read: SET NX decides on the server.
        sets = [
            (self._k(key), _encode(w.value), _ttl_ms(w.ttl))
            for key, w in items.items()
            if w.value is not None
        ]
        return _Plan(sets=sets)

    def _by_slot(self, keys: Sequence[str]) -> list[list[str]]:
        groups: dict[int | None, list[str]] = {}
        for key in keys:
            groups.setdefault(self._slot(self._k(key)), []).append(key)
        return list(groups.values())

    def _exhausted(self, keys: Sequence[str]) -> CacheError:
        return CacheError(
            f"Redis atomic update of {list(keys)!r} lost {self.max_attempts} races in a row "
            f"at {self._where}; the keys are too contended"
        )

    # -- LiveCache -----------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        if not keys:
            return {}
        client = self._sync()
        full = [self._k(k) for k in keys]
        with self._errors("read"):
            if isinstance(client, RedisCluster):
                raws = client.mget_nonatomic(full)  # one MGET per slot, pipelined
            else:
                raws = client.mget(full)
        return _present(keys, raws)

    def _transact(
        self, action: str, keys: Sequence[str], decide: Callable[[list[_Raw]], _Plan]
    ) -> _Plan:
        """Watch ``keys``, read them, queue what ``decide`` plans under MULTI, retry on
        conflict; then send the index moves that had to wait for EXEC."""
        client = self._sync()
        plan = self._watched(client, action, keys, decide)
        if plan.later:
            with self._errors("index update after its values were written"):
                pipe = client.pipeline(transaction=False)
                _queue_ranks(pipe, plan.later)
                pipe.execute()
        return plan

    def _watched(
        self,
        client: Client,
        action: str,
        keys: Sequence[str],
        decide: Callable[[list[_Raw]], _Plan],
    ) -> _Plan:
        full = [self._k(k) for k in keys]
        for attempt in range(self.max_attempts):
            # The pipeline's __exit__ sends UNWATCH and returns the connection even
            # when decide raises, so an aborted attempt leaves nothing behind.
            with self._errors(action), client.pipeline(transaction=True) as pipe:
                try:
                    raws: list[_Raw] = []
                    if full:
                        pipe.watch(*full)
                        # MGET by name: a cluster pipeline blocks its mget() helper.
                        raws = pipe.execute_command("MGET", *full)
                    plan = decide(raws)
                    if not plan.empty:
                        pipe.multi()
                        _queue_writes(pipe, plan)
                        pipe.execute()
                    return plan
                except redis.WatchError:
                    pass
            time.sleep(_backoff(attempt))
        raise self._exhausted(keys)

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        self._one_slot("update", keys)  # before WATCH, which would refuse less clearly
        return self._transact("atomic update", keys, partial(self._plan, keys, fn)).result

    def add_many(self, items: Mapping[str, Write]) -> int:
        if not any(w.value is not None for w in items.values()):
            return 0
        if any(w.rank is not None for w in items.values()):
            # A rank may only follow a value that was really added: watch, then write
            # both, one slot at a time (one transaction on a single server).
            return sum(
                len(self._transact("add", group, partial(self._additions, group, items)).sets)
                for group in self._by_slot(list(items))
            )
        with self._errors("add"):
            pipe = self._sync().pipeline(transaction=False)
            _queue_writes(pipe, self._blind_additions(items), only_new=True)
            return sum(1 for ok in pipe.execute() if ok)

    def delete_many(self, keys: Sequence[str]) -> int:
        if not keys:
            return 0
        with self._errors("delete"):
            # A cluster client splits a multi-key DEL by slot and adds up the counts.
            return int(self._sync().delete(*(self._k(k) for k in keys)))

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        client = self._sync()
        pattern = scan_pattern(prefix, self.prefix)
        with self._errors("scan"):
            if isinstance(client, RedisCluster):
                raws = client.scan_iter(
                    match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES
                )
            else:
                raws = client.scan_iter(match=pattern, count=1000)
            for raw in raws:
                key = logical_key(_text(raw), self.prefix)
                if key.startswith(prefix):  # the glob may match more than the prefix
                    yield key

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        if count <= 0:
            return []
        start = max(offset, 0)
        with self._errors("index read"):
            rows = cast(
                "list[tuple[bytes | str, float]]",
                self._sync().zrange(
                    self._rank_key(index), start, start + count - 1, withscores=True
                ),
            )
        # 0.0 - x also turns a stored -0.0 back into 0.0.
        return [(_text(member), 0.0 - float(score)) for member, score in rows]

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        if not members:
            return
        key = self._rank_key(index)
        scores = {m: _stored(score) for m, score in members.items() if score is not None}
        gone = [member for member, score in members.items() if score is None]
        with self._errors("index update"):
            # One index is one key, hence one slot: a plain MULTI on a cluster too.
            pipe = self._sync().pipeline(transaction=True)
            if scores:
                pipe.zadd(key, scores, lt=True)  # stored -score: lower is a higher score
            if gone:
                pipe.zrem(key, *gone)
            pipe.execute()

    def expire(self) -> int:
        return 0  # Redis expires keys natively

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


# -- module helpers -------------------------------------------------------------------


def _present(keys: Sequence[str], raws: Sequence[_Raw]) -> dict[str, CacheValue]:
    out: dict[str, CacheValue] = {}
    for key, raw in zip(keys, raws, strict=True):
        value = _decode(key, raw)
        if value is not None:
            out[key] = value
    return out


_AnyPipeline: TypeAlias = "SyncPipeline | ClusterPipeline"


def _queue_ranks(pipe: _AnyPipeline, ranks: Sequence[_RankOp]) -> None:
    for key, member, score in ranks:
        if score is None:
            pipe.zrem(key, member)
        else:
            pipe.zadd(key, {member: score})  # exact: a write replaces the member's score


def _queue_writes(pipe: _AnyPipeline, plan: _Plan, *, only_new: bool = False) -> None:
    # Only queues (MULTI or a plain pipeline); the caller runs execute().
    # ``only_new`` is SET NX: never overwrite a live key.
    for key, data, ttl_ms in plan.sets:
        pipe.set(key, data, px=ttl_ms, nx=only_new)
    if plan.deletes:
        pipe.delete(*plan.deletes)
    _queue_ranks(pipe, plan.ranks)

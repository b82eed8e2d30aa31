"""What only a Redis Cluster can get wrong, beyond the live-cache contract it passes
(``tests/contract/test_cache_contract.py``): keys spread over the primaries, a scope's
two keys in one slot, updates across slots refused, and cluster detection."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
import redis
from helpers.threads import run_threads

from stm_memory import ConfigurationError, Scope, ValidationError
from stm_memory.cache.base import CacheValue, Write
from stm_memory.cache.redis import RedisLiveCache


def entry(channel: str, owner: str = "g1") -> str:
    return Scope(channel_id=channel, user_id="u1", server_id=owner).live_key


@pytest.fixture
def cluster_cache(redis_cluster_url: str) -> Iterator[RedisLiveCache]:
    cache = RedisLiveCache.from_url(redis_cluster_url)
    yield cache
    cache.close()


def test_cluster_spreads_channels_over_the_primaries(
    cluster_cache: RedisLiveCache, redis_cluster_url: str
) -> None:
    scopes = [Scope(channel_id=f"c{i}", user_id=f"u{i}", server_id="g1") for i in range(24)]
    for scope in scopes:
        cluster_cache.add_many(dict.fromkeys(scope.keys, Write({"v": 1})))
    raw = redis.cluster.RedisCluster.from_url(redis_cluster_url)
    try:
        holding = [
            sum(1 for _ in raw.scan_iter(count=1000, target_nodes=node))
            for node in raw.get_primaries()
        ]
    finally:
        raw.close()
    assert len(holding) == 3 and sum(holding) == 48
    assert sum(1 for n in holding if n) > 1, holding
    assert sorted(cluster_cache.iter_keys()) == sorted(k for s in scopes for k in s.keys)


# Braces in ids must neither break the hash tag nor split one scope over two slots.
BRACED = Scope(channel_id="c}{1}", user_id="{u1", server_id="g{}")


@pytest.mark.parametrize("scope", [Scope(channel_id="c1", user_id="u1", server_id="g1"), BRACED])
def test_cluster_writes_a_scopes_two_keys_atomically(redis_cluster_url: str, scope: Scope) -> None:
    # User key and server key of one channel share a slot: one WATCH/MULTI moves them
    # together, and concurrent movers never see or leave a torn pair.
    user_key, server_key = scope.keys
    caches = [RedisLiveCache.from_url(redis_cluster_url) for _ in range(2)]
    caches[0].atomic(
        list(scope.keys), lambda _c: {user_key: Write({"n": 500}), server_key: Write({"n": 500})}
    )

    def move(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        user, server = current[user_key], current[server_key]
        assert user is not None and server is not None
        assert user["n"] + server["n"] == 1000
        return {user_key: Write({"n": user["n"] - 1}), server_key: Write({"n": server["n"] + 1})}

    def work(i: int) -> None:
        for _ in range(20):
            caches[i % 2].atomic([user_key, server_key], move)

    try:
        run_threads(6, work, timeout=60)
        assert caches[1].get_many(scope.keys) == {user_key: {"n": 380}, server_key: {"n": 620}}
        assert sorted(caches[0].iter_keys()) == sorted(scope.keys)
    finally:
        for cache in caches:
            cache.close()


def test_cluster_refuses_an_atomic_update_across_slots(cluster_cache: RedisLiveCache) -> None:
    # The digests of channel ids c1 and c2 hash to different slots.
    keys = [entry("c1"), entry("c2")]
    with pytest.raises(ValidationError, match="different hash slots"):
        cluster_cache.atomic(keys, lambda _c: {})

    def strays(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        return {entry("c2"): Write({"v": 1})}  # a write outside the watched slot

    with pytest.raises(ValidationError, match="different hash slots"):
        cluster_cache.atomic([entry("c1")], strays)
    assert cluster_cache.get_many(keys) == {}


def test_cluster_reads_and_deletes_across_slots(cluster_cache: RedisLiveCache) -> None:
    keys = [entry(f"c{i}") for i in range(12)]
    assert cluster_cache.add_many({k: Write({"k": k}) for k in keys}) == 12
    assert cluster_cache.get_many([*keys, entry("none")]) == {k: {"k": k} for k in keys}
    assert cluster_cache.delete_many([*keys[:7], entry("none")]) == 7
    assert sorted(cluster_cache.iter_keys()) == sorted(keys[7:])


def test_cluster_is_found_lazily_and_only_uses_database_0(redis_cluster_url: str) -> None:
    lazy = RedisLiveCache.from_url(redis_cluster_url, ping=False)
    try:
        assert lazy.cluster is True
    finally:
        lazy.close()
    other_db = redis_cluster_url.rsplit("/", 1)[0] + "/3"
    with pytest.raises(ConfigurationError, match="only database 0"):
        RedisLiveCache.from_url(other_db)  # found out by asking
    with pytest.raises(ConfigurationError, match="only database 0"):
        RedisLiveCache.from_url(other_db, cluster=True, ping=False)  # before connecting


def test_a_single_server_is_not_a_cluster(redis_url: str) -> None:
    for cluster in (None, False):
        cache = RedisLiveCache.from_url(redis_url, cluster=cluster)
        try:
            assert cache.cluster is False
        finally:
            cache.close()

"""Hosts on PostgreSQL and a real 3-node Redis Cluster (issue 17), by the same
``redis_url`` a single Redis takes: counters exact across hosts, channels spread over
the nodes, deletions and erasures seen by every host, other-channel memory from the
ordered indexes, and a repair that works slot by slot.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from helpers.deployment import OpenMem
from helpers.memory import refresh, row

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.redis import RedisLiveCache, redis_key
from stm_memory.cache.resilient import ResilientCache

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
DM = Scope(channel_id="dm1", user_id="u1")


@pytest.fixture
def two_hosts(
    open_mem: OpenMem, postgres_url: str, redis_cluster_url: str
) -> tuple[ShortTermMemory, ShortTermMemory]:
    return (
        open_mem(postgres_url, redis_url=redis_cluster_url),
        open_mem(postgres_url, redis_url=redis_cluster_url),
    )


@pytest.fixture
def direct(redis_cluster_url: str) -> Iterator[RedisLiveCache]:
    cache = RedisLiveCache.from_url(redis_cluster_url)
    yield cache
    cache.close()


def primary(mem: ShortTermMemory) -> RedisLiveCache:
    assert isinstance(mem._cache, ResilientCache)
    cache = mem._cache.primary
    assert isinstance(cache, RedisLiveCache)
    return cache


def end_turns(mem: ShortTermMemory, scope: Scope, n: int) -> None:
    for _ in range(n):
        mem.end_turn(mem.begin_turn(scope))


def test_two_hosts_on_a_cluster_count_every_turn(
    two_hosts: tuple[ShortTermMemory, ShortTermMemory],
) -> None:
    one, two = two_hosts
    refresh(one, SCOPE, "on the cluster")
    workers = [threading.Thread(target=end_turns, args=(m, SCOPE, 30)) for m in two_hosts]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for mem in two_hosts:
        assert primary(mem).cluster and not mem._cache.degraded  # type: ignore[attr-defined]
        live = mem.get(SCOPE)
        assert live is not None and (live.summary, live.turns_since_refresh) == (
            "on the cluster",
            60,
        )
    stored = row(two, SCOPE.server_key)
    assert stored is not None and stored.turns_since_refresh == 60


def test_channels_spread_over_the_nodes_and_both_keys_of_a_scope_share_a_slot(
    two_hosts: tuple[ShortTermMemory, ShortTermMemory], redis_cluster_url: str
) -> None:
    import redis.cluster

    one, _two = two_hosts
    scopes = [Scope(channel_id=f"c{i}", user_id="u1", server_id="g1") for i in range(30)]
    for scope in scopes:
        refresh(one, scope, f"summary of {scope.channel_id}")
    client = redis.cluster.RedisCluster.from_url(redis_cluster_url)
    try:
        nodes = set()
        for scope in scopes:
            user, server = (redis_key(k) for k in scope.keys if k)
            assert client.keyslot(user) == client.keyslot(server)
            nodes.add(client.get_node_from_key(server).name)
    finally:
        client.close()
    assert len(nodes) > 1


def test_deletions_on_one_host_are_seen_by_the_other(
    two_hosts: tuple[ShortTermMemory, ShortTermMemory], direct: RedisLiveCache
) -> None:
    one, two = two_hosts
    other = Scope(channel_id="c2", user_id="u2", server_id="g1")
    for scope in (SCOPE, DM, other):
        refresh(one, scope, f"secret of {scope.channel_id}")
    assert two.get(DM) is not None
    one.clear_user("u1")
    two.clear_channel("c2")
    for mem in two_hosts:
        assert mem.get(DM) is None
        assert mem.get(other) is None
        shared = mem.get(SCOPE)
        assert shared is None or shared.summary is None
    keys = set(direct.iter_keys("shortterm:"))
    assert DM.user_key not in keys and other.server_key not in keys


def test_other_channels_come_from_the_ordered_index_on_the_cluster(
    two_hosts: tuple[ShortTermMemory, ShortTermMemory],
) -> None:
    one, two = two_hosts
    for i in range(12):
        refresh(one, Scope(channel_id=f"c{i:02d}", user_id="u1", server_id="g1"), f"s{i}")
    here = Scope(channel_id="main", user_id="u1", server_id="g1")
    content = two.build_context(two.begin_turn(here)).content or ""
    shown = [c for c in (f"#c{i:02d}" for i in range(12)) if c in content]
    assert len(shown) == 3


def test_repair_on_a_cluster_adopts_newer_rows(
    two_hosts: tuple[ShortTermMemory, ShortTermMemory],
) -> None:
    one, _two = two_hosts
    scopes = [Scope(channel_id=f"c{i}", user_id="u1", server_id="g1") for i in range(6)]
    for scope in scopes:
        refresh(one, scope, "cached")
    # SQL moves ahead of the cache (as another host's queued writes landing would).
    newer = {}
    for scope in scopes:
        stored = row(one, scope.server_key)
        assert stored is not None
        newer[scope.server_key] = stored.evolve({"summary": "from SQL", "rev": stored.rev + 10})
    one._store.put_rows(list(newer.values()), one.now())
    repaired = one.repair()
    assert not one._cache.degraded  # type: ignore[attr-defined]
    assert repaired.entries_advanced >= len(scopes)
    for scope in scopes:
        entry = one.get_key(scope.server_key or "")
        assert entry is not None and entry.summary == "from SQL"

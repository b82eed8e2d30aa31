"""The live-cache contract: every backend (in-memory, diskcache, Redis, Redis Cluster)
passes it. The cluster-only tests at the end check what only a cluster can get wrong."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import redis
from helpers.subproc import Gate, finish_worker, start_worker
from helpers.threads import run_threads
from helpers.waiting import wait_until

from stm_memory import ConfigurationError, Scope, ValidationError
from stm_memory.cache.base import CacheValue, LiveCache, Rank, Write
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.memory import InMemoryLiveCache
from stm_memory.cache.redis import RedisLiveCache
from stm_memory.cache.sql import SqlLiveCache
from stm_memory.model import index_key
from stm_memory.store.sql import SqlStore, create_sql_engine

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("disk", id="disk"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("redis-cluster", id="redis-cluster", marks=pytest.mark.redis),
    # Degraded mode's live cache in the rows database (cache/sql.py), unfenced here.
    pytest.param("sql-sqlite", id="sql-sqlite"),
    pytest.param("sql-postgres", id="sql-postgres", marks=pytest.mark.postgres),
]


def _sql_cache(request: pytest.FixtureRequest, tmp_path: Path) -> LiveCache:
    if request.node.callspec.params["backend"] == "sql-postgres":
        url = request.getfixturevalue("postgres_url")
    else:
        url = f"sqlite:///{tmp_path / 'rows.db'}"
    store = SqlStore(create_sql_engine(url))
    store.setup()  # a handle per open: each its own engine, as hosts have
    return _ClosingSql(store)


class _ClosingSql(SqlLiveCache):
    """The SQL live cache on its own store's engine, disposed with it."""

    def __init__(self, store: SqlStore) -> None:
        super().__init__(store.engine)
        self._store = store

    def close(self) -> None:
        self._store.close()


def _redis_cache(request: pytest.FixtureRequest, *, cluster: bool) -> LiveCache:
    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    cache = RedisLiveCache.from_url(url)
    assert cache.cluster is cluster  # detected, not forced
    return cache


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def open_cache(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[[], LiveCache]]:
    """Opens handles on one shared store (one directory / one Redis db / one dict)."""
    opened: list[LiveCache] = []
    shared_memory = InMemoryLiveCache()

    def open_one() -> LiveCache:
        if backend == "memory":
            cache: LiveCache = shared_memory
        elif backend == "disk":
            cache = DiskLiveCache(tmp_path / "cache")
        elif backend.startswith("sql-"):
            cache = _sql_cache(request, tmp_path)
        else:
            cache = _redis_cache(request, cluster=backend == "redis-cluster")
        opened.append(cache)
        return cache

    yield open_one
    for cache in opened:
        cache.close()


@pytest.fixture
def cache(open_cache: Callable[[], LiveCache]) -> LiveCache:
    return open_cache()


def put(cache: LiveCache, key: str, value: CacheValue | None, ttl: float | None = None) -> None:
    cache.atomic([key], lambda _current: {key: Write(value, ttl)})


def bump(key: str) -> Callable[[Mapping[str, CacheValue | None]], dict[str, Write]]:
    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        value = current[key] or {"n": 0}
        return {key: Write({"n": value["n"] + 1})}

    return fn


# -- reads ------------------------------------------------------------------------------


def test_get_of_a_missing_key_is_none(cache: LiveCache) -> None:
    assert cache.get("shortterm:user:nobody:c") is None
    assert cache.get_many(["a", "b"]) == {}


def test_get_many_returns_only_present_keys(cache: LiveCache) -> None:
    put(cache, "k1", {"v": 1})
    put(cache, "k3", {"v": 3})
    assert cache.get_many(["k1", "k2", "k3"]) == {"k1": {"v": 1}, "k3": {"v": 3}}
    assert cache.get("k1") == {"v": 1}


VALUE: CacheValue = {
    "summary": "Ann → Bob: «on se voit demain» 🌙 — 日本語も",
    "n": 42,
    "neg": -7,
    "ratio": 0.25,
    "flag": True,
    "off": False,
    "nothing": None,
    "list": [1, "two", {"three": [3]}],
    "nested": {"deep": {"deeper": {"z": 1, "a": 2}}},
    "empty": {},
    "long": "x" * 20_000,
}


def test_values_round_trip_unchanged(cache: LiveCache) -> None:
    key = "shortterm:server:g%3A1:c 1:persona/ü"
    put(cache, key, VALUE)
    got = cache.get(key)
    assert got == VALUE
    # Key order inside a value is preserved (categories rely on it).
    assert list(got["nested"]["deep"]["deeper"]) == ["z", "a"]
    assert list(cache.iter_keys("shortterm:server:")) == [key]


def test_returned_values_are_copies(cache: LiveCache) -> None:
    put(cache, "k", {"list": [1]})
    got = cache.get("k")
    assert got is not None
    got["list"].append(2)
    assert cache.get("k") == {"list": [1]}


# -- atomic -----------------------------------------------------------------------------


def test_atomic_sees_current_values_and_returns_the_state_after(cache: LiveCache) -> None:
    put(cache, "a", {"n": 1})
    seen: list[dict[str, CacheValue | None]] = []

    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        seen.append(dict(current))
        return {"a": Write({"n": current["a"]["n"] + 1}), "b": Write({"n": 10})}  # type: ignore[index]

    result = cache.atomic(["a", "b", "c"], fn)
    assert seen[-1] == {"a": {"n": 1}, "b": None, "c": None}
    assert result == {"a": {"n": 2}, "b": {"n": 10}, "c": None}
    assert cache.get_many(["a", "b", "c"]) == {"a": {"n": 2}, "b": {"n": 10}}


def test_atomic_write_none_deletes(cache: LiveCache) -> None:
    put(cache, "a", {"n": 1})
    result = cache.atomic(["a"], lambda _c: {"a": Write(None)})
    assert result == {"a": None}
    assert cache.get("a") is None


def test_atomic_without_writes_changes_nothing(cache: LiveCache) -> None:
    put(cache, "a", {"n": 1})
    assert cache.atomic(["a"], lambda _c: {}) == {"a": {"n": 1}}
    assert cache.get("a") == {"n": 1}


def test_atomic_is_all_or_nothing_when_fn_raises(cache: LiveCache) -> None:
    put(cache, "a", {"n": 1})

    def boom(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        raise RuntimeError("decided nothing")

    with pytest.raises(RuntimeError, match="decided nothing"):
        cache.atomic(["a", "b"], boom)
    assert cache.get_many(["a", "b"]) == {"a": {"n": 1}}


def test_atomic_increments_from_threads_are_never_lost(
    open_cache: Callable[[], LiveCache],
) -> None:
    threads, per_thread = 8, 40
    caches = [open_cache() for _ in range(2)]  # two handles on the same store

    def work(i: int) -> None:
        handle = caches[i % 2]
        for _ in range(per_thread):
            handle.atomic(["counter"], bump("counter"))

    run_threads(threads, work, timeout=60)
    assert caches[0].get("counter") == {"n": threads * per_thread}


def test_atomic_multi_key_writes_stay_consistent_under_threads(cache: LiveCache) -> None:
    # Two keys moved together: a reader-writer race would let their sum drift.
    put(cache, "left", {"n": 500})
    put(cache, "right", {"n": 500})

    def move(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        left, right = current["left"], current["right"]
        assert left is not None and right is not None
        return {"left": Write({"n": left["n"] - 1}), "right": Write({"n": right["n"] + 1})}

    def work(_i: int) -> None:
        for _ in range(25):
            cache.atomic(["left", "right"], move)

    run_threads(6, work, timeout=60)
    got = cache.get_many(["left", "right"])
    assert got == {"left": {"n": 350}, "right": {"n": 650}}


@pytest.mark.slow
def test_disk_atomic_increments_from_two_processes(tmp_path: Path) -> None:
    directory = tmp_path / "shared-cache"
    DiskLiveCache(directory).close()
    gate = Gate(tmp_path / "gate")
    procs = [
        start_worker(
            "disk_increments", directory=str(directory), key="k", count=150, gate=str(gate)
        )
        for _ in range(2)
    ]
    local = DiskLiveCache(directory)
    try:
        gate.open_when_ready(2)
        for _ in range(50):
            local.atomic(["k"], bump("k"))
        assert [finish_worker(p) for p in procs] == [150, 150]
        assert local.get("k") == {"n": 350}
    finally:
        local.close()


# -- add / delete / keys ----------------------------------------------------------------


def test_add_many_never_overwrites(cache: LiveCache) -> None:
    put(cache, "old", {"v": "kept"})
    added = cache.add_many({"old": Write({"v": "new"}), "fresh": Write({"v": 1})})
    assert added == 1
    assert cache.get_many(["old", "fresh"]) == {"old": {"v": "kept"}, "fresh": {"v": 1}}
    assert cache.add_many({"old": Write({"v": "again"}), "fresh": Write({"v": 2})}) == 0
    assert cache.get("fresh") == {"v": 1}


def test_add_many_skips_none_values(cache: LiveCache) -> None:
    assert cache.add_many({"x": Write(None)}) == 0
    assert cache.get("x") is None


def test_add_many_refills_a_key_whose_native_ttl_ran_out(cache: LiveCache) -> None:
    put(cache, "short", {"v": "old"}, ttl=0.2)
    assert wait_until(lambda: cache.get("short") is None, timeout=5)
    assert cache.add_many({"short": Write({"v": "new"})}) == 1
    assert cache.get("short") == {"v": "new"}


def test_delete_many_removes_and_counts_existing_keys(cache: LiveCache) -> None:
    for key in ("a", "b", "c"):
        put(cache, key, {"k": key})
    assert cache.delete_many(["a", "c", "missing"]) == 2
    assert cache.get_many(["a", "b", "c"]) == {"b": {"k": "b"}}
    assert cache.delete_many([]) == 0


def test_iter_keys_filters_by_prefix(cache: LiveCache) -> None:
    keys = [
        "shortterm:user:u1:c1",
        "shortterm:user:u1:c2",
        "shortterm:server:g1:c1",
        "shortterm:index:user:u1",
        "other:thing",
    ]
    for key in keys:
        put(cache, key, {"k": key})
    assert sorted(cache.iter_keys("shortterm:user:")) == keys[:2]
    assert sorted(cache.iter_keys("shortterm:")) == sorted(keys[:4])
    assert sorted(cache.iter_keys()) == sorted(keys)
    # Glob-looking characters are literal in a prefix.
    assert list(cache.iter_keys("shortterm:*")) == []
    assert cache.count("shortterm:user:u1:") == 2


# -- native TTL -------------------------------------------------------------------------


def test_native_ttl_expires_values(cache: LiveCache) -> None:
    put(cache, "brief", {"v": 1}, ttl=0.3)
    put(cache, "lasting", {"v": 2}, ttl=3600)
    put(cache, "forever", {"v": 3})
    assert cache.get("brief") == {"v": 1}
    assert wait_until(lambda: cache.get("brief") is None, timeout=5)
    assert cache.get_many(["brief", "lasting", "forever"]) == {
        "lasting": {"v": 2},
        "forever": {"v": 3},
    }
    assert sorted(cache.iter_keys()) == ["forever", "lasting"]
    cache.expire()  # reclaiming space never drops a live value
    assert sorted(cache.iter_keys()) == ["forever", "lasting"]
    # An expired key reads as absent inside atomic too.
    assert cache.atomic(["brief"], lambda current: {})["brief"] is None


def test_iter_keys_skips_values_that_expired_unread(cache: LiveCache) -> None:
    for i in range(5):
        put(cache, f"brief:{i}", {"v": i}, ttl=0.2)
    put(cache, "kept", {"v": 0})
    time.sleep(0.3)  # no read in between: the scan itself meets the expired values
    assert list(cache.iter_keys()) == ["kept"]
    assert cache.count("brief:") == 0


def test_atomic_write_sets_a_fresh_ttl(cache: LiveCache) -> None:
    put(cache, "k", {"v": 1}, ttl=3600)
    put(cache, "k", {"v": 2}, ttl=0.3)
    assert wait_until(lambda: cache.get("k") is None, timeout=5)


# -- ordered indexes --------------------------------------------------------------------

# Engine-shaped names: on a cluster an entry key and its owner's index lie in different
# hash slots, so these tests also cover ranks applied after the values' EXEC.
SERVER_INDEX = index_key("server", "g1")


def entry(channel: str, owner: str = "g1") -> str:
    return Scope(channel_id=channel, user_id="u1", server_id=owner).live_key


def ranked_all(cache: LiveCache, index: str) -> list[tuple[str, float]]:
    return cache.ranked(index, count=1000)


def test_ranked_orders_by_score_desc_then_member_asc(cache: LiveCache) -> None:
    cache.rank_many(
        "recent", {"b": 2.0, "a": 2.0, "c": 3.5, "d": -1.5, "e": 0.0, "ü": 2.0, "B": 2.0}
    )
    assert ranked_all(cache, "recent") == [
        ("c", 3.5),
        ("B", 2.0),
        ("a", 2.0),
        ("b", 2.0),
        ("ü", 2.0),
        ("e", 0.0),
        ("d", -1.5),
    ]


def test_ranked_pages_never_overlap_or_skip(cache: LiveCache) -> None:
    # Scores with ties, so the member order inside a score decides page boundaries.
    members = {f"m{i:02d}": float(i // 3) for i in range(10)}
    cache.rank_many(SERVER_INDEX, members)
    whole = ranked_all(cache, SERVER_INDEX)
    assert len(whole) == 10
    pages = [cache.ranked(SERVER_INDEX, offset=offset, count=3) for offset in (0, 3, 6, 9)]
    assert [len(page) for page in pages] == [3, 3, 3, 1]
    assert [row for page in pages for row in page] == whole
    assert whole[0] == ("m09", 3.0) and whole[-1] == ("m02", 0.0)
    assert cache.ranked(SERVER_INDEX, offset=10, count=3) == []
    assert cache.ranked(SERVER_INDEX, count=0) == []
    assert cache.ranked(SERVER_INDEX, count=2) == whole[:2]  # offset defaults to 0


def test_a_missing_index_is_empty(cache: LiveCache) -> None:
    assert cache.ranked("never-written", count=10) == []
    assert cache.ranked(SERVER_INDEX, offset=5, count=10) == []


def test_write_rank_sets_replaces_and_removes_with_the_value(cache: LiveCache) -> None:
    key = entry("c1")

    def write(value: CacheValue | None, score: float | None) -> None:
        cache.atomic([key], lambda _c: {key: Write(value, rank=Rank(SERVER_INDEX, score))})

    write({"v": 1}, 5.0)
    assert cache.get(key) == {"v": 1}
    assert ranked_all(cache, SERVER_INDEX) == [(key, 5.0)]
    write({"v": 2}, 1.0)  # a write replaces the score, even with a lower one
    assert cache.get(key) == {"v": 2}
    assert ranked_all(cache, SERVER_INDEX) == [(key, 1.0)]
    write({"v": 3}, None)
    assert cache.get(key) == {"v": 3}
    assert ranked_all(cache, SERVER_INDEX) == []
    write(None, 4.0)  # members are listed whatever became of their values
    assert cache.get(key) is None
    assert ranked_all(cache, SERVER_INDEX) == [(key, 4.0)]


def test_one_atomic_write_ranks_a_scope_in_both_owner_indexes(cache: LiveCache) -> None:
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    server_key = scope.server_key
    assert server_key is not None
    user_index = index_key("user", "u1")

    def fn(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        return {
            scope.user_key: Write({"who": "user"}, rank=Rank(user_index, 10.0)),
            server_key: Write({"who": "server"}, rank=Rank(SERVER_INDEX, 20.0)),
        }

    result = cache.atomic(list(scope.keys), fn)
    assert result == {scope.user_key: {"who": "user"}, server_key: {"who": "server"}}
    assert ranked_all(cache, user_index) == [(scope.user_key, 10.0)]
    assert ranked_all(cache, SERVER_INDEX) == [(server_key, 20.0)]


def test_a_rank_is_not_applied_when_the_atomic_fn_raises(cache: LiveCache) -> None:
    key = entry("c1")
    cache.atomic([key], lambda _c: {key: Write({"v": 1}, rank=Rank(SERVER_INDEX, 1.0))})
    calls = 0

    def boom(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("decided nothing")
        return {}

    with pytest.raises(RuntimeError, match="decided nothing"):
        cache.atomic([key, entry("c1", owner="g2")], boom)
    assert ranked_all(cache, SERVER_INDEX) == [(key, 1.0)]
    assert cache.get(key) == {"v": 1}


def test_rank_many_keeps_the_higher_score_and_none_removes(cache: LiveCache) -> None:
    cache.rank_many(SERVER_INDEX, {"a": 5.0, "b": 1.0, "c": 2.0})
    cache.rank_many(SERVER_INDEX, {"a": 3.0, "b": 4.0, "c": None, "d": 0.5, "e": None})
    assert ranked_all(cache, SERVER_INDEX) == [("a", 5.0), ("b", 4.0), ("d", 0.5)]
    cache.rank_many(SERVER_INDEX, {"a": 5.0, "d": 7.0})  # equal keeps, higher moves up
    assert ranked_all(cache, SERVER_INDEX) == [("d", 7.0), ("a", 5.0), ("b", 4.0)]
    cache.rank_many(SERVER_INDEX, {})
    cache.rank_many(SERVER_INDEX, dict.fromkeys(("a", "b", "d")))
    assert ranked_all(cache, SERVER_INDEX) == []


def test_add_many_ranks_only_the_keys_it_adds(cache: LiveCache) -> None:
    old, new = entry("c1"), entry("c2")
    cache.atomic([old], lambda _c: {old: Write({"v": "old"}, rank=Rank(SERVER_INDEX, 5.0))})
    added = cache.add_many(
        {
            old: Write({"v": "stale"}, rank=Rank(SERVER_INDEX, 9.0)),
            new: Write({"v": "new"}, ttl=60, rank=Rank(SERVER_INDEX, 1.0)),
            entry("c3"): Write(None, rank=Rank(SERVER_INDEX, 3.0)),
        }
    )
    assert added == 1
    assert cache.get_many([old, new]) == {old: {"v": "old"}, new: {"v": "new"}}
    assert ranked_all(cache, SERVER_INDEX) == [(old, 5.0), (new, 1.0)]


def test_iter_keys_never_lists_indexes(cache: LiveCache) -> None:
    key = entry("c1")
    cache.atomic([key], lambda _c: {key: Write({"v": 1}, rank=Rank(SERVER_INDEX, 1.0))})
    cache.rank_many(index_key("user", "u1"), {key: 2.0})
    cache.rank_many("shortterm:index:server:g9", {"x": 1.0})  # an index and no value
    cache.rank_many("other", {"y": 1.0})
    assert list(cache.iter_keys()) == [key]
    assert list(cache.iter_keys("shortterm:index:")) == []
    assert cache.count() == 1
    assert cache.get_many([SERVER_INDEX, "other"]) == {}


def test_an_index_may_share_its_name_with_a_value(cache: LiveCache) -> None:
    for name in ("shared", SERVER_INDEX, entry("c1")):
        put(cache, name, {"v": name})
        cache.rank_many(name, {"m": 1.0})
        assert cache.get(name) == {"v": name}
        assert ranked_all(cache, name) == [("m", 1.0)]
    assert cache.delete_many(["shared"]) == 1  # deleting the value leaves the index
    assert ranked_all(cache, "shared") == [("m", 1.0)]
    cache.rank_many(SERVER_INDEX, {"m": None})  # emptying the index leaves the value
    assert cache.get(SERVER_INDEX) == {"v": SERVER_INDEX}
    assert sorted(cache.iter_keys()) == sorted([SERVER_INDEX, entry("c1")])


def test_concurrent_rankers_of_one_index_lose_nothing(
    open_cache: Callable[[], LiveCache],
) -> None:
    # Each thread bumps its own entry and moves it in the shared index with every
    # write; writers of different members never conflict on the index.
    threads, per_thread = 6, 15
    caches = [open_cache() for _ in range(2)]

    def work(i: int) -> None:
        key, handle = entry(f"c{i}"), caches[i % 2]

        def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            n = (current[key] or {"n": 0})["n"] + 1
            return {key: Write({"n": n}, rank=Rank(SERVER_INDEX, float(n * 100 + i)))}

        for _ in range(per_thread):
            handle.atomic([key], fn)

    run_threads(threads, work, timeout=60)
    expected = [(entry(f"c{i}"), float(per_thread * 100 + i)) for i in reversed(range(threads))]
    assert ranked_all(caches[0], SERVER_INDEX) == expected
    keys = [entry(f"c{i}") for i in range(threads)]
    assert caches[1].get_many(keys) == {key: {"n": per_thread} for key in keys}


# -- Redis Cluster only -----------------------------------------------------------------


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

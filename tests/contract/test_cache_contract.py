"""The live-cache contract: every backend (in-memory, diskcache, Redis) passes it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from helpers.subproc import Gate, finish_worker, start_worker
from helpers.threads import run_threads
from helpers.waiting import wait_until

from stm_memory.cache.base import CacheValue, LiveCache, Write
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.memory import InMemoryLiveCache

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("disk", id="disk"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
]


def _redis_cache(request: pytest.FixtureRequest) -> LiveCache:
    url = request.getfixturevalue("redis_url")
    from stm_memory.cache.redis import RedisLiveCache

    return RedisLiveCache.from_url(url)


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
        else:
            cache = _redis_cache(request)
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


# -- async twins ------------------------------------------------------------------------


def test_async_twins_match_the_sync_methods(cache: LiveCache) -> None:
    async def scenario() -> None:
        result = await cache.aatomic(["a"], bump("a"))
        assert result == {"a": {"n": 1}}
        await asyncio.gather(*(cache.aatomic(["a"], bump("a")) for _ in range(10)))
        assert await cache.aget("a") == {"n": 11}
        assert await cache.aget_many(["a", "zz"]) == {"a": {"n": 11}}
        assert await cache.aadd_many({"a": Write({"n": 0}), "b": Write({"n": 0})}) == 1
        assert await cache.adelete_many(["a", "b", "c"]) == 2
        assert await cache.aget("a") is None

    asyncio.run(scenario())

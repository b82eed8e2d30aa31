"""The live-cache contract: what every :class:`~stm_memory.cache.LiveCache` backend does.

Subclass :class:`LiveCacheContract` in a test module and give it an
``open_live_cache`` fixture (see :mod:`stm_memory.testing.contract`). The suite writes
and reads plain keys, entry keys and ordered indexes through the seam only, so it
holds for any backend; it needs one that starts empty, whose native TTLs run out
within a second or so, and whose handles are safe to use from several threads.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping

import pytest

from stm_memory.cache.base import CacheValue, LiveCache, Rank, Write
from stm_memory.model import KEY_PREFIX, Scope, index_key, key_for
from stm_memory.testing.contract._support import run_threads, wait_until

__all__ = ["LiveCacheContract"]


def put(cache: LiveCache, key: str, value: CacheValue | None, ttl: float | None = None) -> None:
    cache.atomic([key], lambda _current: {key: Write(value, ttl)})


def bump(key: str) -> Callable[[Mapping[str, CacheValue | None]], dict[str, Write]]:
    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        value = current[key] or {"n": 0}
        return {key: Write({"n": value["n"] + 1})}

    return fn


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

# Engine-shaped names: on a cluster an entry key and its owner's index lie in different
# hash slots, so the index tests also cover ranks applied after the values' EXEC.
SERVER_INDEX = index_key("server", "g1")
# What every index key starts with, from the codec rather than spelled out here.
INDEX_PREFIX = os.path.commonprefix(  # noqa: RUF071 - a prefix of strings, not of paths
    [index_key("server", "g1"), index_key("user", "u1")]
)


def entry(channel: str, owner: str = "g1") -> str:
    return Scope(channel_id=channel, user_id="u1", server_id=owner).live_key


def ranked_all(cache: LiveCache, index: str) -> list[tuple[str, float]]:
    return cache.ranked(index, count=1000)


class LiveCacheContract:
    """The tests every live cache passes. A subclass provides ``open_live_cache``: a
    fixture returning a callable that opens a new handle on one shared, empty
    backend (the same directory, database or dict each time), and closes every
    handle it opened after the test. :func:`~stm_memory.testing.contract.opened_handles`
    does the bookkeeping."""

    @pytest.fixture
    def open_live_cache(self) -> Callable[[], LiveCache]:
        pytest.fail(
            f"{type(self).__name__} must define an open_live_cache fixture "
            "(see stm_memory.testing.contract)",
            pytrace=False,
        )

    @pytest.fixture
    def live_cache(self, open_live_cache: Callable[[], LiveCache]) -> LiveCache:
        """One handle on the backend."""
        return open_live_cache()

    # -- reads -------------------------------------------------------------------------

    def test_get_of_a_missing_key_is_none(self, live_cache: LiveCache) -> None:
        assert live_cache.get(key_for("user", "nobody", "c")) is None
        assert live_cache.get_many(["a", "b"]) == {}

    def test_get_many_returns_only_present_keys(self, live_cache: LiveCache) -> None:
        put(live_cache, "k1", {"v": 1})
        put(live_cache, "k3", {"v": 3})
        assert live_cache.get_many(["k1", "k2", "k3"]) == {"k1": {"v": 1}, "k3": {"v": 3}}
        assert live_cache.get("k1") == {"v": 1}

    def test_values_round_trip_unchanged(self, live_cache: LiveCache) -> None:
        key = key_for("server", "g:1", "c 1", "persona/ü")
        put(live_cache, key, VALUE)
        got = live_cache.get(key)
        assert got == VALUE
        # Key order inside a value is preserved (categories rely on it).
        assert list(got["nested"]["deep"]["deeper"]) == ["z", "a"]
        assert list(live_cache.iter_keys(f"{KEY_PREFIX}:server:")) == [key]

    def test_returned_values_are_copies(self, live_cache: LiveCache) -> None:
        put(live_cache, "k", {"list": [1]})
        got = live_cache.get("k")
        assert got is not None
        got["list"].append(2)
        assert live_cache.get("k") == {"list": [1]}

    def test_read_many_reads_what_get_many_reads_after_every_change(
        self, live_cache: LiveCache
    ) -> None:
        # read_many may share values between reads of an unchanged key: it must never
        # hand back a value the key no longer holds, nor one a get_many caller changed.
        put(live_cache, "k1", {"v": 1})
        put(live_cache, "k2", {"v": 2})
        assert live_cache.read_many(["k1", "k2", "k3"]) == {"k1": {"v": 1}, "k2": {"v": 2}}
        mine = live_cache.get_many(["k1"])["k1"]
        mine["v"] = 99
        live_cache.atomic(["k2"], lambda current: {"k2": Write({"v": current["k2"]["v"] + 1})})  # type: ignore[index]
        assert live_cache.read_many(["k1", "k2"]) == {"k1": {"v": 1}, "k2": {"v": 3}}
        put(live_cache, "k1", {"v": 4})
        live_cache.delete_many(["k2"])
        assert live_cache.read_many(["k1", "k2"]) == {"k1": {"v": 4}}
        assert live_cache.read_many(["k1"]) == live_cache.get_many(["k1"])

    # -- atomic ------------------------------------------------------------------------

    def test_atomic_sees_current_values_and_returns_the_state_after(
        self, live_cache: LiveCache
    ) -> None:
        put(live_cache, "a", {"n": 1})
        seen: list[dict[str, CacheValue | None]] = []

        def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            seen.append(dict(current))
            return {"a": Write({"n": current["a"]["n"] + 1}), "b": Write({"n": 10})}  # type: ignore[index]

        result = live_cache.atomic(["a", "b", "c"], fn)
        assert seen[-1] == {"a": {"n": 1}, "b": None, "c": None}
        assert result == {"a": {"n": 2}, "b": {"n": 10}, "c": None}
        assert live_cache.get_many(["a", "b", "c"]) == {"a": {"n": 2}, "b": {"n": 10}}

    def test_atomic_write_none_deletes(self, live_cache: LiveCache) -> None:
        put(live_cache, "a", {"n": 1})
        result = live_cache.atomic(["a"], lambda _c: {"a": Write(None)})
        assert result == {"a": None}
        assert live_cache.get("a") is None

    def test_atomic_without_writes_changes_nothing(self, live_cache: LiveCache) -> None:
        put(live_cache, "a", {"n": 1})
        assert live_cache.atomic(["a"], lambda _c: {}) == {"a": {"n": 1}}
        assert live_cache.get("a") == {"n": 1}

    def test_atomic_is_all_or_nothing_when_fn_raises(self, live_cache: LiveCache) -> None:
        put(live_cache, "a", {"n": 1})

        def boom(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            raise RuntimeError("decided nothing")

        with pytest.raises(RuntimeError, match="decided nothing"):
            live_cache.atomic(["a", "b"], boom)
        assert live_cache.get_many(["a", "b"]) == {"a": {"n": 1}}

    def test_atomic_increments_from_threads_are_never_lost(
        self,
        open_live_cache: Callable[[], LiveCache],
    ) -> None:
        threads, per_thread = 8, 40
        caches = [open_live_cache() for _ in range(2)]  # two handles on the same store

        def work(i: int) -> None:
            handle = caches[i % 2]
            for _ in range(per_thread):
                handle.atomic(["counter"], bump("counter"))

        run_threads(threads, work, timeout=60)
        assert caches[0].get("counter") == {"n": threads * per_thread}

    def test_atomic_multi_key_writes_stay_consistent_under_threads(
        self, live_cache: LiveCache
    ) -> None:
        # Two keys moved together: a reader-writer race would let their sum drift.
        put(live_cache, "left", {"n": 500})
        put(live_cache, "right", {"n": 500})

        def move(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            left, right = current["left"], current["right"]
            assert left is not None and right is not None
            return {"left": Write({"n": left["n"] - 1}), "right": Write({"n": right["n"] + 1})}

        def work(_i: int) -> None:
            for _ in range(25):
                live_cache.atomic(["left", "right"], move)

        run_threads(6, work, timeout=60)
        got = live_cache.get_many(["left", "right"])
        assert got == {"left": {"n": 350}, "right": {"n": 650}}

    # -- add / delete / keys -----------------------------------------------------------

    def test_add_many_never_overwrites(self, live_cache: LiveCache) -> None:
        put(live_cache, "old", {"v": "kept"})
        added = live_cache.add_many({"old": Write({"v": "new"}), "fresh": Write({"v": 1})})
        assert added == 1
        assert live_cache.get_many(["old", "fresh"]) == {"old": {"v": "kept"}, "fresh": {"v": 1}}
        assert live_cache.add_many({"old": Write({"v": "again"}), "fresh": Write({"v": 2})}) == 0
        assert live_cache.get("fresh") == {"v": 1}

    def test_add_many_skips_none_values(self, live_cache: LiveCache) -> None:
        assert live_cache.add_many({"x": Write(None)}) == 0
        assert live_cache.get("x") is None

    def test_add_many_refills_a_key_whose_native_ttl_ran_out(self, live_cache: LiveCache) -> None:
        put(live_cache, "short", {"v": "old"}, ttl=0.2)
        assert wait_until(lambda: live_cache.get("short") is None, timeout=5)
        assert live_cache.add_many({"short": Write({"v": "new"})}) == 1
        assert live_cache.get("short") == {"v": "new"}

    def test_delete_many_removes_and_counts_existing_keys(self, live_cache: LiveCache) -> None:
        for key in ("a", "b", "c"):
            put(live_cache, key, {"k": key})
        assert live_cache.delete_many(["a", "c", "missing"]) == 2
        assert live_cache.get_many(["a", "b", "c"]) == {"b": {"k": "b"}}
        assert live_cache.delete_many([]) == 0

    def test_iter_keys_filters_by_prefix(self, live_cache: LiveCache) -> None:
        keys = [
            key_for("user", "u1", "c1"),
            key_for("user", "u1", "c2"),
            key_for("server", "g1", "c1"),
            index_key("user", "u1"),  # a value may have an index's name
            "other:thing",
        ]
        for key in keys:
            put(live_cache, key, {"k": key})
        assert sorted(live_cache.iter_keys(f"{KEY_PREFIX}:user:")) == keys[:2]
        assert sorted(live_cache.iter_keys(f"{KEY_PREFIX}:")) == sorted(keys[:4])
        assert sorted(live_cache.iter_keys()) == sorted(keys)
        # Glob-looking characters are literal in a prefix.
        assert list(live_cache.iter_keys(f"{KEY_PREFIX}:*")) == []
        assert live_cache.count(keys[0].removesuffix("c1"))  # u1's user keys == 2

    # -- native TTL --------------------------------------------------------------------

    def test_native_ttl_expires_values(self, live_cache: LiveCache) -> None:
        put(live_cache, "brief", {"v": 1}, ttl=0.3)
        put(live_cache, "lasting", {"v": 2}, ttl=3600)
        put(live_cache, "forever", {"v": 3})
        assert live_cache.get("brief") == {"v": 1}
        assert wait_until(lambda: live_cache.get("brief") is None, timeout=5)
        assert live_cache.get_many(["brief", "lasting", "forever"]) == {
            "lasting": {"v": 2},
            "forever": {"v": 3},
        }
        assert sorted(live_cache.iter_keys()) == ["forever", "lasting"]
        live_cache.expire()  # reclaiming space never drops a live value
        assert sorted(live_cache.iter_keys()) == ["forever", "lasting"]
        # An expired key reads as absent inside atomic too.
        assert live_cache.atomic(["brief"], lambda current: {})["brief"] is None

    def test_iter_keys_skips_values_that_expired_unread(self, live_cache: LiveCache) -> None:
        for i in range(5):
            put(live_cache, f"brief:{i}", {"v": i}, ttl=0.2)
        put(live_cache, "kept", {"v": 0})
        time.sleep(0.3)  # no read in between: the scan itself meets the expired values
        assert list(live_cache.iter_keys()) == ["kept"]
        assert live_cache.count("brief:") == 0

    def test_atomic_write_sets_a_fresh_ttl(self, live_cache: LiveCache) -> None:
        put(live_cache, "k", {"v": 1}, ttl=3600)
        put(live_cache, "k", {"v": 2}, ttl=0.3)
        assert wait_until(lambda: live_cache.get("k") is None, timeout=5)

    # -- ordered indexes ---------------------------------------------------------------

    def test_ranked_orders_by_score_desc_then_member_asc(self, live_cache: LiveCache) -> None:
        live_cache.rank_many(
            "recent", {"b": 2.0, "a": 2.0, "c": 3.5, "d": -1.5, "e": 0.0, "ü": 2.0, "B": 2.0}
        )
        assert ranked_all(live_cache, "recent") == [
            ("c", 3.5),
            ("B", 2.0),
            ("a", 2.0),
            ("b", 2.0),
            ("ü", 2.0),
            ("e", 0.0),
            ("d", -1.5),
        ]

    def test_ranked_pages_never_overlap_or_skip(self, live_cache: LiveCache) -> None:
        # Scores with ties, so the member order inside a score decides page boundaries.
        members = {f"m{i:02d}": float(i // 3) for i in range(10)}
        live_cache.rank_many(SERVER_INDEX, members)
        whole = ranked_all(live_cache, SERVER_INDEX)
        assert len(whole) == 10
        pages = [live_cache.ranked(SERVER_INDEX, offset=offset, count=3) for offset in (0, 3, 6, 9)]
        assert [len(page) for page in pages] == [3, 3, 3, 1]
        assert [row for page in pages for row in page] == whole
        assert whole[0] == ("m09", 3.0) and whole[-1] == ("m02", 0.0)
        assert live_cache.ranked(SERVER_INDEX, offset=10, count=3) == []
        assert live_cache.ranked(SERVER_INDEX, count=0) == []
        assert live_cache.ranked(SERVER_INDEX, count=2) == whole[:2]  # offset defaults to 0

    def test_a_missing_index_is_empty(self, live_cache: LiveCache) -> None:
        assert live_cache.ranked("never-written", count=10) == []
        assert live_cache.ranked(SERVER_INDEX, offset=5, count=10) == []

    def test_write_rank_sets_replaces_and_removes_with_the_value(
        self, live_cache: LiveCache
    ) -> None:
        key = entry("c1")

        def write(value: CacheValue | None, score: float | None) -> None:
            live_cache.atomic([key], lambda _c: {key: Write(value, rank=Rank(SERVER_INDEX, score))})

        write({"v": 1}, 5.0)
        assert live_cache.get(key) == {"v": 1}
        assert ranked_all(live_cache, SERVER_INDEX) == [(key, 5.0)]
        write({"v": 2}, 1.0)  # a write replaces the score, even with a lower one
        assert live_cache.get(key) == {"v": 2}
        assert ranked_all(live_cache, SERVER_INDEX) == [(key, 1.0)]
        write({"v": 3}, None)
        assert live_cache.get(key) == {"v": 3}
        assert ranked_all(live_cache, SERVER_INDEX) == []
        write(None, 4.0)  # members are listed whatever became of their values
        assert live_cache.get(key) is None
        assert ranked_all(live_cache, SERVER_INDEX) == [(key, 4.0)]

    def test_one_atomic_write_ranks_a_scope_in_both_owner_indexes(
        self, live_cache: LiveCache
    ) -> None:
        scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
        server_key = scope.server_key
        assert server_key is not None
        user_index = index_key("user", "u1")

        def fn(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            return {
                scope.user_key: Write({"who": "user"}, rank=Rank(user_index, 10.0)),
                server_key: Write({"who": "server"}, rank=Rank(SERVER_INDEX, 20.0)),
            }

        result = live_cache.atomic(list(scope.keys), fn)
        assert result == {scope.user_key: {"who": "user"}, server_key: {"who": "server"}}
        assert ranked_all(live_cache, user_index) == [(scope.user_key, 10.0)]
        assert ranked_all(live_cache, SERVER_INDEX) == [(server_key, 20.0)]

    def test_a_rank_is_not_applied_when_the_atomic_fn_raises(self, live_cache: LiveCache) -> None:
        key = entry("c1")
        live_cache.atomic([key], lambda _c: {key: Write({"v": 1}, rank=Rank(SERVER_INDEX, 1.0))})
        calls = 0

        def boom(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise RuntimeError("decided nothing")
            return {}

        with pytest.raises(RuntimeError, match="decided nothing"):
            live_cache.atomic([key, entry("c1", owner="g2")], boom)
        assert ranked_all(live_cache, SERVER_INDEX) == [(key, 1.0)]
        assert live_cache.get(key) == {"v": 1}

    def test_rank_many_keeps_the_higher_score_and_none_removes(self, live_cache: LiveCache) -> None:
        live_cache.rank_many(SERVER_INDEX, {"a": 5.0, "b": 1.0, "c": 2.0})
        live_cache.rank_many(SERVER_INDEX, {"a": 3.0, "b": 4.0, "c": None, "d": 0.5, "e": None})
        assert ranked_all(live_cache, SERVER_INDEX) == [("a", 5.0), ("b", 4.0), ("d", 0.5)]
        live_cache.rank_many(SERVER_INDEX, {"a": 5.0, "d": 7.0})  # equal keeps, higher moves up
        assert ranked_all(live_cache, SERVER_INDEX) == [("d", 7.0), ("a", 5.0), ("b", 4.0)]
        live_cache.rank_many(SERVER_INDEX, {})
        live_cache.rank_many(SERVER_INDEX, dict.fromkeys(("a", "b", "d")))
        assert ranked_all(live_cache, SERVER_INDEX) == []

    def test_add_many_ranks_only_the_keys_it_adds(self, live_cache: LiveCache) -> None:
        old, new = entry("c1"), entry("c2")
        live_cache.atomic(
            [old], lambda _c: {old: Write({"v": "old"}, rank=Rank(SERVER_INDEX, 5.0))}
        )
        added = live_cache.add_many(
            {
                old: Write({"v": "stale"}, rank=Rank(SERVER_INDEX, 9.0)),
                new: Write({"v": "new"}, ttl=60, rank=Rank(SERVER_INDEX, 1.0)),
                entry("c3"): Write(None, rank=Rank(SERVER_INDEX, 3.0)),
            }
        )
        assert added == 1
        assert live_cache.get_many([old, new]) == {old: {"v": "old"}, new: {"v": "new"}}
        assert ranked_all(live_cache, SERVER_INDEX) == [(old, 5.0), (new, 1.0)]

    def test_iter_keys_never_lists_indexes(self, live_cache: LiveCache) -> None:
        key = entry("c1")
        live_cache.atomic([key], lambda _c: {key: Write({"v": 1}, rank=Rank(SERVER_INDEX, 1.0))})
        live_cache.rank_many(index_key("user", "u1"), {key: 2.0})
        live_cache.rank_many(index_key("server", "g9"), {"x": 1.0})  # an index and no value
        live_cache.rank_many("other", {"y": 1.0})
        assert list(live_cache.iter_keys()) == [key]
        assert list(live_cache.iter_keys(INDEX_PREFIX)) == []
        assert live_cache.count() == 1
        assert live_cache.get_many([SERVER_INDEX, "other"]) == {}

    def test_an_index_may_share_its_name_with_a_value(self, live_cache: LiveCache) -> None:
        for name in ("shared", SERVER_INDEX, entry("c1")):
            put(live_cache, name, {"v": name})
            live_cache.rank_many(name, {"m": 1.0})
            assert live_cache.get(name) == {"v": name}
            assert ranked_all(live_cache, name) == [("m", 1.0)]
        assert live_cache.delete_many(["shared"]) == 1  # deleting the value leaves the index
        assert ranked_all(live_cache, "shared") == [("m", 1.0)]
        live_cache.rank_many(SERVER_INDEX, {"m": None})  # emptying the index leaves the value
        assert live_cache.get(SERVER_INDEX) == {"v": SERVER_INDEX}
        assert sorted(live_cache.iter_keys()) == sorted([SERVER_INDEX, entry("c1")])

    def test_concurrent_rankers_of_one_index_lose_nothing(
        self,
        open_live_cache: Callable[[], LiveCache],
    ) -> None:
        # Each thread bumps its own entry and moves it in the shared index with every
        # write; writers of different members never conflict on the index.
        threads, per_thread = 6, 15
        caches = [open_live_cache() for _ in range(2)]

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

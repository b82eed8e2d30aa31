"""RedisLiveCache against a real Redis, on a database of its own per test session.

Skipped when Redis is unreachable, unless ``STM_REQUIRE_SERVICES=1`` (then it fails).
``STM_TEST_REDIS_URL`` overrides the server.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import redis

from stm_memory import CacheError, ConfigurationError, Scope, ShortTermMemory
from stm_memory.cache.base import AtomicFn, CacheValue, Write
from stm_memory.cache.redis import RedisLiveCache, redis_key
from stm_memory.cache.resilient import ResilientCache
from stm_memory.model import KEY_PREFIX

# Set for each test to the isolated database of the shared ``redis_url`` fixture (which
# skips, or fails under STM_REQUIRE_SERVICES=1, when Redis is unreachable): a fixed
# database would be flushed under parallel test sessions.
REDIS_URL = ""
DEAD_URL = "redis://127.0.0.1:1/0"  # port 1: nothing listens, the connect is refused

pytestmark = pytest.mark.redis


@pytest.fixture(autouse=True)
def _isolated_db(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "REDIS_URL", redis_url)


@pytest.fixture
def raw() -> Iterator[redis.Redis]:
    """A plain client on the test database, flushed before and after the test."""
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def cache(raw: redis.Redis) -> Iterator[RedisLiveCache]:
    c = RedisLiveCache.from_url(REDIS_URL)
    yield c
    c.close()


def incr(key: str, ttl: float | None = 60.0) -> AtomicFn:
    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        n = (current[key] or {"n": 0})["n"]
        return {key: Write({"n": n + 1}, ttl)}

    return fn


class Boom(Exception):
    pass


def explode(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
    raise Boom


# -- reads and writes --------------------------------------------------------------------


def test_round_trip_is_compact_utf8_json(cache: RedisLiveCache, raw: redis.Redis) -> None:
    value = {"summary": "café ☕ — ok", "n": [1, 2], "nested": {"a": None}}
    cache.atomic(["k1"], lambda cur: {"k1": Write(value, 60)})

    assert cache.get("k1") == value
    assert cache.get_many(["k1", "missing"]) == {"k1": value}
    assert cache.get_many([]) == {}
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert raw.get(redis_key("k1")) == expected


def test_native_ttls(cache: RedisLiveCache, raw: redis.Redis) -> None:
    cache.atomic(["a", "b"], lambda cur: {"a": Write({"x": 1}, 60), "b": Write({"x": 2})})
    cache.add_many({"c": Write({"x": 3}, 1.5)})

    assert 0 < raw.pttl(redis_key("a")) <= 60_000
    assert raw.pttl(redis_key("b")) == -1  # no TTL given: no expiry
    assert 0 < raw.pttl(redis_key("c")) <= 1_500
    assert cache.expire() == 0


def test_spent_ttl_expires_at_once(cache: RedisLiveCache) -> None:
    cache.atomic(["gone"], lambda cur: {"gone": Write({"x": 1}, 0)})
    # PX 1: gone within a few milliseconds, never an error for a non-positive TTL.
    for _ in range(100):
        if cache.get("gone") is None:
            break
        threading.Event().wait(0.005)
    assert cache.get("gone") is None


def test_atomic_returns_values_after_the_write_and_deletes(cache: RedisLiveCache) -> None:
    cache.atomic(["a", "b"], lambda cur: {"a": Write({"v": 1}), "b": Write({"v": 2})})

    result = cache.atomic(["a", "b"], lambda cur: {"a": Write(None)})

    assert result == {"a": None, "b": {"v": 2}}
    assert cache.get_many(["a", "b"]) == {"b": {"v": 2}}
    assert cache.atomic([], lambda cur: {}) == {}


def test_atomic_under_threads_loses_no_increment(raw: redis.Redis) -> None:
    # Two cache instances, as two workers would have, hammering one key.
    caches = [RedisLiveCache.from_url(REDIS_URL) for _ in range(2)]
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for _ in range(50):
                caches[i % 2].atomic(["ctr"], incr("ctr"))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in caches:
        c.close()

    assert errors == []
    assert json.loads(raw.get(redis_key("ctr")) or b"{}") == {"n": 400}


def test_atomic_fn_error_propagates_and_writes_nothing(
    cache: RedisLiveCache, raw: redis.Redis
) -> None:
    cache.atomic(["k"], incr("k"))

    with pytest.raises(Boom):
        cache.atomic(["k", "other"], explode)

    assert cache.get_many(["k", "other"]) == {"k": {"n": 1}}
    # The connection went back to the pool unwatched: the next update commits.
    assert cache.atomic(["k"], incr("k"))["k"] == {"n": 2}


def test_atomic_gives_up_after_bounded_retries(raw: redis.Redis) -> None:
    cache = RedisLiveCache(redis.Redis.from_url(REDIS_URL), max_attempts=3)
    calls = 0

    def always_raced(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        nonlocal calls
        calls += 1
        raw.set(redis_key("hot"), b'{"other":true}')  # a rival writer between WATCH and EXEC
        return {"hot": Write({"mine": True})}

    with pytest.raises(CacheError, match="3 races"):
        cache.atomic(["hot"], always_raced)
    assert calls == 3
    assert cache.get("hot") == {"other": True}
    cache.close()


def test_add_many_never_overwrites(cache: RedisLiveCache) -> None:
    cache.atomic(["live"], lambda cur: {"live": Write({"v": "new"})})

    added = cache.add_many(
        {
            "live": Write({"v": "stale"}, 60),
            "fresh": Write({"v": "loaded"}, 60),
            "skipped": Write(None),
        }
    )

    assert added == 1
    assert cache.get_many(["live", "fresh", "skipped"]) == {
        "live": {"v": "new"},
        "fresh": {"v": "loaded"},
    }
    assert cache.add_many({}) == 0


def test_delete_many_counts_existing(cache: RedisLiveCache) -> None:
    cache.add_many({"a": Write({"v": 1}), "b": Write({"v": 2})})

    assert cache.delete_many(["a", "b", "never"]) == 2
    assert cache.delete_many([]) == 0
    assert cache.get_many(["a", "b"]) == {}


def test_iter_keys_escapes_glob_characters(cache: RedisLiveCache) -> None:
    weird = "s:a*b?[c]\\d:"
    keys = [f"{weird}1", f"{weird}2"]
    decoys = ["s:aXbY[c]\\d:3", "s:axb?c\\d:4", "s:a*b?[c]d:5", "s:a"]
    cache.add_many({k: Write({"v": 1}) for k in [*keys, *decoys]})

    assert sorted(cache.iter_keys(weird)) == keys
    assert cache.count(weird) == 2
    assert sorted(cache.iter_keys()) == sorted([*keys, *decoys])


def test_prefix_namespaces_and_is_stripped(raw: redis.Redis) -> None:
    key = f"{KEY_PREFIX}:x"
    one = RedisLiveCache(redis.Redis.from_url(REDIS_URL), prefix="app[1]*:")
    two = RedisLiveCache(redis.Redis.from_url(REDIS_URL), prefix="app2:")
    one.add_many({key: Write({"v": 1})})
    two.add_many({key: Write({"v": 2})})

    assert list(one.iter_keys(f"{KEY_PREFIX}:")) == [key]
    assert one.get(key) == {"v": 1}
    assert two.get(key) == {"v": 2}
    assert sorted(raw.keys()) == sorted(redis_key(key, p).encode() for p in ("app2:", "app[1]*:"))
    assert one.delete_many([key]) == 1
    assert two.get(key) == {"v": 2}
    one.close()
    two.close()


def test_decode_responses_clients_work(raw: redis.Redis) -> None:
    c = RedisLiveCache.from_url(REDIS_URL, decode_responses=True)
    c.add_many({"k": Write({"v": "é"})})
    assert c.get("k") == {"v": "é"}
    assert list(c.iter_keys("k")) == ["k"]
    assert c.atomic(["k"], lambda cur: {"k": Write({"v": (cur["k"] or {})["v"] * 2})}) == {
        "k": {"v": "éé"}
    }
    c.close()


def test_foreign_value_is_a_cache_error(cache: RedisLiveCache, raw: redis.Redis) -> None:
    raw.set(redis_key("bad"), b"\x80 not json")
    raw.set(redis_key("arr"), b"[1]")

    with pytest.raises(CacheError, match="'bad' does not hold a JSON value"):
        cache.get("bad")
    with pytest.raises(CacheError, match="'arr' holds list"):
        cache.atomic(["arr"], lambda cur: {})


# -- construction and failures -------------------------------------------------------------


def test_from_url_timeouts_default_and_url_wins() -> None:
    c = RedisLiveCache.from_url(REDIS_URL)
    kw = c._client.connection_pool.connection_kwargs
    assert (kw["socket_timeout"], kw["socket_connect_timeout"]) == (2.0, 2.0)
    c.close()

    sep = "&" if "?" in REDIS_URL else "?"
    c = RedisLiveCache.from_url(f"{REDIS_URL}{sep}socket_timeout=0.5", socket_timeout=9)
    assert c._client.connection_pool.connection_kwargs["socket_timeout"] == 0.5
    c.close()


def test_unreachable_server_raises_cache_error() -> None:
    with pytest.raises(CacheError, match=r"cannot reach Redis at 127\.0\.0\.1:1/0"):
        RedisLiveCache.from_url(DEAD_URL)

    # A cache built on a client whose server is gone fails each call cleanly.
    dead = RedisLiveCache(redis.Redis.from_url(DEAD_URL, socket_connect_timeout=0.5))
    with pytest.raises(CacheError, match="cannot reach Redis"):
        dead.get("k")
    with pytest.raises(CacheError, match="cannot reach Redis"):
        dead.atomic(["k"], incr("k"))
    with pytest.raises(CacheError, match="cannot reach Redis"):
        dead.add_many({"k": Write({"v": 1})})
    with pytest.raises(CacheError, match="cannot reach Redis"):
        list(dead.iter_keys())
    dead.close()


def test_invalid_url_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="invalid Redis URL"):
        RedisLiveCache.from_url("http://127.0.0.1:6379")


def test_missing_redis_names_the_install_command() -> None:
    code = "import sys; sys.modules['redis'] = None; import stm_memory.cache.redis"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode != 0
    assert 'pip install "stm-memory[redis]"' in proc.stderr


# -- end to end with the engine --------------------------------------------------------------


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    # The outbox of a Redis-backed engine lives in the state directory: keep it in tmp.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return f"sqlite:///{tmp_path}/stm.db"


SCOPE = Scope(channel_id="c1", user_id="u1", server_id="s1")


def _remember(stm: ShortTermMemory, text: str) -> None:
    turn = stm.begin_turn(SCOPE, provider="openai")
    assert stm.update(turn, {"summary": text}) == {"status": "completed"}


def test_engine_update_get_and_restart(db_url: str, raw: redis.Redis) -> None:
    with ShortTermMemory.from_url(db_url, redis_url=REDIS_URL) as stm:
        assert isinstance(stm._cache, ResilientCache)
        assert isinstance(stm._cache.primary, RedisLiveCache)
        _remember(stm, "We planned the trip to Lyon.")
        entry = stm.get(SCOPE)
        assert entry is not None and entry.summary == "We planned the trip to Lyon."
    assert raw.exists(redis_key(SCOPE.live_key))

    # Restart with the cache still warm.
    with ShortTermMemory.from_url(db_url, redis_url=REDIS_URL) as stm:
        entry = stm.get(SCOPE)
        assert entry is not None and entry.summary == "We planned the trip to Lyon."

    # Restart after Redis lost everything (no persistence): hydrated from SQLite.
    raw.flushdb()
    with ShortTermMemory.from_url(db_url, redis_url=REDIS_URL) as stm:
        entry = stm.get(SCOPE)
        assert entry is not None and entry.summary == "We planned the trip to Lyon."
    assert raw.exists(redis_key(SCOPE.live_key))


def test_two_engines_share_redis_and_sqlite(db_url: str, raw: redis.Redis) -> None:
    with (
        ShortTermMemory.from_url(db_url, redis_url=REDIS_URL) as a,
        ShortTermMemory.from_url(db_url, redis_url=REDIS_URL) as b,
    ):
        _remember(a, "first from A")
        seen = b.get(SCOPE)
        assert seen is not None and seen.summary == "first from A"

        _remember(b, "then from B")
        seen = a.get(SCOPE)
        assert seen is not None and seen.summary == "then from B"

        # Turn counters bumped by both engines concurrently add up.
        def count_turns(stm: ShortTermMemory) -> None:
            for _ in range(10):
                stm.end_turn(stm.begin_turn(SCOPE, provider="openai"))

        threads = [threading.Thread(target=count_turns, args=(s,)) for s in (a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        final = a.get(SCOPE)
        assert final is not None and final.turns_since_refresh == 40

"""Many hosts while Redis is unreachable (issue 17): degraded mode loses nothing.

Each memory here is a host: its own engine, outbox and connections, sharing one
PostgreSQL schema and (when it is up) one Redis database. While Redis is away the live
cache lives in SQL, shared by every host, so counters stay exact, a stored summary is
never overwritten by another host's stale copy, and a deleted or forgotten entry is
served by no host. When Redis returns, the first host to reach it drains the SQL
cache into it and every host goes back to Redis.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
from helpers.deployment import OpenMem
from helpers.memory import COMPLETED, dialogue, refresh, row, turn
from helpers.proxy import Proxied

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.redis import RedisLiveCache
from stm_memory.cache.resilient import ResilientCache
from stm_memory.cache.sql import SqlLiveCache
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
DM = Scope(channel_id="dm1", user_id="u1")
OTHER_DM = Scope(channel_id="dm2", user_id="u2")

#: A port nothing listens on: Redis is down from the start.
DEAD_REDIS = "redis://127.0.0.1:1/0"


def resilient(mem: ShortTermMemory) -> ResilientCache:
    assert isinstance(mem._cache, ResilientCache)
    return mem._cache


def shared(mem: ShortTermMemory) -> SqlLiveCache:
    cache = resilient(mem).shared
    assert cache is not None
    return cache


def end_turns(mem: ShortTermMemory, scope: Scope, n: int) -> None:
    for _ in range(n):
        mem.end_turn(mem.begin_turn(scope))


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[RedisLiveCache]:
    """What Redis itself holds, read directly (not through any host)."""
    cache = RedisLiveCache.from_url(redis_url)
    yield cache
    cache.close()


def summary_in(cache: RedisLiveCache, key: str | None) -> object:
    assert key is not None
    value = cache.get(key)
    return None if value is None else value.get("summary")


def test_two_hosts_with_redis_down_from_the_start_count_every_turn(
    open_mem: OpenMem, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    one = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    two = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    assert resilient(one).degraded and resilient(two).degraded
    assert shared(one).is_degraded()
    assert any("on SQL (shared by every host)" in r.getMessage() for r in caplog.records)
    # Interleaved from two threads: every begin/end pair counts once.
    workers = [threading.Thread(target=end_turns, args=(m, SCOPE, 40)) for m in (one, two)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for mem in (one, two):
        live = mem.get(SCOPE)
        assert live is not None and live.turns_since_refresh == 80
    stored = row(one, SCOPE.server_key)
    assert stored is not None and stored.turns_since_refresh == 80
    assert len(one._outbox) == len(two._outbox) == 0


def test_a_summary_stored_by_one_host_survives_the_next_host_and_a_fresh_one(
    open_mem: OpenMem, postgres_url: str
) -> None:
    one = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    two = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    end_turns(two, SCOPE, 3)  # host 2 holds the entry from before the update
    assert refresh(one, SCOPE, "stored by host 1") == COMPLETED
    end_turns(two, SCOPE, 1)
    assert two.capture(SCOPE, dialogue(2)) is not None
    fresh = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    for mem in (one, two, fresh):
        live = mem.get(SCOPE)
        assert live is not None
        assert (live.summary, live.turns_since_refresh) == ("stored by host 1", 1)
        assert [m.content for m in live.messages] == ["message 1", "message 2"]
    stored = row(fresh, SCOPE.server_key)
    assert stored is not None and stored.summary == "stored by host 1"


def test_a_user_forgotten_on_one_host_is_served_by_no_host(
    open_mem: OpenMem, postgres_url: str
) -> None:
    one = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    two = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    refresh(one, DM, "u1's secret")
    refresh(one, SCOPE, "u1 wrote this")
    refresh(one, OTHER_DM, "u2 stays")
    assert one.get(DM) is not None  # host 1 has the entries in its live cache
    two.clear_user("u1")
    for mem in (one, two):
        assert mem.get(DM) is None
        shared_entry = mem.get(SCOPE)
        assert shared_entry is None or shared_entry.summary is None
        kept = mem.get(OTHER_DM)
        assert kept is not None and kept.summary == "u2 stays"
    assert row(one, DM.user_key) is None


def test_a_channel_cleared_on_one_host_starts_afresh_on_every_host(
    open_mem: OpenMem, postgres_url: str
) -> None:
    one = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    two = open_mem(postgres_url, redis_url=DEAD_REDIS, timeout=1)
    refresh(one, SCOPE, "before the reset")
    end_turns(one, SCOPE, 2)
    two.clear_channel(SCOPE.channel_id)
    for mem in (one, two):
        assert mem.get(SCOPE) is None
        ctx = mem.build_context(mem.begin_turn(SCOPE))
        assert ctx.content is None
        assert ctx.history is not None and ctx.history.keep_turns == 0


def test_redis_stopped_mid_run_and_back_loses_nothing(
    open_mem: OpenMem,
    postgres_url: str,
    redis_proxy: Proxied,
    raw_redis: RedisLiveCache,
) -> None:
    hosts = [open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1) for _ in range(3)]
    for mem in hosts:
        resilient(mem).retry_after = 3600.0  # the outage is seen once, healed on demand
    refresh(hosts[0], SCOPE, "before the outage")
    refresh(hosts[0], DM, "u1's DM, before the outage")
    end_turns(hosts[1], SCOPE, 2)
    redis_proxy.proxy.stop()
    for mem in hosts:  # every host notices at its next call
        end_turns(mem, SCOPE, 5)
    assert all(resilient(m).degraded for m in hosts)
    assert refresh(hosts[1], SCOPE, "during the outage") == COMPLETED
    end_turns(hosts[2], SCOPE, 1)
    hosts[2].clear_user("u1")  # DM gone; the shared entry u1 wrote in is cleared
    refresh(hosts[0], SCOPE, "written by host 0 after the erasure")
    end_turns(hosts[0], SCOPE, 1)
    # Redis still holds the copies from before the outage.
    assert summary_in(raw_redis, SCOPE.server_key) == "before the outage"

    redis_proxy.proxy.start()
    resilient(hosts[0]).retry_after = 0.0
    assert hosts[0].get(SCOPE) is not None  # host 0 drains the SQL cache into Redis
    assert not resilient(hosts[0]).degraded and not shared(hosts[0]).is_degraded()
    moved = raw_redis.get(SCOPE.server_key or "")
    assert moved is not None
    assert (moved["summary"], moved["turns_since_refresh"]) == (
        "written by host 0 after the erasure",
        1,
    )
    assert raw_redis.get(DM.user_key) is None  # the erasure reached Redis's copy
    # The other hosts are still inside their circuit breaker; their next call finds
    # the SQL cache drained and goes to Redis.
    end_turns(hosts[1], SCOPE, 1)
    assert not resilient(hosts[1]).degraded
    for mem in hosts:
        live = mem.get(SCOPE)
        assert live is not None
        assert (live.summary, live.turns_since_refresh) == (
            "written by host 0 after the erasure",
            2,
        )
        assert mem.get(DM) is None
    stored = row(hosts[2], SCOPE.server_key)
    assert stored is not None and (stored.summary, stored.turns_since_refresh) == (
        "written by host 0 after the erasure",
        2,
    )


def test_a_host_started_while_the_others_are_degraded_joins_them(
    open_mem: OpenMem, postgres_url: str, redis_proxy: Proxied
) -> None:
    one = open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1)
    resilient(one).retry_after = 3600.0
    redis_proxy.proxy.stop()
    refresh(one, SCOPE, "degraded write")
    end_turns(one, SCOPE, 3)
    redis_proxy.proxy.start()
    # Redis answers this host's probe, but the SQL cache holds newer state: it drains
    # before its first use of Redis, so what it serves is the degraded hosts' state.
    late = open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1)
    live = late.get(SCOPE)
    assert live is not None and (live.summary, live.turns_since_refresh) == ("degraded write", 3)
    assert not shared(late).is_degraded()
    end_turns(one, SCOPE, 1)  # host 1 is turned away by the fence and uses Redis
    assert not resilient(one).degraded
    live = late.get(SCOPE)
    assert live is not None and live.turns_since_refresh == 4


def test_redis_and_sql_down_then_back_keeps_sql_the_truth(
    open_mem: OpenMem, pg_proxy: Proxied, redis_proxy: Proxied, fake_clock: FrozenClock
) -> None:
    mem = open_mem(pg_proxy.url, redis_url=redis_proxy.url, timeout=1)
    refresh(mem, SCOPE, "before")
    end_turns(mem, SCOPE, 1)
    resilient(mem).retry_after = 3600.0
    redis_proxy.proxy.stop()
    end_turns(mem, SCOPE, 1)  # degraded, on SQL
    pg_proxy.proxy.stop()
    # Neither shared cache answers: the last resort is this host's own cache, whose
    # write starts from an empty entry; its revision (dated by the clock) outranks
    # the older row when the queued write lands.
    fake_clock.advance(seconds=1)
    assert turn(mem, SCOPE, {"summary": "with both down"}) == COMPLETED
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "with both down"
    pg_proxy.proxy.start()
    assert mem.flush() > 0
    redis_proxy.proxy.start()
    resilient(mem).retry_after = 0.0
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "with both down"
    assert not resilient(mem).degraded and not shared(mem).is_degraded()
    stored = row(mem, SCOPE.server_key)
    assert stored is not None and stored.summary == "with both down"


def test_a_host_that_still_reaches_redis_joins_the_degraded_ones(
    open_mem: OpenMem, postgres_url: str, redis_proxy: Proxied, redis_url: str
) -> None:
    """A partial outage: host A is cut off from Redis, host B is not. B reads the
    degraded flag (here on every call) and moves to SQL too, so the two never count
    one channel apart; A's drain brings both back."""
    cut_off = open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1)
    reaches = open_mem(postgres_url, redis_url=redis_url, timeout=1)
    resilient(cut_off).retry_after = 3600.0
    resilient(reaches).retry_after = 3600.0
    resilient(reaches).check_every = 0.0
    refresh(reaches, SCOPE, "before")
    redis_proxy.proxy.stop()
    end_turns(cut_off, SCOPE, 2)  # fails over and sets the flag
    end_turns(reaches, SCOPE, 3)
    assert resilient(reaches).degraded
    end_turns(cut_off, SCOPE, 1)
    for mem in (cut_off, reaches):
        live = mem.get(SCOPE)
        assert live is not None and (live.summary, live.turns_since_refresh) == ("before", 6)
    redis_proxy.proxy.start()
    resilient(cut_off).retry_after = 0.0
    end_turns(cut_off, SCOPE, 1)  # drains
    end_turns(reaches, SCOPE, 1)  # turned away by the fence: back on Redis
    assert not resilient(cut_off).degraded and not resilient(reaches).degraded
    for mem in (cut_off, reaches):
        live = mem.get(SCOPE)
        assert live is not None and live.turns_since_refresh == 8
    stored = row(reaches, SCOPE.server_key)
    assert stored is not None and stored.turns_since_refresh == 8

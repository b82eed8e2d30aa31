"""Redis unreachable (issue 8): turns go on against SQL with a logged warning, and the
shared cache heals when Redis is back — no copy from before or during the outage may
shadow the newer SQL state afterwards.

The memory under test reaches Redis through a proxy the test stops; a second memory
("host B") reaches Redis directly, the way another machine would during a partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from helpers.deployment import OpenMem
from helpers.inspection import assert_cache_matches_sql, cache_entry_keys
from helpers.memory import COMPLETED, dialogue, refresh, row, turn
from helpers.proxy import Proxied

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.redis import RedisLiveCache
from stm_memory.cache.resilient import ResilientCache
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SECOND = Scope(channel_id="c2", user_id="u1", server_id="g1")
DM = Scope(channel_id="dm1", user_id="u1")
OTHER_USER = Scope(channel_id="c1", user_id="u2", server_id="g1")

#: Long enough that nothing retries Redis while the proxy is down: the outage is seen
#: once, and the heal happens on the first call after ``retry_after`` is set to 0.
NO_RETRY = 3600.0


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[RedisLiveCache]:
    """What Redis itself holds, read directly (not through any memory)."""
    cache = RedisLiveCache.from_url(redis_url)
    yield cache
    cache.close()


@pytest.fixture
def through_proxy(open_mem: OpenMem, postgres_url: str, redis_proxy: Proxied) -> ShortTermMemory:
    return open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1)


@pytest.fixture
def direct(open_mem: OpenMem, postgres_url: str, redis_url: str) -> ShortTermMemory:
    """Host B: same PostgreSQL and Redis, not behind the proxy."""
    return open_mem(postgres_url, redis_url=redis_url)


def resilient(mem: ShortTermMemory) -> ResilientCache:
    assert isinstance(mem._cache, ResilientCache)
    return mem._cache


def redis_summary(cache: RedisLiveCache, key: str | None) -> str | None:
    assert key is not None
    value = cache.get(key)
    return None if value is None else value["summary"]


def outage_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "live cache unreachable" in r.getMessage()
    ]


def test_turns_go_on_while_redis_is_down_and_use_it_again_after(
    through_proxy: ShortTermMemory,
    redis_proxy: Proxied,
    raw_redis: RedisLiveCache,
    caplog: pytest.LogCaptureFixture,
) -> None:
    mem = through_proxy
    caplog.set_level(logging.WARNING, logger="stm_memory")
    refresh(mem, SCOPE, "before the outage")
    turn(mem, SCOPE)
    assert redis_summary(raw_redis, SCOPE.server_key) == "before the outage"

    resilient(mem).retry_after = NO_RETRY
    redis_proxy.proxy.stop()
    ctx = mem.begin_turn(SCOPE)
    assert mem.update(ctx, {"summary": "during the outage"}) == COMPLETED
    mem.end_turn(ctx)
    assert mem.capture(SCOPE, dialogue(2)) is not None
    turn(mem, SCOPE)
    live = mem.get(SCOPE)
    assert live is not None
    assert (live.summary, live.turns_since_refresh, live.last_refreshed_turn) == (
        "during the outage",
        1,
        2,
    )
    assert [m.content for m in live.messages] == ["message 1", "message 2"]
    assert resilient(mem).degraded
    assert len(outage_warnings(caplog)) == 1  # logged once, not once per call
    # SQL took every write directly; nothing waits in the outbox.
    for key in SCOPE.keys:
        stored = row(mem, key)
        assert stored is not None and stored.summary == "during the outage"
    stored = row(mem, SCOPE.server_key)
    assert stored is not None and (stored.turns_since_refresh, stored.last_refreshed_turn) == (1, 2)
    assert len(mem._outbox) == 0
    # Redis itself still holds the old copy: nobody could reach it.
    assert redis_summary(raw_redis, SCOPE.server_key) == "before the outage"

    redis_proxy.proxy.start()
    resilient(mem).retry_after = 0.0
    live = mem.get(SCOPE)
    assert not resilient(mem).degraded
    assert live is not None and live.summary == "during the outage"
    assert (live.turns_since_refresh, live.last_refreshed_turn) == (1, 2)
    # The stale copies are gone from Redis; the read above hydrated SQL's state into it.
    assert redis_summary(raw_redis, SCOPE.server_key) == "during the outage"
    turn(mem, SCOPE)
    stored_after = row(mem, SCOPE.server_key)
    assert stored_after is not None and stored_after.turns_since_refresh == 2
    assert raw_redis.get(SCOPE.server_key or "") is not None  # the write went to Redis
    assert_cache_matches_sql(mem)


def test_a_copy_another_host_wrote_before_the_outage_does_not_shadow_sql(
    through_proxy: ShortTermMemory, direct: ShortTermMemory, redis_proxy: Proxied
) -> None:
    resilient(through_proxy).retry_after = NO_RETRY
    refresh(direct, SCOPE, "host B, before the outage")
    redis_proxy.proxy.stop()
    refresh(through_proxy, SCOPE, "host A, during the outage")
    refresh(through_proxy, DM, "host A, a DM during the outage")
    redis_proxy.proxy.start()
    resilient(through_proxy).retry_after = 0.0
    for mem in (through_proxy, direct):
        for key in (*SCOPE.keys, DM.user_key):
            entry = mem.get_key(key)
            assert entry is not None and entry.summary is not None
            assert entry.summary.startswith("host A"), (key, entry.summary)
    assert_cache_matches_sql(direct)


def test_stale_copies_are_dropped_even_after_a_failed_retry(
    through_proxy: ShortTermMemory, direct: ShortTermMemory, redis_proxy: Proxied
) -> None:
    # retry_after = 0 (the fixture's): every call during the outage retries Redis.
    refresh(direct, SCOPE, "host B, before the outage")
    redis_proxy.proxy.stop()
    refresh(through_proxy, SCOPE, "host A, during the outage")
    turn(through_proxy, SCOPE)
    redis_proxy.proxy.start()
    for key in SCOPE.keys:
        entry = through_proxy.get_key(key)
        assert entry is not None and entry.summary == "host A, during the outage", key


def test_a_deletion_during_the_outage_is_not_undone_when_redis_returns(
    through_proxy: ShortTermMemory, direct: ShortTermMemory, redis_proxy: Proxied
) -> None:
    resilient(through_proxy).retry_after = NO_RETRY
    for scope in (SCOPE, SECOND, DM, OTHER_USER):
        refresh(direct, scope, f"secret of {scope.live_key}")
    redis_proxy.proxy.stop()
    # u1's three own rows deleted; the two server rows u1 wrote memory in cleared.
    assert through_proxy.clear_user("u1") == 3 + 2
    assert through_proxy.clear_channel("c2") == 1  # its server row
    assert through_proxy.get_key(SCOPE.user_key) is None  # the fallback forgot them
    redis_proxy.proxy.start()
    resilient(through_proxy).retry_after = 0.0
    through_proxy.get(OTHER_USER)  # first call: the heal
    gone = [SCOPE.user_key, SECOND.user_key, SECOND.server_key, DM.user_key]
    for mem in (through_proxy, direct):
        assert [k for k in gone if k and mem.get_key(k) is not None] == []
        # The shared entry u1 wrote in: no host serves its summary after the heal.
        shared = mem.get(SCOPE)
        assert shared is None or shared.summary is None
    assert not {k for k in cache_entry_keys(direct) if k in gone}


def test_redis_down_at_start_up(
    open_mem: OpenMem,
    postgres_url: str,
    redis_proxy: Proxied,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    redis_proxy.proxy.stop()
    mem = open_mem(postgres_url, redis_url=redis_proxy.url, timeout=1)
    assert resilient(mem).degraded
    assert outage_warnings(caplog)
    refresh(mem, SCOPE, "written with Redis down since start-up")
    redis_proxy.proxy.start()
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "written with Redis down since start-up"
    assert not resilient(mem).degraded
    assert_cache_matches_sql(mem)


def test_redis_and_postgres_down_together(
    open_mem: OpenMem, pg_proxy: Proxied, redis_proxy: Proxied, fake_clock: FrozenClock
) -> None:
    mem = open_mem(pg_proxy.url, redis_url=redis_proxy.url, timeout=1)
    refresh(mem, SCOPE, "before")
    turn(mem, SCOPE)  # settings are memoised: begin_turn needs no database below
    resilient(mem).retry_after = NO_RETRY
    redis_proxy.proxy.stop()
    pg_proxy.proxy.stop()
    # Nothing can tell this process what the scope held: the write starts from an
    # empty entry, and its revision (dated by the clock) outranks the older row.
    fake_clock.advance(seconds=1)
    assert turn(mem, SCOPE, {"summary": "with both down"}) == COMPLETED
    turn(mem, SCOPE)
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "with both down"
    queued = len(mem._outbox)
    assert queued > 0
    pg_proxy.proxy.start()
    assert mem.flush() == queued
    redis_proxy.proxy.start()
    resilient(mem).retry_after = 0.0
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "with both down"
    stored = row(mem, SCOPE.server_key)
    assert stored is not None
    # Newest write wins, counters included: they restarted from the empty entry.
    assert (stored.summary, stored.turns_since_refresh, stored.last_refreshed_turn) == (
        "with both down",
        1,
        1,
    )
    assert_cache_matches_sql(mem)

"""Restarts: summaries survive a new process, an empty cache hydrates from SQL, and a
restart shows what the running process showed — the same summary, live or expired
alike, and writes that waited in the outbox."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.inspection import assert_cache_matches_sql
from helpers.memory import DM, SERVER, dialogue, refresh, row, scope_dict, turn
from helpers.sqlite_lock import SqliteWriteLock
from helpers.subproc import run_worker

from stm_memory import Category, Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


def test_a_new_process_still_shows_the_summary(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SERVER, "We agreed to meet on Friday.")
    turn(mem, SERVER)
    mem.close()

    later = fake_clock.advance(hours=2)
    common: dict[str, Any] = {
        "database_url": make_mem.database_url("sqlite"),
        "outbox_path": str(make_mem.outbox_path),
        "now": later.isoformat(),
        "scope": scope_dict(SERVER),
    }
    same_cache = run_worker("read_entry", cache_dir=str(make_mem.cache_dir), **common)
    assert same_cache is not None
    assert same_cache["summary"] == "We agreed to meet on Friday."
    assert (same_cache["turns_since_refresh"], same_cache["last_refreshed_turn"]) == (1, 1)

    # A new process on a new (empty) cache directory reads the row.
    empty_cache = run_worker("read_entry", cache_dir=str(make_mem.tmp_path / "other"), **common)
    assert empty_cache is not None
    assert empty_cache["summary"] == "We agreed to meet on Friday."
    assert (empty_cache["turns_since_refresh"], empty_cache["last_refreshed_turn"]) == (1, 1)
    assert empty_cache["messages"] == []


def test_an_empty_cache_hydrates_from_sql(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    thread = Scope(channel_id="t1", user_id="u1", server_id="g1", parent_channel_id="c1")
    first = make_mem()
    first.set_categories("g1", [Category("Plot"), Category("Mood")])
    ctx = first.begin_turn(thread)
    assert first.update(ctx, {"plot": "heist", "mood": "tense"}) == {"status": "completed"}
    first.end_turn(ctx)
    written_at = fake_clock()
    turn(first, thread)
    turn(first, thread)
    first.capture(thread, dialogue(4))
    first.close()

    fake_clock.advance(minutes=30)
    second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache")
    assert second._cache.count("shortterm:") == 0
    entry = second.get(thread)
    assert entry is not None
    assert list(entry.categories.items()) == [("plot", "heist"), ("mood", "tense")]
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (2, 1)
    # The privacy rules read the parent channel, so it must survive a restart.
    assert entry.parent_channel_id == "c1"
    assert entry.messages == ()  # raw dialogue is live-only
    assert entry.last_updated >= written_at
    user_entry = second.get_key(thread.user_key)
    assert user_entry is not None and user_entry.categories["plot"] == "heist"
    # Hydrated entries are cached: the next read needs no SQL.
    assert second._cache.get(thread.server_key or "") is not None

    # Counting continues from the hydrated value, in the cache and in SQL.
    turn(second, thread)
    again = second.get(thread)
    assert again is not None and again.turns_since_refresh == 3
    stored = second._store.load_many([thread.server_key or ""])[thread.server_key or ""]
    assert stored.turns_since_refresh == 3


def test_a_write_after_restart_keeps_other_stored_state(make_mem: MemFactory) -> None:
    first = make_mem()
    refresh(first, DM, "first summary")
    turn(first, DM)
    first.close()
    second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache")
    second.capture(DM, dialogue(2))  # the first write into an empty cache
    entry = second.get(DM)
    assert entry is not None
    assert entry.summary == "first summary"  # hydrated before the capture merged in
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (1, 1)
    assert [m.content for m in entry.messages] == ["message 1", "message 2"]


def test_start_up_replays_writes_queued_by_an_earlier_run(
    make_mem: MemFactory,
) -> None:
    first = make_mem(timeout=0.2)
    with SqliteWriteLock(make_mem.sqlite_path):
        refresh(first, SERVER, "written while the database was locked")
        assert len(first._outbox) > 0
        first.close()
    second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache")
    assert len(second._outbox) == 0
    stored = second._store.load_many([SERVER.server_key or ""])
    assert stored[SERVER.server_key or ""].summary == "written while the database was locked"
    entry = second.get(SERVER)
    assert entry is not None and entry.summary == "written while the database was locked"


@pytest.mark.postgres
@pytest.mark.redis
def test_many_hosts_setup_hydrates_from_postgres_into_an_empty_redis(
    make_mem: MemFactory, redis_url: str
) -> None:
    first = make_mem("postgres", cache="redis")
    refresh(first, SERVER, "shared across hosts")
    turn(first, SERVER)
    first.close()
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()  # the cache is gone: a Redis restart without persistence
    client.close()
    second = make_mem("postgres", cache="redis")
    entry = second.get(SERVER)
    assert entry is not None and entry.summary == "shared across hosts"
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (1, 1)


@pytest.mark.postgres
def test_postgres_rows_hydrate_into_a_fresh_disk_cache(make_mem: MemFactory) -> None:
    first = make_mem("postgres")
    refresh(first, DM, "in postgres")
    first.close()
    second = make_mem("postgres", cache_dir=make_mem.tmp_path / "fresh-cache")
    entry = second.get(DM)
    assert entry is not None and entry.summary == "in postgres"


# -- a restart shows what the running process showed --------------------------------------
# Hydration takes ``last_updated`` from the row's ``updated_at`` and nothing else, while
# the running process moves its cached ``last_updated`` by other rules; these tests pin
# where the two disagree.

SCOPE = SERVER


def summary_seen(mem: ShortTermMemory) -> str | None:
    entry = mem.get(SCOPE)
    return None if entry is None else entry.summary


def restarted(make_mem: MemFactory, n: int) -> ShortTermMemory:
    return make_mem(cache_dir=make_mem.tmp_path / f"cache-after-restart-{n}", timeout=0.2)


def test_a_live_summary_survives_a_restart(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    mem = make_mem()
    refresh(mem, SCOPE, "kept")
    fake_clock.advance(hours=23)
    turn(mem, SCOPE)
    mem.close()
    assert summary_seen(restarted(make_mem, 1)) == "kept"


def test_an_expired_summary_stays_expired_after_a_restart(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SCOPE, "expired yesterday")
    fake_clock.advance(hours=25)  # past the 24 h summary TTL
    turn(mem, SCOPE)  # a turn without a refresh: the channel is active again
    assert summary_seen(mem) is None
    mem.close()
    assert summary_seen(restarted(make_mem, 1)) is None


def test_a_summary_kept_alive_by_capture_survives_a_restart(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem()
    refresh(mem, SCOPE, "still relevant")
    fake_clock.advance(hours=20)
    mem.capture(SCOPE, dialogue(2))  # the conversation goes on
    fake_clock.advance(hours=5)
    assert summary_seen(mem) == "still relevant"
    mem.close()
    assert summary_seen(restarted(make_mem, 1)) == "still relevant"


def test_a_restart_while_writes_are_queued_does_not_cache_the_older_row(
    make_mem: MemFactory,
) -> None:
    mem = make_mem(timeout=0.2)
    refresh(mem, SCOPE, "landed")
    with SqliteWriteLock(make_mem.sqlite_path):
        refresh(mem, SCOPE, "queued")
        assert len(mem._outbox) == 2
        mem.close()
        again = restarted(make_mem, 1)
        again.get(SCOPE)  # a read while the database is still down
    assert again.flush() == 2
    stored = row(again, SCOPE.server_key)
    assert stored is not None and stored.summary == "queued"
    assert summary_seen(again) == "queued"
    assert_cache_matches_sql(again)


def test_a_restart_after_the_database_returned_replays_first(make_mem: MemFactory) -> None:
    mem = make_mem(timeout=0.2)
    refresh(mem, SCOPE, "landed")
    with SqliteWriteLock(make_mem.sqlite_path):
        refresh(mem, SCOPE, "queued")
        turn(mem, SCOPE)
        mem.close()
    again = restarted(make_mem, 1)  # start-up replay lands the queue before any read
    assert len(again._outbox) == 0
    live = again.get(SCOPE)
    assert live is not None
    assert (live.summary, live.turns_since_refresh, live.last_refreshed_turn) == ("queued", 1, 2)
    assert_cache_matches_sql(again)

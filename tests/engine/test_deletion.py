"""Deletion: cache, rows and queued writes go at once, and nothing comes back."""

from __future__ import annotations

import pytest
from helpers.factory import MemFactory
from helpers.memory import DM, SERVER, dialogue, refresh, row, rows, turn
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import Scope, ShortTermMemory

OTHER_CHANNEL = Scope(channel_id="c2", user_id="u1", server_id="g1")
OTHER_USER = Scope(channel_id="c1", user_id="u2", server_id="g1")
ELSEWHERE = Scope(channel_id="c9", user_id="u1", server_id="g2")


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param, timeout=0.2)


def populate(memory: ShortTermMemory) -> None:
    # Each scope's user says something of their own: words the channel already holds
    # would stay their first speaker's (u2 repeating u1's turns in c1 captures u1's).
    for i, scope in enumerate((SERVER, OTHER_CHANNEL, OTHER_USER, ELSEWHERE, DM)):
        refresh(memory, scope, f"summary of {scope.live_key}")
        memory.capture(scope, dialogue(2, start=2 * i + 1))


def all_keys() -> list[str]:
    return [k for s in (SERVER, OTHER_CHANNEL, OTHER_USER, ELSEWHERE, DM) for k in s.keys]


def test_clear_channel_removes_entries_rows_of_every_user(memory: ShortTermMemory) -> None:
    populate(memory)
    assert memory.clear_channel("c1") == 3  # server row + two user rows
    for scope in (SERVER, OTHER_USER):
        assert memory.get(scope) is None
        assert memory.get_key(scope.user_key) is None
        assert row(memory, scope.server_key) is None
        assert row(memory, scope.user_key) is None
    assert not [k for k in memory._cache.iter_keys("shortterm:") if ":c1" in k.split("index")[0]]
    for scope in (OTHER_CHANNEL, ELSEWHERE, DM):
        live = memory.get(scope)
        assert live is not None and live.summary == f"summary of {scope.live_key}"
    # A later turn starts from nothing, in the cache and in SQL.
    turn(memory, SERVER)
    fresh = memory.get(SERVER)
    assert fresh is not None
    assert (fresh.summary, fresh.turns_since_refresh, fresh.last_refreshed_turn) == (None, 1, 0)


def test_clear_user_removes_user_scope_entries_everywhere(memory: ShortTermMemory) -> None:
    populate(memory)
    # c1, c2, c9 and the DM deleted; the three server entries u1 wrote memory in cleared.
    assert memory.clear_user("u1") == 4 + 3
    for scope in (SERVER, OTHER_CHANNEL, ELSEWHERE, DM):
        assert memory.get_key(scope.user_key) is None
        assert row(memory, scope.user_key) is None
    # Server-scope entries stay (the channel's counters, other users' words), without
    # the distilled memory u1's words reached (erasure).
    for scope in (SERVER, OTHER_CHANNEL, ELSEWHERE):
        entry = memory.get(scope)
        assert entry is not None and entry.summary is None
        stored = row(memory, scope.server_key)
        assert stored is not None and stored.summary is None
    other = memory.get_key(OTHER_USER.user_key)
    assert other is not None and other.summary == f"summary of {OTHER_USER.live_key}"


def test_clear_summary_keeps_counters_and_messages(memory: ShortTermMemory) -> None:
    refresh(memory, SERVER, "to forget")
    turn(memory, SERVER)
    memory.capture(SERVER, dialogue(3))
    memory.clear_summary(SERVER)
    for key in SERVER.keys:
        entry = memory.get_key(key)
        assert entry is not None and entry.summary is None and not entry.categories
        stored = row(memory, key)
        assert stored is not None and stored.summary is None and not stored.categories
    live = memory.get(SERVER)
    assert live is not None
    assert (live.turns_since_refresh, live.last_refreshed_turn, len(live.messages)) == (1, 1, 3)


def test_deletes_purge_queued_writes(memory: ShortTermMemory, make_mem: MemFactory) -> None:
    refresh(memory, SERVER, "landed")
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER, {"summary": "queued while locked"})
        memory.capture(SERVER, dialogue(2))
        turn(memory, OTHER_CHANNEL, {"summary": "other channel, also queued"})
        queued = len(memory._outbox)
        assert queued >= 3
        assert memory.clear_channel("c1") == 0  # queued itself, behind nothing of c1
        assert memory.get(SERVER) is None
        # Only c2's writes and the delete itself remain.
        kinds = [(i.kind, i.channel_id) for i in memory._outbox.pending()]
        assert ("delete_channel", "c1") in kinds
        assert all(ch == "c2" for kind, ch in kinds if kind != "delete_channel")
    assert memory.flush() == len(kinds)
    assert len(memory._outbox) == 0
    assert rows(memory, *SERVER.keys) == {}
    assert memory.get(SERVER) is None
    other = row(memory, OTHER_CHANNEL.server_key)
    assert other is not None and other.summary == "other channel, also queued"


def test_clear_user_purges_only_that_users_queued_rows(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER, {"summary": "u1 in c1"})
        turn(memory, OTHER_USER, {"summary": "u2 in c1"})
        memory.clear_user("u1")
    memory.flush()
    assert row(memory, SERVER.user_key) is None
    # The shared c1 row: its summary was written after u1's words were in c1, so the
    # erasure cleared it; u2's own row is u2's alone and stays.
    server_row = row(memory, SERVER.server_key)
    assert server_row is not None and server_row.summary is None
    u2 = row(memory, OTHER_USER.user_key)
    assert u2 is not None and u2.summary == "u2 in c1"


def test_a_delete_made_while_the_database_is_down_survives_a_restart(
    make_mem: MemFactory,
) -> None:
    first = make_mem(timeout=0.2)
    refresh(first, SERVER, "secret plans")
    refresh(first, DM, "dm secret")
    lock = SqliteWriteLock(make_mem.sqlite_path).acquire()
    try:
        assert first.clear_channel("c1") == 0
        assert first.clear_user("u1") == 0
        assert first.get(SERVER) is None
        first.close()

        # A restart with an empty cache while the delete is still queued: the rows
        # are readable (WAL) but must not be hydrated back.
        second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache", timeout=0.2)
        assert len(second._outbox) == 2
        assert second.get(SERVER) is None
        assert second.get(DM) is None
        assert second.get_key(SERVER.user_key) is None
        assert rows(second, SERVER.server_key or "", DM.user_key)  # still in SQL
    finally:
        lock.release()
    assert second.flush() == 2
    assert second._store.count_rows() == 0
    assert second.get(SERVER) is None and second.get(DM) is None
    second.close()
    third = make_mem(cache_dir=make_mem.tmp_path / "third-cache")
    assert third.get(SERVER) is None and third.get(DM) is None


def test_a_summary_cleared_while_the_database_is_down_is_not_hydrated_back(
    make_mem: MemFactory,
) -> None:
    first = make_mem(timeout=0.2)
    refresh(first, SERVER, "forget me")
    turn(first, SERVER)
    with SqliteWriteLock(make_mem.sqlite_path):
        first.clear_summary(SERVER)
        first.close()
        second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache", timeout=0.2)
        entry = second.get(SERVER)
        # The row (counters) may come back; its summary may not.
        assert entry is None or (entry.summary is None and not entry.categories)
        user_entry = second.get_key(SERVER.user_key)
        assert user_entry is None or user_entry.summary is None
    assert second.flush() == 1
    for key in SERVER.keys:
        stored = row(second, key)
        assert stored is not None and stored.summary is None
        entry = second.get_key(key)
        assert entry is None or entry.summary is None


def test_a_failed_delete_is_retried_by_the_next_write(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    refresh(memory, SERVER, "x")
    with SqliteWriteLock(make_mem.sqlite_path):
        assert memory.clear_channel("c1") == 0
    # No explicit flush: the next write replays the queue first, in order.
    turn(memory, OTHER_CHANNEL)
    assert len(memory._outbox) == 0
    assert rows(memory, *SERVER.keys) == {}


def test_async_deletes(memory: ShortTermMemory) -> None:
    import asyncio

    populate(memory)

    async def scenario() -> None:
        assert await memory.aclear_channel("c2") == 2
        # u2's own row deleted, and c1's shared row (u2 wrote its summary) cleared.
        assert await memory.aclear_user("u2") == 2
        await memory.aclear_summary(DM)

    asyncio.run(scenario())
    assert memory.get(OTHER_CHANNEL) is None
    assert memory.get_key(OTHER_USER.user_key) is None
    dm = memory.get(DM)
    assert dm is not None and dm.summary is None


def test_a_summary_clear_during_an_outage_keeps_queued_counters(
    memory: ShortTermMemory, make_mem: MemFactory
) -> None:
    refresh(memory, SERVER, "old summary")
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, SERVER)
        refresh(memory, SERVER, "written during the outage")
        turn(memory, SERVER)
        turn(memory, SERVER)
        memory.clear_summary(SERVER)
        # The queued writes no longer carry the cleared text.
        assert all("written during" not in str(i.payload) for i in memory._outbox.pending())
    memory.flush()
    live = memory.get(SERVER)
    stored = row(memory, SERVER.server_key)
    assert live is not None and stored is not None
    assert (stored.summary, live.summary) == (None, None)
    assert (live.turns_since_refresh, live.last_refreshed_turn) == (2, 2)
    assert (stored.turns_since_refresh, stored.last_refreshed_turn) == (2, 2)
    user_row = row(memory, SERVER.user_key)
    assert user_row is not None and user_row.summary is None

"""The write path: live entries first, then both rows in one transaction."""

from __future__ import annotations

import asyncio

import pytest
from helpers.factory import MemFactory
from helpers.memory import COMPLETED, DM, SERVER, row, rows

from stm_memory import Category, Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param)


def test_update_in_a_server_writes_both_entries_and_both_rows(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    turn = memory.begin_turn(SERVER, provider="openai", user_message="we planned the trip")
    assert memory.update(turn, {"summary": "  Trip planned for {{friday}}.  "}) == COMPLETED
    cleaned = "Trip planned for friday."

    live = memory.get(SERVER)
    assert live is not None and live.key == SERVER.server_key
    assert (live.summary, live.turns_since_refresh, live.last_refreshed_turn) == (cleaned, 0, 1)
    assert live.last_updated == fake_clock()
    user_entry = memory.get_key(SERVER.user_key)
    assert user_entry is not None and user_entry.summary == cleaned
    # Only the live scope's counter is reset.
    assert user_entry.last_refreshed_turn == 0

    stored = rows(memory, *SERVER.keys)
    assert set(stored) == set(SERVER.keys)
    server_row, user_row = stored[SERVER.server_key or ""], stored[SERVER.user_key]
    assert server_row.summary == user_row.summary == cleaned
    assert (server_row.kind, server_row.server_id, server_row.channel_id) == ("server", "g1", "c1")
    assert (user_row.kind, user_row.user_id) == ("user", "u1")
    assert (server_row.turns_since_refresh, server_row.last_refreshed_turn) == (0, 1)
    assert server_row.last_updated == fake_clock()
    assert len(memory._outbox) == 0


def test_update_in_a_dm_writes_one_row(memory: ShortTermMemory) -> None:
    turn = memory.begin_turn(DM)
    assert memory.update(turn, {"summary": "Private chat about chess."}) == COMPLETED
    assert memory._store.count_rows() == 1
    only = row(memory, DM.user_key)
    assert only is not None and only.summary == "Private chat about chess."
    assert (only.kind, only.server_id, only.last_refreshed_turn) == ("user", None, 1)
    live = memory.get(DM)
    assert live is not None and live.key == DM.user_key


def test_category_updates_merge_in_category_order(memory: ShortTermMemory) -> None:
    memory.set_categories("g1", [Category("Plot", "What happened"), Category("Mood", "Tone")])
    first = memory.begin_turn(SERVER)
    assert memory.update(first, {"mood": "tense", "plot": "A heist"}) == COMPLETED
    memory.end_turn(first)
    second = memory.begin_turn(SERVER)
    assert memory.update(second, {"mood": "relieved"}) == COMPLETED  # plot is kept
    live = memory.get(SERVER)
    assert live is not None
    assert list(live.categories.items()) == [("plot", "A heist"), ("mood", "relieved")]
    assert live.summary is None
    stored = row(memory, SERVER.server_key)
    assert stored is not None
    assert list(stored.categories.items()) == [("plot", "A heist"), ("mood", "relieved")]
    assert stored.last_refreshed_turn == 2


def test_a_second_update_in_the_same_turn_fails_and_changes_nothing(
    memory: ShortTermMemory,
) -> None:
    turn = memory.begin_turn(SERVER)
    assert memory.update(turn, {"summary": "first"}) == COMPLETED
    again = memory.update(turn, {"summary": "second"})
    assert again["status"] == "tool_execution_failed"
    assert again["tool_name"] == "update_short_term_memory"
    assert "already updated" in again["reason"]
    live = memory.get(SERVER)
    assert live is not None and (live.summary, live.last_refreshed_turn) == ("first", 1)
    stored = row(memory, SERVER.server_key)
    assert stored is not None and (stored.summary, stored.last_refreshed_turn) == ("first", 1)


def test_rejected_arguments_write_nothing(memory: ShortTermMemory) -> None:
    turn = memory.begin_turn(SERVER)
    for bad in ({"summary": "   "}, {"summary": 3}, {"summary": "x", "extra": "y"}, {}, "text"):
        result = memory.update(turn, bad)
        assert result["status"] == "tool_execution_failed", bad
    assert memory.get(SERVER) is None
    assert memory._store.count_rows() == 0
    # The failures did not use up the turn's one update.
    assert memory.update(turn, {"summary": "ok"}) == COMPLETED


def test_long_summaries_are_truncated_to_the_limit(make_mem: MemFactory) -> None:
    memory = make_mem(max_summary_length=20)
    turn = memory.begin_turn(SERVER)
    result = memory.update(turn, {"summary": "é" * 50})
    assert result["status"] == "completed" and "cut to 20" in result["note"]
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "é" * 20


def test_parent_channel_and_names_are_stored(memory: ShortTermMemory) -> None:
    thread = Scope(
        channel_id="t1",
        user_id="u1",
        server_id="g1",
        parent_channel_id="c1",
        channel_name="planning",
        server_name="Guild",
    )
    assert memory.update(memory.begin_turn(thread), {"summary": "thread talk"}) == COMPLETED
    stored = row(memory, thread.server_key)
    assert stored is not None
    assert (stored.parent_channel_id, stored.channel_name, stored.server_name) == (
        "c1",
        "planning",
        "Guild",
    )


def test_persona_scopes_are_separate(memory: ShortTermMemory) -> None:
    alice = Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="alice")
    bob = Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="bob")
    assert memory.update(memory.begin_turn(alice), {"summary": "alice notes"}) == COMPLETED
    assert memory.update(memory.begin_turn(bob), {"summary": "bob notes"}) == COMPLETED
    a, b = memory.get(alice), memory.get(bob)
    assert a is not None and b is not None
    assert (a.summary, b.summary) == ("alice notes", "bob notes")
    assert memory.get(SERVER) is None
    assert memory._store.count_rows() == 4


def test_disabled_server_refuses_the_update(memory: ShortTermMemory) -> None:
    memory.configure_server("g1", short_term_memory_enabled=False)
    result = memory.update(memory.begin_turn(SERVER), {"summary": "nope"})
    assert result["status"] == "tool_execution_failed"
    assert "disabled" in result["reason"]
    assert memory._store.count_rows() == 0


def test_async_update_uses_the_same_path(memory: ShortTermMemory) -> None:
    async def scenario() -> None:
        turn = await memory.abegin_turn(SERVER)
        assert await memory.aupdate(turn, {"summary": "async"}) == COMPLETED
        await memory.aend_turn(turn)
        live = await memory.aget(SERVER)
        assert live is not None and (live.summary, live.turns_since_refresh) == ("async", 0)

    asyncio.run(scenario())
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "async"


@pytest.mark.postgres
def test_update_on_postgres_writes_both_rows(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    memory = make_mem("postgres")
    assert memory.update(memory.begin_turn(SERVER), {"summary": "pg"}) == COMPLETED
    stored = rows(memory, *SERVER.keys)
    assert {e.summary for e in stored.values()} == {"pg"}
    assert stored[SERVER.server_key or ""].last_updated == fake_clock()


@pytest.mark.redis
def test_update_with_redis_cache(make_mem: MemFactory) -> None:
    memory = make_mem(cache="redis")
    assert memory.update(memory.begin_turn(SERVER), {"summary": "redis"}) == COMPLETED
    live = memory.get(SERVER)
    assert live is not None and live.summary == "redis"
    assert row(memory, SERVER.server_key) is not None

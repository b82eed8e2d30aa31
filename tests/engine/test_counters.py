"""Turn counting and passive capture: an ended turn counts once, a refresh ends its
turn at zero, and capture keeps the latest dialogue turns beside the summary."""

from __future__ import annotations

import asyncio

import pytest
from helpers.factory import MemFactory
from helpers.memory import DM, SERVER, dialogue, refresh, row, turn

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param)


def counters(memory: ShortTermMemory, scope: Scope) -> tuple[tuple[int, int], tuple[int, int]]:
    """(cache, SQL) values of (turns_since_refresh, last_refreshed_turn) of the live key."""
    live = memory.get(scope)
    stored = row(memory, scope.live_key)
    assert live is not None and stored is not None
    return (
        (live.turns_since_refresh, live.last_refreshed_turn),
        (stored.turns_since_refresh, stored.last_refreshed_turn),
    )


def test_three_turns_count_three(memory: ShortTermMemory) -> None:
    for _ in range(3):
        turn(memory, SERVER)
    assert counters(memory, SERVER) == ((3, 0), (3, 0))
    # Only the live key counts; the user key of a server scope has no row yet.
    assert row(memory, SERVER.user_key) is None


def test_a_refresh_turn_ends_at_zero(memory: ShortTermMemory) -> None:
    turn(memory, SERVER)
    turn(memory, SERVER)
    refresh(memory, SERVER, "distilled")
    assert counters(memory, SERVER) == ((0, 1), (0, 1))
    turn(memory, SERVER)
    refresh(memory, SERVER, "again")
    turn(memory, SERVER)
    assert counters(memory, SERVER) == ((1, 2), (1, 2))


def test_end_turn_twice_counts_once(memory: ShortTermMemory) -> None:
    ctx = memory.begin_turn(DM)
    memory.end_turn(ctx)
    memory.end_turn(ctx)
    assert counters(memory, DM) == ((1, 0), (1, 0))
    updated = memory.begin_turn(DM)
    assert memory.update(updated, {"summary": "s"}) == {"status": "completed"}
    memory.end_turn(updated)
    memory.end_turn(updated)
    assert counters(memory, DM) == ((0, 1), (0, 1))


def test_each_persona_counts_its_own_turns(memory: ShortTermMemory) -> None:
    alice = Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="alice")
    bob = Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="bob")
    turn(memory, alice)
    turn(memory, bob)
    turn(memory, bob)
    assert counters(memory, alice) == ((1, 0), (1, 0))
    assert counters(memory, bob) == ((2, 0), (2, 0))


def test_end_turn_on_a_never_seen_scope_creates_its_row(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    fresh = Scope(channel_id="new-channel", user_id="new-user", server_id="g9")
    assert memory.get(fresh) is None
    turn(memory, fresh)
    entry = memory.get(fresh)
    assert entry is not None
    assert (entry.turns_since_refresh, entry.summary, entry.messages) == (1, None, ())
    assert entry.last_updated == fake_clock()
    stored = row(memory, fresh.server_key)
    assert stored is not None and stored.turns_since_refresh == 1


def test_full_privacy_users_are_not_counted_or_captured(memory: ShortTermMemory) -> None:
    memory.configure_user("u1", full_privacy=True)
    turn(memory, SERVER)
    assert memory.capture(SERVER, dialogue(2)) is None
    assert memory.get(SERVER) is None
    assert memory._store.count_rows() == 0


def test_async_end_turn_counts(memory: ShortTermMemory) -> None:
    async def scenario() -> None:
        for _ in range(2):
            ctx = await memory.abegin_turn(SERVER)
            await memory.aend_turn(ctx)

    asyncio.run(scenario())
    assert counters(memory, SERVER) == ((2, 0), (2, 0))


# -- capture ----------------------------------------------------------------------------


def test_capture_keeps_the_last_ten_dialogue_turns(memory: ShortTermMemory) -> None:
    messages = [
        {"role": "system", "content": "be nice"},
        *dialogue(14),
        {"role": "tool", "content": "tool output", "tool_call_id": "t1"},
        {"role": "assistant", "content": ""},  # a pure tool call: not dialogue
    ]
    entry = memory.capture(SERVER, messages)
    assert entry is not None
    assert [m.content for m in entry.messages] == [f"message {i}" for i in range(5, 15)]
    assert [m.role for m in entry.messages][:2] == ["user", "assistant"]
    live = memory.get(SERVER)
    assert live is not None and len(live.messages) == 10
    # Both entries of a server scope get the dialogue, and both rows exist.
    user_entry = memory.get_key(SERVER.user_key)
    assert user_entry is not None and len(user_entry.messages) == 10
    assert row(memory, SERVER.server_key) is not None
    assert row(memory, SERVER.user_key) is not None


def test_capture_replaces_messages_and_keeps_summary_and_counters(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    refresh(memory, SERVER, "the summary")
    turn(memory, SERVER)
    memory.capture(SERVER, dialogue(3))
    fake_clock.advance(minutes=1)
    entry = memory.capture(SERVER, [{"role": "user", "content": "new", "name": "Ann"}])
    assert entry is not None
    assert entry.summary == "the summary"
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (1, 1)
    assert [(m.content, m.name, m.timestamp) for m in entry.messages] == [
        ("new", "Ann", fake_clock())
    ]
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "the summary"  # the capture kept it


def test_capture_of_nothing_stores_nothing(memory: ShortTermMemory) -> None:
    assert memory.capture(SERVER, []) is None
    assert memory.capture(SERVER, [{"role": "system", "content": "x"}]) is None
    assert memory.capture(SERVER, [{"role": "user", "content": "   "}]) is None
    assert memory.get(SERVER) is None
    assert memory._store.count_rows() == 0


def test_capture_respects_messages_kept(make_mem: MemFactory) -> None:
    memory = make_mem(messages_kept=3)
    entry = memory.capture(DM, dialogue(7))
    assert entry is not None
    assert [m.content for m in entry.messages] == ["message 5", "message 6", "message 7"]

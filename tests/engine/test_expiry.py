"""Expiry by the injectable clock: an entry lives 24 h with a summary, 12 h without, counted
from its last activity."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.factory import MemFactory
from helpers.memory import SERVER, dialogue, refresh, turn

from stm_memory import Category, Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param)


def test_a_summary_entry_lives_24_hours(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    refresh(memory, SERVER, "summary")
    fake_clock.advance(hours=23, minutes=59)
    live = memory.get(SERVER)
    assert live is not None and live.summary == "summary"
    fake_clock.advance(minutes=1)
    assert memory.get(SERVER) is None
    assert memory.get_key(SERVER.user_key) is None


def test_a_bare_entry_lives_12_hours(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    assert memory.capture(SERVER, dialogue(2)) is not None
    fake_clock.advance(hours=11, minutes=59, seconds=59)
    assert memory.get(SERVER) is not None
    fake_clock.advance(seconds=1)
    assert memory.get(SERVER) is None


def test_a_categories_only_entry_counts_as_bare(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    memory.set_categories("g1", [Category("Plot"), Category("Mood")])
    assert turn(memory, SERVER, {"plot": "heist"}) == {"status": "completed"}
    fake_clock.advance(hours=11, minutes=59)
    live = memory.get(SERVER)
    assert live is not None and live.categories == {"plot": "heist"}
    fake_clock.advance(minutes=1)
    assert memory.get(SERVER) is None


def test_a_blank_summary_counts_as_bare(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    refresh(memory, SERVER, "something")
    memory.clear_summary(SERVER)  # summary gone, entry stays
    fake_clock.advance(hours=12)
    assert memory.get(SERVER) is None


def test_ttls_follow_constructor_overrides(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    memory = make_mem(summary_ttl=timedelta(minutes=30), bare_ttl=600)  # 600 s
    refresh(memory, SERVER, "short-lived")
    other = Scope(channel_id="c2", user_id="u1", server_id="g1")
    memory.capture(other, dialogue(1))
    fake_clock.advance(minutes=10)
    assert memory.get(SERVER) is not None
    assert memory.get(other) is None
    fake_clock.advance(minutes=20)
    assert memory.get(SERVER) is None


def test_ttls_follow_environment_variables(
    make_mem: MemFactory, fake_clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STM_SUMMARY_TTL_SECONDS", "3600")
    memory = make_mem()
    refresh(memory, SERVER, "one hour")
    fake_clock.advance(minutes=59)
    assert memory.get(SERVER) is not None
    fake_clock.advance(minutes=1)
    assert memory.get(SERVER) is None


def test_activity_keeps_an_entry_alive(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    refresh(memory, SERVER, "kept alive")
    for _ in range(3):
        fake_clock.advance(hours=20)
        memory.capture(SERVER, dialogue(2))
        live = memory.get(SERVER)
        assert live is not None and live.summary == "kept alive"


def test_expired_content_is_not_carried_into_a_new_entry(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    refresh(memory, SERVER, "old news")
    turn(memory, SERVER)
    fake_clock.advance(hours=25)
    entry = memory.capture(SERVER, dialogue(2))
    assert entry is not None
    assert entry.summary is None
    assert [m.content for m in entry.messages] == ["message 1", "message 2"]
    # Counters are bookkeeping, not content: they carry on.
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (1, 1)


def test_hydrated_entries_expire_by_their_row_time(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    first = make_mem()
    refresh(first, SERVER, "persisted")
    first.close()
    fake_clock.advance(hours=24)
    second = make_mem(cache_dir=make_mem.tmp_path / "fresh-cache")
    assert second.get(SERVER) is None
    fake_clock.set(fake_clock() - timedelta(minutes=1))  # a second process, one minute behind
    third = make_mem(cache_dir=make_mem.tmp_path / "third-cache")
    live = third.get(SERVER)
    assert live is not None and live.summary == "persisted"

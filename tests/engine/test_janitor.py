"""The janitor deletes rows idle past the retention (90 days unless configured), when
called or on a schedule, and their live-cache entries with them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from helpers.factory import MemFactory
from helpers.inspection import assert_cache_matches_sql, cache_entry_keys
from helpers.memory import DM, SERVER, refresh, row, turn
from helpers.waiting import wait_until

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock

RECENT = Scope(channel_id="recent", user_id="u2", server_id="g1")


@pytest.fixture(params=["disk", "memory"])
def memory(request: pytest.FixtureRequest, make_mem: MemFactory) -> ShortTermMemory:
    return make_mem(cache=request.param)


def test_rows_idle_for_90_days_are_deleted(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    refresh(memory, SERVER, "ancient")
    refresh(memory, DM, "ancient dm")
    fake_clock.advance(days=60)
    refresh(memory, RECENT, "recent")
    fake_clock.advance(days=30, seconds=1)  # SERVER and DM: idle for over 90 days
    assert memory.run_janitor() == 3
    assert row(memory, SERVER.server_key) is None
    assert row(memory, SERVER.user_key) is None
    assert row(memory, DM.user_key) is None
    assert row(memory, RECENT.server_key) is not None
    assert memory._store.count_rows() == 2
    assert memory.get(SERVER) is None
    # A later turn in a swept channel starts from a new row.
    turn(memory, SERVER)
    fresh = row(memory, SERVER.server_key)
    assert fresh is not None and (fresh.summary, fresh.turns_since_refresh) == (None, 1)


def test_rows_younger_than_the_retention_stay(
    memory: ShortTermMemory, fake_clock: FrozenClock
) -> None:
    refresh(memory, SERVER, "young")
    fake_clock.advance(days=90)  # exactly 90 days is not older than 90 days
    assert memory.run_janitor() == 0
    assert memory._store.count_rows() == 2


def test_activity_renews_a_row(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    refresh(memory, SERVER, "kept")
    fake_clock.advance(days=80)
    turn(memory, SERVER)  # counting a turn touches the live row
    fake_clock.advance(days=20)
    assert memory.run_janitor() == 1  # only the untouched user row
    assert row(memory, SERVER.server_key) is not None


def test_retention_is_configurable(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    memory = make_mem(janitor_retention=timedelta(days=7))
    refresh(memory, DM, "a week")
    fake_clock.advance(days=6, hours=23)
    assert memory.run_janitor() == 0
    fake_clock.advance(hours=2)
    assert memory.run_janitor() == 1


def test_async_janitor(memory: ShortTermMemory, fake_clock: FrozenClock) -> None:
    import asyncio

    refresh(memory, DM, "old")
    fake_clock.advance(days=91)
    assert asyncio.run(memory.arun_janitor()) == 1


def test_background_janitor_runs_on_schedule_and_stops(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    memory = make_mem(janitor_first_run=0.05, janitor_interval=0.05)
    refresh(memory, DM, "old")
    fake_clock.advance(days=91)
    janitor = memory.start_janitor()
    assert memory.start_janitor() is janitor  # already running: the same thread
    assert wait_until(lambda: janitor.runs >= 2, timeout=5)
    assert memory._store.count_rows() == 0
    memory.stop_janitor()
    assert not janitor.is_alive()
    runs = janitor.runs
    refresh(memory, SERVER, "new rows")
    fake_clock.advance(days=91)
    assert not wait_until(lambda: janitor.runs > runs, timeout=0.3)
    assert memory._store.count_rows() == 2


def test_closing_the_memory_stops_the_janitor(make_mem: MemFactory) -> None:
    memory = make_mem(janitor_first_run=3600, janitor_interval=3600)
    janitor = memory.start_janitor()
    assert janitor.is_alive()
    memory.close()
    assert not janitor.is_alive()
    assert janitor.runs == 0


def test_a_failing_sweep_does_not_kill_the_schedule(
    make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = make_mem(janitor_first_run=0.01, janitor_interval=0.02)
    calls: list[int] = []

    def flaky(cutoff: object) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database hiccup")
        return 0

    monkeypatch.setattr(memory._store, "delete_older_than", flaky)
    janitor = memory.start_janitor()
    assert wait_until(lambda: len(calls) >= 3, timeout=5)
    memory.stop_janitor()
    assert janitor.last_deleted == 0


# -- the live cache follows the rows -------------------------------------------------------
# A swept row's live-cache entry must go with it, or the next turn on that scope carries
# the deleted entry's counters into a re-created row (and the deleted summary stays on
# disk until the native TTL).

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
ACTIVE = Scope(channel_id="c2", user_id="u1", server_id="g1")


def test_the_janitor_deletes_only_idle_rows(make_mem: MemFactory, fake_clock: FrozenClock) -> None:
    mem = make_mem()
    refresh(mem, SCOPE, "idle")
    fake_clock.advance(days=60)
    refresh(mem, ACTIVE, "active")
    fake_clock.advance(days=31)
    assert mem.run_janitor() == 2  # SCOPE's two rows, idle for 91 days
    assert row(mem, SCOPE.server_key) is None and row(mem, SCOPE.user_key) is None
    assert mem.get(SCOPE) is None
    kept = row(mem, ACTIVE.server_key)
    assert kept is not None and kept.summary == "active"


def test_a_scope_swept_by_the_janitor_starts_afresh(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    mem = make_mem(janitor_retention=1)  # one day: rows idle that long are deleted
    refresh(mem, SCOPE, "swept")
    for _ in range(3):
        turn(mem, SCOPE)
    fake_clock.advance(days=1, minutes=1)
    assert mem.run_janitor() == 2
    assert not set(SCOPE.keys) & cache_entry_keys(mem)
    turn(mem, SCOPE)
    assert_cache_matches_sql(mem, list(SCOPE.keys))

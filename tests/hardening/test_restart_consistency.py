"""A restart (an empty live cache rebuilt from SQL) must show what the running process
showed: the same summary, live or expired alike, and writes that waited in the outbox.

Hydration takes ``last_updated`` from the row's ``updated_at`` and nothing else, while
the running process moves its cached ``last_updated`` by other rules; these tests pin
where the two disagree.
"""

from __future__ import annotations

from helpers.factory import MemFactory
from helpers.inspection import assert_cache_matches_sql
from helpers.memory import dialogue, refresh, row, turn
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


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

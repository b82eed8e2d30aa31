"""The janitor deletes rows idle past the retention; their live-cache entries must go
with them, or the next turn on that scope carries the deleted entry's counters into a
re-created row (and the deleted summary stays on disk until the native TTL)."""

from __future__ import annotations

from helpers.factory import MemFactory
from helpers.inspection import assert_cache_matches_sql, cache_entry_keys
from helpers.memory import refresh, row, turn

from stm_memory import Scope
from stm_memory.testing import FrozenClock

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

"""Capture keeps the first timestamp of a turn it has seen, so "recent since the last
refresh" stays meaningful when callers pass the whole window every turn."""

from __future__ import annotations

from pathlib import Path

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock


def test_repeated_turns_keep_their_first_timestamp(tmp_path: Path) -> None:
    clock = FrozenClock()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path / 'stm.db'}", cache_dir=tmp_path / "c", clock=clock
    ) as mem:
        first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        mem.capture(scope, first)
        t0 = clock()
        clock.advance(minutes=5)
        mem.capture(scope, [*first, {"role": "user", "content": "again"}])
        entry = mem.get(scope)
        assert entry is not None
        assert [m.timestamp for m in entry.messages] == [t0, t0, clock()]
        assert entry.refreshed_at is None
        turn = mem.begin_turn(scope)
        assert mem.update(turn, {"summary": "greetings"}) == {"status": "completed"}
        entry = mem.get(scope)
        assert entry is not None and entry.refreshed_at == clock()

"""Many workers on one host (SPEC §9): processes and threads sharing one SQLite file and
one diskcache directory never lose a counter update or a refresh."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.memory import row
from helpers.subproc import Gate, finish_worker, start_worker
from helpers.threads import run_threads

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="busy", user_id="u1", server_id="g1")


def worker_args(make_mem: MemFactory, fake_clock: FrozenClock) -> dict[str, Any]:
    return {
        "database_url": make_mem.database_url("sqlite"),
        "cache_dir": str(make_mem.cache_dir),
        "outbox_path": str(make_mem.outbox_path),
        "now": fake_clock().isoformat(),
        "scope": {k: v for k, v in asdict(SCOPE).items() if v is not None},
    }


def counted_turns(memory: ShortTermMemory, turns: int, updates_every: int = 0) -> None:
    for i in range(1, turns + 1):
        ctx = memory.begin_turn(SCOPE)
        if updates_every and i % updates_every == 0:
            assert memory.update(ctx, {"summary": f"thread refresh {i}"}) == {"status": "completed"}
        memory.end_turn(ctx)


@pytest.mark.parametrize("cache", ["disk", "memory"])
def test_threads_counting_turns_lose_nothing(make_mem: MemFactory, cache: str) -> None:
    memory = make_mem(cache=cache)
    run_threads(8, lambda _i: counted_turns(memory, 15))
    live = memory.get(SCOPE)
    stored = row(memory, SCOPE.server_key)
    assert live is not None and stored is not None
    assert live.turns_since_refresh == stored.turns_since_refresh == 120
    assert len(memory._outbox) == 0


@pytest.mark.slow
def test_processes_and_threads_counting_turns_lose_nothing(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    memory = make_mem()
    memory.capture(SCOPE, [{"role": "user", "content": "warm up"}])  # rows and cache exist
    gate = Gate(make_mem.tmp_path / "gate")
    procs = [
        start_worker("end_turns", turns=30, gate=str(gate), **worker_args(make_mem, fake_clock))
        for _ in range(2)
    ]
    gate.open_when_ready(2)
    run_threads(4, lambda _i: counted_turns(memory, 15))
    results = [finish_worker(p) for p in procs]
    assert [r["counted"] for r in results] == [30, 30]
    live = memory.get(SCOPE)
    stored = row(memory, SCOPE.server_key)
    assert live is not None and stored is not None
    assert live.turns_since_refresh == stored.turns_since_refresh == 2 * 30 + 4 * 15
    assert len(memory._outbox) == 0


@pytest.mark.slow
def test_concurrent_refreshes_and_turns_lose_no_refresh(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    memory = make_mem()
    gate = Gate(make_mem.tmp_path / "gate")
    procs = [
        start_worker(
            "end_turns",
            turns=20,
            updates_every=4,
            gate=str(gate),
            **worker_args(make_mem, fake_clock),
        )
        for _ in range(2)
    ]
    gate.open_when_ready(2)
    run_threads(3, lambda _i: counted_turns(memory, 12, updates_every=3))
    results = [finish_worker(p) for p in procs]
    refreshes = sum(r["refreshed"] for r in results) + 3 * 4
    counted = sum(r["counted"] for r in results) + 3 * 8
    live = memory.get(SCOPE)
    stored = row(memory, SCOPE.server_key)
    assert live is not None and stored is not None
    assert live.last_refreshed_turn == stored.last_refreshed_turn == refreshes == 22
    assert 0 <= live.turns_since_refresh <= counted
    assert 0 <= stored.turns_since_refresh <= counted
    assert live.summary is not None and "refresh" in live.summary
    user_row = row(memory, SCOPE.user_key)
    assert user_row is not None and user_row.summary is not None
    assert len(memory._outbox) == 0

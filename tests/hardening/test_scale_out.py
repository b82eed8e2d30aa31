"""Scale-out (issue 8): hosts sharing PostgreSQL + Redis, and the workers of one host
(processes and threads sharing one SQLite file and one diskcache directory), see each
other's writes and deletions at once and lose no counter update and no refresh.

Host A is the test process; host B (and C) are child processes
(``helpers/host_process.py``), so the engines really are separate interpreters with
their own pools and memos. The one-host workers at the end run
``helpers/workers.py`` functions in fresh interpreters (``helpers.subproc``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.deployment import Deployment, OpenMem
from helpers.factory import MemFactory
from helpers.host import HostFactory
from helpers.inspection import assert_cache_matches_sql, cache_entry_keys
from helpers.memory import dialogue, refresh, row, scope_dict, turn
from helpers.subproc import Gate, finish_worker, start_worker
from helpers.threads import run_threads

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.redis import RedisLiveCache
from stm_memory.cache.resilient import ResilientCache
from stm_memory.testing import FrozenClock

S1 = Scope(channel_id="c1", user_id="u1", server_id="g1")
S2 = Scope(channel_id="c2", user_id="u1", server_id="g1")
OTHER_USER = Scope(channel_id="c1", user_id="u2", server_id="g1")
DM = Scope(channel_id="dm", user_id="u1")


def test_redis_url_selects_a_resilient_redis_cache(
    open_mem: OpenMem, postgres_url: str, redis_url: str
) -> None:
    mem = open_mem(postgres_url, redis_url=redis_url)
    assert isinstance(mem._cache, ResilientCache)
    assert isinstance(mem._cache.primary, RedisLiveCache)
    refresh(mem, S1, "stored in redis")
    direct = RedisLiveCache.from_url(redis_url)  # Redis itself, not through the memory
    try:
        stored = set(direct.iter_keys("shortterm:"))
    finally:
        direct.close()
    assert set(S1.keys) <= stored
    assert not mem._cache.degraded


def test_two_processes_see_each_others_writes_and_deletions_at_once(
    deployment: Deployment, hosts: HostFactory, tmp_path: Path
) -> None:
    """Two hosts on PostgreSQL + Redis, or two workers of one host on one SQLite file
    and one cache directory (sharing its outbox, the default layout)."""
    a = deployment.open()
    b_settings = dict(deployment.settings)
    if deployment.name == "postgres+redis":  # every host keeps its own outbox
        b_settings["outbox_path"] = tmp_path / "b.sqlite3"
    b = hosts(**b_settings)

    refresh(a, S1, "written by A")
    seen = b.get(S1.server_key)
    assert seen is not None and seen.summary == "written by A"

    assert b.turn(S1) is None  # B counts a turn: A sees the counter at once
    live = a.get(S1)
    assert live is not None and (live.turns_since_refresh, live.last_refreshed_turn) == (1, 1)

    assert b.turn(S1, {"summary": "written by B"})["status"] == "completed"
    live = a.get(S1)
    assert live is not None
    assert (live.summary, live.turns_since_refresh, live.last_refreshed_turn) == (
        "written by B",
        0,
        2,
    )
    a.capture(S1, dialogue(2))
    seen = b.get(S1.server_key)
    assert seen is not None and [m.content for m in seen.messages] == ["message 1", "message 2"]

    # Deletions: a channel cleared on B is gone for A, in the cache and in SQL.
    refresh(a, S2, "second channel")
    refresh(a, OTHER_USER, "another user")
    assert b.call("clear_channel", channel_id="c2") == 2
    assert a.get(S2) is None and a.get_key(S2.user_key) is None
    assert row(a, S2.server_key) is None and row(a, S2.user_key) is None
    assert not {k for k in cache_entry_keys(a) if ":c2" in k}

    # A user erased on A is gone for B; the channel's server entry stays, without the
    # summary u1's words may be in (u2 wrote it after u1 spoke in c1).
    refresh(a, DM, "direct message")
    assert a.clear_user("u1") == 3  # c1 and the DM deleted, c1's server row cleared
    assert b.get(S1.user_key) is None and b.get(DM.user_key) is None
    server_side = b.get(S1.server_key)
    assert server_side is not None and server_side.summary is None
    assert all(m.user_id != "u1" for m in server_side.messages)
    assert b.get(OTHER_USER.user_key) is not None
    assert_cache_matches_sql(a)
    assert b.call("outbox") == 0 and len(a._outbox) == 0


def _plan(*items: tuple[Scope, str]) -> list[dict[str, Any]]:
    return [{"scope": scope_dict(scope), "mode": mode} for scope, mode in items]


@pytest.mark.parametrize("shared", ["disk", "redis"])
def test_concurrent_processes_lose_no_turn_and_no_refresh(
    open_mem: OpenMem,
    hosts: HostFactory,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    shared: str,
) -> None:
    """Two child processes and the test process work at the same moment on one store.
    Each process has a scope of its own (turns, refreshes and captures mixed); all share a
    scope that only counts and one that only refreshes, so every total is exact."""
    counting = Scope(channel_id="counting", user_id="u0", server_id="g1")
    refreshing = Scope(channel_id="refreshing", user_id="u0", server_id="g1")
    own = [Scope(channel_id=f"own{i}", user_id=f"u{i}", server_id="g1") for i in range(3)]
    if shared == "disk":
        # Several workers on one host: one SQLite file, one cache directory and the
        # default outbox (beside the database file), all shared.
        config: dict[str, Any] = {
            "database_url": f"sqlite:///{tmp_path / 'stm.db'}",
            "cache_dir": tmp_path / "cache",
            "outbox_path": None,
            "timeout": 30,
        }
    else:
        config = {
            "database_url": request.getfixturevalue("postgres_url"),
            "redis_url": request.getfixturevalue("redis_url"),
        }
    a = open_mem(**{k: v for k, v in config.items() if k != "timeout"}, timeout=30)
    # Rows exist before the race (a first refresh racing another one is
    # test_write_ordering.py's subject).
    a.capture(counting, dialogue(1))
    a.capture(refreshing, dialogue(1))
    rounds = 12
    gate = tmp_path / "go"
    children = [
        hosts(**config, **({} if shared == "disk" else {"outbox_path": tmp_path / f"o{i}"}))
        for i in (1, 2)
    ]
    for i, child in enumerate(children, start=1):
        child.send(
            "workload",
            plan=_plan((own[i], "mixed"), (counting, "count"), (refreshing, "refresh")),
            rounds=rounds,
            gate=str(gate),
        )
    gate.touch()
    for i in range(rounds):
        ctx = a.begin_turn(own[0])
        if i % 3 == 2:
            assert a.update(ctx, {"summary": f"A round {i}"})["status"] == "completed"
        a.capture(own[0], dialogue(1, start=i))
        a.end_turn(ctx)
        turn(a, counting)
        assert turn(a, refreshing, {"summary": f"A refresh {i}"})["status"] == "completed"
    results = [child.receive() for child in children]

    total_counted = rounds + sum(r["counted"][counting.live_key] for r in results)
    total_refreshed = rounds + sum(r["refreshed"][refreshing.live_key] for r in results)
    assert total_counted == total_refreshed == 3 * rounds
    live = a.get(counting)
    assert live is not None and live.turns_since_refresh == 3 * rounds
    live = a.get(refreshing)
    assert live is not None
    assert (live.turns_since_refresh, live.last_refreshed_turn) == (0, 3 * rounds)
    stored = row(a, refreshing.live_key)
    assert stored is not None and stored.last_refreshed_turn == 3 * rounds
    for scope in own:  # one writer each: 4 refreshes, the last one in the last round
        live = a.get(scope)
        assert live is not None
        assert (live.turns_since_refresh, live.last_refreshed_turn) == (0, 4)
        assert live.summary is not None and live.summary.endswith("round 11")
    # The refreshing scope's summary is left out: which concurrent refresh ends up in
    # SQL is the subject of test_write_ordering.py.
    assert_cache_matches_sql(a, [k for s in (*own, counting) for k in s.keys])
    assert len(a._outbox) == 0


# -- many workers of one host --------------------------------------------------------------

SCOPE = Scope(channel_id="busy", user_id="u1", server_id="g1")


def worker_args(make_mem: MemFactory, fake_clock: FrozenClock) -> dict[str, Any]:
    return {
        "database_url": make_mem.database_url("sqlite"),
        "cache_dir": str(make_mem.cache_dir),
        "outbox_path": str(make_mem.outbox_path),
        "now": fake_clock().isoformat(),
        "scope": scope_dict(SCOPE),
    }


def counted_turns(memory: ShortTermMemory, turns: int, updates_every: int = 0) -> None:
    for i in range(1, turns + 1):
        ctx = memory.begin_turn(SCOPE)
        if updates_every and i % updates_every == 0:
            assert memory.update(ctx, {"summary": f"thread refresh {i}"})["status"] == "completed"
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

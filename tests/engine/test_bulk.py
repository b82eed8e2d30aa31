"""Bulk operations in batches (stm_memory/bulk.py, SqlStore.batch_size): a
channel delete, a user erasure, the janitor and repair give the same result in batches
of 7 as in one, an interruption between two batches is finished by the outbox's replay
(and brings nothing back), and progress is reported after every batch."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from helpers.factory import MemFactory
from helpers.services import PostgresSchemas

from stm_memory import DatabaseError, MemoryEntry, Scope, ShortTermMemory, StoredMessage
from stm_memory.bulk import (
    DELETE_ROWS,
    ERASE_CACHED,
    ERASE_ROWS,
    EVICT_CACHED,
    REPAIR_CACHED,
    reporting,
)
from stm_memory.cache.base import Write
from stm_memory.live.repair import repair_cache
from stm_memory.store.schema import channel_resets, memories
from stm_memory.store.sql import SqlStore, create_sql_engine
from stm_memory.testing import FrozenClock

BATCH = 7
ROWS = 100
START = FrozenClock()()  # where every FrozenClock starts: the fake_clock's "now"
IDLE = START - timedelta(days=100)
Call = tuple[str, int, int | None]

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


class Interrupted(Exception):
    """Stands for a crash between two batches."""


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], str]:
    """A fresh, empty database of the backend on every call."""
    if backend == "sqlite":
        names = iter(range(1000))
        return lambda: f"sqlite:///{tmp_path / f'store-{next(names)}.db'}"
    schemas: PostgresSchemas = request.getfixturevalue("postgres_schemas")
    return schemas.new_url


@pytest.fixture
def open_store(new_url: Callable[[], str]) -> Iterator[Callable[[int], SqlStore]]:
    opened: list[SqlStore] = []

    def open_one(batch_size: int) -> SqlStore:
        store = SqlStore(create_sql_engine(new_url()), batch_size=batch_size)
        store.setup()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def recorder() -> tuple[list[Call], Callable[[str, int, int | None], None]]:
    calls: list[Call] = []
    return calls, lambda phase, done, total: calls.append((phase, done, total))


def phases(calls: list[Call]) -> list[str]:
    """The phases reported, in order, each once."""
    return list(dict.fromkeys(phase for phase, _done, _total in calls))


def assert_well_reported(calls: list[Call]) -> dict[str, int]:
    """Per phase, counts never go back and the last call gives the total; returns
    each phase's final count."""
    final: dict[str, int] = {}
    for phase in phases(calls):
        counts = [(done, total) for p, done, total in calls if p == phase]
        dones = [done for done, _total in counts]
        assert dones == sorted(dones), (phase, counts)
        last_done, last_total = counts[-1]
        assert last_total == last_done, (phase, counts)
        final[phase] = last_done
    return final


# -- the store -----------------------------------------------------------------------


def population() -> list[MemoryEntry]:
    """100 rows: channel c1 holds a third, user u1 owns a quarter (some of them DMs),
    u1's words reached a fifth of the others, some of whose provenance only looks like
    u1 (u11, u12…), and half are idle for 100 days."""
    entries = []
    for i in range(ROWS):
        channel = "c1" if i % 3 == 0 else f"c{i}"
        user = "u1" if i % 4 == 0 else f"u1{i % 9}"
        kind = "user" if i % 2 == 0 else "server"
        server = None if kind == "user" and i % 8 == 0 else "g1"
        sc = Scope(channel_id=channel, user_id=user, server_id=server, persona_id=f"p{i}")
        key = sc.user_key if kind == "user" else sc.server_key
        assert key is not None
        at = IDLE if i % 2 else START
        said = {user} | ({"u1"} if i % 5 == 0 else set())
        entries.append(
            replace(
                MemoryEntry.empty(sc, key, at),
                summary=f"summary {i}",
                provenance=frozenset(said),
                rev=1,
            )
        )
    # A key longer than the key column: stored as its digest.
    long_scope = Scope(channel_id=":" * 400, user_id="u1", server_id="g1")
    entries.append(
        replace(MemoryEntry.empty(long_scope, long_scope.user_key, IDLE), summary="s", rev=1)
    )
    return entries


def legacy() -> set[str]:
    """Rows written before provenance was kept: a NULL provenance, with a summary."""
    return {e.key for e in population()[10:ROWS:17]}


def fill(store: SqlStore) -> None:
    for entry in population():
        store.put_rows([entry], entry.last_updated)
    m = memories.c
    with store.engine.begin() as conn:
        conn.execute(sa.update(memories).where(m.key.in_(legacy())).values(provenance=sa.null()))


def snapshot(store: SqlStore) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(memories).order_by(memories.c.key)).mappings().all()
        resets = conn.execute(sa.select(channel_resets).order_by("channel_id")).mappings().all()
    return [dict(r) for r in rows], [dict(r) for r in resets]


OPERATIONS: dict[str, Callable[[SqlStore], int]] = {
    "delete_channel": lambda s: s.delete_channel("c1", op_id=uuid.uuid4().hex, at=START),
    "forget_user": lambda s: s.forget_user("u1", START, op_id=uuid.uuid4().hex),
    "delete_user": lambda s: s.delete_user("u1", op_id=uuid.uuid4().hex),
    "delete_older_than": lambda s: s.delete_older_than(START - timedelta(days=90)),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_batches_of_seven_do_what_one_batch_does(
    open_store: Callable[[int], SqlStore], operation: str
) -> None:
    one, small = open_store(10_000), open_store(BATCH)
    fill(one)
    fill(small)
    before = snapshot(small)
    calls, progress = recorder()
    run = OPERATIONS[operation]
    with reporting(progress):
        changed = run(small)
    assert changed == run(one) > BATCH
    assert snapshot(small) == snapshot(one) != before
    final = assert_well_reported(calls)
    if operation != "forget_user":  # (its two phases: the next test)
        assert final == {DELETE_ROWS: changed}
        # After every batch of 7, up to the first that finds fewer.
        assert len(calls) == changed // BATCH + 1


def test_an_erasure_reports_its_deletes_then_its_scan(
    open_store: Callable[[int], SqlStore],
) -> None:
    store = open_store(BATCH)
    fill(store)
    total = store.count_rows()
    own = len(store.load_user("u1"))
    calls, progress = recorder()
    with reporting(progress):
        store.forget_user("u1", START)
    assert phases(calls) == [DELETE_ROWS, ERASE_ROWS]
    # Totals are known up front (a count), and every row is scanned once.
    assert calls[0] == (DELETE_ROWS, BATCH, own)
    assert assert_well_reported(calls) == {DELETE_ROWS: own, ERASE_ROWS: total - own}
    # Each of the user's DMs starts afresh, whichever batch deleted its rows.
    dms = {e.channel_id for e in population() if e.user_id == "u1" and e.server_id is None}
    assert len(dms) > 1
    assert {store.channel_reset_at(ch) for ch in dms} == {START}
    assert store.channel_reset_at("c2") is None


def test_idle_keys_come_in_batches_of_cache_keys(open_store: Callable[[int], SqlStore]) -> None:
    store = open_store(BATCH)
    fill(store)
    cutoff = START - timedelta(days=90)
    batches = list(store.keys_older_than(cutoff))
    assert all(0 < len(b) <= BATCH for b in batches)
    keys = [k for b in batches for k in b]
    idle = {e.key for e in population() if e.last_updated < cutoff}
    assert len(keys) == len(set(keys)) and set(keys) == idle
    assert any(len(k) > 1100 for k in keys)  # the digest row, listed by its entry key


def interrupt_at(batch: int) -> Callable[[str, int, int | None], None]:
    """A progress callback that fails once ``batch`` batches have committed."""
    seen = 0

    def progress(_phase: str, _done: int, _total: int | None) -> None:
        nonlocal seen
        seen += 1
        if seen == batch:
            raise Interrupted

    return progress


@pytest.mark.parametrize(("operation", "at_batch"), [("delete_channel", 2), ("forget_user", 9)])
def test_a_replay_finishes_an_interrupted_delete_once(
    open_store: Callable[[int], SqlStore], operation: str, at_batch: int
) -> None:
    done, store = open_store(10_000), open_store(BATCH)
    fill(done)
    fill(store)
    op_id = uuid.uuid4().hex

    def run(s: SqlStore) -> int:
        if operation == "delete_channel":
            return s.delete_channel("c1", op_id=op_id, at=START)
        return s.forget_user("u1", START, op_id=op_id)

    whole = run(done)
    with reporting(interrupt_at(at_batch)), pytest.raises(Interrupted):
        run(store)
    halfway = snapshot(store)
    assert halfway != snapshot(done)  # some batches committed, not all
    left = run(store)  # the outbox's replay: the same op_id
    assert 0 < left < whole
    assert snapshot(store) == snapshot(done)
    # Applied now: a later replay changes nothing, not even rows written since.
    newer = population()[3]
    store.put_rows([replace(newer, rev=99)], START)
    after = snapshot(store)
    assert run(store) == 0
    assert snapshot(store) == after


def test_a_replay_beside_another_stops_once_the_other_has_finished(
    open_store: Callable[[int], SqlStore],
) -> None:
    store = open_store(BATCH)
    fill(store)
    op_id = uuid.uuid4().hex
    newer = replace(population()[3], rev=99)  # a row of c1 written after the delete
    other: list[int] = []

    def progress(_phase: str, _done: int, _total: int | None) -> None:
        if other:
            return  # the other replay's own reports, and the later ones
        other.append(0)
        # Between two batches of this replay, another one runs the delete to its end,
        # then a turn writes to the channel again.
        other[0] = store.delete_channel("c1", op_id=op_id, at=START)
        store.put_rows([newer], START)

    with reporting(progress):
        first = store.delete_channel("c1", op_id=op_id, at=START)
    assert first == BATCH  # its first batch only: the claim of its second one failed
    assert other[0] > 0
    assert store.load_many([newer.key]) == {newer.key: newer}


@pytest.mark.postgres
def test_a_delete_beside_another_deletes_everything(
    postgres_schemas: PostgresSchemas,
) -> None:
    store = SqlStore(create_sql_engine(postgres_schemas.new_url()), batch_size=BATCH)
    try:
        store.setup()
        fill(store)
        in_c1 = [e.key for e in population() if e.channel_id == "c1"]
        m = memories.c
        first_rows = sa.select(m.key).where(m.channel_id == "c1").limit(3)
        locked = threading.Event()

        def concurrent_delete() -> None:
            # Another delete takes the rows this one's first batch is about to pick,
            # and commits while that batch waits on them.
            with store.engine.begin() as conn:
                conn.execute(sa.delete(memories).where(m.key.in_(first_rows)))
                locked.set()
                time.sleep(0.5)

        other = threading.Thread(target=concurrent_delete)
        other.start()
        assert locked.wait(5)
        # The first batch deletes 4 of its 7: not the last one, as rows are left.
        assert store.delete_channel("c1") == len(in_c1) - 3
        other.join()
        assert store.load_many(in_c1) == {}
    finally:
        store.close()


# -- the engine ------------------------------------------------------------------------


@pytest.fixture
def small_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cache scans in batches of 7 keys too."""
    import stm_memory.bulk
    import stm_memory.engine
    import stm_memory.live.deletion
    import stm_memory.live.scan

    monkeypatch.setattr(stm_memory.bulk, "CACHE_BATCH", BATCH)
    monkeypatch.setattr(stm_memory.live.scan, "CACHE_BATCH", BATCH)
    monkeypatch.setattr(stm_memory.engine, "CACHE_BATCH", BATCH)
    monkeypatch.setattr(stm_memory.live.deletion, "CACHE_BATCH", BATCH)
    monkeypatch.setattr(stm_memory.live.deletion, "_ERASE_BATCH", BATCH)


def engine(make_mem: MemFactory, backend: str, **kw: Any) -> ShortTermMemory:
    mem = make_mem(backend, timeout=0.5, **kw)
    assert isinstance(mem._store, SqlStore)
    mem._store.batch_size = BATCH
    return mem


def seed(mem: ShortTermMemory, *, idle_cached: int = 0) -> list[MemoryEntry]:
    """The population in SQL; its recent entries (and ``idle_cached`` idle ones) in
    the live cache too, with their speakers' captured turns."""
    assert isinstance(mem._store, SqlStore)
    fill(mem._store)
    entries = population()
    # (Legacy rows are not cached: a value hydrated from one has no provenance.)
    entries = [e for e in entries if e.key not in legacy()]
    live = [e for e in entries if e.last_updated == START]
    live += [e for e in entries if e.last_updated == IDLE][:idle_cached]
    live = [
        replace(e, messages=tuple(said(user, e.last_updated) for user in sorted(e.provenance)))
        for e in live
    ]
    mem._cache.add_many({e.key: Write(e.to_dict(), mem._live.native_ttl(e)) for e in live})
    return live


def said(user: str, at: datetime) -> StoredMessage:
    return StoredMessage(role="user", content=f"{user} was here", timestamp=at, user_id=user)


def cached(mem: ShortTermMemory) -> set[str]:
    return {k for k in mem._cache.iter_keys("shortterm:") if not k.startswith("shortterm:index:")}


def rows_of(mem: ShortTermMemory, keys: Iterable[str]) -> dict[str, MemoryEntry]:
    return mem._store.load_many(list(keys))


def interrupt_in(phase: str, error: Exception) -> Callable[[str, int, int | None], None]:
    """Fails with ``error`` once the second batch of ``phase`` has committed."""
    seen = 0

    def progress(reported: str, _done: int, _total: int | None) -> None:
        nonlocal seen
        if reported == phase:
            seen += 1
            if seen == 2:
                raise error

    return progress


@pytest.mark.usefixtures("small_caches")
def test_clear_channel_in_batches(make_mem: MemFactory, backend: str) -> None:
    mem = engine(make_mem, backend)
    live = seed(mem)
    in_c1 = {e.key for e in population() if e.channel_id == "c1"}
    calls, progress = recorder()
    assert mem.clear_channel("c1", progress=progress) == len(in_c1)
    assert phases(calls) == [EVICT_CACHED, DELETE_ROWS]
    assert assert_well_reported(calls) == {
        EVICT_CACHED: len([e for e in live if e.channel_id == "c1"]),
        DELETE_ROWS: len(in_c1),
    }
    assert cached(mem) == {e.key for e in live} - in_c1
    assert rows_of(mem, in_c1) == {}
    assert mem._store.count_rows() == ROWS + 1 - len(in_c1)


@pytest.mark.usefixtures("small_caches")
def test_clear_user_in_batches(
    make_mem: MemFactory, backend: str, open_store: Callable[[int], SqlStore]
) -> None:
    twin = open_store(10_000)
    fill(twin)
    mem = engine(make_mem, backend)
    live = seed(mem)
    calls, progress = recorder()
    assert mem.clear_user("u1", progress=progress) == twin.forget_user("u1", START)
    assert phases(calls) == [EVICT_CACHED, ERASE_CACHED, DELETE_ROWS, ERASE_ROWS]
    own = [e for e in live if e.kind == "user" and e.user_id == "u1"]
    final = assert_well_reported(calls)
    assert final[EVICT_CACHED] == len(own)
    assert final[ERASE_CACHED] == len(live) - len(own)
    assert_erased(mem, "u1")


def assert_erased(mem: ShortTermMemory, user: str) -> None:
    """Nothing of ``user`` is left, in the cache or in SQL; everyone else's is."""
    entries = population()
    assert mem._store.load_user(user) == []
    assert not [k for k in cached(mem) if k.startswith(f"shortterm:user:{user}:")]
    reached = {e.key for e in entries if user in e.provenance}
    stored = rows_of(mem, (e.key for e in entries))
    for key, entry in stored.items():
        assert user not in entry.provenance
        if key in reached:
            assert entry.summary is None, key
    for key, value in mem._cache.get_many(list(cached(mem))).items():
        assert user not in value["provenance"] and f"{user} was here" not in str(value)
        if key in reached:
            assert value["summary"] is None
    kept = [e for e in entries if e.key in stored and e.key not in reached | legacy()]
    assert kept and all(stored[e.key].summary == e.summary for e in kept)


@pytest.mark.usefixtures("small_caches")
@pytest.mark.parametrize("error", [Interrupted(), DatabaseError("lost the connection")])
def test_an_interrupted_clear_channel_is_finished_by_the_replay(
    make_mem: MemFactory, backend: str, error: Exception
) -> None:
    mem = engine(make_mem, backend)
    seed(mem)
    in_c1 = {e.key for e in population() if e.channel_id == "c1"}
    progress = interrupt_in(DELETE_ROWS, error)
    if isinstance(error, DatabaseError):
        assert mem.clear_channel("c1", progress=progress) == 0  # queued for a retry
    else:
        with pytest.raises(Interrupted):
            mem.clear_channel("c1", progress=progress)
    assert 0 < len(rows_of(mem, in_c1)) < len(in_c1)  # two batches went
    assert [i.kind for i in mem._outbox.pending()] == ["delete_channel"]
    # Nothing of the channel comes back meanwhile, even from the rows still there.
    assert all(mem.get_key(k) is None for k in in_c1)
    mem.close()
    # The next start replays the outbox first, which finishes the delete.
    again = engine(make_mem, backend, cache_dir=make_mem.tmp_path / "fresh-cache")
    assert len(again._outbox) == 0
    assert rows_of(again, in_c1) == {}
    assert all(again.get_key(k) is None for k in in_c1)
    assert again._store.count_rows() == ROWS + 1 - len(in_c1)


@pytest.mark.usefixtures("small_caches")
def test_an_interrupted_erasure_is_finished_by_the_replay(
    make_mem: MemFactory, backend: str
) -> None:
    mem = engine(make_mem, backend)
    seed(mem)
    with pytest.raises(Interrupted):
        mem.clear_user("u1", progress=interrupt_in(ERASE_ROWS, Interrupted()))
    assert [i.kind for i in mem._outbox.pending()] == ["forget_user"]
    assert mem._store.load_user("u1") == []  # the first phase is done
    reached = [
        e.key
        for e in population()
        if "u1" in e.provenance and e.kind == "server" and e.key not in legacy()
    ]
    assert any(r.summary for r in rows_of(mem, reached).values())  # the second is not
    # Read from SQL again meanwhile, they show what the queued erasure will leave.
    mem._live.evict(reached)
    shown = mem._live.get_many(reached)
    assert shown and all(e.summary is None for e in shown.values())
    assert mem.flush() == 1
    assert_erased(mem, "u1")


@pytest.mark.usefixtures("small_caches")
def test_the_janitor_in_batches(make_mem: MemFactory, backend: str) -> None:
    mem = engine(make_mem, backend)
    live = seed(mem, idle_cached=10)
    cutoff = START - timedelta(days=90)
    idle = {e.key for e in population() if e.last_updated < cutoff}
    calls, progress = recorder()
    assert mem.run_janitor(progress=progress) == len(idle)
    assert phases(calls) == [REPAIR_CACHED, EVICT_CACHED, DELETE_ROWS]
    assert assert_well_reported(calls) == {
        REPAIR_CACHED: len(live),
        EVICT_CACHED: len(idle),
        DELETE_ROWS: len(idle),
    }
    assert cached(mem) == {e.key for e in live} - idle
    assert rows_of(mem, idle) == {}
    assert mem._store.count_rows() == ROWS + 1 - len(idle)


def test_repair_in_batches(make_mem: MemFactory, backend: str) -> None:
    mem = engine(make_mem, backend)
    live = seed(mem)
    # Disagreements spread over many batches: entries ahead of their rows, and entries
    # whose rows are gone.
    ahead, orphans = live[::5], live[1::5]
    for entry in ahead:
        bumped = replace(entry, summary="cached only", rev=entry.rev + 1)
        mem._cache.atomic([entry.key], lambda _c, e=bumped: {e.key: Write(e.to_dict())})
    with mem._store.engine.begin() as conn:
        keys = [e.key for e in orphans]
        conn.execute(sa.delete(memories).where(memories.c.key.in_(keys)))
    calls, progress = recorder()
    with reporting(progress):
        repaired = repair_cache(mem._live, START, batch=BATCH)
    assert assert_well_reported(calls) == {REPAIR_CACHED: len(live)}
    assert len(calls) > len(live) // BATCH
    assert (repaired.checked, repaired.rows_advanced, repaired.entries_dropped) == (
        len(live),
        len(ahead),
        len(orphans),
    )
    assert all(r.summary == "cached only" for r in rows_of(mem, (e.key for e in ahead)).values())
    assert not cached(mem) & {e.key for e in orphans}


def test_a_stop_ends_a_running_sweep_between_two_batches() -> None:
    from stm_memory.durability.janitor import Janitor

    steps: list[int] = []

    def sweep(*, progress: Callable[[str, int, int | None], None] | None = None) -> int:
        assert progress is not None
        for done in range(1, 4):
            steps.append(done)  # a batch committed
            if done == 2:
                janitor.stop(timeout=0)  # close() comes while the sweep runs
            progress(DELETE_ROWS, done, None)
        return 3

    janitor = Janitor(sweep, first_run=0, interval=3600)
    janitor.start()
    janitor.join(5)
    assert not janitor.is_alive()
    assert steps == [1, 2] and janitor.runs == 0 and janitor.last_deleted is None

"""The outbox of one process: while the database refuses writes (a held SQLite lock, or
PostgreSQL behind a stopped proxy) the tool still completes and the live entry is
updated; the write waits in the outbox, lands exactly once and in order when the
database is back, and a write the database rejects outright is dropped, not queued.

Outages of the scale-out layout (PostgreSQL or Redis lost under several hosts, killed
server connections) are in tests/hardening/."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from helpers.factory import MemFactory
from helpers.memory import COMPLETED, SERVER, dialogue, refresh, row, turn
from helpers.proxy import TcpProxy
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import Scope, ShortTermMemory
from stm_memory.store.sql import SqlStore


def live_counters(memory: ShortTermMemory) -> tuple[int, int]:
    entry = memory.get(SERVER)
    assert entry is not None
    return entry.turns_since_refresh, entry.last_refreshed_turn


def sql_counters(memory: ShortTermMemory) -> tuple[int, int]:
    stored = row(memory, SERVER.server_key)
    assert stored is not None
    return stored.turns_since_refresh, stored.last_refreshed_turn


def outage_conversation(memory: ShortTermMemory) -> None:
    """What happens in a channel while the database is unreachable."""
    turn(memory, SERVER)
    assert turn(memory, SERVER, {"summary": "written during the outage"}) == COMPLETED
    live = memory.get(SERVER)
    assert live is not None and live.summary == "written during the outage"
    memory.capture(SERVER, dialogue(2))
    turn(memory, SERVER)
    turn(memory, SERVER)
    assert len(memory._outbox) > 0


def check_recovered(memory: ShortTermMemory, queued: int) -> None:
    assert memory.flush() == queued
    assert len(memory._outbox) == 0
    assert memory.flush() == 0
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "written during the outage"
    user_row = row(memory, SERVER.user_key)
    assert user_row is not None and user_row.summary == "written during the outage"
    # Before: 2 turns counted, then 1 refresh. During: 1 turn, refresh, 2 turns.
    assert live_counters(memory) == (2, 2)
    assert sql_counters(memory) == (2, 2)


@pytest.mark.parametrize("cache", ["disk", "memory"])
def test_sqlite_locked_during_an_update(make_mem: MemFactory, cache: str) -> None:
    memory = make_mem(cache=cache, timeout=0.2)
    turn(memory, SERVER)
    refresh(memory, SERVER, "before the outage")
    turn(memory, SERVER)
    turn(memory, SERVER)
    assert sql_counters(memory) == (2, 1)

    with SqliteWriteLock(make_mem.sqlite_path):
        outage_conversation(memory)
        queued = len(memory._outbox)
        stored = row(memory, SERVER.server_key)  # reads still work under the lock
        assert stored is not None and stored.summary == "before the outage"
        assert memory.flush() == 0  # still locked: nothing lands, nothing is lost
        assert len(memory._outbox) == queued
    check_recovered(memory, queued)


def test_a_replay_interrupted_after_the_write_is_not_applied_twice(
    make_mem: MemFactory,
) -> None:
    memory = make_mem(timeout=0.2)
    refresh(memory, SERVER, "before")
    with SqliteWriteLock(make_mem.sqlite_path):
        for _ in range(3):
            turn(memory, SERVER)
    items = memory._outbox.pending()
    assert [i.kind for i in items] == ["put_rows"] * 3
    # A worker applied the first item and died before removing it from the outbox.
    memory._persister.apply(items[0].kind, items[0].payload, items[0].op_id)
    assert sql_counters(memory) == (1, 1)
    assert memory.flush() == 3
    assert sql_counters(memory) == (3, 1) == live_counters(memory)


def test_writes_wait_behind_a_queued_write(make_mem: MemFactory) -> None:
    memory = make_mem(timeout=0.2)
    with SqliteWriteLock(make_mem.sqlite_path):
        refresh(memory, SERVER, "first")
    # The next write lands the queued one first, then itself: order is kept.
    refresh(memory, SERVER, "second")
    assert len(memory._outbox) == 0
    stored = row(memory, SERVER.server_key)
    assert stored is not None and (stored.summary, stored.last_refreshed_turn) == ("second", 2)


def test_the_janitor_replays_the_outbox(make_mem: MemFactory) -> None:
    memory = make_mem(timeout=0.2)
    with SqliteWriteLock(make_mem.sqlite_path):
        refresh(memory, SERVER, "queued")
    memory.run_janitor()
    assert len(memory._outbox) == 0
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "queued"


def test_reads_during_an_outage_do_not_fail(make_mem: MemFactory) -> None:
    memory = make_mem(timeout=0.2)
    with SqliteWriteLock(make_mem.sqlite_path):
        assert memory.get(SERVER) is None
        ctx = memory.begin_turn(SERVER)
        assert memory.update(ctx, {"summary": "s"}) == COMPLETED
        memory.build_context(ctx)


# -- PostgreSQL through a proxy that can be taken down ------------------------------------


@pytest.mark.postgres
def test_postgres_unreachable_during_an_update(make_mem: MemFactory) -> None:
    url = sa.make_url(make_mem.postgres_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432).start()
    try:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        memory = make_mem("postgres", database_url=proxied, timeout=1)
        turn(memory, SERVER)
        refresh(memory, SERVER, "before the outage")
        turn(memory, SERVER)
        turn(memory, SERVER)
        assert sql_counters(memory) == (2, 1)

        proxy.stop()
        outage_conversation(memory)
        queued = len(memory._outbox)
        assert memory.flush() == 0
        assert len(memory._outbox) == queued

        proxy.start()
        check_recovered(memory, queued)
    finally:
        proxy.stop()


# -- data the database refuses must not block the queue ----------------------------------

POISON = Scope(channel_id="poison", user_id="u1")


def refuse_channel(memory: ShortTermMemory, channel_id: str) -> None:
    """A database-side rule that rejects every row of one channel (a constraint error)."""
    assert isinstance(memory._store, SqlStore)
    with memory._store.engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse BEFORE INSERT ON short_term_memories"
            f" WHEN NEW.channel_id = '{channel_id}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )


def test_a_refused_write_is_not_queued(make_mem: MemFactory) -> None:
    memory = make_mem(timeout=0.2)
    refuse_channel(memory, "poison")
    assert turn(memory, POISON, {"summary": "refused"}) == COMPLETED
    live = memory.get(POISON)
    assert live is not None and live.summary == "refused"  # the live entry still works
    assert len(memory._outbox) == 0
    refresh(memory, SERVER, "lands at once")
    assert row(memory, SERVER.server_key) is not None


def test_a_refused_queued_write_does_not_block_the_ones_behind_it(
    make_mem: MemFactory,
) -> None:
    memory = make_mem(timeout=0.2)
    refuse_channel(memory, "poison")
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(memory, POISON, {"summary": "refused"})
        refresh(memory, SERVER, "queued behind it")
        queued = len(memory._outbox)
    assert memory.flush() == queued - 1  # only the refused write is dropped
    assert len(memory._outbox) == 0
    stored = row(memory, SERVER.server_key)
    assert stored is not None and stored.summary == "queued behind it"
    refresh(memory, SERVER, "and later writes land directly")
    assert len(memory._outbox) == 0

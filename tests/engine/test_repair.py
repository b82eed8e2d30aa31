"""Repair (stm_memory/live/repair.py) and writer leases
(stm_memory/durability/writers.py).

The write path mutates the cache, then writes SQL; a kill in between leaves the cache
ahead. These tests make each kind of disagreement by hand and check that
``repair()`` moves the older side forward, and that a start-up repairs only when a
process of this host died holding a writer lease (tests/hardening/test_crash.py kills a
real worker).
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from helpers.factory import MemFactory
from helpers.memory import SERVER, dialogue, refresh, row, turn
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import ShortTermMemory
from stm_memory.cache.base import Write
from stm_memory.durability.writers import REGISTRY_KEY, dead_writers
from stm_memory.live.repair import Repaired
from stm_memory.model import MemoryEntry
from stm_memory.testing import FrozenClock


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def cache_only(mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on the SQL writes of ``mem`` vanish, as if the process died before each."""
    monkeypatch.setattr(mem._persister, "write", lambda *_a, **_k: True)


def leave_the_cache_ahead(mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A summary that landed in SQL, then a newer one that reached only the cache."""
    refresh(mem, SERVER, "landed")
    with monkeypatch.context() as patch:
        cache_only(mem, patch)
        refresh(mem, SERVER, "cached only")


def cached(mem: ShortTermMemory, key: str) -> MemoryEntry:
    value = mem._cache.get(key)
    assert value is not None
    return MemoryEntry.from_dict(value)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def plant_lease(mem: ShortTermMemory, pid: int, host: str | None = None) -> None:
    registry = mem._cache.get(REGISTRY_KEY) or {"writers": {}}
    writers = dict(registry["writers"])
    writers["planted"] = {"host": host or socket.gethostname(), "pid": pid}
    mem._cache.atomic([REGISTRY_KEY], lambda _cur: {REGISTRY_KEY: Write({"writers": writers})})


def test_a_cache_ahead_of_its_rows_is_written_to_sql(
    make_mem: MemFactory, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = make_mem(backend)
    refresh(mem, SERVER, "landed")
    with monkeypatch.context() as patch:
        cache_only(mem, patch)
        refresh(mem, SERVER, "cached only")
        turn(mem, SERVER)
    assert row(mem, SERVER.server_key).summary == "landed"  # type: ignore[union-attr]
    repaired = mem.repair()
    assert (repaired.rows_advanced, repaired.entries_advanced, repaired.entries_dropped) == (
        2,
        0,
        0,
    )
    for key in SERVER.keys:
        stored, live = row(mem, key), cached(mem, key)
        assert stored == replace(live, messages=())
    stored = row(mem, SERVER.server_key)
    assert stored is not None
    assert (stored.summary, stored.turns_since_refresh, stored.last_refreshed_turn) == (
        "cached only",
        1,
        2,
    )
    assert mem.repair().rows_advanced == 0  # nothing left to do


def test_a_cache_behind_its_rows_takes_them_and_keeps_its_messages(
    make_mem: MemFactory, backend: str
) -> None:
    mem = make_mem(backend)
    refresh(mem, SERVER, "old")
    mem.capture(SERVER, dialogue(2))
    newer = replace(cached(mem, SERVER.live_key), summary="newer", rev=10**18)
    mem._store.put_rows([replace(newer, messages=())], newer.last_updated)
    assert mem.repair().entries_advanced == 1
    live = cached(mem, SERVER.live_key)
    assert (live.summary, live.rev) == ("newer", 10**18)
    assert [m.content for m in live.messages] == [m["content"] for m in dialogue(2)]


def test_an_entry_without_a_row_is_dropped_never_inserted(
    make_mem: MemFactory, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new scope's first write died before SQL, or a delete raced the check: either
    way the row must not be created by the repair."""
    mem = make_mem(backend)
    with monkeypatch.context() as patch:
        cache_only(mem, patch)
        refresh(mem, SERVER, "never landed")
    assert mem.repair().entries_dropped == 2
    assert mem._cache.get_many(list(SERVER.keys)) == {}
    assert mem._store.load_many(list(SERVER.keys)) == {}
    assert mem.get(SERVER) is None


def test_a_start_up_repairs_after_a_dead_writer_of_this_host(
    make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    mem = make_mem()
    leave_the_cache_ahead(mem, monkeypatch)
    plant_lease(mem, dead_pid())
    assert dead_writers(mem._cache) == {"planted"}
    mem.close()
    caplog.set_level(logging.WARNING, logger="stm_memory")
    again = make_mem()
    assert row(again, SERVER.server_key).summary == "cached only"  # type: ignore[union-attr]
    assert "repaired" in caplog.text
    assert dead_writers(again._cache) == set()  # the dead lease is forgotten


@pytest.mark.parametrize("holder", ["alive", "other host"])
def test_a_start_up_skips_the_repair_without_a_dead_writer(
    make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch, holder: str
) -> None:
    mem = make_mem()
    leave_the_cache_ahead(mem, monkeypatch)
    if holder == "alive":
        plant_lease(mem, os.getpid())
    else:
        plant_lease(mem, dead_pid(), host="another-host.invalid")
    mem.close()
    again = make_mem()
    assert row(again, SERVER.server_key).summary == "landed"  # type: ignore[union-attr]
    # ... and the janitor's periodic repair is what lands it.
    again.run_janitor()
    assert row(again, SERVER.server_key).summary == "cached only"  # type: ignore[union-attr]


def test_a_closed_engine_releases_its_lease(make_mem: MemFactory) -> None:
    first = make_mem()
    second = make_mem()
    registry: Any = second._cache.get(REGISTRY_KEY)
    assert len(registry["writers"]) == 2
    first.close()
    registry = second._cache.get(REGISTRY_KEY)
    assert list(registry["writers"]) == [second._lease.id]


def test_the_repair_is_safe_beside_a_live_writer(
    make_mem: MemFactory, fake_clock: FrozenClock
) -> None:
    """Revisions only move forward: a repair reading an entry just before a newer write
    lands cannot put the older snapshot over it."""
    mem = make_mem()
    refresh(mem, SERVER, "first")
    stale = cached(mem, SERVER.live_key)
    fake_clock.advance(seconds=1)
    refresh(mem, SERVER, "second")
    assert mem._store.advance_rows([stale], fake_clock()) == 0
    assert row(mem, SERVER.server_key).summary == "second"  # type: ignore[union-attr]


def test_no_repair_while_writes_wait_in_the_outbox(
    make_mem: MemFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = make_mem(timeout=0.2)
    leave_the_cache_ahead(mem, monkeypatch)
    with SqliteWriteLock(make_mem.sqlite_path):
        turn(mem, SERVER)  # queued
    assert len(mem._outbox) == 1
    assert mem.repair() == Repaired()
    assert row(mem, SERVER.server_key).summary == "landed"  # type: ignore[union-attr]
    assert mem.flush() == 1  # the queued snapshot carries the cached state
    assert row(mem, SERVER.server_key).summary == "cached only"  # type: ignore[union-attr]

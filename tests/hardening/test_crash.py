"""A worker process killed in the middle of the write path (issue 8): after a restart
the write lands (outbox) or the cache and SQL agree, and a row pair is never half
written. The kill is ``os._exit`` inside a child process (the ``crash`` command of
``helpers/host_process.py``), so nothing is flushed or closed, as with an OOM kill or a
power cut.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.deployment import OpenMem
from helpers.host import Host, HostCrashed, HostFactory
from helpers.host_process import CRASH_EXIT_CODE
from helpers.inspection import assert_cache_matches_sql
from helpers.memory import COMPLETED, scope_dict
from helpers.proxy import Proxied
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory import Scope, ShortTermMemory

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


@pytest.fixture(params=["sqlite+disk", pytest.param("postgres+redis", marks=pytest.mark.redis)])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """Where both the crashing worker and its successor keep their data."""
    if request.param == "sqlite+disk":
        return {
            "database_url": f"sqlite:///{tmp_path / 'stm.db'}",
            "cache_dir": tmp_path / "cache",
            "outbox_path": tmp_path / "outbox.sqlite3",
        }
    return {
        "database_url": request.getfixturevalue("postgres_url"),
        "redis_url": request.getfixturevalue("redis_url"),
        "outbox_path": tmp_path / "outbox.sqlite3",
    }


def crash_during(host: Host, op: str, **kwargs: Any) -> None:
    host.send(op, **kwargs)
    with pytest.raises(HostCrashed) as crashed:
        host.receive()
    assert crashed.value.returncode == CRASH_EXIT_CODE, crashed.value.stderr


def restart(open_mem: OpenMem, setup: dict[str, Any]) -> ShortTermMemory:
    """The successor process: same database, cache and outbox; start-up replay runs."""
    return open_mem(**setup)


def stored(mem: ShortTermMemory) -> dict[str, tuple[Any, ...]]:
    rows = mem._store.load_many(list(SCOPE.keys))
    return {k: (e.summary, e.turns_since_refresh, e.last_refreshed_turn) for k, e in rows.items()}


def test_killed_between_the_cache_write_and_the_sql_write(
    hosts: HostFactory, open_mem: OpenMem, setup: dict[str, Any]
) -> None:
    worker = hosts(**setup)
    assert worker.turn(SCOPE, {"summary": "landed"}) == COMPLETED
    worker.call("crash", point="before_sql")
    crash_during(worker, "turn", scope=scope_dict(SCOPE), args={"summary": "cached only"})
    mem = restart(open_mem, setup)
    live = mem.get(SCOPE)
    assert live is not None
    # Either the write landed after the restart, or the cache was brought back to SQL.
    assert stored(mem)[SCOPE.live_key][0] == live.summary
    assert_cache_matches_sql(mem)


def test_killed_inside_the_transaction_leaves_both_rows_or_neither(
    hosts: HostFactory, open_mem: OpenMem, setup: dict[str, Any]
) -> None:
    worker = hosts(**setup)
    assert worker.turn(SCOPE, {"summary": "landed"}) == COMPLETED
    worker.call("crash", point="mid_transaction")  # after the user row's upsert
    crash_during(worker, "turn", scope=scope_dict(SCOPE), args={"summary": "half"})
    mem = restart(open_mem, setup)
    # The transaction rolled back with the process (neither row was half written);
    # the restart's repair then landed the write the cache already held: both rows.
    assert stored(mem) == {
        SCOPE.user_key: ("half", 0, 0),
        SCOPE.server_key: ("half", 0, 2),
    }
    assert_cache_matches_sql(mem)


def test_killed_after_a_replayed_write_landed_it_lands_once(
    hosts: HostFactory,
    open_mem: OpenMem,
    setup: dict[str, Any],
    request: pytest.FixtureRequest,
) -> None:
    """The replay applied an item and died before removing it from the outbox: the
    restart replays it again, and the store's applied-op record makes that a no-op."""
    down: Callable[[], object]
    up: Callable[[], object]
    if "redis_url" in setup:
        proxy: Proxied = request.getfixturevalue("pg_proxy")
        worker = hosts(**setup | {"database_url": proxy.url}, timeout=1)
        down, up = proxy.proxy.stop, proxy.proxy.start
    else:
        lock = SqliteWriteLock(str(setup["database_url"]).removeprefix("sqlite:///"))
        worker = hosts(**setup, timeout=0.2)
        down, up = lock.acquire, lock.release
    assert worker.turn(SCOPE, {"summary": "landed"}) == COMPLETED
    worker.turn(SCOPE)
    down()
    try:
        worker.turn(SCOPE)
        assert worker.turn(SCOPE, {"summary": "queued"}) == COMPLETED
        worker.turn(SCOPE)
        assert worker.call("outbox") == 4  # increment, two row writes, increment
    finally:
        up()
    worker.call("crash", point="after_replay_write")
    crash_during(worker, "flush")
    mem = restart(open_mem, setup)
    assert len(mem._outbox) == 0
    assert stored(mem) == {
        SCOPE.user_key: ("queued", 0, 0),
        SCOPE.server_key: ("queued", 1, 2),
    }
    assert_cache_matches_sql(mem)

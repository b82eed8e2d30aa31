"""A diskcache directory that cannot be used: unwritable or corrupt (issue 8) → the
memory starts in degraded mode (issue 17), with a warning naming the directory: the
live cache runs in the database, nothing is lost, and once the directory can be
opened the memory moves back to it.

Tests run as root, so permission bits do not stop writes; an unwritable location is
made reliably by putting the directory *under a regular file* (``ENOTDIR``), by a
regular file where the directory should be, or by a path below ``/proc``.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.deployment import OpenMem
from helpers.memory import dialogue, refresh, row, turn

from stm_memory import CacheError, Scope, ShortTermMemory, StorageError
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.reopen import ReopeningCache
from stm_memory.cache.resilient import ResilientCache

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


def cache_db_is_a_directory(tmp_path: Path) -> Path:
    (tmp_path / "c" / "cache.db").mkdir(parents=True)
    return tmp_path / "c"


def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "not-a-directory"
    path.write_text("a regular file")
    return path


UNUSABLE: dict[str, Callable[[Path], Path]] = {
    "under a regular file": lambda tmp: a_file(tmp) / "cache",
    "a regular file": a_file,
    "cache.db is a directory": cache_db_is_a_directory,
    "below /proc": lambda tmp: Path("/proc/stm-memory-cache"),
}


def warnings_about(caplog: pytest.LogCaptureFixture, cache_dir: Path) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and f"cannot open the diskcache directory {cache_dir}" in r.getMessage()
    ]


@pytest.mark.parametrize("where", list(UNUSABLE))
def test_an_unusable_cache_directory_starts_degraded_on_sql(
    open_mem: OpenMem, tmp_path: Path, where: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    before = open_mem(db, cache_dir=tmp_path / "good")
    refresh(before, SCOPE, "kept safe in SQL")
    before.close()
    cache_dir = UNUSABLE[where](tmp_path)
    caplog.set_level(logging.WARNING, logger="stm_memory")
    mem = open_mem(db, cache_dir=cache_dir)
    assert warnings_about(caplog, cache_dir)
    cache = mem._cache
    assert isinstance(cache, ResilientCache) and cache.degraded
    live = mem.get(SCOPE)
    assert live is not None and live.summary == "kept safe in SQL"
    mem.end_turn(mem.begin_turn(SCOPE))
    turn(mem, SCOPE, {"summary": "written while degraded"})
    live = mem.get(SCOPE)
    assert live is not None and (live.summary, live.turns_since_refresh) == (
        "written while degraded",
        0,
    )
    stored = row(mem, SCOPE.server_key)
    assert stored is not None and stored.summary == "written while degraded"
    mem.close()
    after = open_mem(db, cache_dir=tmp_path / "fresh")
    live = after.get(SCOPE)
    assert live is not None and live.summary == "written while degraded"


def test_a_directory_that_becomes_usable_takes_over_with_what_was_written_meanwhile(
    open_mem: OpenMem, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    blocker = a_file(tmp_path)  # a regular file where the directory should be
    mem = open_mem(db, cache_dir=blocker)
    cache = mem._cache
    assert isinstance(cache, ResilientCache) and cache.degraded
    refresh(mem, SCOPE, "while the directory was unusable")
    mem.end_turn(mem.begin_turn(SCOPE))
    mem.capture(SCOPE, dialogue(2))
    blocker.unlink()
    cache.retry_after = 0.0
    live = mem.get(SCOPE)  # reopens the directory and drains the SQL cache into it
    assert not cache.degraded
    assert isinstance(cache.primary, ReopeningCache)
    assert isinstance(cache.primary.opened, DiskLiveCache)
    assert live is not None and (live.summary, live.turns_since_refresh) == (
        "while the directory was unusable",
        1,
    )
    assert [m.content for m in live.messages] == ["message 1", "message 2"]
    mem.close()
    # The directory now holds the live entry, dialogue included.
    direct = DiskLiveCache(blocker)
    try:
        value = direct.get(SCOPE.server_key or "")
        assert value is not None and value["summary"] == "while the directory was unusable"
        assert len(value["messages"]) == 2
    finally:
        direct.close()


def garbage_everywhere(db: Path) -> None:
    db.write_bytes(os.urandom(db.stat().st_size))


def garbage_after_the_header(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[100:] = os.urandom(len(data) - 100)
    db.write_bytes(bytes(data))


def truncated(db: Path) -> None:
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("corrupt", [garbage_everywhere, garbage_after_the_header, truncated])
def test_a_corrupt_cache_database_starts_degraded_and_loses_nothing(
    open_mem: OpenMem, tmp_path: Path, corrupt: Callable[[Path], None]
) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    cache_dir = tmp_path / "cache"
    first = open_mem(db, cache_dir=cache_dir)
    for i in range(40):  # enough pages that a truncation cuts real data
        refresh(first, Scope(channel_id=f"c{i}", user_id="u1", server_id="g1"), "x" * 1000)
    first.close()
    corrupt(cache_dir / "cache.db")
    degraded = open_mem(db, cache_dir=cache_dir)
    assert isinstance(degraded._cache, ResilientCache) and degraded._cache.degraded
    live = degraded.get(Scope(channel_id="c3", user_id="u1", server_id="g1"))
    assert live is not None and live.summary == "x" * 1000
    degraded.close()
    # Nothing was lost: the rows are intact and a new cache hydrates from them.
    after = open_mem(db, cache_dir=tmp_path / "fresh")
    assert after._store.count_rows() == 80
    live = after.get(Scope(channel_id="c7", user_id="u1", server_id="g1"))
    assert live is not None and live.summary == "x" * 1000


def test_a_corrupt_cached_value_is_not_a_raw_exception(open_mem: OpenMem, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    first = open_mem(db, cache_dir=tmp_path / "cache")
    refresh(first, SCOPE, "v1")
    first.close()
    with sqlite3.connect(tmp_path / "cache" / "cache.db") as conn:
        conn.execute("UPDATE Cache SET value = X'80049500ff' WHERE key = ?", (SCOPE.server_key,))
    mem = open_mem(db, cache_dir=tmp_path / "cache")
    try:
        live = mem.get(SCOPE)
    except CacheError:
        pass
    else:
        assert live is not None and live.summary == "v1"
    result = mem.update(mem.begin_turn(SCOPE), {"summary": "v2"})
    assert result["status"] in ("completed", "tool_execution_failed")
    stored = row(mem, SCOPE.server_key)
    assert stored is not None and stored.summary in ("v1", "v2")


def test_an_unusable_outbox_path_is_a_storage_error(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="outbox"):
        ShortTermMemory.from_url(
            f"sqlite:///{tmp_path / 'stm.db'}",
            cache_dir=tmp_path / "cache",
            outbox_path=a_file(tmp_path) / "outbox.sqlite3",
        )

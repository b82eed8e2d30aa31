"""A diskcache directory that cannot be used (issue 8): unwritable or corrupt → a clear
:class:`CacheError` at construction, and the durable rows are untouched.

Tests run as root, so permission bits do not stop writes; an unwritable location is
made reliably by putting the directory *under a regular file* (``ENOTDIR``), by a
regular file where the directory should be, or by a path below ``/proc``.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.memory import refresh, row

from stm_memory import CacheError, Scope, ShortTermMemory, StorageError

from .conftest import OpenMem

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


@pytest.mark.parametrize("where", list(UNUSABLE))
def test_an_unusable_cache_directory_fails_at_construction(
    open_mem: OpenMem, tmp_path: Path, where: str
) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    before = open_mem(db, cache_dir=tmp_path / "good")
    refresh(before, SCOPE, "kept safe in SQL")
    before.close()
    cache_dir = UNUSABLE[where](tmp_path)
    with pytest.raises(CacheError, match=f"cannot open the diskcache directory {cache_dir}"):
        ShortTermMemory.from_url(db, cache_dir=cache_dir, outbox_path=tmp_path / "o.sqlite3")
    after = open_mem(db, cache_dir=tmp_path / "fresh")
    live = after.get(SCOPE)
    assert live is not None and live.summary == "kept safe in SQL"


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
def test_a_corrupt_cache_database_fails_at_construction(
    open_mem: OpenMem, tmp_path: Path, corrupt: Callable[[Path], None]
) -> None:
    db = f"sqlite:///{tmp_path / 'stm.db'}"
    cache_dir = tmp_path / "cache"
    first = open_mem(db, cache_dir=cache_dir)
    for i in range(40):  # enough pages that a truncation cuts real data
        refresh(first, Scope(channel_id=f"c{i}", user_id="u1", server_id="g1"), "x" * 1000)
    first.close()
    corrupt(cache_dir / "cache.db")
    with pytest.raises(CacheError, match="cannot open the diskcache directory"):
        ShortTermMemory.from_url(db, cache_dir=cache_dir, outbox_path=tmp_path / "o.sqlite3")
    # Nothing was lost: the rows are intact and a new cache hydrates from them.
    after = open_mem(db, cache_dir=tmp_path / "fresh")
    assert after.store.count_rows() == 80
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

"""DiskLiveCache reads and writes diskcache's table directly on its hot paths
(``stm_memory.cache._disk_rows``): what it writes must be exactly what diskcache itself
reads, counts and cleans up, and a failed write must leave nothing behind."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import diskcache
import pytest

from stm_memory.cache import _disk_rows
from stm_memory.cache.base import CacheValue, Write
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.errors import CacheError
from stm_memory.model import KEY_PREFIX

BIG = {"text": "x" * 100_000}  # over diskcache's min_file_size: stored in a file


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "cache"


@pytest.fixture
def cache(directory: Path) -> Iterator[DiskLiveCache]:
    cache = DiskLiveCache(directory)
    yield cache
    cache.close()


@pytest.fixture
def plain(directory: Path, cache: DiskLiveCache) -> Iterator[diskcache.Cache]:
    """diskcache's own handle on the same directory (opened after ours created it)."""
    handle = diskcache.Cache(str(directory))
    yield handle
    handle.close()


def put(cache: DiskLiveCache, items: Mapping[str, CacheValue | None], ttl: float = 600) -> None:
    cache.atomic(list(items), lambda _current: {k: Write(v, ttl) for k, v in items.items()})


def value_files(directory: Path) -> list[Path]:
    return sorted(directory.rglob("*.val"))


def test_values_written_here_are_read_by_diskcache(
    cache: DiskLiveCache, plain: diskcache.Cache
) -> None:
    before = time.time()
    put(cache, {"a": {"n": 1, "nested": [{"role": "user"}]}, "b": {"n": 2}}, ttl=600)
    value, expire_time = plain.get("a", expire_time=True)
    assert value == {"n": 1, "nested": [{"role": "user"}]}
    assert before + 600 <= expire_time <= time.time() + 600
    put(cache, {"a": {"n": 3}})  # an update in place, not a second row
    assert plain.get("a") == {"n": 3}
    assert plain.get("b") == {"n": 2}
    assert len(plain) == 2
    assert plain.check() == []  # diskcache's own consistency check: counts, sizes, files


def test_values_diskcache_wrote_are_read_and_updated_here(
    cache: DiskLiveCache, plain: diskcache.Cache
) -> None:
    plain.set("a", {"n": 1})
    plain.set("b", {"n": 2}, expire=600)
    assert cache.get_many(["a", "b", "missing"]) == {"a": {"n": 1}, "b": {"n": 2}}
    after = cache.atomic(["a", "b"], lambda cur: {"a": Write({"n": cur["a"]["n"] + 10})})
    assert after == {"a": {"n": 11}, "b": {"n": 2}}
    assert plain.get("a") == {"n": 11}
    assert len(plain) == 2


def test_large_values_live_in_files_that_are_removed_when_replaced_or_deleted(
    cache: DiskLiveCache, plain: diskcache.Cache, directory: Path
) -> None:
    put(cache, {"a": BIG})
    assert len(value_files(directory)) == 1
    assert plain.get("a") == BIG and cache.get("a") == BIG
    put(cache, {"a": BIG})  # replaced by another file: the old one goes
    assert len(value_files(directory)) == 1
    put(cache, {"a": {"small": True}})
    assert value_files(directory) == []
    put(cache, {"b": BIG})
    put(cache, {"b": None})  # a delete
    assert value_files(directory) == []
    assert plain.get("b") is None and plain.check() == []


def test_a_write_that_fails_midway_rolls_back_and_leaves_no_file(
    cache: DiskLiveCache, directory: Path
) -> None:
    put(cache, {"a": {"n": 1}, "b": {"n": 1}})

    def fn(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        # The first value is written (to a file) before the second fails to pickle.
        return {"a": Write(BIG), "b": Write({"unpicklable": lambda: None})}

    with pytest.raises(Exception, match="pickle"):
        cache.atomic(["a", "b"], fn)
    assert cache.get_many(["a", "b"]) == {"a": {"n": 1}, "b": {"n": 1}}
    assert value_files(directory) == []


def test_a_natively_expired_row_reads_as_absent_and_is_rewritten_in_place(
    cache: DiskLiveCache, plain: diskcache.Cache
) -> None:
    put(cache, {"a": {"n": 1}}, ttl=0.05)
    time.sleep(0.1)
    assert cache.get_many(["a"]) == {}
    seen: list[CacheValue | None] = []

    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        seen.append(current["a"])
        return {"a": Write({"n": 2}, 600)}

    cache.atomic(["a"], fn)
    assert seen == [None]
    assert plain.get("a") == {"n": 2} and len(plain) == 1


def a_and_b_with_a_unreadable(cache: DiskLiveCache, directory: Path) -> None:
    put(cache, {"a": {"n": 1}, "b": {"n": 1}})
    with sqlite3.connect(directory / "cache.db") as conn:  # a truncated pickle
        conn.execute("UPDATE Cache SET value = X'80049500ff' WHERE key = 'a'")


def rows_of(directory: Path, key: str) -> int:
    with sqlite3.connect(directory / "cache.db") as conn:
        (count,) = conn.execute("SELECT count(*) FROM Cache WHERE key = ?", (key,)).fetchone()
    return int(count)


def test_an_unreadable_value_is_dropped_by_a_write_that_does_not_replace_it(
    cache: DiskLiveCache, directory: Path
) -> None:
    a_and_b_with_a_unreadable(cache, directory)
    after = cache.atomic(["a", "b"], lambda cur: {"b": Write({"n": 2})})
    assert after == {"a": None, "b": {"n": 2}}
    assert rows_of(directory, "a") == 0


def test_a_read_drops_an_unreadable_value_and_returns_the_rest(
    cache: DiskLiveCache, directory: Path
) -> None:
    a_and_b_with_a_unreadable(cache, directory)
    assert cache.get_many(["a", "b"]) == {"b": {"n": 1}}
    assert cache.get_many(["a"]) == {}
    assert rows_of(directory, "a") == 0


def test_a_value_rewritten_after_an_unreadable_read_is_not_dropped(
    cache: DiskLiveCache, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a_and_b_with_a_unreadable(cache, directory)
    other = DiskLiveCache(directory)
    decode = DiskLiveCache._decode

    def decode_then_rewrite(
        self: DiskLiveCache, key: str, row: Any, now: float, **how: bool
    ) -> tuple[CacheValue | None, bool]:
        result = decode(self, key, row, now, **how)
        if result[1] and self is cache:  # unreadable: another handle writes meanwhile
            other.atomic([key], lambda _current: {key: Write({"n": 9})})
        return result

    monkeypatch.setattr(DiskLiveCache, "_decode", decode_then_rewrite)
    try:
        assert cache.get_many(["a"]) == {}
        monkeypatch.undo()
        assert cache.get_many(["a"]) == {"a": {"n": 9}}
    finally:
        other.close()


def test_a_table_without_the_expected_columns_is_refused_at_open(
    directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # diskcache 5 always has these columns; a future format might not.
    monkeypatch.setattr(_disk_rows, "_COLUMNS", _disk_rows._COLUMNS | {"format_v6_column"})
    with pytest.raises(CacheError, match=r"cannot use the diskcache directory.*format_v6_column"):
        DiskLiveCache(directory)


@pytest.mark.parametrize(("synchronous", "expected"), [(2, 2), ("OFF", 0)])
def test_the_connections_apply_the_directory_s_pragmas(
    directory: Path, synchronous: int | str, expected: int
) -> None:
    # Settings a directory was created with (a number or a keyword) are diskcache's to
    # keep; our connections apply them as diskcache's own connections do.
    diskcache.Cache(str(directory), sqlite_synchronous=synchronous, sqlite_cache_size=1234).close()
    cache = DiskLiveCache(directory)
    try:
        put(cache, {"a": {"n": 1}})
        con = cache._rows._connection()
        assert con.execute("PRAGMA synchronous").fetchone() == (expected,)
        assert con.execute("PRAGMA cache_size").fetchone() == (1234,)
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        cache.close()


def test_reads_and_writes_of_many_keys_span_several_statements(cache: DiskLiveCache) -> None:
    keys = [f"k{i}" for i in range(1_203)]  # more than one statement's parameters
    put(cache, {key: {"n": 1} for key in keys})
    assert cache.get_many([*keys, "missing"]) == {key: {"n": 1} for key in keys}
    assert cache.get_many([]) == {}
    after = cache.atomic(
        keys, lambda cur: {k: Write({"n": v["n"] + 1}) for k, v in cur.items() if v}
    )
    assert after == {key: {"n": 2} for key in keys}


def test_key_scans_return_the_text_keys_with_the_prefix(
    cache: DiskLiveCache, plain: diskcache.Cache
) -> None:
    p = KEY_PREFIX
    top = f"{p}:\U0010ffff"  # a prefix that cannot be moved one code point on
    text_keys = [p, f"{p}:a", f"{p}:a:b", top, f"{top}x", f"{p};", "x"]
    put(cache, {k: {"n": 1} for k in text_keys})
    plain.set(f"{p}:bytes".encode(), 1)  # keys diskcache stores otherwise are not ours
    plain.set(7, 1)
    assert sorted(cache.iter_keys(f"{p}:")) == [f"{p}:a", f"{p}:a:b", top, f"{top}x"]
    assert sorted(cache.iter_keys(f"{p}:a")) == [f"{p}:a", f"{p}:a:b"]
    assert sorted(cache.iter_keys(top)) == [top, f"{top}x"]
    assert sorted(cache.iter_keys()) == sorted(text_keys)

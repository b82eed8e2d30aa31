"""Looking past the engine: what the live cache holds, what the SQL table holds, and
whether they agree (the check most multi-process and outage tests end with)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from stm_memory import MemoryEntry, ShortTermMemory
from stm_memory.store.sql import SqlStore

__all__ = ["assert_cache_matches_sql", "cache_entry_keys", "distilled", "files_holding", "raw_rows"]


def cache_entry_keys(mem: ShortTermMemory) -> set[str]:
    """Every entry key the live cache holds (indexes excluded)."""
    return {k for k in mem._cache.iter_keys("shortterm:") if not k.startswith("shortterm:index:")}


def raw_rows(mem: ShortTermMemory, where: str = "", **params: Any) -> list[dict[str, Any]]:
    """Rows of ``short_term_memories`` read with plain SQL, bypassing the store's code."""
    assert isinstance(mem._store, SqlStore)
    sql = "SELECT * FROM short_term_memories" + (f" WHERE {where}" if where else "")
    with mem._store.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def distilled(entry: MemoryEntry) -> tuple[Any, ...]:
    """What must agree between a live entry and its row (messages live only in the cache)."""
    return (
        entry.summary,
        dict(entry.categories),
        entry.turns_since_refresh,
        entry.last_refreshed_turn,
    )


def assert_cache_matches_sql(mem: ShortTermMemory, keys: list[str] | None = None) -> None:
    """Every cached entry (or each of ``keys``) equals its SQL row in summary,
    categories and both counters."""
    keys = sorted(cache_entry_keys(mem)) if keys is None else keys
    raw = mem._cache.get_many(keys)
    stored = mem._store.load_many(keys)
    mismatches = []
    for key in keys:
        if key not in raw:
            continue
        live = MemoryEntry.from_dict(raw[key])
        row = stored.get(key)
        if row is None or distilled(row) != distilled(live):
            mismatches.append((key, distilled(live), None if row is None else distilled(row)))
    assert not mismatches, f"cache and SQL disagree (key, cache, sql): {mismatches}"


def files_holding(root: Path, needle: bytes) -> list[str]:
    """The files under ``root`` whose bytes hold ``needle`` (what erasure must leave)."""
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and needle in path.read_bytes()
    ]

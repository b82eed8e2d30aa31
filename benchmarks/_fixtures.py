"""Shared set-up: an embedded ShortTermMemory, deterministic text, and the raw floors.

The floors are "the same work written naively by hand": a raw ``diskcache.Cache`` with
its default settings, and a raw ``sqlite3`` connection in WAL / synchronous=NORMAL with
the same table, indexes and upsert statements as ours, fed the same values. The
recency index our cache keeps (each owner's entry keys by ``last_updated``, read by
prompt assembly) is, in the floor, the same table in the diskcache file written with
one raw upsert per key on diskcache's own connection (:data:`RANK_UPSERT`).
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC
from pathlib import Path
from typing import Any

import diskcache

from stm_memory import ShortTermMemory
from stm_memory.model import MemoryEntry

__all__ = [
    "RANK_UPSERT",
    "UPSERT_PLAIN",
    "UPSERT_RESET",
    "WORDS",
    "RawFloor",
    "dialogue",
    "open_memory",
    "row_params",
    "sentence",
    "summary_text",
]

_VOCABULARY = (
    "heist plan friday vault guard keycard lobby rooftop van driver map code alarm "
    "camera shift window budget crew meeting coffee rain storm train ticket station "
    "north south river bridge market lantern harbor ship cargo clock tower garden "
    "letter secret promise island signal radio battery rope ladder tunnel compass "
    "recipe dragon castle knight forest wizard potion scroll temple desert oasis"
)
WORDS = tuple(_VOCABULARY.split())


def sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def summary_text(rng: random.Random, chars: int = 600) -> str:
    parts: list[str] = []
    while sum(len(p) + 1 for p in parts) < chars:
        parts.append(sentence(rng, rng.randint(8, 16)))
    return " ".join(parts)[:chars]


def dialogue(rng: random.Random, turns: int, *, words: int = 30) -> list[dict[str, Any]]:
    """``turns`` user/assistant exchanges as chat dicts (what ``capture`` takes)."""
    out: list[dict[str, Any]] = []
    for _ in range(turns):
        out.append({"role": "user", "content": sentence(rng, words), "name": "Ann"})
        out.append({"role": "assistant", "content": sentence(rng, words * 2)})
    return out


@contextmanager
def open_memory(root: Path, name: str = "stm", **options: Any) -> Iterator[ShortTermMemory]:
    """The embedded default (SQLite file + diskcache directory) under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    mem = ShortTermMemory.from_url(
        f"sqlite:///{root / name}.db", cache_dir=root / f"{name}-cache", **options
    )
    try:
        yield mem
    finally:
        mem.close()


_DDL = """
CREATE TABLE IF NOT EXISTS short_term_memories (
    key VARCHAR(2200) PRIMARY KEY,
    scope_kind VARCHAR(8) NOT NULL,
    server_id VARCHAR(512),
    user_id VARCHAR(512),
    channel_id VARCHAR(512) NOT NULL,
    persona_id VARCHAR(512),
    parent_channel_id VARCHAR(512),
    channel_name TEXT,
    server_name TEXT,
    summary TEXT,
    categories JSON NOT NULL,
    turns_since_refresh INTEGER NOT NULL,
    last_refreshed_turn INTEGER NOT NULL,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_stm_updated_at ON short_term_memories (updated_at);
CREATE INDEX IF NOT EXISTS ix_stm_channel ON short_term_memories (channel_id);
CREATE INDEX IF NOT EXISTS ix_stm_user ON short_term_memories (user_id, scope_kind);
CREATE INDEX IF NOT EXISTS ix_stm_server ON short_term_memories (server_id, scope_kind);
"""

_COLUMNS = (
    "key, scope_kind, server_id, user_id, channel_id, persona_id, parent_channel_id, "
    "channel_name, server_name, summary, categories, turns_since_refresh, "
    "last_refreshed_turn, created_at, updated_at"
)
_INSERT = f"INSERT INTO short_term_memories ({_COLUMNS}) VALUES ({', '.join('?' * 15)})"
_SET = (
    "parent_channel_id = excluded.parent_channel_id, updated_at = excluded.updated_at, "
    "summary = excluded.summary"
)
UPSERT_PLAIN = f"{_INSERT} ON CONFLICT (key) DO UPDATE SET {_SET}"
UPSERT_RESET = (
    f"{_INSERT} ON CONFLICT (key) DO UPDATE SET {_SET}, turns_since_refresh = 0, "
    "last_refreshed_turn = short_term_memories.last_refreshed_turn + 1"
)


def row_params(entry: MemoryEntry) -> tuple[Any, ...]:
    stamp = entry.last_updated.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    return (
        entry.key,
        entry.kind,
        entry.server_id,
        entry.user_id,
        entry.channel_id,
        entry.persona_id,
        entry.parent_channel_id,
        entry.channel_name,
        entry.server_name,
        entry.summary,
        json.dumps(dict(entry.categories)),
        entry.turns_since_refresh,
        entry.last_refreshed_turn,
        stamp,
        stamp,
    )


#: The floor's recency index: the table the engine's diskcache backend keeps beside
#: diskcache's (``stm_memory/cache/_disk_rows.py``), with its order index.
_RANK_DDL = (
    "CREATE TABLE IF NOT EXISTS floor_rank (idx TEXT NOT NULL, member TEXT NOT NULL,"
    " score REAL NOT NULL, PRIMARY KEY (idx, member)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS floor_rank_order ON floor_rank (idx, score DESC, member)",
)
RANK_UPSERT = (
    "INSERT INTO floor_rank (idx, member, score) VALUES (?, ?, ?)"
    " ON CONFLICT (idx, member) DO UPDATE SET score = excluded.score"
)


class RawFloor:
    """Raw diskcache + raw sqlite3, as a careful developer would write them by hand."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.cache = diskcache.Cache(str(root / "raw-cache"))
        self.db = sqlite3.connect(str(root / "raw.db"), isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_DDL)
        for statement in _RANK_DDL:
            self.cache._con.execute(statement)

    def seed(self, items: dict[str, dict[str, Any]], ttl: float | None = None) -> None:
        for key, value in items.items():
            self.cache.set(key, value, expire=ttl)

    def write_pair(
        self,
        values: Sequence[tuple[str, dict[str, Any]]],
        rows: Sequence[tuple[str, tuple[Any, ...]]],
        ttl: float,
        ranks: Sequence[tuple[str, str, float]] = (),
    ) -> None:
        """The floor of one update: a set per key, then one transaction with the upserts.
        ``ranks`` — ``(index key, entry key, score)`` — adds the recency index: one raw
        upsert (its own transaction, as each ``set`` is) per key after its ``set``."""
        cache = self.cache
        if ranks:
            index = cache._con
            for (key, value), rank in zip(values, ranks, strict=True):
                cache.set(key, value, expire=ttl)
                index.execute(RANK_UPSERT, rank)
        else:
            for key, value in values:
                cache.set(key, value, expire=ttl)
        db = self.db
        db.execute("BEGIN")
        for sql, params in rows:
            db.execute(sql, params)
        db.execute("COMMIT")

    def rmw_pair(
        self,
        keys: Sequence[str],
        patch: dict[str, Any],
        rows: Sequence[tuple[str, tuple[Any, ...]]],
        ttl: float,
    ) -> None:
        """An update written by hand as a read-modify-write, which is what keeping the
        captured turns and counters of an entry takes: both keys read and rewritten in
        one cache transaction, then the rows (informational: not the target's floor)."""
        cache = self.cache
        with cache.transact():
            for key in keys:
                cache.set(key, {**cache.get(key), **patch}, expire=ttl)
        db = self.db
        db.execute("BEGIN")
        for sql, params in rows:
            db.execute(sql, params)
        db.execute("COMMIT")

    def close(self) -> None:
        self.cache.close()
        self.db.close()

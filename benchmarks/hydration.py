"""Case 4 — hydration: bulk warm of 10,000 rows into an empty cache.

10,000 server-scope rows of one server are inserted through the store, then
``mem._live.warm("server", server_id)`` loads them into an empty cache directory (a
fresh one per round). Reported: rows per second (median of rounds).

For orientation, the floor — the same rows read with raw sqlite3 and added to a raw
``diskcache.Cache`` in one transaction — is measured in the same run
(``hydrate_vs_floor`` = our time / floor time).
"""

from __future__ import annotations

import random
import sqlite3
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import diskcache

from stm_memory import ShortTermMemory
from stm_memory.model import MemoryEntry, key_for

from ._fixtures import summary_text
from ._harness import CaseResult, Config, Metric, timed

NAME = "hydrate"
SERVER = "g-big"


def make_rows(n: int, rng: random.Random) -> list[MemoryEntry]:
    base = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    summaries = [summary_text(rng, 400) for _ in range(50)]
    return [
        MemoryEntry(
            key=key_for("server", SERVER, f"c{i}"),
            kind="server",
            channel_id=f"c{i}",
            server_id=SERVER,
            user_id=f"u{i % 500}",
            summary=summaries[i % len(summaries)],
            turns_since_refresh=i % 5,
            last_refreshed_turn=i % 7,
            last_updated=base - timedelta(seconds=i),
        )
        for i in range(n)
    ]


def _open(db: Path, cache_dir: Path) -> ShortTermMemory:
    return ShortTermMemory.from_url(f"sqlite:///{db}", cache_dir=cache_dir)


def floor_warm(db: Path, cache_dir: Path, ttl: float) -> tuple[int, int]:
    """Raw sqlite3 SELECT + raw diskcache adds in one transaction: (rows, ns)."""
    conn = sqlite3.connect(str(db))
    cache = diskcache.Cache(str(cache_dir))
    try:
        start = time.perf_counter_ns()
        cur = conn.execute(
            "SELECT * FROM short_term_memories WHERE server_id = ? AND scope_kind = 'server' "
            "ORDER BY updated_at DESC",
            (SERVER,),
        )
        names = [d[0] for d in cur.description]
        added = 0
        with cache.transact():
            for row in cur:
                value = dict(zip(names, row, strict=True))
                added += bool(cache.add(value["key"], value, expire=ttl))
        return added, time.perf_counter_ns() - start
    finally:
        cache.close()
        conn.close()


def run(cfg: Config) -> CaseResult:
    rng = random.Random(4)
    n = 10_000
    root = cfg.workdir / NAME
    root.mkdir(parents=True, exist_ok=True)
    db = root / "stm.db"
    rows = make_rows(n, rng)
    with _open(db, root / "setup-cache") as mem:
        mem._store.put_rows(rows, rows[0].last_updated)
        assert mem._store.count_rows() == n
        ttl = mem._live.native_ttl(rows[0])
    repeats = cfg.pick(5, 2)
    ours: list[float] = []
    floors: list[float] = []
    for i in range(repeats + 1):  # round 0 is the warm-up
        with _open(db, root / f"cache-{i}") as mem:
            added = 0

            def warm(_: int, mem: ShortTermMemory = mem) -> None:
                nonlocal added
                added = mem._live.warm("server", SERVER)

            elapsed = timed(warm, range(1))
            assert added == n, added
        f_added, f_elapsed = floor_warm(db, root / f"floor-{i}", ttl)
        assert f_added == n, f_added
        if i:
            ours.append(elapsed)
            floors.append(f_elapsed)
    ours_ns = statistics.median(ours)
    floor_ns = statistics.median(floors)
    ratios = [a / b for a, b in zip(ours, floors, strict=True)]
    return CaseResult(
        NAME,
        [
            Metric("hydrate_rows_per_s", n / (ours_ns / 1e9), unit="rows/s"),
            Metric("hydrate_floor_rows_per_s", n / (floor_ns / 1e9), unit="rows/s"),
            Metric("hydrate_vs_floor", statistics.median(ratios)),
        ],
        {
            "rows": n,
            "rounds": repeats,
            "ours_ms_median": ours_ns / 1e6,
            "floor_ms_median": floor_ns / 1e6,
        },
    )

"""Case 8 — erasure: ``clear_user`` over 10,000 entries.

10,000 server-scope entries of one server sit in the live cache and in SQL, each with
captured turns of two of 500 users and a summary. ``clear_user`` then erases one user,
whose words are in 40 of them: it scans every cached entry, rewrites the 40 (turns
removed, distilled memory cleared), clears their rows by provenance in one SQL
transaction and checkpoints the embedded stores. Reported: seconds per erasure and
entries scanned per second (median of rounds; a fresh copy of the data each round).
Information only: an erasure is an administrative operation, not a turn.
"""

from __future__ import annotations

import shutil
import statistics
import time
from datetime import UTC, datetime

from stm_memory import MemoryEntry, ShortTermMemory, StoredMessage
from stm_memory.cache.base import Write
from stm_memory.model import key_for

from ._harness import CaseResult, Config, Metric

NAME = "erasure"
SERVER = "g-erase"
ENTRIES = 10_000
USERS = 500


def _populate(mem: ShortTermMemory, n: int, now: datetime) -> None:
    """The entries as turns would have left them, written in bulk (through the engine,
    10,000 new channels of one server would measure the owner index instead)."""
    entries = []
    for i in range(n):
        a, b = f"u{i % USERS}", f"u{(i * 7 + 3) % USERS}"
        said = (
            StoredMessage(role="user", content=f"{a} in c{i}", timestamp=now, user_id=a),
            StoredMessage(role="user", content=f"{b} in c{i}", timestamp=now, user_id=b),
            StoredMessage(role="assistant", content="Noted.", timestamp=now),
        )
        entries.append(
            MemoryEntry(
                key=key_for("server", SERVER, f"c{i}"),
                kind="server",
                channel_id=f"c{i}",
                server_id=SERVER,
                messages=said,
                summary=f"Channel {i}: {a} and {b} planned the heist.",
                provenance=frozenset({a, b}),
                last_updated=now,
                rev=1,
            )
        )
    mem._store.put_rows(entries, now)
    ttl = mem._live.native_ttl(entries[0])
    mem._cache.add_many({e.key: Write(e.to_dict(), ttl) for e in entries})
    mem._live.warm("server", SERVER)  # the owner index; adds nothing already cached


def run(cfg: Config) -> CaseResult:
    n = cfg.pick(ENTRIES, 1_000)
    root = cfg.workdir / NAME
    seed = root / "seed"
    seed.mkdir(parents=True, exist_ok=True)
    clock = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    with ShortTermMemory.from_url(
        f"sqlite:///{seed / 'stm.db'}", cache_dir=seed / "cache", clock=lambda: clock
    ) as mem:
        _populate(mem, n, clock)
    rounds = cfg.pick(3, 1)
    seconds: list[float] = []
    touched = 0
    for i in range(rounds):
        work = root / f"round-{i}"
        shutil.copytree(seed, work)
        with ShortTermMemory.from_url(
            f"sqlite:///{work / 'stm.db'}", cache_dir=work / "cache", clock=lambda: clock
        ) as mem:
            start = time.perf_counter()
            touched = mem.clear_user("u7")
            seconds.append(time.perf_counter() - start)
        shutil.rmtree(work)
    median = statistics.median(seconds)
    return CaseResult(
        NAME,
        [
            Metric(f"clear_user_{n // 1000}k_entries_s", median, unit="s"),
            Metric("clear_user_entries_scanned_per_s", n / median, unit="1/s"),
        ],
        {"entries": n, "users": USERS, "rows_deleted_or_cleared": touched, "rounds": rounds},
    )

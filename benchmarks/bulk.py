"""Case 9 — bulk: ``clear_user``, ``clear_channel``, the janitor and repair at size.

One embedded store (SQLite file + diskcache directory) holds 1,000,000 rows (``--quick``:
50,000), written straight through ``SqlStore.put_rows`` in chunks, and a live cache of a
tenth of the recent ones (``cache.add_many``, ranked in their owners' indexes):

- 20 % belong to one user, ``u-big`` (user-scope rows in 100 servers), whose words are
  also in the provenance of a quarter of the recent rows of others (5 % of all rows);
- 10 % are the rows of one channel, ``c-big``, one per user;
- 50 % are other rows idle for 100 days (past the 90-day retention), 20 % recent ones.

Then, in a fresh interpreter, one after the other on that store, each timed once:
``repair()`` (every cached entry compared with its row), ``clear_user("u-big")``
(its own rows deleted, the rows its words reached cleared by provenance, the cache
scanned and rewritten, the embedded files checkpointed), ``clear_channel("c-big")`` and
``run_janitor()`` (repair again, then the idle half evicted and deleted). Reported: rows
per second of each (rows deleted or cleared; for repair, cached entries checked), and
the peak resident memory of that interpreter (the details have each operation's,
sampled every 10 ms, and its heap part: the rest is file-backed pages, SQLite's and
diskcache's memory maps and page caches, bounded by their settings). It stays about
flat from 50,000 to 1,000,000 rows because every operation works in batches.
Information only: administrative operations, not turns.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stm_memory import MemoryEntry, ShortTermMemory, StoredMessage
from stm_memory.cache.base import Rank, Write
from stm_memory.model import ScopeKind, index_key, key_for

from ._harness import CaseResult, Config, Metric, rss_breakdown_mb, rss_mb

NAME = "bulk"
ROWS = 1_000_000
QUICK_ROWS = 50_000
CHUNK = 20_000  # rows per put_rows call (one transaction)
SERVERS = 100
USERS = 20_000
BIG_USER = "u-big"
BIG_CHANNEL = "c-big"
CACHED_SHARE = 10  # one row in this many is in the live cache


class _PeakRss:
    """The highest RSS of this process while the ``with`` block runs, whole and its
    heap part (``RssAnon``), in MiB."""

    def __init__(self) -> None:
        self.peak = 0.0
        self.peak_anon = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _take(self) -> None:
        self.peak = max(self.peak, rss_mb())
        self.peak_anon = max(self.peak_anon, rss_breakdown_mb().get("RssAnon", 0.0))

    def _sample(self) -> None:
        while True:
            self._take()
            if self._stop.wait(0.01):
                return

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()


def _entry(
    kind: ScopeKind,
    owner: str,
    channel: str,
    server: str,
    user: str,
    provenance: frozenset[str],
    at: datetime,
) -> MemoryEntry:
    said = tuple(
        StoredMessage(role="user", content=f"{u} in {channel}", timestamp=at, user_id=u)
        for u in sorted(provenance)
    )
    return MemoryEntry(
        key=key_for(kind, owner, channel),
        kind=kind,
        channel_id=channel,
        server_id=server,
        user_id=user,
        messages=(*said, StoredMessage(role="assistant", content="Noted.", timestamp=at)),
        summary=f"In {channel}, {' and '.join(sorted(provenance))} planned the heist.",
        provenance=provenance,
        last_updated=at,
        rev=1,
    )


def _segments(
    n: int, now: datetime
) -> list[tuple[int, int, datetime, Callable[[int], MemoryEntry]]]:
    """``(first, end, written_at, entry_of_row)`` for each share of the rows."""
    idle_at = now - timedelta(days=100)

    def own(i: int) -> MemoryEntry:
        server = f"g{i % SERVERS}"
        return _entry("user", BIG_USER, f"b{i}", server, BIG_USER, frozenset({BIG_USER}), now)

    def channel(i: int) -> MemoryEntry:
        user = f"u{i}"
        return _entry("user", user, BIG_CHANNEL, "g0", user, frozenset({user}), now)

    def other(at: datetime, reached: bool) -> Callable[[int], MemoryEntry]:
        def make(i: int) -> MemoryEntry:
            server, user = f"g{i % SERVERS}", f"u{i % USERS}"
            said = {user, f"u{(i * 7 + 3) % USERS}"}
            if reached and i % 4 == 0:
                said.add(BIG_USER)
            kind: ScopeKind = "server" if i % 2 else "user"
            owner = server if kind == "server" else user
            return _entry(kind, owner, f"f{i}", server, user, frozenset(said), at)

        return make

    bounds = [0, n * 2 // 10, n * 3 // 10, n * 8 // 10, n]
    makers = [own, channel, other(idle_at, False), other(now, True)]
    stamps = [now, now, idle_at, now]
    return [(bounds[k], bounds[k + 1], stamps[k], makers[k]) for k in range(len(makers))]


def _chunks(
    first: int, end: int, make: Callable[[int], MemoryEntry]
) -> Iterator[list[MemoryEntry]]:
    for lo in range(first, end, CHUNK):
        yield [make(i) for i in range(lo, min(end, lo + CHUNK))]


def _populate(mem: ShortTermMemory, n: int, now: datetime) -> int:
    """Write the rows, and cache one in :data:`CACHED_SHARE` of the recent ones;
    returns how many were cached."""
    cached = 0
    for first, end, at, make in _segments(n, now):
        for chunk in _chunks(first, end, make):
            mem._store.put_rows(chunk, at)
            if at != now:
                continue  # idle rows are long gone from a live cache
            live = chunk[::CACHED_SHARE]
            mem._cache.add_many({e.key: _cached(mem, e) for e in live})
            cached += len(live)
    return cached


def _cached(mem: ShortTermMemory, entry: MemoryEntry) -> Write:
    """The entry's cache value, ranked in its owner's index as a write ranks it."""
    owner = entry.server_id if entry.kind == "server" else entry.user_id
    assert owner is not None
    rank = Rank(index_key(entry.kind, owner), entry.last_updated.timestamp())
    return Write(entry.to_dict(), mem._live.native_ttl(entry), rank=rank)


def _measure(run: Callable[[], int]) -> dict[str, Any]:
    """Run ``run`` (it returns the rows it went through) once: its rows, seconds and
    the peak RSS meanwhile."""
    with _PeakRss() as rss:
        start = time.perf_counter()
        rows = run()
        seconds = time.perf_counter() - start
    return {
        "rows": rows,
        "s": round(seconds, 2),
        "rows_per_s": rows / seconds,
        "peak_rss_mb": round(rss.peak, 1),
        "peak_rss_anon_mb": round(rss.peak_anon, 1),
    }


def operate(root: Path, now: datetime) -> dict[str, Any]:
    """Runs in a fresh interpreter (so the population's garbage is not counted): the
    four operations on the populated store, in this order (repair sees the whole
    cache, the janitor what the others left), and the process's peak RSS."""
    with ShortTermMemory.from_url(
        f"sqlite:///{root / 'stm.db'}", cache_dir=root / "cache", clock=lambda: now
    ) as mem:
        out: dict[str, Any] = {"rss_mb_open": round(rss_mb(), 1)}
        runs: dict[str, Callable[[], int]] = {
            "repair": lambda: mem.repair().checked,
            "clear_user": lambda: mem.clear_user(BIG_USER),
            "clear_channel": lambda: mem.clear_channel(BIG_CHANNEL),
            "janitor": mem.run_janitor,
        }
        out |= {name: _measure(op) for name, op in runs.items()}
        out["rows_left"] = mem._store.count_rows()
    out["max_rss_mb"] = round(_peak_rss_mb(), 1)
    return out


def _peak_rss_mb() -> float:
    """The peak RSS of this process so far (``VmHWM``; ``ru_maxrss`` would not do: on
    Linux it carries the parent's peak over the ``exec``), NaN where unknown."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run(cfg: Config) -> CaseResult:
    n = cfg.pick(ROWS, QUICK_ROWS)
    root = cfg.workdir / NAME
    root.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    with ShortTermMemory.from_url(
        f"sqlite:///{root / 'stm.db'}", cache_dir=root / "cache", clock=lambda: now
    ) as mem:
        start = time.perf_counter()
        cached = _populate(mem, n, now)
        populate_s = round(time.perf_counter() - start, 1)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bulk", str(root), now.isoformat()],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    ops: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    names = ("clear_user", "clear_channel", "janitor", "repair")
    return CaseResult(
        NAME,
        [
            *(
                Metric(f"bulk_{name}_rows_per_s", ops[name]["rows_per_s"], unit="1/s")
                for name in names
            ),
            Metric("bulk_peak_rss_mb", ops["max_rss_mb"], unit="MiB"),
        ],
        {"rows": n, "cached_entries": cached, "populate_s": populate_s, **ops},
    )


if __name__ == "__main__":
    print(json.dumps(operate(Path(sys.argv[1]), datetime.fromisoformat(sys.argv[2]))))

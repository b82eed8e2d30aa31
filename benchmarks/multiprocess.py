"""Case 7 — multi-process: 2 processes × 2,000 updates over 100 scopes on one host.

Both processes open the same SQLite file and diskcache directory (the embedded
default) and update the same 100 warm server scopes in round-robin order (so they
contend on the same keys). Each worker creates its turns before a shared barrier
(``begin_turn`` is outside the timed region, as in case 1), then runs its updates.

- ``two_process_speedup``: total updates/s of the two processes (4,000 updates over the
  wall time from the first start to the last finish) / updates/s of one process doing
  2,000 updates alone on a fresh store of the same shape (median of rounds);
- ``lost_updates``: every update runs on a fresh turn, so it adds exactly 1 to
  ``last_refreshed_turn`` of the scope's live key, in the cache *and* in SQL. After
  the run, the sums over the 100 live keys must have grown by the number of updates
  that reported ``completed``; the larger shortfall of the two is reported (must be 0).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import statistics
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from stm_memory import Scope, ShortTermMemory

from ._fixtures import dialogue
from ._harness import CaseResult, Config, Metric

NAME = "multiprocess"
SCOPES = 100


def scopes() -> list[Scope]:
    return [
        Scope(channel_id=f"c{j}", user_id=f"u{j % 10}", server_id="g-mp") for j in range(SCOPES)
    ]


def _open(root: Path) -> ShortTermMemory:
    return ShortTermMemory.from_url(f"sqlite:///{root}/stm.db", cache_dir=root / "cache")


def prepare(root: Path) -> None:
    rng = random.Random(7)
    root.mkdir(parents=True, exist_ok=True)
    with _open(root) as mem:
        for scope in scopes():
            mem.capture(scope, dialogue(rng, 3, words=12))
            assert mem.update(mem.begin_turn(scope), {"summary": "Start."})["status"] == "completed"


def counters(root: Path) -> tuple[int, int]:
    """Sum of ``last_refreshed_turn`` over the live keys: (cache, SQL)."""
    keys = [s.live_key for s in scopes()]
    with _open(root) as mem:
        cached = mem._cache.get_many(keys)
        rows = mem._store.load_many(keys)
    assert len(cached) == len(rows) == SCOPES
    return (
        sum(int(v["last_refreshed_turn"]) for v in cached.values()),
        sum(e.last_refreshed_turn for e in rows.values()),
    )


def worker(root: str, wid: int, n: int, barrier: Barrier, out: Any) -> None:
    """One process: ``n`` updates, round-robin over the scopes (offset per worker)."""
    all_scopes = scopes()
    summary = f"Worker {wid} keeps the summary up to date with what happened. " * 6
    with _open(Path(root)) as mem:
        mem.get(all_scopes[0])  # connections open, statements compiled
        turns = [mem.begin_turn(all_scopes[(i + wid * 50) % SCOPES]) for i in range(n)]
        barrier.wait()
        cpu = time.process_time()
        start = time.perf_counter_ns()  # CLOCK_MONOTONIC: comparable across processes
        completed = 0
        for turn in turns:
            if mem.update(turn, {"summary": summary})["status"] == "completed":
                completed += 1
        end = time.perf_counter_ns()
        cpu = time.process_time() - cpu
    out.put({"wid": wid, "start": start, "end": end, "completed": completed, "cpu_s": cpu})


def run_round(root: Path, processes: int, n: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(processes)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=worker, args=(str(root), wid, n, barrier, out))
        for wid in range(processes)
    ]
    before = counters(root)
    for p in procs:
        p.start()
    reports = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, p.exitcode
    after = counters(root)
    completed = sum(r["completed"] for r in reports)
    wall = max(r["end"] for r in reports) - min(r["start"] for r in reports)
    return {
        "processes": processes,
        "updates": processes * n,
        "completed": completed,
        "wall_s": wall / 1e9,
        "updates_per_s": completed / (wall / 1e9),
        "cpu_s": [round(r["cpu_s"], 3) for r in reports],
        "lost_cache": completed - (after[0] - before[0]),
        "lost_sql": completed - (after[1] - before[1]),
    }


def run(cfg: Config) -> CaseResult:
    n = cfg.pick(2_000, 300)
    rounds = cfg.pick(2, 1)
    root = cfg.workdir / NAME
    singles: list[dict[str, Any]] = []
    pairs: list[dict[str, Any]] = []
    for r in range(rounds):
        one, two = root / f"one-{r}", root / f"two-{r}"
        prepare(one)
        prepare(two)
        singles.append(run_round(one, 1, n))
        pairs.append(run_round(two, 2, n))
    speedup = statistics.median(
        p["updates_per_s"] / s["updates_per_s"] for p, s in zip(pairs, singles, strict=True)
    )
    lost = max(max(r["lost_cache"], r["lost_sql"]) for r in [*singles, *pairs])
    failed = sum(r["updates"] - r["completed"] for r in [*singles, *pairs])
    return CaseResult(
        NAME,
        [
            Metric("two_process_speedup", speedup),
            Metric("lost_updates", lost, "==", 0),
            Metric("failed_updates", failed, "==", 0),
            Metric(
                "one_process_updates_per_s",
                statistics.median(s["updates_per_s"] for s in singles),
                unit="1/s",
            ),
            Metric(
                "two_process_updates_per_s",
                statistics.median(p["updates_per_s"] for p in pairs),
                unit="1/s",
            ),
        ],
        {"single": singles, "two": pairs},
    )

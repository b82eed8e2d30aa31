"""Case 6 — scale: ``get`` p50 at 1,000 vs 100,000 stored scopes, and memory growth.

Two embedded stores are populated directly through the bulk APIs (``store.put_rows``
and ``cache.add_many``, in chunks): 1,000 and 100,000 server scopes, each with its
server and user entry (so 2 rows and 2 cache keys per scope) and the per-owner key
indexes. Each is then probed in a **fresh interpreter** (``python -m benchmarks.scale
PROBE``), so neither population nor the other probe pollutes its numbers:

- ``get`` latency: warm-up gets, then individually timed ``mem.get(scope)`` calls on
  random scopes (GC off) → p50; ``get_growth_100k_vs_1k`` = the median over three
  rounds of p50(100k) / p50(1k), the two probes of a round run one after the other;
- resident memory: RSS after opening the store and a few gets, then after a ``get`` of
  every stored scope; ``rss_mb_100k`` is that growth for 100,000 scopes (what a
  process pays for the data it serves: the SQLite page caches, any in-process maps).
"""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ._harness import CaseResult, Config, Metric, percentile, rss_breakdown_mb, rss_mb

NAME = "scale"
CHUNK = 10_000
SCOPES_PER_SERVER = 100
USERS = 5_000
ROUNDS = 3


def _scope_ids(i: int) -> tuple[str, str, str]:
    """(server_id, channel_id, user_id) of scope ``i``."""
    return f"g{i // SCOPES_PER_SERVER}", f"c{i}", f"u{i % USERS}"


def populate(root: Path, n: int) -> float:
    """Create ``n`` scopes under ``root``; returns seconds taken."""
    from stm_memory import ShortTermMemory
    from stm_memory.cache.base import Write
    from stm_memory.model import MemoryEntry, StoredMessage, index_key, key_for

    start = time.perf_counter()
    rng = random.Random(6)
    summaries = [" ".join(rng.choice("abcdefgh") * 6 for _ in range(45)) for _ in range(20)]
    now = datetime.now(UTC) - timedelta(minutes=5)
    messages = (
        StoredMessage(role="user", content="Are we on for Friday?", timestamp=now, name="Ann"),
        StoredMessage(role="assistant", content="Yes, the plan has not changed.", timestamp=now),
    )
    root.mkdir(parents=True, exist_ok=True)
    with ShortTermMemory.from_url(f"sqlite:///{root}/stm.db", cache_dir=root / "cache") as mem:
        indexes: dict[str, dict[str, int]] = {}
        for lo in range(0, n, CHUNK):
            entries: list[MemoryEntry] = []
            for i in range(lo, min(n, lo + CHUNK)):
                server, channel, user = _scope_ids(i)
                summary = summaries[i % len(summaries)]
                for kind, owner in (("server", server), ("user", user)):
                    key = key_for(kind, owner, channel)  # type: ignore[arg-type]
                    entries.append(
                        MemoryEntry(
                            key=key,
                            kind=kind,  # type: ignore[arg-type]
                            channel_id=channel,
                            server_id=server,
                            user_id=user,
                            messages=messages,
                            summary=summary,
                            last_updated=now,
                        )
                    )
                    indexes.setdefault(index_key(kind, owner), {})[key] = 1  # type: ignore[arg-type]
            mem._store.put_rows(entries, now)
            mem._cache.add_many(
                {e.key: Write(e.to_dict(), mem._live.native_ttl(e)) for e in entries}
            )
        mem._cache.add_many({k: Write({"members": v}) for k, v in indexes.items()})
        assert mem._store.count_rows() == 2 * n
    return time.perf_counter() - start


def probe(root: Path, n: int, samples: int) -> dict[str, Any]:
    """Runs in a fresh interpreter: get p50 and RSS growth over every scope."""
    from stm_memory import Scope, ShortTermMemory

    def scope(i: int) -> Scope:
        server, channel, user = _scope_ids(i)
        return Scope(channel_id=channel, user_id=user, server_id=server)

    rng = random.Random(66)
    mem = ShortTermMemory.from_url(f"sqlite:///{root}/stm.db", cache_dir=root / "cache")
    for i in range(0, n, max(1, n // 100)):
        assert mem.get(scope(i)) is not None
    gc.collect()
    rss_before = rss_mb()
    parts_before = rss_breakdown_mb()
    picks = [scope(rng.randrange(n)) for _ in range(samples + 1000)]
    for s in picks[:1000]:
        mem.get(s)
    timings: list[int] = []
    gc.collect()
    gc.disable()
    clock = time.perf_counter_ns
    get = mem.get
    for s in picks[1000:]:
        t0 = clock()
        get(s)
        timings.append(clock() - t0)
    gc.enable()
    missing = 0
    for i in range(n):
        if mem.get(scope(i)) is None:
            missing += 1
    gc.collect()
    rss_after = rss_mb()
    parts_after = rss_breakdown_mb()
    mem.close()
    return {
        "scopes": n,
        "get_p50_us": percentile(timings, 0.5) / 1000,
        "get_p90_us": percentile(timings, 0.9) / 1000,
        "get_p99_us": percentile(timings, 0.99) / 1000,
        "rss_before_mb": rss_before,
        "rss_after_mb": rss_after,
        "rss_growth_mb": rss_after - rss_before,
        "rss_growth_parts_mb": {k: v - parts_before.get(k, 0.0) for k, v in parts_after.items()},
        "missing": missing,
    }


def _run_probe(root: Path, n: int, samples: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", str(root), str(n), str(samples)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run(cfg: Config) -> CaseResult:
    small, large = 1_000, cfg.pick(100_000, 20_000)
    samples = cfg.pick(5_000, 1_000)
    root = cfg.workdir / NAME
    populate_s = {
        small: populate(root / "small", small),
        large: populate(root / "large", large),
    }
    # Probe the two stores alternately, ROUNDS times; the ratio is the median of the
    # per-round ratios (as in the other cases): the two probes of a round run moments
    # apart, so a slow spell of a shared machine weighs on both sides of its ratio.
    runs: dict[int, list[dict[str, Any]]] = {small: [], large: []}
    for _ in range(ROUNDS):
        runs[small].append(_run_probe(root / "small", small, samples))
        runs[large].append(_run_probe(root / "large", large, samples))
    assert all(r["missing"] == 0 for rs in runs.values() for r in rs), runs
    ratios = sorted(
        big["get_p50_us"] / little["get_p50_us"]
        for little, big in zip(runs[small], runs[large], strict=True)
    )
    growth = ratios[len(ratios) // 2]
    best = {size: min(r, key=lambda x: x["get_p50_us"]) for size, r in runs.items()}
    rss = max(r["rss_growth_mb"] for r in runs[large])
    label = f"{large // 1000}k"
    return CaseResult(
        NAME,
        [
            Metric(f"get_growth_{label}_vs_1k", growth, "<=", 1.5),
            Metric(f"rss_mb_{label}", rss, "<=", 100, unit="MiB"),
            Metric("get_p50_us_1k", best[small]["get_p50_us"], unit="µs"),
            Metric(f"get_p50_us_{label}", best[large]["get_p50_us"], unit="µs"),
        ],
        {"probes": runs, "round_ratios": ratios, "populate_seconds": populate_s},
    )


if __name__ == "__main__":
    print(json.dumps(probe(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))

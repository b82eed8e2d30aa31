"""Case 1 — update latency.

``mem.update()`` in summary mode on a warm server scope (two keys, two rows) against
its floor, which does the same job: per key, a raw ``diskcache.Cache.set`` of the same
entry value and one raw upsert moving the key in its owner's recency index (the ordered
index prompt assembly reads; the same table and order index as our diskcache backend's,
in the same file, each statement its own transaction); then one raw sqlite3
(WAL/NORMAL) transaction with the same two upserts. ``update_vs_floor_no_index`` keeps
the earlier floor without the index writes, for continuity.

Each update needs a fresh TurnContext (one update per turn): the turns of a round are
created *outside* the timed region; ``begin_turn`` is measured on its own and
reported beside it (``begin_turn_us``, ``update_with_begin_turn_vs_floor``).
"""

from __future__ import annotations

import random

from stm_memory import Scope, ShortTermMemory
from stm_memory.live.indexes import owner_index, score

from ._fixtures import (
    UPSERT_PLAIN,
    UPSERT_RESET,
    RawFloor,
    dialogue,
    open_memory,
    row_params,
    summary_text,
)
from ._harness import CaseResult, Comparison, Config, Metric, compare, timed

NAME = "update"

SCOPE = Scope(channel_id="c-general", user_id="u-ann", server_id="g-guild")


def warm_scope(mem: ShortTermMemory, scope: Scope, rng: random.Random) -> None:
    """A scope as it is mid-conversation: captured dialogue and an earlier summary."""
    mem.capture(scope, dialogue(rng, 5))
    result = mem.update(mem.begin_turn(scope), {"summary": "An earlier summary."})
    assert result["status"] == "completed", result
    mem.end_turn(mem.begin_turn(scope))


def measure(
    mem: ShortTermMemory, floor: RawFloor, summary: str, cfg: Config
) -> tuple[Comparison, Comparison, Comparison]:
    scope = SCOPE
    args = {"summary": summary}

    def ours(n: int) -> int:
        turns = [mem.begin_turn(scope) for _ in range(n)]
        elapsed = timed(lambda t: mem.update(t, args), turns)
        last = mem.update(mem.begin_turn(scope), args)
        assert last["status"] == "completed", last
        return elapsed

    # The floor writes exactly what our update wrote: the same entry values and rows.
    entries = mem._live.get_many(list(scope.keys))
    values = [(k, entries[k].to_dict()) for k in scope.keys]
    ttl = mem._live.native_ttl(entries[scope.live_key])
    rows = [
        (UPSERT_RESET if k == scope.live_key else UPSERT_PLAIN, row_params(entries[k]))
        for k in scope.keys
    ]
    # The recency index: each key under its owner's index, scored by last_updated.
    ranks = [(owner_index(k), k, score(entries[k])) for k in scope.keys]
    # Rows and index members exist: the timed upserts take the update path.
    floor.write_pair(values, rows, ttl, ranks)

    def raw(n: int) -> int:
        return timed(lambda _: floor.write_pair(values, rows, ttl, ranks), range(n))

    def raw_no_index(n: int) -> int:
        return timed(lambda _: floor.write_pair(values, rows, ttl), range(n))

    patch = {"summary": summary, "turns_since_refresh": 0}
    keys = [k for k, _ in values]

    def rmw(n: int) -> int:
        return timed(lambda _: floor.rmw_pair(keys, patch, rows, ttl), range(n))

    sizes = {
        "warmup": cfg.pick(300, 50),
        "repeats": cfg.pick(21, 5),
        "inner": cfg.pick(300, 60),
    }
    return (
        compare(ours, raw, **sizes),
        compare(ours, raw_no_index, **sizes),
        compare(ours, rmw, **sizes),
    )


def measure_begin_turn(mem: ShortTermMemory, cfg: Config) -> float:
    n = cfg.pick(3000, 500)
    timed(lambda _: mem.begin_turn(SCOPE), range(200))
    samples = [timed(lambda _: mem.begin_turn(SCOPE), range(n)) / n for _ in range(5)]
    return sorted(samples)[len(samples) // 2]


def run(cfg: Config) -> CaseResult:
    rng = random.Random(1)
    root = cfg.workdir / NAME
    floor = RawFloor(root / "floor")
    try:
        with open_memory(root) as mem:
            warm_scope(mem, SCOPE, rng)
            summary = summary_text(rng, 600)
            result, no_index, by_hand = measure(mem, floor, summary, cfg)
            begin_ns = measure_begin_turn(mem, cfg)
    finally:
        floor.close()
    with_begin = (result.ours_ns + begin_ns) / result.floor_ns
    return CaseResult(
        NAME,
        [
            Metric("update_vs_floor", result.ratio, "<=", 1.5, note="aim < 1.0"),
            Metric("update_us", result.ours_ns / 1000, unit="µs"),
            Metric("update_floor_us", result.floor_ns / 1000, unit="µs"),
            Metric("update_vs_floor_no_index", no_index.ratio),
            Metric("update_floor_no_index_us", no_index.floor_ns / 1000, unit="µs"),
            Metric("update_vs_rmw_by_hand", by_hand.ratio),
            Metric("update_rmw_by_hand_us", by_hand.floor_ns / 1000, unit="µs"),
            Metric("begin_turn_us", begin_ns / 1000, unit="µs"),
            Metric("update_with_begin_turn_vs_floor", with_begin),
        ],
        {
            "update": result.to_dict(),
            "update_vs_floor_no_index": no_index.to_dict(),
            "update_vs_rmw_by_hand": by_hand.to_dict(),
            "begin_turn_us": begin_ns / 1000,
            "summary_chars": 600,
        },
    )

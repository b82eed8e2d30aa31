"""Case 2 — context latency.

``mem.build_context()`` for a server scope with a same-channel summary and 3
other-channel entries (summary + captured dialogue each), everything warm in the
cache, against its floor: raw ``diskcache.Cache.get`` of the same keys.

"The same keys" are the keys our engine reads for that call (recorded once by
wrapping the cache): the live entry, the server's key index and the 3 other
entries. The floor reads the same values from a raw ``diskcache.Cache``.

The same call once the server has 100, 1,000 and 10,000 other channels
(``context_{N}ch_vs_3ch``, target ≤ 1.5 for 1,000 and 10,000): prompt assembly reads
the newest entries from the server's ordered index, so its cost does not grow with
the number of channels.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from stm_memory import Scope, ShortTermMemory

from ._fixtures import RawFloor, dialogue, open_memory, summary_text
from ._harness import CaseResult, Config, Metric, compare, timed

NAME = "context"

SCOPE = Scope(channel_id="c-main", user_id="u-ann", server_id="g-guild", channel_name="main")
OTHERS = ("c-plans", "c-random", "c-lore")
#: Channels of the server in the wide runs (the first three are OTHERS).
WIDE = (100, 1000, 10000)


def populate(mem: ShortTermMemory, rng: random.Random) -> None:
    for channel in OTHERS:
        scope = Scope(
            channel_id=channel, user_id="u-ann", server_id="g-guild", channel_name=channel
        )
        mem.capture(scope, dialogue(rng, 5))
        assert (
            mem.update(mem.begin_turn(scope), {"summary": summary_text(rng, 500)})["status"]
            == "completed"
        )
    mem.capture(SCOPE, dialogue(rng, 5))
    assert (
        mem.update(mem.begin_turn(SCOPE), {"summary": summary_text(rng, 600)})["status"]
        == "completed"
    )


def add_channels(mem: ShortTermMemory, rng: random.Random, start: int, stop: int) -> None:
    """Channels ``c-extra-{start}`` … ``c-extra-{stop - 1}``, each with a summary."""
    for i in range(start, stop):
        scope = Scope(channel_id=f"c-extra-{i}", user_id="u-ann", server_id="g-guild")
        mem.capture(scope, dialogue(rng, 5))
        assert (
            mem.update(mem.begin_turn(scope), {"summary": summary_text(rng, 500)})["status"]
            == "completed"
        )


def keys_read(mem: ShortTermMemory, call: Any) -> list[str]:
    """The cache keys read while running ``call()`` (in order, duplicates kept)."""
    seen: list[str] = []
    cache = mem._cache
    # The engine reads with read_many (values it never changes); get_many besides.
    originals = {name: getattr(cache, name) for name in ("get_many", "read_many")}

    def spying(original: Any) -> Any:
        def spy(keys: Sequence[str]) -> Any:
            seen.extend(keys)
            return original(keys)

        return spy

    for name, original in originals.items():
        setattr(cache, name, spying(original))
    try:
        call()
    finally:
        for name in originals:
            delattr(cache, name)
    return seen


def run(cfg: Config) -> CaseResult:
    rng = random.Random(2)
    root = cfg.workdir / NAME
    floor = RawFloor(root / "floor")
    try:
        with open_memory(root) as mem:
            populate(mem, rng)
            turn = mem.begin_turn(SCOPE, user_message="what did we plan?")
            ctx = mem.build_context(turn)
            assert ctx.content and all(f"#{c}" in ctx.content for c in OTHERS), ctx.content
            keys = keys_read(mem, lambda: mem.build_context(turn))
            values = mem._cache.get_many(keys)
            floor.seed(values)
            raw_cache = floor.cache

            def ours(n: int) -> int:
                return timed(lambda _: mem.build_context(turn), range(n))

            def raw(n: int) -> int:
                def op(_: int) -> None:
                    for key in keys:
                        raw_cache.get(key)

                return timed(op, range(n))

            result = compare(
                ours,
                raw,
                warmup=cfg.pick(300, 50),
                repeats=cfg.pick(21, 5),
                inner=cfg.pick(400, 80),
            )
            wide: dict[int, Any] = {}
            have = len(OTHERS)
            for total in WIDE:
                add_channels(mem, rng, have - len(OTHERS), total - len(OTHERS))
                have = total
                turn = mem.begin_turn(SCOPE, user_message="what did we plan?")
                wide[total] = compare(
                    ours,
                    raw,
                    warmup=cfg.pick(50, 5),
                    repeats=cfg.pick(11, 3),
                    inner=cfg.pick(200, 20),
                )
    finally:
        floor.close()
    return CaseResult(
        NAME,
        [
            Metric("context_vs_floor", result.ratio, "<=", 3),
            Metric("context_us", result.ours_ns / 1000, unit="µs"),
            Metric("context_floor_us", result.floor_ns / 1000, unit="µs"),
            *(
                metric
                for total, w in wide.items()
                for metric in (
                    Metric(f"context_{total}ch_us", w.ours_ns / 1000, unit="µs"),
                    Metric(
                        f"context_{total}ch_vs_3ch",
                        w.ours_ns / result.ours_ns,
                        op="<=" if total >= 1000 else None,
                        threshold=1.5 if total >= 1000 else None,
                    ),
                )
            ),
        ],
        {
            "context": result.to_dict(),
            **{f"context_{total}_channels": w.to_dict() for total, w in wide.items()},
            "keys_read": keys,
            "content_chars": len(ctx.content or ""),
        },
    )

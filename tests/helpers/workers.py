"""Entry points run in child processes by :mod:`helpers.subproc` (JSON in, JSON out).

Each one opens its own handles on shared paths, as a second worker process would.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from stm_memory import Scope, ShortTermMemory
from stm_memory.cache.base import CacheValue, Write
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.testing import FrozenClock


def _rendezvous(gate: str | None, timeout: float = 30.0) -> None:
    """Say "ready" in ``gate`` and wait for its "go" file, so every process starts its
    loop at the same moment (after the slow imports) and they really contend."""
    if gate is None:
        return
    Path(gate, f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + timeout
    while not Path(gate, "go").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("no go signal from the test")
        time.sleep(0.005)


def disk_increments(directory: str, key: str, count: int, gate: str | None = None) -> int:
    """``count`` read-modify-write increments of ``key`` through ``atomic``."""
    cache = DiskLiveCache(directory)

    def bump(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        value = current[key] or {"n": 0}
        return {key: Write({"n": value["n"] + 1})}

    _rendezvous(gate)
    try:
        for _ in range(count):
            cache.atomic([key], bump)
    finally:
        cache.close()
    return count


def _memory(database_url: str, cache_dir: str, outbox_path: str, now: str) -> ShortTermMemory:
    return ShortTermMemory.from_url(
        database_url,
        cache_dir=cache_dir,
        outbox_path=outbox_path,
        clock=FrozenClock(datetime.fromisoformat(now)),
    )


def read_entry(
    database_url: str, cache_dir: str, outbox_path: str, now: str, scope: dict[str, Any]
) -> dict[str, Any] | None:
    """What a freshly started process sees for ``scope``."""
    with _memory(database_url, cache_dir, outbox_path, now) as mem:
        entry = mem.get(Scope(**scope))
        return None if entry is None else entry.to_dict()


def end_turns(
    database_url: str,
    cache_dir: str,
    outbox_path: str,
    now: str,
    scope: dict[str, Any],
    turns: int,
    updates_every: int = 0,
    gate: str | None = None,
) -> dict[str, int]:
    """Run ``turns`` turns on ``scope``; every ``updates_every``-th one refreshes the
    memory instead of counting. Returns how many turns counted and refreshed."""
    counted = refreshed = 0
    with _memory(database_url, cache_dir, outbox_path, now) as mem:
        target = Scope(**scope)
        _rendezvous(gate)
        for i in range(1, turns + 1):
            turn = mem.begin_turn(target)
            if updates_every and i % updates_every == 0:
                result = mem.update(turn, {"summary": f"refresh {i}"})
                assert result["status"] == "completed", result
                refreshed += 1
            else:
                counted += 1
            mem.end_turn(turn)
    return {"counted": counted, "refreshed": refreshed}


def history_window(
    database_url: str, cache_dir: str, outbox_path: str, now: str, scope: dict[str, Any]
) -> dict[str, Any]:
    """The history window a freshly started process computes for a turn in ``scope``."""
    with _memory(database_url, cache_dir, outbox_path, now) as mem:
        context = mem.build_context(mem.begin_turn(Scope(**scope), provider="openai"))
        window = context.history
        assert window is not None
        return {"keep_turns": window.keep_turns, "max_raw_turns": window.max_raw_turns}

"""What only the diskcache backend promises beyond the live-cache contract it passes:
writers in several processes sharing one directory lose no increment."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from helpers.subproc import Gate, finish_worker, start_worker

from stm_memory.cache.base import CacheValue, Write
from stm_memory.cache.disk import DiskLiveCache


def bump(key: str) -> Callable[[Mapping[str, CacheValue | None]], dict[str, Write]]:
    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        value = current[key] or {"n": 0}
        return {key: Write({"n": value["n"] + 1})}

    return fn


@pytest.mark.slow
def test_disk_atomic_increments_from_two_processes(tmp_path: Path) -> None:
    directory = tmp_path / "shared-cache"
    DiskLiveCache(directory).close()
    gate = Gate(tmp_path / "gate")
    procs = [
        start_worker(
            "disk_increments", directory=str(directory), key="k", count=150, gate=str(gate)
        )
        for _ in range(2)
    ]
    local = DiskLiveCache(directory)
    try:
        gate.open_when_ready(2)
        for _ in range(50):
            local.atomic(["k"], bump("k"))
        assert [finish_worker(p) for p in procs] == [150, 150]
        assert local.get("k") == {"n": 350}
    finally:
        local.close()

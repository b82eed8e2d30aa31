"""Timing, metrics and environment helpers shared by every case.

The rules every case follows:

- warm-ups first, then ``repeats`` rounds; in each round our side and its floor run
  ``inner`` operations each, in alternating order (so slow drift of the machine hits
  both sides alike);
- ``time.perf_counter_ns`` around the whole inner loop, with the garbage collector
  disabled during the loop (and, per comparison, one full collection followed by
  ``gc.freeze()``, so the collections between rounds do not rescan the set-up);
- the reported ratio is the **median of the per-round ratios**, and the absolute
  medians (ns per operation) are kept beside it for orientation.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

__all__ = [
    "Bench",
    "CaseResult",
    "Comparison",
    "Config",
    "Metric",
    "compare",
    "environment",
    "loadavg",
    "percentile",
    "rss_breakdown_mb",
    "rss_mb",
    "timed",
]

T = TypeVar("T")

#: Runs ``n`` operations and returns the elapsed nanoseconds of the timed part only.
Bench = Callable[[int], int]


@dataclass(frozen=True)
class Config:
    """What a case may read: the size profile and where to put its files."""

    quick: bool
    workdir: Path
    out_dir: Path
    png_path: Path

    def pick(self, full: T, quick: T) -> T:
        return quick if self.quick else full


@dataclass(frozen=True)
class Metric:
    """One reported number, with its target when it has one."""

    key: str
    value: float
    op: Literal["<=", ">=", "=="] | None = None
    threshold: float | None = None
    unit: str = ""
    note: str = ""

    @property
    def target(self) -> str:
        if self.op is None or self.threshold is None:
            return "—"
        symbol = {"<=": "≤", ">=": "≥", "==": "="}[self.op]
        return f"{symbol} {self.threshold:g}"

    @property
    def passed(self) -> bool | None:
        if self.op is None or self.threshold is None:
            return None
        if self.op == "<=":
            return self.value <= self.threshold
        if self.op == ">=":
            return self.value >= self.threshold
        return self.value == self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "target": self.target,
            "passed": self.passed,
            "unit": self.unit,
            "note": self.note,
        }


@dataclass
class CaseResult:
    name: str
    metrics: list[Metric]
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class Comparison:
    """Ours against a floor: median of per-round ratios, and absolute medians."""

    ratio: float
    ours_ns: float
    floor_ns: float
    ratios: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ratio_median": self.ratio,
            "ours_us_median": self.ours_ns / 1000,
            "floor_us_median": self.floor_ns / 1000,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "rounds": len(self.ratios),
        }


def timed(op: Callable[[T], object], items: Iterable[T]) -> int:
    """Nanoseconds to run ``op`` on each item, with the garbage collector off meanwhile."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for item in items:
            op(item)
        return time.perf_counter_ns() - start
    finally:
        if was_enabled:
            gc.enable()


def compare(ours: Bench, floor: Bench, *, warmup: int, repeats: int, inner: int) -> Comparison:
    """Median of per-round ``ours / floor`` ratios (time per op); see the module docstring."""
    ours(warmup)
    floor(warmup)
    gc.collect()
    gc.freeze()
    ratios: list[float] = []
    ours_ns: list[float] = []
    floor_ns: list[float] = []
    try:
        for i in range(repeats):
            if i % 2 == 0:
                a = ours(inner)
                b = floor(inner)
            else:
                b = floor(inner)
                a = ours(inner)
            ours_ns.append(a / inner)
            floor_ns.append(b / inner)
            ratios.append(a / b)
    finally:
        gc.unfreeze()
    return Comparison(
        ratio=statistics.median(ratios),
        ours_ns=statistics.median(ours_ns),
        floor_ns=statistics.median(floor_ns),
        ratios=tuple(ratios),
    )


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank of sorted ``samples``."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def rss_mb() -> float:
    """Resident set size of this process in MiB (Linux ``/proc``; NaN elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    except OSError:
        return float("nan")


def rss_breakdown_mb() -> dict[str, float]:
    """``RssAnon`` (heap) and ``RssFile`` (file-backed pages, e.g. SQLite mmap) in MiB."""
    out: dict[str, float] = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                if name in ("RssAnon", "RssFile", "RssShmem"):
                    out[name] = int(rest.split()[0]) / 1024
    except OSError:
        pass
    return out


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def loadavg() -> list[float] | None:
    """The 1/5/15-minute load averages: a busy machine makes every number noisier."""
    return _loadavg()


def environment() -> dict[str, Any]:
    packages = [
        "stm-memory",
        "diskcache",
        "sqlalchemy",
        "langchain-core",
        "langchain",
        "langgraph",
        "langgraph-checkpoint-sqlite",
        "openai",
        "openai-agents",
    ]
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _git_commit(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "sqlite": sqlite3.sqlite_version,
        "loadavg_at_start": _loadavg(),
        "packages": {name: _version(name) for name in packages},
    }

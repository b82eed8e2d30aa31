"""Live-cache backends. Redis lives in ``cache.redis`` and is imported only on demand."""

from .base import AtomicFn, CacheValue, LiveCache, Rank, Write
from .disk import DiskLiveCache
from .memory import InMemoryLiveCache

__all__ = [
    "AtomicFn",
    "CacheValue",
    "DiskLiveCache",
    "InMemoryLiveCache",
    "LiveCache",
    "Rank",
    "Write",
]

"""Live-cache backends. Redis lives in ``cache.redis`` and is imported only on demand."""

from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Rank, Write
from stm_memory.cache.disk import DiskLiveCache
from stm_memory.cache.memory import InMemoryLiveCache

__all__ = [
    "AtomicFn",
    "CacheValue",
    "DiskLiveCache",
    "InMemoryLiveCache",
    "LiveCache",
    "Rank",
    "Write",
]

"""Memories on arbitrary URLs (the ``open_mem`` fixture) and the two storage layouts
the hardening tests run on (the ``deployment`` fixture)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stm_memory import ShortTermMemory

__all__ = ["Deployment", "OpenMem"]

#: ``open_mem(database_url, **from_url_kwargs)``.
OpenMem = Callable[..., ShortTermMemory]


@dataclass
class Deployment:
    """One storage layout: ``sqlite+disk`` (embedded default) or ``postgres+redis``
    (scale-out). ``open()`` builds a memory on it; ``open(fresh_cache=True)`` is a
    restart whose live cache starts empty."""

    name: str
    settings: dict[str, Any]
    _open: OpenMem
    _redis_url: str | None = None
    _restarts: int = 0

    def open(self, *, fresh_cache: bool = False, **kw: Any) -> ShortTermMemory:
        settings = dict(self.settings)
        if fresh_cache:
            self._restarts += 1
            if self._redis_url is not None:
                import redis

                client = redis.Redis.from_url(self._redis_url)
                client.flushdb()
                client.close()
            else:
                settings["cache_dir"] = Path(settings["cache_dir"]).with_name(
                    f"cache-{self._restarts}"
                )
        return self._open(**(settings | kw))

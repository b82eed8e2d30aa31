"""Writer leases: which engine instances write through a live cache, so a start-up can
tell that one of them died without closing (and only then pay for a repair).

Every engine records ``{host, pid}`` under its own id in one registry key of the
cache, and removes it when it is closed or the interpreter exits normally. A lease
left behind by a process of this host that no longer exists means that process was
killed, possibly between a cache write and its SQL write (see
:mod:`stm_memory.live.repair`). Leases of other hosts cannot be checked from
here: their own restart (same host name) or the janitor's periodic repair covers them.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
import weakref
from collections.abc import Mapping

from stm_memory.cache.base import CacheValue, LiveCache, Write

__all__ = ["WriterLease", "dead_writers", "forget_writers"]

log = logging.getLogger("stm_memory")

# Outside the "shortterm:" namespace: entry scans and a healing cache's wipe skip it.
REGISTRY_KEY = "stm-writers"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


def _edit(cache: LiveCache, add: Mapping[str, dict[str, object]], drop: set[str]) -> None:
    def fn(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        writers = dict((current[REGISTRY_KEY] or {}).get("writers", {}))
        writers.update(add)
        for lease_id in drop:
            writers.pop(lease_id, None)
        return {REGISTRY_KEY: Write({"writers": writers})}

    cache.atomic([REGISTRY_KEY], fn)


def _release(cache: LiveCache, lease_id: str) -> None:
    try:
        _edit(cache, {}, {lease_id})
    except Exception as exc:  # best effort: it may run in a finalizer at exit
        log.debug("stm-memory: writer lease %s not released: %s", lease_id, exc)


class WriterLease:
    """This engine's lease; released by :meth:`release` or at interpreter exit."""

    def __init__(self, cache: LiveCache) -> None:
        self.id = uuid.uuid4().hex
        _edit(cache, {self.id: {"host": socket.gethostname(), "pid": os.getpid()}}, set())
        # Not on os._exit or a kill: exactly the exits a repair is for.
        self._finalizer = weakref.finalize(self, _release, cache, self.id)

    def release(self) -> None:
        self._finalizer()


def dead_writers(cache: LiveCache) -> set[str]:
    """Ids of leases held by processes of this host that no longer exist."""
    value = cache.get(REGISTRY_KEY) or {}
    host = socket.gethostname()
    return {
        lease_id
        for lease_id, holder in value.get("writers", {}).items()
        if holder.get("host") == host and not _alive(int(holder.get("pid", 0)))
    }


def forget_writers(cache: LiveCache, lease_ids: set[str]) -> None:
    if lease_ids:
        _edit(cache, {}, lease_ids)

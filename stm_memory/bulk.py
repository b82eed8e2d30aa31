"""Bulk operations at size: batching helpers and progress reporting.

``clear_channel``, ``clear_user``, the janitor and repair may each go through a
million rows or cached entries. They run in batches (SQL: one transaction per batch,
see ``SqlStore.batch_size``; the live cache: :data:`CACHE_BATCH` keys per round trip),
so memory stays bounded and no transaction holds a lock for long, and they report
their progress after every batch.

Progress is ambient (a context variable) rather than a parameter threaded through
every layer: a delete runs inside the store, called by the outbox's persister (which
may replay other queued operations first), and only the engine's public methods and
the store's batches need to know about it. :func:`reporting` sets the callback for
the duration of a call; a ``with`` nested in it without a callback keeps the outer
one, so the janitor's repair reports to the janitor's caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import islice
from typing import TypeAlias, TypeVar

__all__ = [
    "CACHE_BATCH",
    "DELETE_ROWS",
    "ERASE_CACHED",
    "ERASE_ROWS",
    "EVICT_CACHED",
    "REPAIR_CACHED",
    "ProgressCallback",
    "Tally",
    "batched",
    "listening",
    "report",
    "reporting",
]

T = TypeVar("T")

#: ``progress(phase, done, total)``: called after each batch of a bulk operation with
#: the phase's running count and its expected total (``None`` when unknown). The last
#: call of a phase has ``total == done``: the exact count, once it is known.
ProgressCallback: TypeAlias = Callable[[str, int, int | None], None]

# Phases, as shown by the CLI. One operation may report several, one after another.
EVICT_CACHED = "evict cached entries"
ERASE_CACHED = "erase cached entries"
REPAIR_CACHED = "repair cached entries"
DELETE_ROWS = "delete rows"
ERASE_ROWS = "erase shared rows"

#: Live-cache keys read or evicted per round trip while a bulk operation scans the
#: cache: one ``get_many`` / ``delete_many`` each, a few hundred kilobytes of values.
CACHE_BATCH = 500

_current: ContextVar[ProgressCallback | None] = ContextVar("stm_memory_progress", default=None)


@contextmanager
def reporting(progress: ProgressCallback | None) -> Iterator[None]:
    """Send the progress of the bulk operations run inside to ``progress`` (``None``:
    keep the callback already set, if any)."""
    if progress is None:
        yield
        return
    token = _current.set(progress)
    try:
        yield
    finally:
        _current.reset(token)


def listening() -> bool:
    """Whether a callback is set: totals cost a count query, spent only then."""
    return _current.get() is not None


def report(phase: str, done: int, total: int | None) -> None:
    progress = _current.get()
    if progress is not None:
        progress(phase, done, total)


class Tally:
    """The running count of one phase, reported as it grows."""

    def __init__(self, phase: str, total: int | None = None) -> None:
        self.phase = phase
        self.total = total
        self.done = 0

    def add(self, count: int, *, last: bool = False) -> None:
        self.done += count
        if last:
            self.total = self.done
        report(self.phase, self.done, self.total)

    def end(self) -> None:
        """The phase is over: its total is what was done."""
        self.total = self.done
        report(self.phase, self.done, self.total)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of up to ``size`` items, drawn from ``items`` as they are needed."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk

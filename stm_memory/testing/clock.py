"""A frozen, advanceable clock for tests: relative times come only from it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["FrozenClock"]


class FrozenClock:
    """Callable returning a fixed aware UTC datetime until :meth:`advance` moves it."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("FrozenClock needs a timezone-aware start")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**kwargs)`` (e.g. ``hours=25``)."""
        step = delta if delta is not None else timedelta(**kwargs)
        if step < timedelta(0):
            raise ValueError("a FrozenClock only moves forward")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("FrozenClock needs timezone-aware datetimes")
        with self._lock:
            self._now = when.astimezone(UTC)

    def __repr__(self) -> str:
        return f"FrozenClock({self._now.isoformat()})"

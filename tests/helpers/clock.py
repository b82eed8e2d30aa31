"""A settable clock for the engine's ``clock=`` option."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

__all__ = ["START", "FakeClock"]

#: Where every fake clock starts: a Monday noon, UTC.
START = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


class FakeClock:
    """Callable returning an aware UTC datetime that only moves when told to."""

    def __init__(self, start: datetime = START) -> None:
        if start.tzinfo is None:
            raise ValueError("FakeClock needs an aware start time")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)``; returns the new time."""
        step = timedelta(**delta)
        if step < timedelta(0):
            raise ValueError("a clock does not run backwards")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> datetime:
        with self._lock:
            self._now = when.astimezone(UTC)
            return self._now

    def __repr__(self) -> str:
        return f"FakeClock({self():%Y-%m-%d %H:%M:%S} UTC)"

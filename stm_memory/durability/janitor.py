"""A stoppable background thread that runs the janitor on a schedule."""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from stm_memory.bulk import ProgressCallback

__all__ = ["Janitor", "Sweep"]

log = logging.getLogger("stm_memory")


class Sweep(Protocol):
    """One janitor run (``ShortTermMemory.run_janitor``): rows deleted."""

    def __call__(self, *, progress: ProgressCallback | None = None) -> int: ...


class _Stopped(Exception):
    """Raised between two batches of a sweep once a stop is requested."""


class Janitor(threading.Thread):
    """Calls ``sweep`` after ``first_run`` seconds, then every ``interval`` seconds."""

    def __init__(self, sweep: Sweep, *, first_run: float, interval: float) -> None:
        super().__init__(name="stm-memory-janitor", daemon=True)
        self._sweep = sweep
        self._first_run = first_run
        self._interval = interval
        self._stop_event = threading.Event()
        self.runs = 0
        self.last_deleted: int | None = None

    def run(self) -> None:
        delay = self._first_run
        while not self._stop_event.wait(delay):
            try:
                self.last_deleted = self._sweep(progress=self._between_batches)
            except _Stopped:
                return  # the batches done so far stay done; the next start carries on
            except Exception:  # a failed sweep must not kill the schedule
                log.exception("stm-memory: janitor run failed; retrying at the next interval")
            self.runs += 1
            delay = self._interval

    def _between_batches(self, _phase: str, _done: int, _total: int | None) -> None:
        # A sweep over a million rows takes a while: a stop requested meanwhile ends it
        # at the next batch boundary, so close() does not shut the stores under it.
        if self._stop_event.is_set():
            raise _Stopped

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

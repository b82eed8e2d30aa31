"""A stoppable background thread that runs the janitor on a schedule."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["Janitor"]

log = logging.getLogger("stm_memory")


class Janitor(threading.Thread):
    """Calls ``sweep`` after ``first_run`` seconds, then every ``interval`` seconds."""

    def __init__(self, sweep: Callable[[], int], *, first_run: float, interval: float) -> None:
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
                self.last_deleted = self._sweep()
            except Exception:  # a failed sweep must not kill the schedule
                log.exception("stm-memory: janitor run failed; retrying at the next interval")
            self.runs += 1
            delay = self._interval

    def stop(self, timeout: float | None = 5.0) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

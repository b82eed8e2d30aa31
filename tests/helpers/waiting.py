"""Polling instead of fixed sleeps: fast when the condition comes early."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(
    condition: Callable[[], object], *, timeout: float = 5.0, step: float = 0.01
) -> bool:
    """True as soon as ``condition()`` is truthy; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)

"""Threads that start together and report their failures to the test thread."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_threads(count: int, target: Callable[[int], object], *, timeout: float = 120) -> None:
    """Run ``target(i)`` for ``i`` in ``range(count)``, each on its own thread released
    at once by a barrier (so they race); the first exception is re-raised here."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def wrapped(i: int) -> None:
        barrier.wait()
        try:
            target(i)
        except BaseException as exc:  # re-raised in the test thread below
            errors.append(exc)

    pool = [threading.Thread(target=wrapped, args=(i,)) for i in range(count)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=timeout)
    assert not errors, errors[0]

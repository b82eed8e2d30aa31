"""What the contract suites share: racing threads, polling, handle bookkeeping."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

__all__ = ["opened_handles", "run_threads", "wait_until"]


class _Closable(Protocol):
    def close(self) -> None: ...


H = TypeVar("H", bound=_Closable)


@contextmanager
def opened_handles(open_one: Callable[[], H]) -> Iterator[Callable[[], H]]:
    """A callable that opens a handle with ``open_one`` each time it is called; every
    handle it opened is closed on exit (in the order opened)."""
    opened: list[H] = []

    def open_handle() -> H:
        handle = open_one()
        opened.append(handle)
        return handle

    try:
        yield open_handle
    finally:
        for handle in opened:
            handle.close()


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


def wait_until(
    condition: Callable[[], object], *, timeout: float = 5.0, step: float = 0.01
) -> bool:
    """True as soon as ``condition()`` is truthy (polling: fast when it comes early);
    False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)

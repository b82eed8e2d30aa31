"""Operations a sans-I/O body yields, and the two drivers that run them.

A body (a provider turn, a middleware hook, a chat-history step) is a generator that
*yields* :class:`Op` values and receives their results. :func:`drive` runs it with
blocking calls and :func:`adrive` with awaits, so a sync method and its async twin
share one body (the habit httpx taught: I/O-free logic in one place, thin shells
around it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

__all__ = ["Op", "adrive", "attempt", "drive", "op"]

log = logging.getLogger("stm_memory")
T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class Op:
    """One I/O operation: ``run`` for blocking drivers, ``arun`` for async ones."""

    run: Callable[[], Any]
    arun: Callable[[], Awaitable[Any]]
    label: str = ""


def op(
    fn: Callable[P, object], afn: Callable[P, Awaitable[object]], *args: P.args, **kw: P.kwargs
) -> Op:
    """An :class:`Op` calling ``fn`` (blocking drivers) or ``afn`` (async drivers) with
    ``args`` and ``kw``, checked by the type checker against both signatures (the
    ParamSpec): a closure built here cannot hide a wrong argument."""
    return Op(lambda: fn(*args, **kw), lambda: afn(*args, **kw), getattr(fn, "__name__", ""))


def attempt(step: Op, what: str) -> Generator[Op, Any, Any]:
    """Run ``step``; on failure log and return None: memory never fails the user's turn."""
    try:
        return (yield step)
    except Exception:
        log.exception("stm-memory: %s failed; the turn continues without it", what)
        return None


def _advance(steps: Generator[Op, Any, T], result: Any, error: BaseException | None) -> Op:
    return steps.throw(error) if error is not None else steps.send(result)


def drive(steps: Generator[Op, Any, T]) -> T:
    """Run a step generator with blocking calls."""
    try:
        step = next(steps)
        while True:
            try:
                result, error = step.run(), None
            except BaseException as exc:
                result, error = None, exc
            step = _advance(steps, result, error)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[Op, Any, T]) -> T:
    """Run a step generator with awaits."""
    try:
        step = next(steps)
        while True:
            try:
                result, error = await step.arun(), None
            except BaseException as exc:
                result, error = None, exc
            step = _advance(steps, result, error)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]

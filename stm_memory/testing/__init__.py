"""Testing kit for users of stm-memory: a frozen clock, fixtures (pytest plugin) and
assertion helpers."""

from .clock import FrozenClock

__all__ = ["FrozenClock"]

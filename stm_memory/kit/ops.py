"""The kit's operations and drivers (:mod:`stm_memory._ops`, below every layer that
yields them: the memory tool's call runs on them too)."""

from stm_memory._ops import Op, adrive, attempt, drive, op

__all__ = ["Op", "adrive", "attempt", "drive", "op"]

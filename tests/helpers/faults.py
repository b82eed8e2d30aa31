"""Faults injected inside the process (servers taken down from outside are
:mod:`helpers.proxy` and :mod:`helpers.sqlite_lock`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from stm_memory import DatabaseError, ShortTermMemory

__all__ = ["store_writes_fail"]

_STORE_WRITES = (
    "put_rows",
    "advance_rows",
    "delete_channel",
    "delete_user",
    "clear_summary",
)


@contextmanager
def store_writes_fail(mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every SQL write of ``mem`` raises DatabaseError (reads still work), as during an
    outage that spares reads: the writes go to the outbox."""

    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise DatabaseError("simulated outage")

    with monkeypatch.context() as patch:
        for name in _STORE_WRITES:
            patch.setattr(mem._store, name, fail)
        yield

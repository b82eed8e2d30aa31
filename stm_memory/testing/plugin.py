"""pytest plugin (registered through the ``pytest11`` entry point): stm-memory fixtures.

Active whenever stm-memory is installed; no conftest needed::

    def test_my_agent(stm_memory, stm_scope, stm_clock):
        scope = stm_scope(channel_id="general")
        ...
        stm_clock.advance(hours=25)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ..engine import ShortTermMemory
from ..types import Scope
from .clock import FrozenClock

__all__ = ["stm_clock", "stm_memory", "stm_scope"]


@pytest.fixture
def stm_clock() -> FrozenClock:
    """A frozen clock starting 2026-01-05 12:00 UTC; ``stm_clock.advance(hours=25)``."""
    return FrozenClock()


@pytest.fixture
def stm_memory(tmp_path: Path, stm_clock: FrozenClock) -> Iterator[ShortTermMemory]:
    """A ShortTermMemory on a temporary SQLite file and cache directory, using
    ``stm_clock``; closed after the test."""
    mem = ShortTermMemory.from_url(
        f"sqlite:///{tmp_path / 'stm.db'}", cache_dir=tmp_path / "stm-cache", clock=stm_clock
    )
    try:
        yield mem
    finally:
        mem.close()


@pytest.fixture
def stm_scope() -> Callable[..., Scope]:
    """A factory of scopes with readable defaults (server ``test-server``, channel
    ``general``, user ``alice``); pass ``server_id=None`` for a DM."""

    def make(**overrides: Any) -> Scope:
        values: dict[str, Any] = {
            "channel_id": "general",
            "user_id": "alice",
            "server_id": "test-server",
            "channel_name": overrides.get("channel_id", "general"),
            "user_name": overrides.get("user_id", "alice").title(),
        }
        values.update(overrides)
        return Scope(**values)

    return make

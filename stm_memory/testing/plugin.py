"""pytest plugin (registered through the ``pytest11`` entry point): stm-memory fixtures.

Active whenever stm-memory is installed; no conftest needed::

    def test_summary_expires(stm_memory, stm_scope, stm_clock, stm_assert):
        scope = stm_scope("plot")
        turn = stm_memory.begin_turn(scope)
        stm_memory.update(turn, {"summary": "The heist is on Friday."})
        stm_assert.memory_contains(scope, "Friday")
        stm_clock.advance(hours=25)
        assert stm_memory.get(scope) is None

Fixtures:

- ``stm_clock``: a :class:`~stm_memory.testing.FrozenClock` at 2026-01-05 12:00 UTC;
  ``stm_clock.advance(hours=25)``.
- ``stm_memory``: a :class:`~stm_memory.ShortTermMemory` on a temporary SQLite file and
  cache directory, using ``stm_clock``, closed after the test.
- ``stm_memory_factory``: opens more memories on the same SQLite file and clock —
  ``stm_memory_factory()`` is a restart (a fresh cache directory, so entries hydrate
  from SQL), ``stm_memory_factory(fresh_cache=False)`` another worker sharing the cache.
- ``stm_scope``: a factory of scopes with readable defaults (channel ``general`` of
  server ``test-server``, user ``alice``).
- ``stm_assert``: the assertion helpers bound to ``stm_memory``
  (:class:`~stm_memory.testing.StmAssertions`).

Hermetic by default: the ``STM_*`` environment variables are ignored (every limit
takes its documented default), and server/user settings are read afresh on every turn
(``settings_ttl=0``: the brief memo is timed by the real clock, so a test's outcome
would depend on its speed). Options for the memories go in a marker, e.g.
``@pytest.mark.stm_memory(summary_ttl=timedelta(hours=1), messages_kept=4)``; it takes
any keyword of :meth:`ShortTermMemory.from_url <stm_memory.ShortTermMemory.from_url>`
except the database URL, ``cache_dir`` and ``clock``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from stm_memory.config import Limits
from stm_memory.engine import ShortTermMemory
from stm_memory.model import Scope
from stm_memory.testing.clock import FrozenClock

if TYPE_CHECKING:  # imported by the fixture: every pytest run loads this plugin
    from stm_memory.testing.assertions import StmAssertions

__all__ = [
    "MemoryFactory",
    "stm_assert",
    "stm_clock",
    "stm_memory",
    "stm_memory_factory",
    "stm_scope",
]

_MARKER = "stm_memory"
_OWN_OPTIONS = frozenset({"database_url", "cache_dir", "clock"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(**options): options for the stm_memory fixtures (any keyword of "
        "ShortTermMemory.from_url but the URL, cache_dir and clock, e.g. summary_ttl=)",
    )


def _marker_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    options: dict[str, Any] = {}
    # Closest marker last, so a test's marker beats its class's and module's.
    for marker in reversed(list(request.node.iter_markers(_MARKER))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{_MARKER} takes keyword arguments only")
        options.update(marker.kwargs)
    clash = sorted(_OWN_OPTIONS & options.keys())
    if clash:
        raise pytest.UsageError(
            f"@pytest.mark.{_MARKER}: the fixture sets {', '.join(clash)} itself"
        )
    return options


class MemoryFactory:
    """``stm_memory_factory``: opens memories on one temporary SQLite file with the test's
    clock and closes them all after the test.

    ``factory(fresh_cache=True, **options)``: each call with ``fresh_cache=True`` gets a
    new, empty cache directory (a restart: entries hydrate from SQL); with
    ``fresh_cache=False`` it shares the first cache directory (another worker on the
    same host). ``options`` add to (and override) the marker's.
    """

    def __init__(self, directory: Path, clock: FrozenClock, options: dict[str, Any]) -> None:
        self.directory = directory
        self.clock = clock
        self.options = options
        self.database_url = f"sqlite:///{directory / 'stm.db'}"
        self.opened: list[ShortTermMemory] = []

    def __call__(self, *, fresh_cache: bool = True, **options: Any) -> ShortTermMemory:
        clash = sorted(_OWN_OPTIONS & options.keys())
        if clash:
            raise TypeError(f"stm_memory_factory sets {', '.join(clash)} itself")
        number = len(self.opened)
        cache = "stm-cache" if number == 0 or not fresh_cache else f"stm-cache-{number}"
        # Every limit explicitly: the STM_* environment variables must not change a test.
        defaults: dict[str, Any] = {f.name: getattr(Limits(), f.name) for f in fields(Limits)}
        # Settings are memoised for settings_ttl seconds of *real* time; a test must not
        # depend on how fast it runs, so a change made through one memory is seen at once.
        defaults["settings_ttl"] = 0.0
        memory = ShortTermMemory.from_url(
            self.database_url,
            cache_dir=self.directory / cache,
            clock=self.clock,
            **{**defaults, **self.options, **options},
        )
        self.opened.append(memory)
        return memory

    def close_all(self) -> None:
        while self.opened:
            self.opened.pop().close()


@pytest.fixture
def stm_clock() -> FrozenClock:
    """A frozen clock starting 2026-01-05 12:00 UTC; ``stm_clock.advance(hours=25)``."""
    return FrozenClock()


@pytest.fixture
def stm_memory_factory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, stm_clock: FrozenClock
) -> Iterator[MemoryFactory]:
    """Opens memories on one temporary SQLite file with ``stm_clock`` (see
    :class:`MemoryFactory`); all are closed after the test."""
    factory = MemoryFactory(
        tmp_path_factory.mktemp("stm-memory"), stm_clock, _marker_options(request)
    )
    try:
        yield factory
    finally:
        factory.close_all()


@pytest.fixture
def stm_memory(stm_memory_factory: MemoryFactory) -> ShortTermMemory:
    """A ShortTermMemory on a temporary SQLite file and cache directory, using
    ``stm_clock``; closed after the test. Options: ``@pytest.mark.stm_memory(...)``."""
    return stm_memory_factory(fresh_cache=False)


@pytest.fixture
def stm_scope() -> Callable[..., Scope]:
    """A factory of scopes with readable defaults: ``stm_scope()`` is channel
    ``general`` of server ``test-server`` for user ``alice``; ``stm_scope("plot")``
    names the channel; any :class:`~stm_memory.Scope` field can be overridden
    (``server_id=None`` or ``dm=True`` for a direct conversation)."""

    def make(channel_id: str = "general", *, dm: bool = False, **overrides: Any) -> Scope:
        values: dict[str, Any] = {
            "channel_id": channel_id,
            "user_id": "alice",
            "server_id": None if dm else "test-server",
        }
        values.update(overrides)
        if dm and values["server_id"] is not None:
            raise TypeError("stm_scope: dm=True contradicts a server_id")
        user_id, channel = values["user_id"], values["channel_id"]
        values.setdefault("channel_name", channel if isinstance(channel, str) else None)
        values.setdefault("user_name", user_id.title() if isinstance(user_id, str) else None)
        return Scope(**values)

    return make


@pytest.fixture
def stm_assert(stm_memory: ShortTermMemory) -> StmAssertions:
    """The assertion helpers bound to ``stm_memory``: ``stm_assert.memory_contains(scope,
    "Friday")``, ``stm_assert.tool_offered(scope)``, ``stm_assert.tool_not_offered(turn)``,
    ``stm_assert.request_carries_memory(body, "Friday")``, ``request_lacks_memory``."""
    from stm_memory.testing.assertions import StmAssertions

    return StmAssertions(stm_memory)

"""Conformance suites, written once and run against every backend and entry point.

stm-memory runs them on each backend it ships (in-memory, diskcache, Redis, Redis
Cluster, the SQL live cache, SQLite and PostgreSQL stores); a backend of your own
passes them too before the engine can rely on it. Subclass a suite in a test module
(the class name must start with ``Test``) and give it the fixture that opens your
backend; every test of the suite then runs on it::

    # tests/test_my_cache.py
    import pytest
    from stm_memory.testing.contract import LiveCacheContract, opened_handles
    from my_package import MyLiveCache

    class TestMyLiveCache(LiveCacheContract):
        @pytest.fixture
        def open_live_cache(self, tmp_path):
            # Each call opens another handle on the same backend (some tests race two).
            with opened_handles(lambda: MyLiveCache(tmp_path / "cache")) as open_one:
                yield open_one

:class:`MemoryStoreContract` works the same way with an ``open_memory_store`` fixture
whose handles are set up (``store.setup()``) before they are returned. Parametrize
the fixture to run one class on several configurations. The suites use pytest alone
(a core dependency of stm-memory) and need no plugin or conftest.

:class:`IntegrationContract` does the same for an entry point (a provider loop, a
framework adapter, your own): one scripted group-channel dialogue, driven through it
by an ``entry_point`` fixture returning an :class:`IntegrationDriver`, must show what
every shipped entry point shows (:mod:`stm_memory.testing.contract.integration`).
:func:`shipped_drivers` are the drivers of stm-memory's own entry points.
"""

import pytest

# The suites' assert statements are in this package, not in your test module: have
# pytest rewrite them too, so a failure shows the compared values.
pytest.register_assert_rewrite(
    "stm_memory.testing.contract.cache",
    "stm_memory.testing.contract.store",
    "stm_memory.testing.contract.integration",
)

from stm_memory.testing.contract._drivers import (  # noqa: E402
    DriverFactory,
    memory_results,
    shipped_drivers,
)
from stm_memory.testing.contract._support import opened_handles  # noqa: E402
from stm_memory.testing.contract.cache import LiveCacheContract  # noqa: E402
from stm_memory.testing.contract.integration import (  # noqa: E402
    STEPS,
    IntegrationContract,
    IntegrationDriver,
    ScriptedModel,
    SentRequest,
    Turn,
    TurnOutcome,
)
from stm_memory.testing.contract.store import MemoryStoreContract  # noqa: E402

__all__ = [
    "STEPS",
    "DriverFactory",
    "IntegrationContract",
    "IntegrationDriver",
    "LiveCacheContract",
    "MemoryStoreContract",
    "ScriptedModel",
    "SentRequest",
    "Turn",
    "TurnOutcome",
    "memory_results",
    "opened_handles",
    "shipped_drivers",
]

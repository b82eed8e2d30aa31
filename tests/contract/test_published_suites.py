"""The contract suites run from a third party's test module, as their docstring shows:
a subclass in a file of its own, with nothing from this repository's tests."""

from __future__ import annotations

import pytest

from stm_memory.testing.contract import LiveCacheContract, MemoryStoreContract

pytest_plugins = ["pytester"]

# The inner runs need no cache, and no asyncio plugin (it warns without its settings).
INNER_ARGS = ("-p", "no:cacheprovider", "-p", "no:asyncio")


def count_tests(suite: type) -> int:
    return sum(1 for name in dir(suite) if name.startswith("test_"))


THIRD_PARTY = """
import pytest
from stm_memory.cache import InMemoryLiveCache
from stm_memory.store import SqlStore, create_sql_engine
from stm_memory.testing.contract import LiveCacheContract, MemoryStoreContract, opened_handles


class TestTheirCache(LiveCacheContract):
    @pytest.fixture
    def open_live_cache(self):
        shared = InMemoryLiveCache()  # one dict behind every handle
        with opened_handles(lambda: shared) as open_one:
            yield open_one


class TestTheirStore(MemoryStoreContract):
    @pytest.fixture
    def open_memory_store(self, tmp_path):
        def open_one():
            store = SqlStore(create_sql_engine(f"sqlite:///{tmp_path / 'their.db'}"))
            store.setup()
            return store

        with opened_handles(open_one) as opener:
            yield opener
"""


def test_a_third_party_module_runs_both_suites(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_their_backends=THIRD_PARTY)
    result = pytester.runpytest(*INNER_ARGS)
    expected = count_tests(LiveCacheContract) + count_tests(MemoryStoreContract)
    result.assert_outcomes(passed=expected)


def test_a_subclass_without_the_fixture_is_told_what_to_add(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_incomplete="""
        from stm_memory.testing.contract import LiveCacheContract

        class TestIncomplete(LiveCacheContract):
            pass
        """
    )
    result = pytester.runpytest(*INNER_ARGS, "-k", "missing_key")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*TestIncomplete must define an open_live_cache fixture*"])

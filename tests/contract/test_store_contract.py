"""The published durable-store contract (:mod:`stm_memory.testing.contract`) on the
store stm-memory ships, SqlStore, on a SQLite file, in-memory SQLite and PostgreSQL
(``store_url`` in this folder's conftest). What its schema adds beyond the contract is
tested in ``test_sql_store.py``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from stm_memory.store.sql import SqlStore
from stm_memory.testing.contract import MemoryStoreContract


class TestSqlStore(MemoryStoreContract):
    @pytest.fixture
    def open_memory_store(
        self, open_store: Callable[[], SqlStore], store_url: str
    ) -> Callable[[], SqlStore]:
        if store_url == "sqlite://":
            # An in-memory database lives in its one handle: another would be empty.
            only = open_store()
            return lambda: only
        return open_store

"""The SQL stores the store suites run on: ``store_url`` (a SQLite file, in-memory
SQLite, PostgreSQL), ``open_store`` (set-up handles on it, closed after the test) and
``store`` (one of them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from stm_memory.store.sql import SqlStore, create_sql_engine

STORE_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("sqlite-memory", id="sqlite-memory"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=STORE_BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path / 'store.db'}"
    if request.param == "sqlite-memory":
        return "sqlite://"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def open_store(store_url: str) -> Iterator[Callable[[], SqlStore]]:
    opened: list[SqlStore] = []

    def open_one() -> SqlStore:
        store = SqlStore(create_sql_engine(store_url, timeout=5))
        store.setup()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[[], SqlStore]) -> SqlStore:
    return open_store()

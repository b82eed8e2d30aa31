"""SqlStore beyond the store contract it passes (``test_store_contract.py``): the
schema and its migrations, two engines on one database, and the stamps in the columns
(the janitor's ``updated_at``, ``created_at``), on a SQLite file, in-memory SQLite and
PostgreSQL (``store``, ``store_url`` in this folder's conftest)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers.services import PostgresSchemas
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory.model import MemoryEntry, Scope
from stm_memory.store.schema import MIGRATIONS, memories, schema_version
from stm_memory.store.sql import SqlStore, create_sql_engine

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def scope(channel: str = "c1") -> Scope:
    return Scope(channel_id=channel, user_id="u1", server_id="g1")


def entry(
    sc: Scope,
    *,
    at: datetime = T0,
    summary: str | None = None,
    turns: int = 0,
    rev: int = 1,
    refreshed_at: datetime | None = None,
) -> MemoryEntry:
    """The server entry of ``sc`` as the engine would write it."""
    key = sc.server_key
    assert key is not None
    return replace(
        MemoryEntry.empty(sc, key, at),
        summary=summary,
        turns_since_refresh=turns,
        rev=rev,
        refreshed_at=refreshed_at,
    )


def row(store: SqlStore, key: str) -> MemoryEntry:
    return store.load_many([key])[key]


def raw_row(store: SqlStore, key: str) -> dict[str, object]:
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(memories).where(memories.c.key == key)).mappings().one()
        return dict(found)


def test_setup_is_idempotent_and_versioned(store: SqlStore) -> None:
    store.setup()
    store.setup()
    with store.engine.connect() as conn:
        versions = conn.execute(sa.select(schema_version.c.version)).scalars().all()
        tables = set(sa.inspect(conn).get_table_names())
        indexes = {ix["name"] for ix in sa.inspect(conn).get_indexes("short_term_memories")}
    assert versions == list(range(1, len(MIGRATIONS) + 1))
    assert {
        "short_term_memories",
        "stm_categories",
        "stm_server_settings",
        "stm_user_settings",
        "stm_schema_version",
    } <= tables
    assert {"ix_stm_updated_at", "ix_stm_channel", "ix_stm_user"} <= indexes


@pytest.fixture(
    params=[
        pytest.param("sqlite-file", id="sqlite-file"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database that a second engine can open too (not in-memory SQLite)."""
    if request.param == "sqlite-file":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_a_second_store_on_the_same_database_keeps_data(shared_url: str) -> None:
    first, second = (SqlStore(create_sql_engine(shared_url)) for _ in range(2))
    try:
        first.setup()
        sc = scope()
        first.put_rows([entry(sc, summary="kept")], T0)
        second.setup()  # against an existing, current schema
        assert row(second, sc.server_key or "").summary == "kept"
        with second.engine.connect() as conn:
            count = sa.select(sa.func.count()).select_from(schema_version)
            assert conn.execute(count).scalar() == len(MIGRATIONS)
    finally:
        first.close()
        second.close()


def test_a_database_from_before_row_revisions_is_migrated(store: SqlStore) -> None:
    """Schema v2 adds last_updated, refreshed_at and rev to an existing v1 table."""
    sc = scope()
    store.put_rows([entry(sc, summary="old", turns=2)], T0)
    later = T0 + timedelta(hours=1)
    with store.engine.begin() as conn:  # back to the v1 shape, row kept
        conn.execute(sa.update(memories).values(updated_at=later))
        for column in ("last_updated", "refreshed_at", "rev"):
            conn.execute(sa.text(f"ALTER TABLE short_term_memories DROP COLUMN {column}"))
        conn.execute(sa.delete(schema_version).where(schema_version.c.version >= 2))
    store.setup()
    got = row(store, sc.server_key or "")
    # An old row reads its last_updated from updated_at, and any new write outranks it.
    assert (got.summary, got.turns_since_refresh, got.rev) == ("old", 2, 0)
    assert got.last_updated == later
    assert store.put_rows([entry(sc, summary="new", rev=1)], later) == 1
    assert row(store, sc.server_key or "").summary == "new"


def test_activity_and_the_entry_clock_are_stamped_apart(store: SqlStore) -> None:
    """updated_at is when the row was last written (the janitor's clock); last_updated
    is the entry's own expiry clock, which a counted turn does not move."""
    sc = scope()
    key = sc.server_key or ""
    store.put_rows([entry(sc, summary="S", at=T0, rev=1)], T0)
    later = T0 + timedelta(hours=30)
    store.put_rows([entry(sc, summary="S", at=T0, turns=1, rev=2)], later)
    got = row(store, key)
    assert got.last_updated == T0
    updated = raw_row(store, key)["updated_at"]
    assert isinstance(updated, datetime)
    assert updated.replace(tzinfo=updated.tzinfo or UTC) == later


def test_timestamps_are_aware_utc_and_come_from_the_given_values(store: SqlStore) -> None:
    sc = scope()
    tokyo = timezone(timedelta(hours=9))
    written = datetime(2026, 3, 1, 21, 30, 15, 123456, tzinfo=tokyo)  # 12:30:15 UTC
    store.put_rows([entry(sc, summary="S", at=written, refreshed_at=written)], written)
    got = row(store, sc.server_key or "")
    for stamp in (got.last_updated, got.refreshed_at):
        assert stamp is not None and stamp.utcoffset() == timedelta(0)
        assert stamp == written
    raw = raw_row(store, sc.server_key or "")
    created = raw["created_at"]
    assert isinstance(created, datetime)
    assert created.replace(tzinfo=created.tzinfo or UTC) == written
    # Later writes move updated_at, never created_at.
    later = written + timedelta(hours=2)
    store.put_rows([entry(sc, summary="S2", at=later, rev=2)], later)
    raw = raw_row(store, sc.server_key or "")
    updated = raw["updated_at"]
    assert isinstance(updated, datetime)
    assert updated.replace(tzinfo=updated.tzinfo or UTC) == later
    created = raw["created_at"]
    assert isinstance(created, datetime)
    assert created.replace(tzinfo=created.tzinfo or UTC) == written
    assert row(store, sc.server_key or "").last_updated == later


@pytest.mark.postgres
def test_postgres_stamps_do_not_depend_on_the_session_time_zone(
    postgres_schemas: PostgresSchemas,
) -> None:
    url = postgres_schemas.new_url(timezone="America/New_York")
    store = SqlStore(create_sql_engine(url))
    try:
        store.setup()
        sc = scope()
        store.put_rows([entry(sc, summary="S", at=T0)], T0)
        assert row(store, sc.server_key or "").last_updated == T0
        assert store.delete_older_than(T0 - timedelta(minutes=1)) == 0
        assert store.delete_older_than(T0 + timedelta(minutes=1)) == 1
    finally:
        store.close()


def test_setup_of_a_current_schema_needs_no_write_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    first = SqlStore(create_sql_engine(url, timeout=0.2))
    first.setup()
    first.close()
    with SqliteWriteLock(tmp_path / "locked.db"):
        again = SqlStore(create_sql_engine(url, timeout=0.2))
        try:
            again.setup()  # a worker restarting while another one writes
            assert again.count_rows() == 0
        finally:
            again.close()

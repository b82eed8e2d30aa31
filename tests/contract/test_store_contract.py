"""The durable-store contract: SQLite file, SQLite in-memory and PostgreSQL pass it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers.services import PostgresSchemas
from helpers.sqlite_lock import SqliteWriteLock
from helpers.threads import run_threads

from stm_memory.errors import RejectedWriteError
from stm_memory.model import (
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    UserSettings,
    next_rev,
)
from stm_memory.store.schema import MIGRATIONS, memories, schema_version
from stm_memory.store.sql import SqlStore, create_sql_engine

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

BACKENDS = [
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("sqlite-memory", id="sqlite-memory"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=BACKENDS)
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


def scope(channel: str = "c1", user: str = "u1", server: str | None = "g1", **kw: str) -> Scope:
    return Scope(channel_id=channel, user_id=user, server_id=server, **kw)


def entry(
    sc: Scope,
    kind: str = "server",
    *,
    at: datetime = T0,
    summary: str | None = None,
    categories: dict[str, str] | None = None,
    turns: int = 0,
    refreshed: int = 0,
    rev: int = 1,
    refreshed_at: datetime | None = None,
) -> MemoryEntry:
    key = sc.server_key if kind == "server" else sc.user_key
    assert key is not None
    return replace(
        MemoryEntry.empty(sc, key, at),
        summary=summary,
        categories=categories or {},
        turns_since_refresh=turns,
        last_refreshed_turn=refreshed,
        rev=rev,
        refreshed_at=refreshed_at,
    )


def row(store: SqlStore, key: str) -> MemoryEntry:
    return store.load_many([key])[key]


def raw_row(store: SqlStore, key: str) -> dict[str, object]:
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(memories).where(memories.c.key == key)).mappings().one()
        return dict(found)


def op() -> str:
    return uuid.uuid4().hex


# -- schema -----------------------------------------------------------------------------


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


@pytest.fixture(params=[b for b in BACKENDS if b.id != "sqlite-memory"])
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


# -- row writes -------------------------------------------------------------------------


def test_put_rows_inserts_the_entries_as_they_are(store: SqlStore) -> None:
    sc = scope(parent_channel_id="p1")
    refreshed_at = T0 - timedelta(minutes=1)
    user = entry(sc, "user", summary="S", turns=4, refreshed=2, rev=7)
    server = entry(sc, "server", summary="S", refreshed=3, rev=8, refreshed_at=refreshed_at)
    assert store.put_rows([user, server], T0) == 2
    got = store.load_many(list(sc.keys))
    assert got[sc.user_key] == user
    assert got[sc.server_key or ""] == server
    assert got[sc.server_key or ""].parent_channel_id == "p1"
    assert got[sc.user_key].kind == "user" and got[sc.user_key].user_id == "u1"
    assert got[sc.server_key or ""].kind == "server" and got[sc.server_key or ""].server_id == "g1"


def test_put_rows_takes_a_snapshot_only_from_a_newer_revision(store: SqlStore) -> None:
    sc = scope()
    key = sc.server_key or ""
    assert store.put_rows([entry(sc, summary="two", turns=0, refreshed=2, rev=20)], T0) == 1
    # Older revisions arrive late (a racing writer, an outbox replay): refused.
    assert store.put_rows([entry(sc, summary="one", turns=5, refreshed=1, rev=10)], T0) == 0
    # The same revision again (a lost commit acknowledgement, replayed): a no-op.
    assert store.put_rows([entry(sc, summary="two?", turns=9, refreshed=2, rev=20)], T0) == 0
    got = row(store, key)
    assert (got.summary, got.turns_since_refresh, got.last_refreshed_turn) == ("two", 0, 2)
    later = T0 + timedelta(minutes=5)
    newer = entry(sc, summary=None, categories={"a": "1"}, turns=3, refreshed=2, rev=21, at=later)
    assert store.put_rows([newer], later) == 1
    assert row(store, key) == newer  # every persisted field replaced, none merged


def test_one_put_rows_call_is_one_transaction(store: SqlStore) -> None:
    sc = scope()
    user, server = entry(sc, "user", summary="U"), entry(sc, "server", summary="S")
    broken = replace(server, channel_id=None)  # type: ignore[arg-type]  # NOT NULL column
    with pytest.raises(RejectedWriteError):
        store.put_rows([user, broken], T0)
    assert store.count_rows() == 0


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


def test_concurrent_writers_leave_the_newest_revision(
    store: SqlStore, open_store: Callable[[], SqlStore], store_url: str
) -> None:
    handles = [store] if store_url == "sqlite://" else [store, open_store()]
    sc = scope()
    threads, per_thread = 6, 15

    def work(i: int) -> None:
        for n in range(per_thread):
            rev = n * threads + i + 1  # every thread races every other one
            snapshot = entry(sc, summary=f"rev {rev}", turns=rev, rev=rev)
            handles[i % len(handles)].put_rows([snapshot], T0)

    run_threads(threads, work, timeout=60)
    top = threads * per_thread
    got = row(store, sc.server_key or "")
    assert (got.summary, got.turns_since_refresh, got.rev) == (f"rev {top}", top, top)


def test_advance_rows_moves_existing_older_rows_only(store: SqlStore) -> None:
    old, new, gone = scope(channel="old"), scope(channel="new"), scope(channel="gone")
    store.put_rows([entry(old, summary="o", rev=1), entry(new, summary="n", rev=9)], T0)
    later = T0 + timedelta(minutes=1)
    ahead = [
        entry(old, summary="o2", turns=4, rev=5, at=later),
        entry(new, summary="stale", rev=3),
        entry(gone, summary="deleted meanwhile", rev=5),
    ]
    assert store.advance_rows(ahead, later) == 1
    assert row(store, old.server_key or "") == ahead[0]
    assert row(store, new.server_key or "").summary == "n"
    assert store.load_many([gone.server_key or ""]) == {}  # never inserted


def test_json_categories_keep_their_order(store: SqlStore) -> None:
    sc = scope()
    cats = {"zeta": "last letter", "alpha": "first", "mid": "middle", "b": "2"}
    store.put_rows([entry(sc, categories=cats)], T0)
    assert list(row(store, sc.server_key or "").categories.items()) == list(cats.items())


def test_parent_channel_and_names_are_kept_and_not_erased_by_a_later_write(
    store: SqlStore,
) -> None:
    sc = Scope(
        channel_id="thread-1",
        user_id="u1",
        server_id="g1",
        parent_channel_id="general",
        channel_name="Plans",
        server_name="Guild",
    )
    key = sc.server_key or ""
    store.put_rows([entry(sc, summary="a", rev=1)], T0)
    got = row(store, key)
    assert (got.parent_channel_id, got.channel_name, got.server_name) == (
        "general",
        "Plans",
        "Guild",
    )
    bare = scope(channel="thread-1")  # same key, no parent or names known
    store.put_rows([entry(bare, summary="b", rev=2)], T0)
    got = row(store, key)
    assert (got.summary, got.parent_channel_id, got.channel_name) == ("b", "general", "Plans")
    store.advance_rows([entry(bare, summary="c", rev=3)], T0)
    assert row(store, key).parent_channel_id == "general"
    renamed = replace(sc, channel_name="Plans v2")
    store.put_rows([entry(renamed, summary="d", rev=4)], T0)
    assert row(store, key).channel_name == "Plans v2"


# -- loads ------------------------------------------------------------------------------


def test_load_many_returns_present_rows_without_messages(store: SqlStore) -> None:
    sc = scope()
    store.put_rows([entry(sc, "user"), entry(sc, "server")], T0)
    got = store.load_many([sc.user_key, "shortterm:user:nobody:nowhere"])
    assert list(got) == [sc.user_key]
    assert got[sc.user_key].messages == ()
    assert store.load_many([]) == {}


def test_load_server_and_load_user_select_by_owner_and_kind(store: SqlStore) -> None:
    a = scope(channel="c1", user="u1", server="g1")
    b = scope(channel="c2", user="u2", server="g1")
    c = scope(channel="c3", user="u1", server="g2")
    dm = scope(channel="dm1", user="u1", server=None)
    rows = [
        entry(a, "server", at=T0),
        entry(a, "user", at=T0),
        entry(b, "server", at=T0 + timedelta(minutes=2)),
        entry(b, "user", at=T0),
        entry(c, "server", at=T0),
        entry(c, "user", at=T0 + timedelta(minutes=1)),
        entry(dm, "user", at=T0 + timedelta(minutes=3)),
    ]
    for e in rows:
        store.put_rows([e], e.last_updated)
    assert [e.key for e in store.load_server("g1")] == [b.server_key, a.server_key]
    assert [e.key for e in store.load_user("u1")] == [dm.user_key, c.user_key, a.user_key]
    assert store.load_server("nope") == [] and store.load_user("nope") == []


# -- deletes ----------------------------------------------------------------------------


def test_delete_channel_removes_every_row_of_the_channel(store: SqlStore) -> None:
    a = scope(channel="c1", user="u1")
    b = scope(channel="c1", user="u2", persona_id="p")
    keep = scope(channel="c2", user="u1")
    store.put_rows([entry(s, k) for s in (a, b, keep) for k in ("user", "server")], T0)
    assert store.delete_channel("c1") == 4
    assert set(store.load_many([*a.keys, *b.keys, *keep.keys])) == set(keep.keys)
    assert store.delete_channel("c1") == 0


def test_delete_user_removes_only_user_scope_rows(store: SqlStore) -> None:
    a = scope(channel="c1", user="u1", server="g1")
    dm = scope(channel="dm", user="u1", server=None)
    other = scope(channel="c1", user="u2", server="g1")
    store.put_rows([entry(a, "user"), entry(a, "server"), entry(dm, "user")], T0)
    store.put_rows([entry(other, "user")], T0)
    assert store.delete_user("u1") == 2
    left = set(store.load_many([*a.keys, *dm.keys, *other.keys]))
    assert left == {a.server_key, other.user_key}


def test_clear_summary_nulls_distilled_content_and_keeps_counters(store: SqlStore) -> None:
    sc = scope()
    store.put_rows(
        [
            entry(sc, "user", summary="S", categories={"a": "1"}),
            entry(sc, "server", summary="S", categories={"a": "1"}, turns=1, refreshed=1, rev=5),
        ],
        T0,
    )
    later = T0 + timedelta(minutes=3)
    assert store.clear_summary(list(sc.keys), later) == 2
    server = row(store, sc.server_key or "")
    assert (server.summary, dict(server.categories)) == (None, {})
    assert (server.turns_since_refresh, server.last_refreshed_turn) == (1, 1)
    assert server.last_updated == later
    # The clear moves the revision as a cache mutation at that time would, so the
    # snapshot it replaced can no longer land on top of it.
    assert server.rev == next_rev(5, later)
    stale = entry(sc, "server", summary="S", categories={"a": "1"}, turns=1, refreshed=1, rev=6)
    assert store.put_rows([stale], later) == 0
    assert store.clear_summary(["shortterm:user:x:y"], later) == 0


def test_delete_older_than_uses_the_given_cutoff(store: SqlStore) -> None:
    old, edge, new = scope(channel="old"), scope(channel="edge"), scope(channel="new")
    store.put_rows([entry(old, at=T0 - timedelta(days=91))], T0 - timedelta(days=91))
    store.put_rows([entry(edge, at=T0 - timedelta(days=90))], T0 - timedelta(days=90))
    store.put_rows([entry(new, at=T0)], T0)
    assert store.delete_older_than(T0 - timedelta(days=90)) == 1
    assert {e.channel_id for e in store.list_rows()} == {"edge", "new"}


# -- op_id: exactly-once replay ---------------------------------------------------------


def test_op_id_makes_each_delete_apply_once(store: SqlStore) -> None:
    sc = scope()
    delete_id, clear_id = op(), op()
    store.put_rows([entry(sc, "server", summary="S")], T0)
    assert store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 1
    assert store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 0
    assert store.delete_channel("c1", op_id=delete_id) == 1
    store.put_rows([entry(sc, "server")], T0)  # written after the delete
    assert store.delete_channel("c1", op_id=delete_id) == 0
    assert store.count_rows() == 1
    user_id = op()
    store.put_rows([entry(sc, "user")], T0)
    assert store.delete_user("u1", op_id=user_id) == 1
    store.put_rows([entry(sc, "user")], T0)
    assert store.delete_user("u1", op_id=user_id) == 0
    assert store.count_rows() == 2


# -- settings ---------------------------------------------------------------------------


def test_server_settings_round_trip(store: SqlStore) -> None:
    assert store.get_server_settings("g1") is None
    custom = ServerSettings(
        short_term_memory_enabled=False,
        refresh_cadence=3,
        render_mode="supersede",
        crude_message_count=2,
        tool_description_override="Keep notes.",
        update_nudge_override="Update {category_labels} now.",
        nudge_injection_depth=4,
        content_injection_depth=1,
        private_channel_ids=frozenset({"secret", "staff"}),
        stm_privacy_bypass=True,
    )
    store.put_server_settings("g1", custom, T0)
    assert store.get_server_settings("g1") == custom
    changed = custom.with_changes(render_mode="crude_summary", private_channel_ids=frozenset())
    store.put_server_settings("g1", changed, T0 + timedelta(seconds=1))
    assert store.get_server_settings("g1") == changed
    assert store.get_server_settings("g2") is None


def test_user_settings_round_trip(store: SqlStore) -> None:
    assert store.get_user_settings("u1") is None
    store.put_user_settings("u1", UserSettings(cross_server_opt_in=True), T0)
    assert store.get_user_settings("u1") == UserSettings(cross_server_opt_in=True)
    store.put_user_settings("u1", UserSettings(full_privacy=True), T0)
    assert store.get_user_settings("u1") == UserSettings(full_privacy=True)
    assert store.get_user_settings("u2") is None


def test_categories_round_trip_in_order(store: SqlStore) -> None:
    assert store.get_categories("g1") == []
    cats = [
        Category("Plot", "What happened", "plot"),
        Category("Mood", "Tone", "mood"),
        Category("Zed", "", "zed"),
        Category("Ärger", "Streit", "rger"),
        Category("Alpha", "first letter, last place", "alpha"),
    ]
    store.set_categories("g1", cats)
    store.set_categories("g2", cats[:1])
    assert store.get_categories("g1") == cats
    store.set_categories("g1", [cats[4], cats[0]])
    assert store.get_categories("g1") == [cats[4], cats[0]]
    store.set_categories("g1", [])
    assert store.get_categories("g1") == []
    assert store.get_categories("g2") == cats[:1]


# -- timestamps -------------------------------------------------------------------------


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


def test_ids_with_separators_and_unicode_round_trip(store: SqlStore) -> None:
    sc = scope(channel="c:1%2", user="ü:ser", server="g:1", persona_id="π")
    store.put_rows([entry(sc, "user"), entry(sc, "server")], T0)
    got = store.load_many(list(sc.keys))
    assert got[sc.user_key].user_id == "ü:ser"
    assert got[sc.server_key or ""].channel_id == "c:1%2"
    assert got[sc.server_key or ""].persona_id == "π"
    assert [e.key for e in store.load_server("g:1")] == [sc.server_key]
    assert store.delete_channel("c:1%2") == 2


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


def test_longest_ids_fit(store: SqlStore) -> None:
    # 512-character ids of ":" escape to 1,536 characters each: far past the key
    # column and PostgreSQL's b-tree entry limit, yet valid scopes.
    sc = scope(channel=":" * 512, user="%" * 512, server="é" * 512, persona_id=":" * 512)
    assert len(sc.user_key) > 3000
    user, server = entry(sc, "user", summary="U"), entry(sc, "server", summary="S", turns=1)
    store.put_rows([user, server], T0)
    store.put_rows([replace(server, rev=2)], T0)  # the update path of a digest key
    got = store.load_many(list(sc.keys))
    assert set(got) == set(sc.keys)
    assert (got[sc.user_key].summary, got[sc.server_key or ""].summary) == ("U", "S")
    assert got[sc.server_key or ""].turns_since_refresh == 1
    assert got[sc.server_key or ""].persona_id == ":" * 512
    assert [e.key for e in store.load_server("é" * 512)] == [sc.server_key]
    assert [e.key for e in store.load_user("%" * 512)] == [sc.user_key]
    assert store.clear_summary(list(sc.keys), T0) == 2
    assert store.delete_channel(":" * 512) == 2

"""The durable-store contract: SQLite file, SQLite in-memory and PostgreSQL pass it."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers.services import PostgresSchemas
from helpers.sqlite_lock import SqliteWriteLock

from stm_memory.store.schema import MIGRATIONS, memories, schema_version
from stm_memory.store.sql import SqlStore, create_sql_engine
from stm_memory.types import (
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    UserSettings,
)

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
) -> MemoryEntry:
    key = sc.server_key if kind == "server" else sc.user_key
    assert key is not None
    return replace(
        MemoryEntry.empty(sc, key, at),
        summary=summary,
        categories=categories or {},
        turns_since_refresh=turns,
        last_refreshed_turn=refreshed,
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
        first.write_memory(
            [entry(sc, summary="kept")], reset_key=None, summary=True, categories=False
        )
        second.setup()  # against an existing, current schema
        assert row(second, sc.server_key or "").summary == "kept"
        with second.engine.connect() as conn:
            count = sa.select(sa.func.count()).select_from(schema_version)
            assert conn.execute(count).scalar() == len(MIGRATIONS)
    finally:
        first.close()
        second.close()


# -- write_memory -----------------------------------------------------------------------


def test_write_memory_inserts_both_rows_and_resets_the_live_one(store: SqlStore) -> None:
    sc = scope(parent_channel_id="p1")
    user = entry(sc, "user", summary="S", turns=4, refreshed=2)
    server = entry(sc, "server", summary="S", turns=0, refreshed=3)
    assert store.write_memory(
        [user, server], reset_key=sc.server_key, summary=True, categories=False
    )
    got = store.load_many(list(sc.keys))
    assert got[sc.user_key].summary == got[sc.server_key or ""].summary == "S"
    # New rows count this write only (the cache's totals are not stored).
    assert (got[sc.user_key].turns_since_refresh, got[sc.user_key].last_refreshed_turn) == (0, 0)
    live = got[sc.server_key or ""]
    assert (live.turns_since_refresh, live.last_refreshed_turn) == (0, 1)
    assert got[sc.server_key or ""].parent_channel_id == "p1"
    assert got[sc.user_key].kind == "user" and got[sc.user_key].user_id == "u1"
    assert got[sc.server_key or ""].kind == "server" and got[sc.server_key or ""].server_id == "g1"


def test_write_memory_upserts_and_resets_counters_in_sql(store: SqlStore) -> None:
    sc = scope()
    key = sc.server_key or ""
    store.write_memory([entry(sc, summary="one")], reset_key=key, summary=True, categories=False)
    for _ in range(3):
        store.increment_turns(entry(sc), T0)
    assert row(store, key).turns_since_refresh == 3
    later = T0 + timedelta(minutes=5)
    # The entry's own counters are ignored: SQL resets and adds to what it holds.
    other = entry(sc, summary="two", at=later, turns=99, refreshed=99)
    store.write_memory([other], reset_key=key, summary=True, categories=False)
    got = row(store, key)
    assert (got.summary, got.turns_since_refresh, got.last_refreshed_turn) == ("two", 0, 2)
    assert got.last_updated == later


def test_counters_are_exact_whatever_order_writes_land_in(store: SqlStore) -> None:
    # Two refreshes and a capture of a new scope raced: the cache assigned them
    # last_refreshed_turn 1 and 2, but the second one's SQL write lands first.
    sc = scope()
    key = sc.server_key or ""
    second, first = entry(sc, summary="2nd", refreshed=2), entry(sc, summary="1st", refreshed=1)
    store.write_memory([second], reset_key=key, summary=True, categories=False)
    store.write_memory([first], reset_key=key, summary=True, categories=False)
    assert row(store, key).last_refreshed_turn == 2
    # A capture made after three counted turns lands before their increments.
    other = scope(channel="c2")
    store.ensure_rows([entry(other, turns=3)], T0)
    for _ in range(3):
        store.increment_turns(entry(other, turns=3), T0)
    assert row(store, other.server_key or "").turns_since_refresh == 3


def test_write_memory_without_reset_keeps_counters(store: SqlStore) -> None:
    sc = scope()
    store.write_memory(
        [entry(sc, "user", summary="a")], reset_key=None, summary=True, categories=False
    )
    store.increment_turns(entry(sc, "user"), T0)
    store.write_memory(
        [entry(sc, "user", summary="b", turns=50)],
        reset_key=sc.server_key,  # another key: this row is not reset
        summary=True,
        categories=False,
    )
    got = row(store, sc.user_key)
    assert (got.summary, got.turns_since_refresh, got.last_refreshed_turn) == ("b", 1, 0)


def test_write_memory_updates_only_the_named_columns(store: SqlStore) -> None:
    sc = scope()
    key = sc.server_key or ""
    store.write_memory(
        [entry(sc, summary="S", categories={"mood": "calm"})],
        reset_key=None,
        summary=True,
        categories=True,
    )
    store.write_memory(
        [entry(sc, summary="ignored", categories={"plot": "P"})],
        reset_key=None,
        summary=False,
        categories=True,
    )
    got = row(store, key)
    assert (got.summary, dict(got.categories)) == ("S", {"plot": "P"})
    store.write_memory(
        [entry(sc, summary="S2", categories={"x": "ignored"})],
        reset_key=None,
        summary=True,
        categories=False,
    )
    got = row(store, key)
    assert (got.summary, dict(got.categories)) == ("S2", {"plot": "P"})


def test_json_categories_keep_their_order(store: SqlStore) -> None:
    sc = scope()
    cats = {"zeta": "last letter", "alpha": "first", "mid": "middle", "b": "2"}
    store.write_memory([entry(sc, categories=cats)], reset_key=None, summary=False, categories=True)
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
    store.write_memory([entry(sc, summary="a")], reset_key=None, summary=True, categories=False)
    got = row(store, key)
    assert (got.parent_channel_id, got.channel_name, got.server_name) == (
        "general",
        "Plans",
        "Guild",
    )
    bare = scope(channel="thread-1")  # same key, no parent or names known
    store.write_memory([entry(bare, summary="b")], reset_key=None, summary=True, categories=False)
    got = row(store, key)
    assert (got.summary, got.parent_channel_id, got.channel_name) == ("b", "general", "Plans")
    renamed = replace(sc, channel_name="Plans v2")
    store.write_memory(
        [entry(renamed, summary="c")], reset_key=None, summary=True, categories=False
    )
    assert row(store, key).channel_name == "Plans v2"


# -- ensure_rows / increment ------------------------------------------------------------


def test_ensure_rows_inserts_missing_rows_only(store: SqlStore) -> None:
    sc = scope()
    store.write_memory(
        [entry(sc, "server", summary="stored", turns=0)],
        reset_key=None,
        summary=True,
        categories=False,
    )
    later = T0 + timedelta(hours=1)
    store.ensure_rows(
        [entry(sc, "server", summary=None, turns=7, at=later), entry(sc, "user", at=later)],
        later,
    )
    server, user = row(store, sc.server_key or ""), row(store, sc.user_key)
    assert (server.summary, server.turns_since_refresh, server.last_updated) == ("stored", 0, T0)
    assert (user.summary, user.last_updated) == (None, later)
    assert store.count_rows() == 2


def test_increment_inserts_then_adds_one(store: SqlStore) -> None:
    sc = scope(server=None)
    target = entry(sc, "user", turns=41)  # the entry's value never matters: SQL counts
    assert store.increment_turns(target, T0)
    assert row(store, sc.user_key).turns_since_refresh == 1
    store.increment_turns(target, T0 + timedelta(seconds=1))
    store.increment_turns(target, T0 + timedelta(seconds=2))
    got = row(store, sc.user_key)
    assert (got.turns_since_refresh, got.last_refreshed_turn) == (3, 0)


def test_concurrent_increments_from_threads_are_exact(
    store: SqlStore, open_store: Callable[[], SqlStore], store_url: str
) -> None:
    handles = [store] if store_url == "sqlite://" else [store, open_store()]
    sc = scope()
    target = entry(sc)
    threads, per_thread = 6, 15
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def work(i: int) -> None:
        barrier.wait()
        try:
            for _ in range(per_thread):
                handles[i % len(handles)].increment_turns(target, T0)
        except BaseException as exc:
            errors.append(exc)

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert not errors, errors[0]
    assert row(store, sc.server_key or "").turns_since_refresh == threads * per_thread


# -- loads ------------------------------------------------------------------------------


def test_load_many_returns_present_rows_without_messages(store: SqlStore) -> None:
    sc = scope()
    store.ensure_rows([entry(sc, "user"), entry(sc, "server")], T0)
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
        store.ensure_rows([e], e.last_updated)
    assert [e.key for e in store.load_server("g1")] == [b.server_key, a.server_key]
    assert [e.key for e in store.load_user("u1")] == [dm.user_key, c.user_key, a.user_key]
    assert store.load_server("nope") == [] and store.load_user("nope") == []


# -- deletes ----------------------------------------------------------------------------


def test_delete_channel_removes_every_row_of_the_channel(store: SqlStore) -> None:
    a = scope(channel="c1", user="u1")
    b = scope(channel="c1", user="u2", persona_id="p")
    keep = scope(channel="c2", user="u1")
    store.ensure_rows([entry(s, k) for s in (a, b, keep) for k in ("user", "server")], T0)
    assert store.delete_channel("c1") == 4
    assert set(store.load_many([*a.keys, *b.keys, *keep.keys])) == set(keep.keys)
    assert store.delete_channel("c1") == 0


def test_delete_user_removes_only_user_scope_rows(store: SqlStore) -> None:
    a = scope(channel="c1", user="u1", server="g1")
    dm = scope(channel="dm", user="u1", server=None)
    other = scope(channel="c1", user="u2", server="g1")
    store.ensure_rows([entry(a, "user"), entry(a, "server"), entry(dm, "user")], T0)
    store.ensure_rows([entry(other, "user")], T0)
    assert store.delete_user("u1") == 2
    left = set(store.load_many([*a.keys, *dm.keys, *other.keys]))
    assert left == {a.server_key, other.user_key}


def test_clear_summary_nulls_distilled_content_and_keeps_counters(store: SqlStore) -> None:
    sc = scope()
    store.write_memory(
        [
            entry(sc, "user", summary="S", categories={"a": "1"}),
            entry(sc, "server", summary="S", categories={"a": "1"}),
        ],
        reset_key=sc.server_key,
        summary=True,
        categories=True,
    )
    store.increment_turns(entry(sc, "server"), T0)
    later = T0 + timedelta(minutes=3)
    assert store.clear_summary(list(sc.keys), later) == 2
    server = row(store, sc.server_key or "")
    assert (server.summary, dict(server.categories)) == (None, {})
    assert (server.turns_since_refresh, server.last_refreshed_turn) == (1, 1)
    assert server.last_updated == later
    assert store.clear_summary(["shortterm:user:x:y"], later) == 0


def test_delete_older_than_uses_the_given_cutoff(store: SqlStore) -> None:
    old, edge, new = scope(channel="old"), scope(channel="edge"), scope(channel="new")
    store.ensure_rows([entry(old, at=T0 - timedelta(days=91))], T0 - timedelta(days=91))
    store.ensure_rows([entry(edge, at=T0 - timedelta(days=90))], T0 - timedelta(days=90))
    store.ensure_rows([entry(new, at=T0)], T0)
    assert store.delete_older_than(T0 - timedelta(days=90)) == 1
    assert {e.channel_id for e in store.list_rows()} == {"edge", "new"}


# -- op_id: exactly-once replay ---------------------------------------------------------


def test_op_id_makes_each_write_apply_once(store: SqlStore) -> None:
    sc = scope()
    key = sc.server_key or ""
    write_id, incr_id = op(), op()
    store.write_memory([entry(sc, summary="S")], reset_key=key, summary=True, categories=False)
    assert store.increment_turns(entry(sc), T0, op_id=incr_id) is True
    assert store.increment_turns(entry(sc), T0, op_id=incr_id) is False
    assert row(store, key).turns_since_refresh == 1
    assert store.write_memory(
        [entry(sc, summary="S2")], reset_key=key, summary=True, categories=False, op_id=write_id
    )
    assert not store.write_memory(
        [entry(sc, summary="S3")], reset_key=key, summary=True, categories=False, op_id=write_id
    )
    got = row(store, key)
    assert (got.summary, got.turns_since_refresh, got.last_refreshed_turn) == ("S2", 0, 2)


def test_op_id_makes_each_delete_apply_once(store: SqlStore) -> None:
    sc = scope()
    delete_id, clear_id = op(), op()
    store.ensure_rows([entry(sc, "server", summary="S")], T0)
    assert store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 1
    assert store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 0
    assert store.delete_channel("c1", op_id=delete_id) == 1
    store.ensure_rows([entry(sc, "server")], T0)  # written after the delete
    assert store.delete_channel("c1", op_id=delete_id) == 0
    assert store.count_rows() == 1
    user_id = op()
    store.ensure_rows([entry(sc, "user")], T0)
    assert store.delete_user("u1", op_id=user_id) == 1
    store.ensure_rows([entry(sc, "user")], T0)
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
    store.write_memory(
        [entry(sc, summary="S", at=written)], reset_key=None, summary=True, categories=False
    )
    got = row(store, sc.server_key or "")
    assert got.last_updated.tzinfo is not None
    assert got.last_updated.utcoffset() == timedelta(0)
    assert got.last_updated == written
    raw = raw_row(store, sc.server_key or "")
    created = raw["created_at"]
    assert isinstance(created, datetime)
    assert created.replace(tzinfo=created.tzinfo or UTC) == written
    # Later writes move updated_at, never created_at.
    later = written + timedelta(hours=2)
    store.write_memory(
        [entry(sc, summary="S2", at=later)], reset_key=None, summary=True, categories=False
    )
    raw = raw_row(store, sc.server_key or "")
    updated = raw["updated_at"]
    assert isinstance(updated, datetime)
    assert updated.replace(tzinfo=updated.tzinfo or UTC) == later
    created = raw["created_at"]
    assert isinstance(created, datetime)
    assert created.replace(tzinfo=created.tzinfo or UTC) == written
    store.increment_turns(entry(sc), later + timedelta(minutes=1))
    assert row(store, sc.server_key or "").last_updated == later + timedelta(minutes=1)


def test_ids_with_separators_and_unicode_round_trip(store: SqlStore) -> None:
    sc = scope(channel="c:1%2", user="ü:ser", server="g:1", persona_id="π")
    store.ensure_rows([entry(sc, "user"), entry(sc, "server")], T0)
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
        store.write_memory(
            [entry(sc, summary="S", at=T0)], reset_key=None, summary=True, categories=False
        )
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
    user, server = entry(sc, "user", summary="U"), entry(sc, "server", summary="S")
    store.write_memory([user, server], reset_key=sc.server_key, summary=True, categories=False)
    store.increment_turns(server, T0)
    got = store.load_many(list(sc.keys))
    assert set(got) == set(sc.keys)
    assert (got[sc.user_key].summary, got[sc.server_key or ""].summary) == ("U", "S")
    assert got[sc.server_key or ""].turns_since_refresh == 1
    assert got[sc.server_key or ""].persona_id == ":" * 512
    assert [e.key for e in store.load_server("é" * 512)] == [sc.server_key]
    assert [e.key for e in store.load_user("%" * 512)] == [sc.user_key]
    assert store.clear_summary(list(sc.keys), T0) == 2
    assert store.delete_channel(":" * 512) == 2

"""The durable-store contract: what every :class:`~stm_memory.store.MemoryStore` does.

Subclass :class:`MemoryStoreContract` in a test module and give it an
``open_memory_store`` fixture (see :mod:`stm_memory.testing.contract`). The suite goes
through the seam only: row writes and their revisions, loads, deletes with exactly-once
``op_id`` replay, the janitor's cutoff, and settings. What a SQL schema adds (migrations,
column stamps) is the SQL store's own business and is tested beside it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from stm_memory.errors import RejectedWriteError
from stm_memory.model import (
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    UserSettings,
    key_for,
    next_rev,
)
from stm_memory.store.base import MemoryStore
from stm_memory.testing.contract._support import run_threads

__all__ = ["MemoryStoreContract"]

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


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


def row(store: MemoryStore, key: str) -> MemoryEntry:
    return store.load_many([key])[key]


def op() -> str:
    return uuid.uuid4().hex


class MemoryStoreContract:
    """The tests every durable store passes. A subclass provides ``open_memory_store``:
    a fixture returning a callable that opens a new, set-up handle on one shared,
    empty database each time it is called (a database only one handle can reach, such
    as in-memory SQLite, returns that handle again), and closes every handle it opened
    after the test. :func:`~stm_memory.testing.contract.opened_handles` does the
    bookkeeping."""

    @pytest.fixture
    def open_memory_store(self) -> Callable[[], MemoryStore]:
        pytest.fail(
            f"{type(self).__name__} must define an open_memory_store fixture "
            "(see stm_memory.testing.contract)",
            pytrace=False,
        )

    @pytest.fixture
    def memory_store(self, open_memory_store: Callable[[], MemoryStore]) -> MemoryStore:
        """One handle on the database."""
        return open_memory_store()

    # -- row writes --------------------------------------------------------------------

    def test_put_rows_inserts_the_entries_as_they_are(self, memory_store: MemoryStore) -> None:
        sc = scope(parent_channel_id="p1")
        refreshed_at = T0 - timedelta(minutes=1)
        user = entry(sc, "user", summary="S", turns=4, refreshed=2, rev=7)
        server = entry(sc, "server", summary="S", refreshed=3, rev=8, refreshed_at=refreshed_at)
        assert memory_store.put_rows([user, server], T0) == 2
        got = memory_store.load_many(list(sc.keys))
        assert got[sc.user_key] == user
        assert got[sc.server_key or ""] == server
        assert got[sc.server_key or ""].parent_channel_id == "p1"
        assert got[sc.user_key].kind == "user" and got[sc.user_key].user_id == "u1"
        assert (
            got[sc.server_key or ""].kind == "server" and got[sc.server_key or ""].server_id == "g1"
        )

    def test_put_rows_takes_a_snapshot_only_from_a_newer_revision(
        self, memory_store: MemoryStore
    ) -> None:
        sc = scope()
        key = sc.server_key or ""
        assert (
            memory_store.put_rows([entry(sc, summary="two", turns=0, refreshed=2, rev=20)], T0) == 1
        )
        # Older revisions arrive late (a racing writer, an outbox replay): refused.
        assert (
            memory_store.put_rows([entry(sc, summary="one", turns=5, refreshed=1, rev=10)], T0) == 0
        )
        # The same revision again (a lost commit acknowledgement, replayed): a no-op.
        assert (
            memory_store.put_rows([entry(sc, summary="two?", turns=9, refreshed=2, rev=20)], T0)
            == 0
        )
        got = row(memory_store, key)
        assert (got.summary, got.turns_since_refresh, got.last_refreshed_turn) == ("two", 0, 2)
        later = T0 + timedelta(minutes=5)
        newer = entry(
            sc, summary=None, categories={"a": "1"}, turns=3, refreshed=2, rev=21, at=later
        )
        assert memory_store.put_rows([newer], later) == 1
        assert row(memory_store, key) == newer  # every persisted field replaced, none merged

    def test_one_put_rows_call_is_one_transaction(self, memory_store: MemoryStore) -> None:
        sc = scope()
        user, server = entry(sc, "user", summary="U"), entry(sc, "server", summary="S")
        broken = replace(server, channel_id=None)  # type: ignore[arg-type]  # a row needs a channel
        with pytest.raises(RejectedWriteError):
            memory_store.put_rows([user, broken], T0)
        assert memory_store.count_rows() == 0

    def test_concurrent_writers_leave_the_newest_revision(
        self,
        memory_store: MemoryStore,
        open_memory_store: Callable[[], MemoryStore],
    ) -> None:
        handles = [memory_store, open_memory_store()]  # one handle twice if that is all there is
        sc = scope()
        threads, per_thread = 6, 15

        def work(i: int) -> None:
            for n in range(per_thread):
                rev = n * threads + i + 1  # every thread races every other one
                snapshot = entry(sc, summary=f"rev {rev}", turns=rev, rev=rev)
                handles[i % len(handles)].put_rows([snapshot], T0)

        run_threads(threads, work, timeout=60)
        top = threads * per_thread
        got = row(memory_store, sc.server_key or "")
        assert (got.summary, got.turns_since_refresh, got.rev) == (f"rev {top}", top, top)

    def test_advance_rows_moves_existing_older_rows_only(self, memory_store: MemoryStore) -> None:
        old, new, gone = scope(channel="old"), scope(channel="new"), scope(channel="gone")
        memory_store.put_rows([entry(old, summary="o", rev=1), entry(new, summary="n", rev=9)], T0)
        later = T0 + timedelta(minutes=1)
        ahead = [
            entry(old, summary="o2", turns=4, rev=5, at=later),
            entry(new, summary="stale", rev=3),
            entry(gone, summary="deleted meanwhile", rev=5),
        ]
        assert memory_store.advance_rows(ahead, later) == 1
        assert row(memory_store, old.server_key or "") == ahead[0]
        assert row(memory_store, new.server_key or "").summary == "n"
        assert memory_store.load_many([gone.server_key or ""]) == {}  # never inserted

    def test_a_secret_is_made_once_and_read_back(self, memory_store: MemoryStore) -> None:
        # The erasure key: every host must read the one the first stored.
        first = memory_store.secret("erasure_key", "made-first")
        assert first == "made-first"
        assert memory_store.secret("erasure_key", "made-later") == "made-first"
        assert memory_store.secret("other", "x") == "x"

    def test_forgotten_marks_reach_the_row_and_come_back(self, memory_store: MemoryStore) -> None:
        # What erasure keeps of a shared thread's messages outlives the live cache.
        sc = scope()
        marks = frozenset({"a" * 32, "b" * 32})
        memory_store.put_rows([replace(entry(sc), forgotten=marks)], T0)
        assert row(memory_store, sc.server_key or "").forgotten == marks

    def test_json_categories_keep_their_order(self, memory_store: MemoryStore) -> None:
        sc = scope()
        cats = {"zeta": "last letter", "alpha": "first", "mid": "middle", "b": "2"}
        memory_store.put_rows([entry(sc, categories=cats)], T0)
        assert list(row(memory_store, sc.server_key or "").categories.items()) == list(cats.items())

    def test_parent_channel_and_names_are_kept_and_not_erased_by_a_later_write(
        self,
        memory_store: MemoryStore,
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
        memory_store.put_rows([entry(sc, summary="a", rev=1)], T0)
        got = row(memory_store, key)
        assert (got.parent_channel_id, got.channel_name, got.server_name) == (
            "general",
            "Plans",
            "Guild",
        )
        bare = scope(channel="thread-1")  # same key, no parent or names known
        memory_store.put_rows([entry(bare, summary="b", rev=2)], T0)
        got = row(memory_store, key)
        assert (got.summary, got.parent_channel_id, got.channel_name) == ("b", "general", "Plans")
        memory_store.advance_rows([entry(bare, summary="c", rev=3)], T0)
        assert row(memory_store, key).parent_channel_id == "general"
        renamed = replace(sc, channel_name="Plans v2")
        memory_store.put_rows([entry(renamed, summary="d", rev=4)], T0)
        assert row(memory_store, key).channel_name == "Plans v2"

    # -- loads -------------------------------------------------------------------------

    def test_load_many_returns_present_rows_without_messages(
        self, memory_store: MemoryStore
    ) -> None:
        sc = scope()
        memory_store.put_rows([entry(sc, "user"), entry(sc, "server")], T0)
        got = memory_store.load_many([sc.user_key, key_for("user", "nobody", "nowhere")])
        assert list(got) == [sc.user_key]
        assert got[sc.user_key].messages == ()
        assert memory_store.load_many([]) == {}

    def test_load_server_and_load_user_select_by_owner_and_kind(
        self, memory_store: MemoryStore
    ) -> None:
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
            memory_store.put_rows([e], e.last_updated)
        assert [e.key for e in memory_store.load_server("g1")] == [b.server_key, a.server_key]
        assert [e.key for e in memory_store.load_user("u1")] == [
            dm.user_key,
            c.user_key,
            a.user_key,
        ]
        assert memory_store.load_server("nope") == [] and memory_store.load_user("nope") == []

    # -- deletes -----------------------------------------------------------------------

    def test_delete_channel_removes_every_row_of_the_channel(
        self, memory_store: MemoryStore
    ) -> None:
        a = scope(channel="c1", user="u1")
        b = scope(channel="c1", user="u2", persona_id="p")
        keep = scope(channel="c2", user="u1")
        memory_store.put_rows([entry(s, k) for s in (a, b, keep) for k in ("user", "server")], T0)
        assert memory_store.delete_channel("c1") == 4
        assert set(memory_store.load_many([*a.keys, *b.keys, *keep.keys])) == set(keep.keys)
        assert memory_store.delete_channel("c1") == 0

    def test_delete_user_removes_only_user_scope_rows(self, memory_store: MemoryStore) -> None:
        a = scope(channel="c1", user="u1", server="g1")
        dm = scope(channel="dm", user="u1", server=None)
        other = scope(channel="c1", user="u2", server="g1")
        memory_store.put_rows([entry(a, "user"), entry(a, "server"), entry(dm, "user")], T0)
        memory_store.put_rows([entry(other, "user")], T0)
        assert memory_store.delete_user("u1") == 2
        left = set(memory_store.load_many([*a.keys, *dm.keys, *other.keys]))
        assert left == {a.server_key, other.user_key}

    def test_clear_summary_nulls_distilled_content_and_keeps_counters(
        self, memory_store: MemoryStore
    ) -> None:
        sc = scope()
        memory_store.put_rows(
            [
                entry(sc, "user", summary="S", categories={"a": "1"}),
                entry(
                    sc, "server", summary="S", categories={"a": "1"}, turns=1, refreshed=1, rev=5
                ),
            ],
            T0,
        )
        later = T0 + timedelta(minutes=3)
        assert memory_store.clear_summary(list(sc.keys), later) == 2
        server = row(memory_store, sc.server_key or "")
        assert (server.summary, dict(server.categories)) == (None, {})
        assert (server.turns_since_refresh, server.last_refreshed_turn) == (1, 1)
        assert server.last_updated == later
        # The clear moves the revision as a cache mutation at that time would, so the
        # snapshot it replaced can no longer land on top of it.
        assert server.rev == next_rev(5, later)
        stale = entry(sc, "server", summary="S", categories={"a": "1"}, turns=1, refreshed=1, rev=6)
        assert memory_store.put_rows([stale], later) == 0
        assert memory_store.clear_summary([key_for("user", "x", "y")], later) == 0

    def test_delete_older_than_uses_the_given_cutoff(self, memory_store: MemoryStore) -> None:
        old, edge, new = scope(channel="old"), scope(channel="edge"), scope(channel="new")
        memory_store.put_rows([entry(old, at=T0 - timedelta(days=91))], T0 - timedelta(days=91))
        memory_store.put_rows([entry(edge, at=T0 - timedelta(days=90))], T0 - timedelta(days=90))
        memory_store.put_rows([entry(new, at=T0)], T0)
        assert memory_store.delete_older_than(T0 - timedelta(days=90)) == 1
        assert {e.channel_id for e in memory_store.list_rows()} == {"edge", "new"}

    # -- op_id: exactly-once replay ----------------------------------------------------

    def test_op_id_makes_each_delete_apply_once(self, memory_store: MemoryStore) -> None:
        sc = scope()
        delete_id, clear_id = op(), op()
        memory_store.put_rows([entry(sc, "server", summary="S")], T0)
        assert memory_store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 1
        assert memory_store.clear_summary([sc.server_key or ""], T0, op_id=clear_id) == 0
        assert memory_store.delete_channel("c1", op_id=delete_id) == 1
        memory_store.put_rows([entry(sc, "server")], T0)  # written after the delete
        assert memory_store.delete_channel("c1", op_id=delete_id) == 0
        assert memory_store.count_rows() == 1
        user_id = op()
        memory_store.put_rows([entry(sc, "user")], T0)
        assert memory_store.delete_user("u1", op_id=user_id) == 1
        memory_store.put_rows([entry(sc, "user")], T0)
        assert memory_store.delete_user("u1", op_id=user_id) == 0
        assert memory_store.count_rows() == 2

    # -- settings ----------------------------------------------------------------------

    def test_server_settings_round_trip(self, memory_store: MemoryStore) -> None:
        assert memory_store.get_server_settings("g1") is None
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
        memory_store.put_server_settings("g1", custom, T0)
        assert memory_store.get_server_settings("g1") == custom
        changed = custom.with_changes(render_mode="crude_summary", private_channel_ids=frozenset())
        memory_store.put_server_settings("g1", changed, T0 + timedelta(seconds=1))
        assert memory_store.get_server_settings("g1") == changed
        assert memory_store.get_server_settings("g2") is None

    def test_user_settings_round_trip(self, memory_store: MemoryStore) -> None:
        assert memory_store.get_user_settings("u1") is None
        memory_store.put_user_settings("u1", UserSettings(cross_server_opt_in=True), T0)
        assert memory_store.get_user_settings("u1") == UserSettings(cross_server_opt_in=True)
        memory_store.put_user_settings("u1", UserSettings(full_privacy=True), T0)
        assert memory_store.get_user_settings("u1") == UserSettings(full_privacy=True)
        assert memory_store.get_user_settings("u2") is None

    def test_categories_round_trip_in_order(self, memory_store: MemoryStore) -> None:
        assert memory_store.get_categories("g1") == []
        cats = [
            Category("Plot", "What happened", "plot"),
            Category("Mood", "Tone", "mood"),
            Category("Zed", "", "zed"),
            Category("Ärger", "Streit", "rger"),
            Category("Alpha", "first letter, last place", "alpha"),
        ]
        memory_store.set_categories("g1", cats)
        memory_store.set_categories("g2", cats[:1])
        assert memory_store.get_categories("g1") == cats
        memory_store.set_categories("g1", [cats[4], cats[0]])
        assert memory_store.get_categories("g1") == [cats[4], cats[0]]
        memory_store.set_categories("g1", [])
        assert memory_store.get_categories("g1") == []
        assert memory_store.get_categories("g2") == cats[:1]

    # -- ids ---------------------------------------------------------------------------

    def test_ids_with_separators_and_unicode_round_trip(self, memory_store: MemoryStore) -> None:
        sc = scope(channel="c:1%2", user="ü:ser", server="g:1", persona_id="π")
        memory_store.put_rows([entry(sc, "user"), entry(sc, "server")], T0)
        got = memory_store.load_many(list(sc.keys))
        assert got[sc.user_key].user_id == "ü:ser"
        assert got[sc.server_key or ""].channel_id == "c:1%2"
        assert got[sc.server_key or ""].persona_id == "π"
        assert [e.key for e in memory_store.load_server("g:1")] == [sc.server_key]
        assert memory_store.delete_channel("c:1%2") == 2

    def test_longest_ids_fit(self, memory_store: MemoryStore) -> None:
        # 512-character ids of ":" escape to 1,536 characters each: far past the key
        # column and PostgreSQL's b-tree entry limit, yet valid scopes.
        sc = scope(channel=":" * 512, user="%" * 512, server="é" * 512, persona_id=":" * 512)
        assert len(sc.user_key) > 3000
        user, server = entry(sc, "user", summary="U"), entry(sc, "server", summary="S", turns=1)
        memory_store.put_rows([user, server], T0)
        memory_store.put_rows([replace(server, rev=2)], T0)  # the update path of a digest key
        got = memory_store.load_many(list(sc.keys))
        assert set(got) == set(sc.keys)
        assert (got[sc.user_key].summary, got[sc.server_key or ""].summary) == ("U", "S")
        assert got[sc.server_key or ""].turns_since_refresh == 1
        assert got[sc.server_key or ""].persona_id == ":" * 512
        assert [e.key for e in memory_store.load_server("é" * 512)] == [sc.server_key]
        assert [e.key for e in memory_store.load_user("%" * 512)] == [sc.user_key]
        assert memory_store.clear_summary(list(sc.keys), T0) == 2
        assert memory_store.delete_channel(":" * 512) == 2

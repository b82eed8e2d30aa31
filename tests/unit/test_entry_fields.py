"""MemoryEntry's fields are declared once for each form an entry takes: the cache codec
(``model/_codec.py`` CACHED) and the SQL row (``store/sql.py`` ROW, or cache-only).
Every field must reach each form it is declared for and come back, and a field that
is declared nowhere must fail loudly, naming it, rather than be silently dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, fields
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from stm_memory.model import MemoryEntry, Messages, StoredMessage
from stm_memory.model._codec import CACHED, EntryCodec, check_fields
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.entry import CACHE_ONLY_FIELDS
from stm_memory.model.receipt import DayTotals
from stm_memory.model.shown import ShownState
from stm_memory.store import sql
from stm_memory.store.sql import ROW, SqlStore, create_sql_engine

T0 = datetime(2026, 1, 5, 12, 0, 1, 123456, tzinfo=UTC)
T1 = datetime(2026, 1, 6, 7, 8, 9, 654321, tzinfo=UTC)

FIELD_NAMES = [f.name for f in fields(MemoryEntry)]


def full_entry() -> MemoryEntry:
    """An entry whose every field holds something other than its default."""
    return MemoryEntry(
        key="shortterm:user:u1:c1",
        kind="user",
        channel_id="c1",
        server_id="g1",
        user_id="u1",
        persona_id="p1",
        parent_channel_id="pc1",
        channel_name="chan",
        server_name="srv",
        messages=(
            StoredMessage(role="user", content="hi", timestamp=T0, name="Ann", user_id="u1"),
            StoredMessage(role="assistant", content="yo", timestamp=T1),
        ),
        summary="the summary",
        categories={"plot": "a", "mood": "b"},
        kept=(StoredMessage(role="user", content="door code 4821", timestamp=T0, user_id="u1"),),
        turns_since_refresh=3,
        last_refreshed_turn=7,
        turns_since_reset=2,
        provenance=frozenset({"u9", "u1", "u5"}),
        last_updated=T0,
        refreshed_at=T1,
        briefings=(
            BriefingCopy(
                source="shortterm:server:g1:c2",
                channel_id="c2",
                server_id="g1",
                text="briefing",
                provenance=frozenset({"u3", "u2"}),
                turn=4,
            ),
        ),
        briefings_epoch=5,
        shown=ShownState(
            epoch=6,
            summary="the summary shown",
            categories={"plot": "x"},
            turns=9,
            swap=2,
            at=T1,
        ),
        rev=123456789,
        receipt={
            "2026-01-05": DayTotals(
                turns=3,
                calls=4,
                input_tokens=9000,
                cached_tokens=6000,
                written_tokens=100,
                cost=3725.0,
                full_tokens=12000,
                full_cost=4100.5,
                missed=1,
            )
        },
        forgotten=frozenset({"b" * 32, "a" * 32}),
        no_writer=True,
    )


def default_of(name: str) -> object:
    f = next(f for f in fields(MemoryEntry) if f.name == name)
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING  # a required field: no default to differ from


def test_the_full_entry_sets_every_field() -> None:
    # Else a round trip below could pass for a field that is dropped.
    entry = full_entry()
    assert [n for n in FIELD_NAMES if getattr(entry, n) == default_of(n)] == []


# -- the cache codec -----------------------------------------------------------------


def test_the_codec_declares_every_field() -> None:
    assert sorted(CACHED) == sorted(FIELD_NAMES)


def test_every_field_round_trips_through_the_cache() -> None:
    entry = full_entry()
    # Through JSON, as the caches store it.
    cached = json.loads(json.dumps(entry.to_dict()))
    assert list(cached) == FIELD_NAMES  # the cached form's keys, in field order
    back = MemoryEntry.from_dict(cached)
    assert isinstance(back.messages, Messages)  # the turns stay undecoded until read
    for name in FIELD_NAMES:
        assert getattr(back, name) == getattr(entry, name), name
    assert back == entry
    assert back.to_dict() == entry.to_dict()


def test_the_cached_form_is_unchanged() -> None:
    # The cache's wire format: values written by earlier releases must still load,
    # and the same entry must be written as the same bytes.
    assert json.dumps(full_entry().to_dict(), separators=(",", ":")) == (
        '{"key":"shortterm:user:u1:c1","kind":"user","channel_id":"c1","server_id":"g1",'
        '"user_id":"u1","persona_id":"p1","parent_channel_id":"pc1","channel_name":"chan",'
        '"server_name":"srv","messages":[{"role":"user","content":"hi",'
        '"timestamp":"2026-01-05T12:00:01.123456+00:00","name":"Ann","user_id":"u1"},'
        '{"role":"assistant","content":"yo","timestamp":"2026-01-06T07:08:09.654321+00:00",'
        '"name":null,"user_id":null}],"summary":"the summary",'
        '"categories":{"plot":"a","mood":"b"},"kept":[{"role":"user","content":"door code 4821",'
        '"timestamp":"2026-01-05T12:00:01.123456+00:00","name":null,"user_id":"u1"}],'
        '"turns_since_refresh":3,'
        '"last_refreshed_turn":7,"turns_since_reset":2,"provenance":["u1","u5","u9"],'
        '"last_updated":"2026-01-05T12:00:01.123456+00:00",'
        '"refreshed_at":"2026-01-06T07:08:09.654321+00:00",'
        '"briefings":[{"source":"shortterm:server:g1:c2","channel_id":"c2",'
        '"server_id":"g1","text":"briefing","provenance":["u2","u3"],"turn":4}],'
        '"briefings_epoch":5,"shown":{"epoch":6,"summary":"the summary shown",'
        '"categories":{"plot":"x"},"turns":9,"swap":2,'
        '"at":"2026-01-06T07:08:09.654321+00:00"},"rev":123456789,'
        '"receipt":{"2026-01-05":{"turns":3,"calls":4,"input_tokens":9000,'
        '"cached_tokens":6000,"written_tokens":100,"cost":3725.0,"full_tokens":12000,'
        '"full_cost":4100.5,"missed":1}},'
        f'"forgotten":["{"a" * 32}","{"b" * 32}"],"no_writer":true}}'
    )


def test_an_older_cached_value_decodes_with_defaults() -> None:
    # Values cached before a field existed lack it: it decodes to its default.
    bare = {"key": "k", "kind": "server", "channel_id": "c", "last_updated": T0.isoformat()}
    entry = MemoryEntry.from_dict(bare)
    for name in FIELD_NAMES:
        if name not in bare:
            assert getattr(entry, name) == default_of(name), name
    with pytest.raises(KeyError, match="channel_id"):
        MemoryEntry.from_dict({k: v for k, v in bare.items() if k != "channel_id"})


def test_patched_changes_are_encoded_as_encode_encodes_them() -> None:
    # value_after patches a cached value with each changed field's encoding.
    entry = full_entry()
    empty = MemoryEntry(key=entry.key, kind="user", channel_id="c1")
    source = empty.to_dict()
    for name in FIELD_NAMES:
        change = {name: getattr(entry, name)}
        assert empty.evolve(change).value_after(source, change) == (
            empty.evolve(change).to_dict()
        ), name


# -- the SQL row ---------------------------------------------------------------------


def test_the_row_declares_every_field_but_the_cache_only_ones() -> None:
    assert sorted([*ROW, *CACHE_ONLY_FIELDS]) == sorted(FIELD_NAMES)
    assert not set(ROW) & CACHE_ONLY_FIELDS
    # Rows never hold the captured turns, the briefing copies (other channels' words)
    # nor the shown state (a copy of the memory as it was shown).
    assert {"messages", "briefings", "briefings_epoch", "shown"} <= CACHE_ONLY_FIELDS


@pytest.fixture(params=["sqlite-file", "sqlite-memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    # A file goes through the raw sqlite3 write path (_sqlite/raw), memory through
    # SQLAlchemy's.
    url = f"sqlite:///{tmp_path / 'rows.db'}" if request.param == "sqlite-file" else "sqlite://"
    opened = SqlStore(create_sql_engine(url, timeout=5))
    opened.setup()
    yield opened
    opened.close()


def test_the_row_holds_every_declared_field(store: SqlStore) -> None:
    params = store._row_params(full_entry(), T0)
    columns = {col.name or name for name, col in ROW.items()}
    assert set(params) == columns | {"created_at", "updated_at"}
    assert params["scope_kind"] == "user"
    assert "messages" not in params and "briefings" not in params


def test_every_row_field_round_trips_through_sqlite(store: SqlStore) -> None:
    entry = full_entry()
    assert store.put_rows([entry], T0) == 1
    back = store.load_many([entry.key])[entry.key]
    for name in FIELD_NAMES:
        expected = default_of(name) if name in CACHE_ONLY_FIELDS else getattr(entry, name)
        assert getattr(back, name) == expected, name


def test_the_stored_row_is_unchanged(store: SqlStore) -> None:
    # The columns' values as SQLite holds them: databases written by earlier releases
    # must still load, and the same entry must be written as the same values.
    store.put_rows([full_entry()], T1)
    with store.engine.connect() as conn:
        row = conn.exec_driver_sql("SELECT * FROM short_term_memories").mappings().one()
    assert dict(row) == {
        "key": "shortterm:user:u1:c1",
        "scope_kind": "user",
        "server_id": "g1",
        "user_id": "u1",
        "channel_id": "c1",
        "persona_id": "p1",
        "parent_channel_id": "pc1",
        "channel_name": "chan",
        "server_name": "srv",
        "summary": "the summary",
        "categories": '{"plot": "a", "mood": "b"}',
        "turns_since_refresh": 3,
        "last_refreshed_turn": 7,
        "created_at": "2026-01-06 07:08:09.654321",
        "updated_at": "2026-01-06 07:08:09.654321",
        "last_updated": "2026-01-05 12:00:01.123456",
        "refreshed_at": "2026-01-06 07:08:09.654321",
        "rev": 123456789,
        "turns_since_reset": 2,
        "provenance": '["u1", "u5", "u9"]',
        "kept": '[{"role": "user", "content": "door code 4821", "timestamp": '
        '"2026-01-05T12:00:01.123456+00:00", "name": null, "user_id": "u1"}]',
        "receipt": '{"2026-01-05": {"turns": 3, "calls": 4, "input_tokens": 9000, '
        '"cached_tokens": 6000, "written_tokens": 100, "cost": 3725.0, "full_tokens": 12000, '
        '"full_cost": 4100.5, "missed": 1}}',
        "forgotten": f'["{"a" * 32}", "{"b" * 32}"]',
        "no_writer": 1,
    }


def test_stamps_in_another_time_zone_come_back_as_the_same_instant(store: SqlStore) -> None:
    plus_two = timezone(timedelta(hours=2))
    entry = MemoryEntry(
        key="shortterm:server:g1:c1",
        kind="server",
        channel_id="c1",
        server_id="g1",
        last_updated=T0.astimezone(plus_two),
        refreshed_at=T1.astimezone(plus_two),
        rev=1,
    )
    store.put_rows([entry], T1)
    back = store.load_many([entry.key])[entry.key]
    assert (back.last_updated, back.refreshed_at) == (T0, T1)


# -- the checks fail loudly ----------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class WithMood(MemoryEntry):
    """MemoryEntry with a field nobody declared."""

    mood: str = "calm"


def test_a_field_the_codec_does_not_declare_fails_naming_it() -> None:
    with pytest.raises(TypeError, match="'mood' is not declared"):
        EntryCodec(WithMood)


def test_a_field_the_row_does_not_declare_fails_naming_it() -> None:
    with pytest.raises(TypeError, match="'mood' is not declared"):
        sql._check_row_plan(WithMood)


def test_a_declaration_of_no_field_or_of_one_twice_fails() -> None:
    with pytest.raises(TypeError, match="'moood' is declared but is no field"):
        check_fields(MemoryEntry, [*CACHED, "moood"], "a test")
    with pytest.raises(TypeError, match="'summary' is declared 2 times"):
        check_fields(MemoryEntry, [*ROW, *CACHE_ONLY_FIELDS, "summary"], "a test")


def test_a_column_no_field_writes_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # The raw write path would bind NULL for a column missing from the row.
    monkeypatch.setattr(sql, "_SQL_ONLY", ("created_at",))
    with pytest.raises(TypeError, match="nothing writes column 'updated_at'"):
        sql._check_row_plan()


def test_the_codec_refuses_a_post_init_it_would_skip() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Checked(MemoryEntry):
        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="__post_init__"):
        EntryCodec(Checked)

"""Isolation (issue 8): the tool writes only its turn's scope, ids containing the key
separators never collide, and deleting a user leaves no trace of their user-scope
memory in SQL, in the cache or in the outbox — while nobody else's data moves.
Every check runs on the embedded layout and on PostgreSQL + Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.deployment import Deployment
from helpers.faults import store_writes_fail
from helpers.inspection import assert_cache_matches_sql, cache_entry_keys, raw_rows
from helpers.memory import dialogue, refresh, turn
from hypothesis import given
from hypothesis import strategies as st

from stm_memory import MemoryEntry, Scope, ShortTermMemory
from stm_memory.model import index_key, key_for, parse_key
from stm_memory.model.erasure import erase_user

A = Scope(channel_id="c1", user_id="u1", server_id="g1")
NEIGHBOURS = [
    Scope(channel_id="c2", user_id="u1", server_id="g1"),
    Scope(channel_id="c1", user_id="u2", server_id="g1"),
    Scope(channel_id="c1", user_id="u1", server_id="g2"),
    Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="p1"),
    Scope(channel_id="dm", user_id="u1"),
]


def snapshot(mem: ShortTermMemory, keys: list[str]) -> dict[str, Any]:
    """Cache values and SQL rows of ``keys``, for before/after comparisons."""
    rows = mem._store.load_many(keys)
    return {
        "cache": mem._cache.get_many(keys),
        "sql": {k: e.to_dict() for k, e in rows.items()},
    }


def all_keys(scopes: list[Scope]) -> list[str]:
    return [k for s in scopes for k in s.keys]


# -- the tool writes its own turn's scope, nothing else ------------------------------------


@pytest.mark.parametrize("smuggled", ["channel_id", "user_id", "server_id", "scope", "key"])
def test_the_tool_refuses_scope_arguments(deployment: Deployment, smuggled: str) -> None:
    mem = deployment.open()
    for scope in NEIGHBOURS:
        refresh(mem, scope, f"own memory of {scope.live_key}")
    before = snapshot(mem, all_keys([A, *NEIGHBOURS]))
    tool = mem.tool(mem.begin_turn(A, provider="openai", user_message="hi"))
    assert tool is not None
    result = json.loads(tool.invoke({"summary": "hijack", smuggled: "c2"}))
    assert result["status"] == "tool_execution_failed"
    assert repr(smuggled) in result["reason"]
    assert snapshot(mem, all_keys([A, *NEIGHBOURS])) == before


def test_a_tool_writes_the_scope_it_was_built_for(deployment: Deployment) -> None:
    mem = deployment.open()
    for scope in NEIGHBOURS:
        refresh(mem, scope, f"own memory of {scope.live_key}")
    # A's server key is also u2's channel memory in c1: a shared key, A's to write.
    others = [k for k in all_keys(NEIGHBOURS) if k not in A.keys]
    before = snapshot(mem, others)
    tool_a = mem.tool(mem.begin_turn(A, provider="openai", user_message="hi"))
    assert tool_a is not None
    mem.begin_turn(NEIGHBOURS[0])  # another turn in flight changes nothing for tool_a
    assert json.loads(tool_a.invoke({"summary": "for A only"}))["status"] == "completed"
    assert snapshot(mem, others) == before
    for key in A.keys:
        entry = mem.get_key(key)
        assert entry is not None and entry.summary == "for A only"
    rows = raw_rows(mem, "summary = :s", s="for A only")
    assert sorted(r["key"] for r in rows) == sorted(A.keys)
    assert_cache_matches_sql(mem)


# -- ids containing ":" and "%" ----------------------------------------------------------

LONG = "x" * 500
LOOKALIKES: list[list[Scope]] = [
    [Scope(channel_id="c", user_id="a:b"), Scope(channel_id="b:c", user_id="a")],
    [
        Scope(channel_id="b", user_id="a", persona_id="c"),
        Scope(channel_id="b:c", user_id="a"),
    ],
    [Scope(channel_id="c", user_id="a%3Ab"), Scope(channel_id="c", user_id="a:b")],
    [Scope(channel_id="c", user_id="%25"), Scope(channel_id="c", user_id="%")],
    [
        Scope(channel_id="1:c", user_id="u", server_id="g"),
        Scope(channel_id="c", user_id="u", server_id="g:1"),
    ],
    [Scope(channel_id="user:x", user_id="index"), Scope(channel_id="x", user_id="u:index")],
    # Past 1 KB a key is stored as a digest; ids differing only at the end still differ.
    [
        Scope(channel_id=LONG + ":a", user_id=LONG + ":" + LONG[:5]),
        Scope(channel_id=LONG + ":b", user_id=LONG + ":" + LONG[:5]),
    ],
]


@pytest.mark.parametrize("group", LOOKALIKES, ids=lambda g: " vs ".join(s.user_key for s in g))
def test_ids_with_key_separators_never_collide(deployment: Deployment, group: list[Scope]) -> None:
    mem = deployment.open()
    for i, scope in enumerate(group):
        refresh(mem, scope, f"memory {i}")
    keys = all_keys(group)
    assert len(set(keys)) == len(keys)
    assert set(keys) <= cache_entry_keys(mem)
    rows = mem._store.load_many(keys)
    assert sorted(rows) == sorted(keys)
    for i, scope in enumerate(group):
        for key in scope.keys:
            assert rows[key].summary == f"memory {i}"
            live = mem.get_key(key)
            assert live is not None and live.summary == f"memory {i}"
    # Deleting one lookalike leaves the other.
    first, second = group
    mem.clear_channel(first.channel_id)
    assert mem.get(first) is None and mem._store.load_many(list(first.keys)) == {}
    if second.channel_id != first.channel_id:
        live = mem.get(second)
        assert live is not None and live.summary == "memory 1"
    mem.clear_user(second.user_id)
    if first.user_id != second.user_id:
        refresh(mem, first, "back")
        assert mem.get_key(first.user_key) is not None
    assert mem.get_key(second.user_key) is None
    assert_cache_matches_sql(mem)
    # A restart with an empty cache sees the same thing.
    again = deployment.open(fresh_cache=True)
    assert again.get_key(second.user_key) is None


ID_CHARS = st.text(alphabet=":%3A25ab", min_size=1, max_size=8)


@given(
    st.tuples(st.sampled_from(["user", "server"]), ID_CHARS, ID_CHARS, st.none() | ID_CHARS),
    st.tuples(st.sampled_from(["user", "server"]), ID_CHARS, ID_CHARS, st.none() | ID_CHARS),
)
def test_keys_are_injective_and_parse_back(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    ka, kb = key_for(*a), key_for(*b)
    assert parse_key(ka) == a
    assert (ka == kb) == (a == b)
    assert not ka.startswith("shortterm:index:")
    assert index_key(a[0], a[1]) != ka


# -- deleting a user ----------------------------------------------------------------------

U1 = [
    Scope(channel_id="c1", user_id="u1", server_id="g1"),
    Scope(channel_id="c2", user_id="u1", server_id="g1"),
    Scope(channel_id="c1", user_id="u1", server_id="g2"),
    Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="p1"),
    Scope(channel_id="t1", user_id="u1", server_id="g1", parent_channel_id="c1"),
    Scope(channel_id="dm", user_id="u1"),
]
OTHERS = [
    Scope(channel_id="c1", user_id="u2", server_id="g1"),
    Scope(channel_id="dm2", user_id="u2"),
    Scope(channel_id="c1", user_id="u1:x", server_id="g1"),  # a separator neighbour
    Scope(channel_id="c9", user_id="u", server_id="g1"),
]


def user_rows(mem: ShortTermMemory, user_id: str) -> list[dict[str, Any]]:
    return raw_rows(mem, "user_id = :u AND scope_kind = 'user'", u=user_id)


def test_clear_user_removes_every_trace_and_nothing_else(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem = deployment.open()
    for scope in U1 + OTHERS:
        refresh(mem, scope, f"landed for {scope.live_key}")
        mem.capture(scope, dialogue(2))
    with store_writes_fail(mem, monkeypatch):
        for scope in U1 + OTHERS:
            wrote = turn(mem, scope, {"summary": f"queued for {scope.live_key}"})
            assert wrote["status"] == "completed"
            turn(mem, scope)
        assert any(item.user_id == "u1" for item in mem._outbox.pending())
        other_keys = all_keys(OTHERS)
        before = snapshot(mem, other_keys)
        assert mem.clear_user("u1") == 0  # queued: the database is down
        queued = mem._outbox.pending()
        assert [i.kind for i in queued if i.user_id == "u1"] == ["forget_user"]
    assert mem.flush() == len(queued)
    assert len(mem._outbox) == 0

    # SQL: no user-scope row of u1 anywhere, through the store and through plain SQL.
    assert user_rows(mem, "u1") == []
    assert mem._store.list_rows(user_id="u1") == []
    assert mem._store.load_user("u1") == []
    # Cache: no entry and no index member of u1.
    assert not [k for k in cache_entry_keys(mem) if parse_key(k)[:2] == ("user", "u1")]
    assert mem._cache.ranked(index_key("user", "u1"), count=100) == []
    for scope in U1:
        assert mem.get_key(scope.user_key) is None
        live = mem.get(scope)  # the channel's server entry stays, without u1's words
        if not scope.is_dm:
            assert live is not None and live.summary is None
            assert all(m.user_id != "u1" for m in live.messages)
    # Everyone else: as before, except what u1's words reached in the entries they
    # share with u1 (g1's c1): its distilled memory cleared, u1's turns removed.
    after = snapshot(mem, other_keys)

    def seen(value: dict[str, Any]) -> tuple[Any, ...]:
        entry = MemoryEntry.from_dict(value)
        return entry.summary, [(m.user_id, m.content) for m in entry.messages]

    def erased(value: dict[str, Any]) -> tuple[Any, ...]:
        entry = MemoryEntry.from_dict(value)
        changes = erase_user(entry, "u1")
        return seen((entry.evolve(changes) if changes else entry).to_dict())

    assert {k: seen(v) for k, v in after["cache"].items()} == {
        k: erased(v) for k, v in before["cache"].items()
    }
    assert {k: erased(v)[0] for k, v in before["cache"].items()} != {
        k: MemoryEntry.from_dict(v).summary for k, v in before["cache"].items()
    }  # something was shared with u1, so the check above compares real changes
    assert {k: MemoryEntry.from_dict(v).summary for k, v in after["sql"].items()} == {
        k: erased(v)[0] for k, v in before["cache"].items()
    }
    assert len(user_rows(mem, "u1:x")) == 1 and len(user_rows(mem, "u")) == 1
    assert_cache_matches_sql(mem)

    again = deployment.open(fresh_cache=True)
    for scope in U1:
        assert again.get_key(scope.user_key) is None
    assert user_rows(again, "u1") == []

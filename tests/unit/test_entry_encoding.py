"""MemoryEntry's write fast path: ``evolve`` and ``value_after`` must agree with
``dataclasses.replace`` and ``to_dict``, or the cache would hold something other than
the entry a write computed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stm_memory import MemoryEntry
from stm_memory.model import Messages, StoredMessage, turns_after

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)

stamps = st.integers(min_value=0, max_value=10**6).map(lambda s: T0 + timedelta(seconds=s))
texts = st.text(max_size=40)
messages = st.lists(
    st.builds(
        StoredMessage,
        role=st.sampled_from(["user", "assistant"]),
        content=texts,
        timestamp=stamps,
        name=st.none() | texts,
    ),
    max_size=4,
).map(tuple)
categories = st.dictionaries(st.sampled_from(["plot", "mood", "goal"]), texts, max_size=3)

entries = st.builds(
    MemoryEntry,
    key=st.just("shortterm:server:g1:c1"),
    kind=st.just("server"),
    channel_id=st.just("c1"),
    server_id=st.just("g1"),
    channel_name=st.none() | texts,
    messages=messages,
    summary=st.none() | texts,
    categories=categories,
    turns_since_refresh=st.integers(0, 50),
    last_refreshed_turn=st.integers(0, 50),
    last_updated=stamps,
    refreshed_at=st.none() | stamps,
    rev=st.integers(0, 2**62),
)

changes = st.fixed_dictionaries(
    {},
    optional={
        "summary": st.none() | texts,
        "categories": categories,
        "messages": messages,
        "turns_since_refresh": st.integers(0, 50),
        "last_refreshed_turn": st.integers(0, 50),
        "last_updated": stamps,
        "refreshed_at": st.none() | stamps,
        "rev": st.integers(0, 2**62),
        "channel_name": st.none() | texts,
    },
)


@given(entries, changes)
def test_evolve_is_replace(entry: MemoryEntry, change: dict[str, Any]) -> None:
    assert entry.evolve(change) == replace(entry, **change)


@given(entries, changes)
def test_a_patched_value_is_the_whole_encoding(entry: MemoryEntry, change: dict[str, Any]) -> None:
    # As on the write path: the entry comes from a cached value, then changes apply.
    cached = MemoryEntry.from_dict(entry.to_dict())
    assert isinstance(cached.messages, Messages)
    new = cached.evolve(change)
    patched = new.value_after(entry.to_dict(), change)
    assert patched == new.to_dict()
    assert MemoryEntry.from_dict(patched) == new


@given(entries, changes)
def test_an_incomplete_source_is_encoded_whole(entry: MemoryEntry, change: dict[str, Any]) -> None:
    # A value from an older release may lack fields: the patch must not keep it short.
    old = entry.to_dict()
    del old["rev"]
    new = MemoryEntry.from_dict(old).evolve(change)
    assert new.value_after(old, change) == new.to_dict()
    assert new.value_after(None, change) == new.to_dict()


def test_evolve_refuses_a_field_that_does_not_exist() -> None:
    entry = MemoryEntry(key="shortterm:user:u1:c1", kind="user", channel_id="c1")
    with pytest.raises(TypeError, match="summry"):
        entry.evolve({"summry": "typo"})


def test_equal_instants_in_other_time_zones_keep_their_own_text() -> None:
    # The write path remembers the last stamp it encoded: by identity, never by equality.
    entry = MemoryEntry(key="shortterm:user:u1:c1", kind="user", channel_id="c1")
    source = entry.to_dict()
    plus_one = T0.astimezone(timezone(timedelta(hours=1)))
    assert plus_one == T0
    for stamp in (T0, plus_one, T0, plus_one):
        change = {"last_updated": stamp, "refreshed_at": stamp}
        new = entry.evolve(change)
        assert new.value_after(source, change) == new.to_dict()


@given(messages, st.none() | stamps, st.integers(-6, 6), st.integers(-6, 6))
def test_lazy_turns_read_like_the_decoded_tuple(
    turns: tuple[StoredMessage, ...], since: datetime | None, start: int, stop: int
) -> None:
    # Rendering reads a few turns of a cached entry without decoding the others; what
    # it reads must be what the decoded tuple holds (any timestamp order).
    def lazy() -> Messages:
        return Messages([m.to_dict() for m in turns])

    assert turns_after(lazy(), since) == turns_after(turns, since)
    assert lazy()[start:stop] == turns[start:stop]
    if turns:
        assert lazy()[start % len(turns)] == turns[start % len(turns)]
    decoded = lazy()
    list(decoded)  # decoded first: the same answers from the decoded tuple
    assert turns_after(decoded, since) == turns_after(turns, since)
    assert decoded[start:stop] == turns[start:stop]


@given(messages)
def test_a_turn_keeps_its_cached_form_and_a_changed_copy_does_not(
    turns: tuple[StoredMessage, ...],
) -> None:
    for turn in turns:
        written = {**turn.to_dict()}  # as a cache hands it back: a dict of its own
        read = StoredMessage.from_dict(written)
        assert read == turn
        assert read.to_dict() is written  # re-encoded for nothing on the next write
        moved = replace(read, timestamp=read.timestamp + timedelta(seconds=1))
        assert moved.to_dict()["timestamp"] == moved.timestamp.isoformat()
        assert read.to_dict()["timestamp"] == turn.timestamp.isoformat()


def test_a_value_decoding_normalised_is_not_taken_as_the_cached_form() -> None:
    odd = {"role": "human", "content": "hi", "timestamp": T0.isoformat(), "name": None}
    read = StoredMessage.from_dict({**odd, "user_id": None})
    assert read.to_dict() == {**odd, "role": "user", "user_id": None}
    partial = StoredMessage.from_dict(
        {"role": "user", "content": "hi", "timestamp": T0.isoformat()}
    )
    assert partial.to_dict() == {
        "role": "user",
        "content": "hi",
        "timestamp": T0.isoformat(),
        "name": None,
        "user_id": None,
    }

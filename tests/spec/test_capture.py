"""Capture (SPEC §5): which turns of a caller's transcript a turn stores, with whose speaker
and which timestamp — the window kept, first-seen timestamps, and speakers kept by
alignment with the stored turns.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers.memory import SERVER
from hypothesis import given
from hypothesis import strategies as st

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit import CAPTURE_WINDOW, MemoryTurn, drive
from stm_memory.model import StoredMessage
from stm_memory.model.dialogue import _alignment, with_stored_speakers
from stm_memory.testing import FrozenClock

# ------------------------------------------------------------------------------------
# The one capture window (MemoryTurn.finish and MemoryTurn.capture_window): every
# entry point hands the turn what it keeps, and the turn reads only as far back as
# capture needs — never so little that stored dialogue is replaced with less.


def record(turns: int, speaker: str | None = "u1") -> list[dict[str, Any]]:
    """A channel's record; its user messages name their speaker (an unnamed one from
    before this turn is nobody's to capture: see the erasure rules below)."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out += [
            {"role": "user", "content": f"q{i}", "user_id": speaker},
            {"role": "assistant", "content": f"a{i}"},
        ]
    return out


def stored(mem: ShortTermMemory) -> list[str]:
    entry = mem.get(SERVER)
    return [m.content for m in entry.messages] if entry is not None else []


def test_a_whole_record_is_captured_as_its_last_messages(mem: ShortTermMemory) -> None:
    full = record(300)
    turn = drive(MemoryTurn.begin(mem, SERVER, user_message="q299"))
    drive(turn.finish(full, start=len(full) - 2))
    kept = mem.limits.messages_kept
    assert stored(mem) == [m["content"] for m in full[-kept:]]


def test_a_record_nobody_can_be_credited_with_is_not_captured_but_this_turn(
    mem: ShortTermMemory,
) -> None:
    # A shared channel's record whose earlier messages name no speaker, with nothing
    # stored to tell who said them: only this turn's (its user's) is stored, never the
    # rest under this user's id (SPEC §7: erasure could not reach it then).
    full = record(30, speaker=None)
    turn = drive(MemoryTurn.begin(mem, SERVER, user_message="q29"))
    drive(turn.finish(full, start=len(full) - 2))
    entry = mem.get(SERVER)
    assert entry is not None
    assert [(m.content, m.user_id) for m in entry.messages] == [("q29", "u1"), ("a29", "u1")]


def test_a_group_channel_with_unstored_speakers_still_fills_what_is_kept(
    mem: ShortTermMemory,
) -> None:
    mem.configure_user("shy", full_privacy=True)
    full: list[dict[str, Any]] = []
    for i in range(40):  # the private user speaks twice as often as the others
        full += [
            {"role": "user", "content": f"shy {i}a", "user_id": "shy"},
            {"role": "user", "content": f"shy {i}b", "user_id": "shy"},
            {"role": "user", "content": f"ann {i}", "user_id": "u1"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    turn = drive(MemoryTurn.begin(mem, SERVER, user_message="ann 39"))
    drive(turn.finish(full, start=len(full) - 4))
    kept = mem.limits.messages_kept
    words = stored(mem)
    assert len(words) == kept and not any(w.startswith("shy") for w in words)


def test_a_record_read_from_its_end_reads_the_window_then_all_when_short(
    mem: ShortTermMemory,
) -> None:
    turn = drive(MemoryTurn.begin(mem, SERVER))
    kept = mem.limits.messages_kept
    first = turn.capture_window(3)
    assert first == max(CAPTURE_WINDOW, 3 + 4 * kept)
    assert first is not None
    dialogue = record(first // 2)
    assert turn.capture_window(3, dialogue) == len(dialogue)  # enough: no second read
    tools = [{"role": "tool", "content": "x"}] * first  # a window of tool traffic only
    assert turn.capture_window(3, tools) is None  # read the whole record
    assert turn.capture_window(3, record(5)) == 10  # a short record is all there is


# ------------------------------------------------------------------------------------
# Capture keeps the first timestamp of a turn it has seen, so "recent since the last
# refresh" stays meaningful when callers pass the whole window every turn.


def test_repeated_turns_keep_their_first_timestamp(tmp_path: Path) -> None:
    clock = FrozenClock()
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    with ShortTermMemory.from_url(
        f"sqlite:///{tmp_path / 'stm.db'}", cache_dir=tmp_path / "c", clock=clock
    ) as mem:
        first = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        mem.capture(scope, first)
        t0 = clock()
        clock.advance(minutes=5)
        mem.capture(scope, [*first, {"role": "user", "content": "again"}])
        entry = mem.get(scope)
        assert entry is not None
        assert [m.timestamp for m in entry.messages] == [t0, t0, clock()]
        assert entry.refreshed_at is None
        turn = mem.begin_turn(scope)
        assert mem.update(turn, {"summary": "greetings"}) == {"status": "completed"}
        entry = mem.get(scope)
        assert entry is not None and entry.refreshed_at == clock()


# ------------------------------------------------------------------------------------
# Who said a captured turn: ``with_stored_speakers`` credits a turn the channel's store
# already holds to the speaker it was stored with, matched as a sequence, and only new
# turns to the user whose turn captures them (SPEC §5).

NOW = datetime(2026, 1, 5, 12, tzinfo=UTC)


def user(text: str, speaker: str | None = None, name: str | None = None) -> StoredMessage:
    return StoredMessage(role="user", content=text, timestamp=NOW, user_id=speaker, name=name)


def bot(text: str) -> StoredMessage:
    return StoredMessage(role="assistant", content=text, timestamp=NOW)


def speakers_of(said: list[StoredMessage], stored: list[StoredMessage]) -> list[str | None]:
    out = with_stored_speakers(said, stored, default="turn")
    return [m.user_id for m in out if m.role == "user"]


YES_TWICE = [user("yes", "ann"), bot("ok"), user("yes", "bob"), bot("ok")]


@pytest.mark.parametrize(
    ("said", "stored", "expected"),
    [
        # Nothing stored: this turn's unnamed user turn is the turn's user's.
        ([user("hi"), bot("hello")], [], ["turn"]),
        # An unnamed turn before this one, never stored: nobody can tell whose it is.
        ([user("old"), bot("x"), user("hi")], [], [None, "turn"]),
        # The whole stored list again, then a new turn.
        (
            [user("hi"), bot("hello"), user("hi")],
            [user("hi", "ann"), bot("hello")],
            ["ann", "turn"],
        ),
        # Equal words of two speakers: told apart by their place in the sequence.
        (
            [user("yes"), bot("ok"), user("yes"), bot("ok"), user("yes")],
            YES_TWICE,
            ["ann", "bob", "turn"],
        ),
        # A window that keeps only the stored list's last turns: the latest "yes" is Bob's.
        ([user("yes"), bot("ok"), user("more")], YES_TWICE, ["bob", "turn"]),
        # Older history in front of the stored list (the store keeps the last turns only):
        # whose it was is lost with it, and it is not this turn's user's.
        (
            [user("old"), bot("x"), *[user("yes"), bot("ok")] * 2, user("new")],
            YES_TWICE,
            [None, "ann", "bob", "turn"],
        ),
        # A turn the store dropped (a private speaker's) sits between two stored ones.
        (
            [user("a"), user("secret", "cy"), user("b"), user("c")],
            [user("a", "ann"), user("b", "bob")],
            ["ann", "cy", "bob", "turn"],
        ),
        # A stored turn the caller no longer passes does not stop the match before it.
        (
            [user("a"), user("c"), bot("1"), user("d")],
            [user("a", "ann"), user("b", "bob"), user("c", "cy"), bot("1")],
            ["ann", "cy", "turn"],
        ),
        # A turn that names its speaker keeps that name, and is not the stored one.
        ([user("hi", "bob"), user("hi")], [user("hi", "ann")], ["bob", "ann"]),
        # The same words said anew, without the stored list's last turn: a new turn.
        ([user("hi")], [user("hi", "ann"), bot("hello")], ["turn"]),
    ],
)
def test_stored_turns_keep_their_speakers(
    said: list[StoredMessage], stored: list[StoredMessage], expected: list[str | None]
) -> None:
    assert speakers_of(said, stored) == expected


def test_a_different_display_name_is_someone_else() -> None:
    stored = [user("hi", "ann", name="Ann")]
    assert speakers_of([user("hi", name="Bob")], stored) == ["turn"]


def test_a_repeated_turn_keeps_its_stored_name_too() -> None:
    out = with_stored_speakers([user("hi")], [user("hi", "ann", name="Ann")], default="bob")
    assert [(m.user_id, m.name) for m in out] == [("ann", "Ann")]


def test_a_legacy_turn_without_a_speaker_is_the_turns_users() -> None:
    assert speakers_of([user("hi")], [user("hi")]) == ["turn"]


def test_a_reply_is_credited_to_the_user_whose_turn_it_answered() -> None:
    # A reply is derived from its turn's words: erasing that user takes it too.
    out = with_stored_speakers(
        [user("a"), bot("1"), user("b"), bot("2"), user("c"), bot("3")],
        [user("a", "ann"), bot("1"), user("b", "bob"), bot("2")],
        default="cy",
    )
    assert [m.user_id for m in out] == ["ann", "ann", "bob", "bob", "cy", "cy"]


def test_a_repeated_turn_keeps_its_stored_mark() -> None:
    stored = [replace(user("hi", "ann"), mark="m1"), replace(bot("hello"), mark="m2")]
    out = with_stored_speakers([user("hi"), bot("hello"), user("new")], stored, default="bob")
    assert [m.mark for m in out] == ["m1", "m2", None]


def test_a_direct_conversation_is_all_its_users() -> None:
    # Current from the first message: a DM holds one user's words.
    out = with_stored_speakers([user("old"), bot("x"), user("hi")], [], default="u", current=0)
    assert [m.user_id for m in out] == ["u", "u", "u"]


# -- the stored turns first, then the new ones (how MemoryTurn.finish captures) ---------

_turns = st.builds(
    StoredMessage,
    role=st.sampled_from(["user", "assistant"]),
    content=st.sampled_from(["yes", "ok", "hi"]),
    timestamp=st.just(NOW),
    name=st.sampled_from([None, "Ann", "Bob"]),
    user_id=st.sampled_from([None, "ann", "bob"]),
)


@given(st.lists(_turns, max_size=6), st.lists(_turns, max_size=4), st.randoms())
def test_a_transcript_led_by_the_stored_turns_is_aligned_as_by_the_run_search(
    stored: list[StoredMessage], new: list[StoredMessage], rnd: random.Random
) -> None:
    # The stored turns again (some without their name or speaker), then new ones: the
    # one-to-one pairing must give what the run search gives.
    again = [
        replace(m, name=m.name if rnd.random() < 0.8 else None, user_id=None)
        if rnd.random() < 0.5
        else m
        for m in stored
    ]
    said = [*again, *new]
    repeats = _alignment(said, stored) if stored else {}
    current = len(again)
    expected = [
        m.user_id
        if m.user_id is not None
        else (
            old.user_id
            if (old := repeats.get(i)) is not None and old.user_id
            else ("turn" if i >= current else None)
        )
        for i, m in enumerate(said)
    ]
    got = with_stored_speakers(said, stored, default="turn", current=current)
    users = [i for i, m in enumerate(said) if m.role == "user"]
    assert [got[i].user_id for i in users] == [expected[i] for i in users]

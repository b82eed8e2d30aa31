"""What a write keeps beside its memory (stm_memory/model/kept.py): what the memory
leaves out is kept and released once carried, within the budget (the first turn that
does not fit is held), a restated value was replaced, a reply that repeats a briefing is
carried by it, a word the dialogue writes in lower case is no name, and an excerpt is
the sentence around the detail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stm_memory.model.details import missing
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.kept import excerpt, left_out, reconcile, written

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def said(text: str, minutes: int, user: str | None = "u1") -> StoredMessage:
    role = "user" if user else "assistant"
    return StoredMessage(
        role=role, content=text, timestamp=T0 + timedelta(minutes=minutes), user_id=user
    )


def test_reconcile_keeps_what_the_memory_leaves_out_and_releases_what_it_carries() -> None:
    turns = [
        said("Hi there.", 0),
        said("The door code is 4821. The host is Okafor.", 1),
        said("Sure thing.", 2, user=None),
    ]
    first = reconcile((), turns, written("Host: Okafor.", ()), budget=1000)
    assert [m.content for m in first.kept] == ["The door code is 4821."]
    assert first.kept[0].timestamp == turns[1].timestamp  # when it was said, by whom
    assert first.kept[0].user_id == "u1"
    assert left_out(first.kept, written("Host: Okafor.", ())) == ["4821"]
    # A later write that carries it releases it.
    later = reconcile(first.kept, (), written("Code 4821, host Okafor.", ()), budget=1000)
    assert later.kept == ()


def test_category_values_are_the_memory_too() -> None:
    turns = [said("Meet at Quillon at 18:30.", 0)]
    memory = written(None, ["Quillon", "in the evening"])
    (kept,) = reconcile((), turns, memory, budget=1000).kept
    assert left_out([kept], memory) == ["18:30"]


def test_past_the_budget_the_first_turn_that_does_not_fit_is_held() -> None:
    turns = [said(f"Room {n}A is booked for team {n}.", n) for n in range(10, 20)]
    out = reconcile((), turns, written("Rooms are booked.", ()), budget=70)
    assert len(out.kept) == 2
    assert out.held_from is turns[2]


def test_an_excerpt_is_the_sentence_around_the_detail() -> None:
    text = "Some words here. " * 30 + "The code is 4821. " + "And then some. " * 30
    cut = excerpt(text, missing(text, ""))
    assert cut == "The code is 4821."
    assert len(excerpt("x" * 500 + " 4821", missing("x" * 500 + " 4821", ""))) <= 200


def test_a_value_the_memory_restates_was_replaced_not_left_out() -> None:
    # The memory says the same thing with another value of the same shape: the writer
    # replaced it (a correction), so the old value is not kept.
    turns = [said("Settled: the host for the garden day is Vasquez.", 0)]
    memory = written("- host for the garden day: Okafor", ())
    assert reconcile((), turns, memory, budget=1000).kept == ()
    # Another value of another shape is no restatement ("four thousand" is no number).
    turns = [said("The door code for the garden shed is 4821.", 0)]
    memory = written("- door code for the garden shed: four thousand", ())
    assert [m.content for m in reconcile((), turns, memory, budget=1000).kept] == [
        "The door code for the garden shed is 4821."
    ]


def test_a_reply_that_repeats_a_briefing_is_carried_by_it() -> None:
    reply = StoredMessage(role="assistant", content="It is 4197.", timestamp=T0)
    memory = written("Nothing here.", (), elsewhere="- #events: door code 4197")
    assert reconcile((), [reply], memory, budget=1000).kept == ()
    # A user who says it is kept: their words are this channel's.
    assert reconcile((), [said("It is 4197.", 0)], memory, budget=1000).kept != ()


def test_a_word_opening_a_sentence_is_no_name_where_the_dialogue_writes_it_in_lower_case() -> None:
    turns = [said("Tunnel maps are on the desk.", 0), said("Is the tunnel dry now?", 1)]
    assert reconcile((), turns, written("Nothing yet.", ()), budget=1000).kept == ()
    # Never written in lower case: a name that opens a sentence is kept.
    turns = [said("Okafor hosts the night.", 0)]
    assert reconcile((), turns, written("Someone hosts.", ()), budget=1000).kept != ()


def test_past_the_budget_the_oldest_kept_excerpts_leave_for_the_new_ones() -> None:
    # The writer was told at each write and kept leaving the old ones out; the prompt
    # stays bounded (a writer that keeps only its last points must not pin the cut).
    old = [said(f"Room {n}A is booked for team {n}.", n) for n in range(10, 13)]
    first = reconcile((), old, written("Rooms are booked.", ()), budget=100)
    assert [m.content for m in first.kept] == [m.content for m in old]
    new = [said("Room 77Z is booked for team 77.", 30)]
    later = reconcile(first.kept, new, written("Rooms are booked.", ()), budget=100)
    assert [m.content for m in later.kept] == [
        "Room 11A is booked for team 11.",
        "Room 12A is booked for team 12.",
        "Room 77Z is booked for team 77.",
    ]
    assert later.held_from is None

"""The shown state as the turn's end stores it (model/changes.counted): one swap wins
between processes, an erasure wins over a turn in flight, a lost state stays lost
until the next request swaps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from stm_memory.model import MemoryEntry
from stm_memory.model.changes import counted
from stm_memory.model.erasure import erase_user
from stm_memory.model.shown import ShownState

T0 = datetime(2026, 1, 5, 12, tzinfo=UTC)
T1 = T0 + timedelta(minutes=3)


def entry(shown: ShownState | None, **fields: object) -> MemoryEntry:
    base: dict[str, object] = {
        "key": "shortterm:server:g:c",
        "kind": "server",
        "channel_id": "c",
        "server_id": "g",
        "summary": "Second write.",
        "last_refreshed_turn": 2,
        "turns_since_refresh": 1,
        "provenance": frozenset({"u1"}),
        "shown": shown,
    }
    return MemoryEntry(**(base | fields))  # type: ignore[arg-type]


HELD = ShownState(epoch=1, summary="First write.", turns=4, swap=3, at=T0)
SWAPPED = ShownState(epoch=2, summary="Second write.", turns=1, swap=4, at=T0)


def test_a_held_turn_counts_on_the_form_it_showed() -> None:
    fields = counted(entry(HELD), shown=HELD, base=3, at=T1)
    assert fields["shown"] == ShownState(epoch=1, summary="First write.", turns=5, swap=3, at=T1)
    assert fields["turns_since_refresh"] == 2


def test_a_swap_is_stored_when_nothing_moved_meanwhile() -> None:
    fields = counted(entry(HELD), shown=SWAPPED, base=3, at=T1)
    assert fields["shown"].swap == 4 and fields["shown"].epoch == 2
    assert fields["shown"].turns == 2


def test_one_swap_wins_between_two_processes() -> None:
    # Process A swapped and ended first (the stored form is its swap 4); process B,
    # which read swap 3 too and swapped to its own copy, keeps A's and counts its turn.
    stored = entry(SWAPPED)
    theirs = ShownState(epoch=2, summary="Second write.", turns=1, swap=4, at=T0)
    fields = counted(stored, shown=theirs, base=3, at=T1)
    assert fields["shown"] == SWAPPED.later(T1)
    # A held turn of B, read against swap 3, after A's swap: A's form, counted.
    fields = counted(stored, shown=HELD, base=3, at=T1)
    assert fields["shown"] == SWAPPED.later(T1)


def test_an_erasure_wins_over_a_turn_in_flight() -> None:
    erased = entry(HELD).evolve(erase_user(entry(HELD), "u1") or {})
    assert erased.summary is None and erased.shown is not None
    assert erased.shown.summary is None and erased.shown.swap == 4
    # The turn read swap 3 (and showed the first write's copy): it does not come back.
    fields = counted(erased, shown=HELD, base=3, at=T1)
    assert fields["shown"].summary is None
    swapped = counted(erased, shown=SWAPPED, base=3, at=T1)
    assert swapped["shown"].summary is None


def test_a_lost_state_is_not_restored_by_a_turn_that_held() -> None:
    # The cache was flushed mid-turn: the stored form is gone; the held copy read
    # before is not written back (the next request swaps to what is there now).
    fields = counted(entry(None), shown=HELD, base=3, at=T1)
    assert "shown" not in fields
    # A turn that found no state swapped to the newest: that is stored.
    first = ShownState(epoch=2, summary="Second write.", turns=1, swap=1, at=None)
    assert counted(entry(None), shown=first, base=0, at=T1)["shown"].swap == 1


def test_the_shown_state_never_reaches_a_row_or_the_outbox() -> None:
    from stm_memory.model.entry import CACHE_ONLY_FIELDS
    from stm_memory.store.sql import ROW

    assert "shown" in CACHE_ONLY_FIELDS and "shown" not in ROW

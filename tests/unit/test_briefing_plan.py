"""plan_briefings (pure): which briefing copies a request carries, billed once per change."""

from __future__ import annotations

from dataclasses import replace

from stm_memory.model import MemoryEntry
from stm_memory.model.briefings import STABLE, BriefingCopy
from stm_memory.prompt.briefings import (
    MAX_COPIES_FACTOR,
    MAX_COPY_TOKENS,
    WAIT_TURNS,
    plan_briefings,
)

RAW_1 = '- #lore, 2026-01-05 12:00 UTC:\n  Ann: "The map is fake."\n  Assistant: "Noted."'
RAW_2 = (
    '- #lore, 2026-01-05 12:30 UTC:\n  Ann: "The map is fake."\n  Assistant: "Noted."\n'
    '  Bo: "Who drew it?"'
)
SUMMARY = "- #lore, 2026-01-05 13:00 UTC:\n  Recent conversation: the map is fake."


def copy(text: str, *, source: str = "shortterm:server:g:lore", turn: int = STABLE) -> BriefingCopy:
    return BriefingCopy(
        source=source,
        channel_id="lore",
        server_id="g",
        text=text,
        provenance=frozenset({"ann"}),
        turn=turn,
    )


def live(*copies: BriefingCopy, since: int = 2, epoch: int = 1) -> MemoryEntry:
    return MemoryEntry(
        key="shortterm:server:g:plot",
        kind="server",
        channel_id="plot",
        server_id="g",
        turns_since_refresh=since,
        last_refreshed_turn=epoch,
        briefings=copies,
        briefings_epoch=epoch,
    )


def plan(entry: MemoryEntry | None, *shown: BriefingCopy) -> tuple[BriefingCopy, ...]:
    return plan_briefings(entry, shown, visible={c.source for c in shown}, limit=3)[0]


def test_a_first_set_and_a_rewrite_make_the_stable_group() -> None:
    assert plan(None, copy(RAW_1, turn=5)) == (copy(RAW_1),)
    rewritten = replace(live(copy(RAW_1)), last_refreshed_turn=2)
    assert plan(rewritten, copy(SUMMARY, turn=4)) == (copy(SUMMARY),)


def test_an_unchanged_briefing_is_not_sent_again() -> None:
    assert plan(live(copy(RAW_1)), copy(RAW_1)) == (copy(RAW_1),)


def test_raw_turns_bring_only_the_turns_not_sent_before() -> None:
    since = WAIT_TURNS
    planned = plan(live(copy(RAW_1), since=since), copy(RAW_2))
    delta = '- #lore, 2026-01-05 12:30 UTC:\n  Bo: "Who drew it?"'
    assert planned == (copy(RAW_1), copy(delta, turn=since))
    # The same raw turns again, as the next turn renders them: nothing new.
    assert plan(live(*planned, since=since + WAIT_TURNS), copy(RAW_2)) == planned


def test_new_distilled_memory_enters_whole_beside_the_old_copy() -> None:
    since = WAIT_TURNS
    assert plan(live(copy(RAW_1), since=since), copy(SUMMARY)) == (
        copy(RAW_1),
        copy(SUMMARY, turn=since),
    )


def test_a_change_of_a_carried_source_waits_for_the_rewrite_or_the_bound() -> None:
    # Two turns after the rewrite: the change waits (the request extends the last).
    assert plan(live(copy(RAW_1), since=2), copy(SUMMARY)) == (copy(RAW_1),)
    # At the bound it is sent on its own, once.
    waited = plan(live(copy(RAW_1), since=WAIT_TURNS), copy(SUMMARY))
    assert waited == (copy(RAW_1), copy(SUMMARY, turn=WAIT_TURNS))
    # A rewrite of this channel takes it at once, in the stable group.
    rewritten = replace(live(copy(RAW_1), since=0), last_refreshed_turn=2)
    assert plan(rewritten, copy(SUMMARY)) == (copy(SUMMARY),)


def test_a_source_changing_every_turn_is_delivered_once_per_bound() -> None:
    carried: tuple[BriefingCopy, ...] = (copy(RAW_1),)
    deliveries = []
    for since in range(1, 4 * WAIT_TURNS + 1):
        text = RAW_1 + "".join(f'\n  Bo: "line {i}"' for i in range(since))
        carried = plan(live(*carried, since=since), copy(text))
        deliveries += [c.turn for c in carried if c.turn == since]
    assert deliveries == [WAIT_TURNS * k for k in range(1, 5)]


def test_a_source_not_carried_yet_enters_at_once() -> None:
    other = copy("- #maps, t:\n  Recent conversation: north.", source="shortterm:server:g:maps")
    assert plan(live(copy(RAW_1), since=1), copy(RAW_1), other) == (
        copy(RAW_1),
        replace(other, turn=1),
    )


def test_copies_past_the_token_bound_start_again_as_the_stable_group() -> None:
    big = "- #lore, t:\n  Recent conversation: " + "x" * (4 * MAX_COPY_TOKENS)
    fresh = copy("- #maps, t:\n  y", source="shortterm:server:g:maps")
    planned = plan(live(copy(big), since=1), copy(big), fresh)
    assert planned == (copy(big), copy(fresh.text, source=fresh.source))


def test_a_source_no_longer_visible_leaves_the_set() -> None:
    gone = copy(RAW_1, source="shortterm:server:g:secret")
    assert plan(live(gone, copy(RAW_1)), copy(RAW_1)) == (copy(RAW_1),)


def test_a_full_set_starts_again_as_the_stable_group() -> None:
    many = [
        copy(f"- #c{i}, t:\n  x{i}", source=f"s{i}", turn=1) for i in range(3 * MAX_COPIES_FACTOR)
    ]
    new = copy("- #new, t:\n  y", source="s-new")
    planned = plan_briefings(live(*many), [new], visible={c.source for c in [*many, new]}, limit=3)[
        0
    ]
    assert planned == (copy("- #new, t:\n  y", source="s-new"),)

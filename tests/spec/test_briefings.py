"""Briefings (SPEC §6, amended 2026-12-01): which copies of the other channels' memories a
request carries, billed once per change — the plan as a pure table, then through the
public API while other channels of the server move on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from stm_memory import Scope, ShortTermMemory
from stm_memory.model import MemoryEntry
from stm_memory.model.briefings import STABLE, BriefingCopy
from stm_memory.prompt.briefings import (
    MAX_COPIES_FACTOR,
    MAX_COPY_TOKENS,
    WAIT_TURNS,
    plan_briefings,
)
from stm_memory.prompt.placement import MemoryContext
from stm_memory.prompt.quiet import NUDGE_TRIES
from stm_memory.prompt.render import CONTENT_HEADER, FRAMING
from stm_memory.testing import FrozenClock

# ------------------------------------------------------------------------------------
# plan_briefings (pure): which briefing copies a request carries, billed once per change.

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


# ------------------------------------------------------------------------------------
# Briefings are billed once per change (SPEC §6, amended 2026-12-01), through the
# public API: a full-history caller drives one channel with OpenAI-style dict messages
# (``begin_turn`` / ``build_context`` / ``ctx.apply`` / ``capture`` / ``end_turn``) while
# other channels of the server move on.
#
# - Between two rewrites of this channel's memory, a briefing the channel was already
#   sent is sent again as the same bytes at the same place, never again after the new
#   user message; a new or changed one enters once, right after the current user
#   message, and stays after that turn's user message.
# - After a rewrite (or on a channel's first turn) the briefings shown form one stable
#   group, right after this channel's memory at the top.
# - The stored copies are other channels' words: ``clear_channel``, ``clear_summary``,
#   ``clear_user``, a privacy change and the source's expiry remove them from the next
#   request and from the live cache.
# - Every request extends the last: between two turns without a rewrite the request is
#   byte-identical up to the previous turn's user message, however much time passed.
#
# The clock is the testing kit's FrozenClock (2026-01-05 12:00 UTC at the start); every
# header time below is worked out from it.

HEAD = f"{CONTENT_HEADER}\n{FRAMING}\n"
SYSTEM = "You are the expedition's helper."

HERE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="general")
# Each other channel has one speaker of its own (u2 speaks only in #packing).
PACKING = Scope(channel_id="c2", user_id="u2", server_id="g1", channel_name="packing")
ROUTE = Scope(channel_id="c3", user_id="u3", server_id="g1", channel_name="route")

PACKING_KEY = PACKING.live_key  # shortterm:server:g1:c2
ROUTE_KEY = ROUTE.live_key


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()  # 2026-01-05 12:00 UTC


@pytest.fixture
def mem(tmp_path: Path, clock: FrozenClock) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache", clock=clock
    )
    yield memory
    memory.close()


# -- the expected text -------------------------------------------------------------------


def entry(channel: str, at: str, *lines: str) -> str:
    """One briefing as rendered: ``- #channel, <absolute time>:`` and its lines."""
    return "\n".join([f"- #{channel}, {at}:", *(f"  {line}" for line in lines)])


def group(*entries: str) -> str:
    """One group of briefings, a memory block of its own."""
    return HEAD + "Other channels:\n" + "\n".join(entries)


def memory_block(summary: str) -> str:
    return HEAD + f"This channel:\n  {summary}"


# -- driving the channels ----------------------------------------------------------------


def elsewhere(
    mem: ShortTermMemory,
    scope: Scope,
    said: str,
    summary: str | None = None,
    *,
    reply: str = "Noted.",
) -> None:
    """One turn in another channel: its last exchange captured (what that channel's
    caller passes), optionally a new summary."""
    turn = mem.begin_turn(scope, provider="openai", user_message=said)
    mem.capture(scope, [{"role": "user", "content": said}, {"role": "assistant", "content": reply}])
    if summary is not None:
        assert mem.update(turn, {"summary": summary})["status"] == "completed"
    mem.end_turn(turn)


@dataclass
class Sent:
    context: MemoryContext
    request: list[dict[str, Any]]

    @property
    def contents(self) -> list[Any]:
        return [m["content"] for m in self.request]

    def wire(self, count: int | None = None) -> str:
        """The first ``count`` messages as the bytes a client sends."""
        return json.dumps(self.request[:count], ensure_ascii=False)

    def index(self, content: str) -> int:
        return self.contents.index(content)


def wrote_before(mem: ShortTermMemory, scope: Scope) -> None:
    """The channel's model has written its memory before (since cleared): a channel
    whose model never wrote is quiet and is sent no briefing on its own between swaps
    (stm_memory.prompt.quiet; tested below), so the tests of those deliveries run on a
    channel that writes."""
    turn = mem.begin_turn(scope, provider="openai", user_message="-")
    assert mem.update(turn, {"summary": "-"})["status"] == "completed"
    mem.end_turn(turn)
    mem.clear_summary(scope)


class Chat:
    """This channel as a full-history caller drives it: the whole history goes in
    every request (the memory decides what to cut), answers come back as dicts.
    ``writes``: its model has written its memory before (:func:`wrote_before`)."""

    def __init__(self, mem: ShortTermMemory, scope: Scope = HERE, *, writes: bool = True) -> None:
        self.mem = mem
        self.scope = scope
        self.history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        if writes:
            wrote_before(mem, scope)

    def turn(self, said: str, *, update: str | None = None) -> Sent:
        """One turn: the request its first step sends, then (optionally) the memory
        tool's call, the answer, capture and the end of the turn."""
        mem = self.mem
        self.history.append({"role": "user", "content": said})
        turn = mem.begin_turn(self.scope, provider="openai", user_message=said)
        context = mem.build_context(turn)
        sent = Sent(context, context.apply(self.history))
        if update is not None:
            assert mem.update(turn, {"summary": update})["status"] == "completed"
        self.history.append({"role": "assistant", "content": f"Re: {said}"})
        mem.capture(self.scope, self.history)
        mem.end_turn(turn)
        return sent


def stored_copies(mem: ShortTermMemory, key: str = HERE.live_key) -> list[tuple[str, str]]:
    """``(source, text)`` of the copies the channel's live entry keeps."""
    live = mem.get_key(key)
    assert live is not None
    return [(c.source, c.text) for c in live.briefings]


def raw_cache_value(mem: ShortTermMemory, key: str = HERE.live_key) -> dict[str, Any]:
    """The live cache's stored value, read past the engine."""
    value = mem._cache.get(key)
    assert isinstance(value, dict)
    return value


def mentions(sent: Sent, text: str) -> int:
    """How many messages of the request hold ``text``."""
    return sum(text in str(content) for content in sent.contents)


TENTS = entry("packing", "2026-01-05 12:00 UTC", "Packing: tents.")


# -- (a) an unchanged briefing is sent once -----------------------------------------------


def test_an_unchanged_briefing_is_sent_once_and_stays_where_it_was_sent(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem)

    # The channel's first turn: what it is shown forms the stable group at the top.
    first = chat.turn("hi 1")
    assert first.context.briefings == ((-1, group(TENTS)),)
    assert first.contents == [SYSTEM, group(TENTS), "hi 1"]

    clock.advance(minutes=10)
    elsewhere(mem, ROUTE, "Over the pass?", summary="Route: the pass.")  # 12:10
    route = entry("route", "2026-01-05 12:10 UTC", "Route: the pass.")

    # #route is new: it enters once, right after the current user message; #packing,
    # unchanged, is at the top as before (its bytes unchanged, no "10 minutes ago").
    second = chat.turn("hi 2")
    assert second.context.briefings == ((-1, group(TENTS)), (0, group(route)))
    assert second.context.briefing == group(route)
    assert second.contents == [SYSTEM, group(TENTS), "hi 1", "Re: hi 1", "hi 2", group(route)]

    clock.advance(minutes=10)
    # Neither changed: both are where they were first sent, #route after the previous
    # turn's user message, and nothing is sent after the new one.
    third = chat.turn("hi 3")
    assert third.context.briefing is None
    assert third.context.briefings == ((-1, group(TENTS)), (1, group(route)))
    assert third.contents == [
        SYSTEM,
        group(TENTS),
        "hi 1",
        "Re: hi 1",
        "hi 2",
        group(route),
        "Re: hi 2",
        "hi 3",
    ]
    assert mentions(third, "- #packing") == 1 and mentions(third, "- #route") == 1
    # The channel keeps the copies it sent, byte for byte.
    assert stored_copies(mem) == [(PACKING_KEY, TENTS), (ROUTE_KEY, route)]


def test_a_source_turn_the_briefing_does_not_show_sends_nothing_new(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem)
    chat.turn("hi 1")
    clock.advance(minutes=20)
    # #packing talks on without a new summary: in supersede mode (the default) its
    # briefing shows the summary only, so its text, time included, is unchanged.
    elsewhere(mem, PACKING, "Any news on the stoves?")
    second = chat.turn("hi 2")
    assert second.context.briefing is None
    assert second.contents == [SYSTEM, group(TENTS), "hi 1", "Re: hi 1", "hi 2"]


# -- (b) a changed briefing enters once ---------------------------------------------------


def test_a_changed_briefing_enters_once_and_the_old_copy_stays(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", refresh_cadence=100)  # no nudge in these requests
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem)
    chat.turn("hi 1")
    clock.advance(minutes=20)
    elsewhere(mem, PACKING, "And stoves.", summary="Packing: tents, stoves.")  # 12:20
    stoves = entry("packing", "2026-01-05 12:20 UTC", "Packing: tents, stoves.")

    # The change of a source already carried rides this channel's next rewrite: until
    # WAIT_TURNS of its turns have passed, each request extends the last unchanged.
    history = ["hi 1", "Re: hi 1"]
    for n in range(2, WAIT_TURNS + 1):
        waiting = chat.turn(f"hi {n}")
        assert waiting.context.briefings == ((-1, group(TENTS)),)
        assert waiting.contents == [SYSTEM, group(TENTS), *history, f"hi {n}"]
        history += [f"hi {n}", f"Re: hi {n}"]

    # Then it is sent on its own, once, after the current user message. The copy sent
    # before stays where it was (the model reads the newer one by its time).
    n = WAIT_TURNS + 1
    sent = chat.turn(f"hi {n}")
    assert sent.context.briefings == ((-1, group(TENTS)), (0, group(stoves)))
    assert sent.contents == [SYSTEM, group(TENTS), *history, f"hi {n}", group(stoves)]

    clock.advance(minutes=20)
    later = chat.turn(f"hi {n + 1}")
    assert later.contents == [
        SYSTEM,
        group(TENTS),
        *history,
        f"hi {n}",
        group(stoves),
        f"Re: hi {n}",
        f"hi {n + 1}",
    ]
    assert mentions(later, "Packing: tents, stoves.") == 1
    assert stored_copies(mem) == [(PACKING_KEY, TENTS), (PACKING_KEY, stoves)]


# -- (c) a rewrite of this channel's memory starts one stable group ----------------------


def test_after_a_rewrite_the_briefings_shown_form_the_stable_group(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem)
    chat.turn("hi 1")
    clock.advance(minutes=10)
    elsewhere(mem, ROUTE, "Over the pass?", summary="Route: the pass.")  # 12:10
    elsewhere(mem, PACKING, "And stoves.", summary="Packing: tents, stoves.")  # 12:10
    route = entry("route", "2026-01-05 12:10 UTC", "Route: the pass.")
    stoves = entry("packing", "2026-01-05 12:10 UTC", "Packing: tents, stoves.")

    # The turn that rewrites the memory still sends what was planned at its start: the
    # new source at once, the change of #packing (carried) waiting for the rewrite.
    rewriting = chat.turn("hi 2", update="We said hi 1 and 2.")
    assert rewriting.contents == [SYSTEM, group(TENTS), "hi 1", "Re: hi 1", "hi 2", group(route)]

    clock.advance(minutes=10)
    after = chat.turn("hi 3")
    # Now the briefings shown go, as one stable group, right after the memory (one
    # top message); the superseded copy of #packing is gone, and nothing follows the
    # current user message. The dialogue the memory covers is cut (one turn overlap).
    stable = group(stoves, route)
    assert after.context.briefings == ((-1, stable),)
    assert after.context.memory == memory_block("We said hi 1 and 2.")
    assert after.contents == [
        SYSTEM,
        f"{stable}\n\n{memory_block('We said hi 1 and 2.')}",  # what changes least first
        "hi 2",
        "Re: hi 2",
        "hi 3",
    ]
    assert mentions(after, "Packing: tents.") == 0
    assert stored_copies(mem) == [(PACKING_KEY, stoves), (ROUTE_KEY, route)]

    # And the next turn re-sends that top message unchanged.
    clock.advance(minutes=10)
    assert chat.turn("hi 4").contents[:5] == after.contents


# -- (d) every copy of another channel's words is reached --------------------------------

ROUTE_BRIEFING = entry("route", "2026-01-05 12:10 UTC", "Route: the pass.")


def _with_two_copies(mem: ShortTermMemory, clock: FrozenClock) -> Chat:
    """#packing's copy in the stable group (12:00), #route's after "hi 2" (12:10)."""
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")
    chat = Chat(mem)
    chat.turn("hi 1")
    clock.advance(minutes=10)
    elsewhere(mem, ROUTE, "Over the pass?", summary="Route: the pass.")
    second = chat.turn("hi 2")
    assert second.contents == [
        SYSTEM,
        group(TENTS),
        "hi 1",
        "Re: hi 1",
        "hi 2",
        group(ROUTE_BRIEFING),
    ]
    assert stored_copies(mem) == [(PACKING_KEY, TENTS), (ROUTE_KEY, ROUTE_BRIEFING)]
    clock.advance(minutes=10)
    return chat


def _assert_packing_gone_from_the_cache(
    mem: ShortTermMemory, *, left: tuple[str, ...] = ()
) -> None:
    """No copy of #packing in this channel's live entry but ``left`` (the texts of new
    copies made since), neither through the engine nor in the raw cache value."""
    ours = [text for source, text in stored_copies(mem) if source == PACKING_KEY]
    assert ours == list(left)
    raw = raw_cache_value(mem)
    copies = raw.get("briefings") or ()
    assert [c["text"] for c in copies if c["source"] == PACKING_KEY] == list(left)
    assert "Packing: tents." not in json.dumps(raw, ensure_ascii=False)


# What each deletion leaves of #packing for the next request (as a new copy, after
# the current user message): clear_channel nothing; clear_summary its raw turns
# (captured at 12:00); clear_user (u2 spoke only there) nothing: the assistant's reply
# to her turn is hers too.
DELETIONS: dict[str, tuple[Callable[[ShortTermMemory], Any], tuple[str, ...]]] = {
    "clear_channel": (lambda m: m.clear_channel("c2"), ()),
    "clear_summary": (
        lambda m: m.clear_summary(PACKING),
        (
            entry(
                "packing", "2026-01-05 12:00 UTC", 'User: "We need tents."', 'Assistant: "Noted."'
            ),
        ),
    ),
    "clear_user": (lambda m: m.clear_user("u2"), ()),
}


@pytest.mark.parametrize(("delete", "left"), DELETIONS.values(), ids=DELETIONS.keys())
def test_a_deletion_removes_the_copy_from_the_cache_and_the_next_request(
    mem: ShortTermMemory,
    clock: FrozenClock,
    delete: Callable[[ShortTermMemory], Any],
    left: tuple[str, ...],
) -> None:
    chat = _with_two_copies(mem, clock)
    delete(mem)
    # Gone from the live cache at once, before any request; the other copy stays.
    _assert_packing_gone_from_the_cache(mem)
    assert stored_copies(mem) == [(ROUTE_KEY, ROUTE_BRIEFING)]

    third = chat.turn("hi 3")
    assert mentions(third, "Packing: tents.") == 0
    # #route's copy stays where it was sent; what is left of #packing, if anything,
    # is a new briefing.
    assert third.contents == [
        SYSTEM,
        "hi 1",
        "Re: hi 1",
        "hi 2",
        group(ROUTE_BRIEFING),
        "Re: hi 2",
        "hi 3",
        *([group(*left)] if left else []),
    ]
    _assert_packing_gone_from_the_cache(mem, left=left)


def test_making_the_source_private_removes_its_copy(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    chat = _with_two_copies(mem, clock)
    mem.configure_server("g1", private_channel_ids=["c2"])
    _assert_packing_gone_from_the_cache(mem)

    third = chat.turn("hi 3")
    assert mentions(third, "#packing") == 0
    # A privacy change drops the server's copies; what the new rule still shows
    # (#route) enters again as a new copy, after the current user message.
    assert third.contents == [
        SYSTEM,
        "hi 1",
        "Re: hi 1",
        "hi 2",
        "Re: hi 2",
        "hi 3",
        group(ROUTE_BRIEFING),
    ]
    assert stored_copies(mem) == [(ROUTE_KEY, ROUTE_BRIEFING)]
    _assert_packing_gone_from_the_cache(mem)


@pytest.mark.parametrize("janitor", [False, True], ids=["next_turn", "janitor"])
def test_an_expired_source_leaves_the_next_request_and_the_cache(
    mem: ShortTermMemory, clock: FrozenClock, janitor: bool
) -> None:
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00, 24 h TTL
    chat = Chat(mem)
    # Turns every 10 hours keep this channel (raw turns only: 12 h TTL) live.
    assert chat.turn("hi 1").contents == [SYSTEM, group(TENTS), "hi 1"]
    clock.advance(hours=10)  # 22:00
    assert chat.turn("hi 2").contents[1] == group(TENTS)
    clock.advance(hours=10)  # 2026-01-06 08:00: #packing is 20 h old, still live
    assert chat.turn("hi 3").contents[1] == group(TENTS)
    clock.advance(hours=4, minutes=1)  # 12:01: 24 h 1 min since #packing was written
    assert mem.get(PACKING) is None
    assert stored_copies(mem) == [(PACKING_KEY, TENTS)]  # nothing has run yet
    if janitor:
        # The janitor does not wait for the channel's next turn: the copy of a
        # source that expired leaves the cache now.
        mem.run_janitor()
        assert stored_copies(mem) == []
        _assert_packing_gone_from_the_cache(mem)

    fourth = chat.turn("hi 4")
    assert mentions(fourth, "#packing") == 0
    assert fourth.contents == [
        SYSTEM,
        "hi 1",
        "Re: hi 1",
        "hi 2",
        "Re: hi 2",
        "hi 3",
        "Re: hi 3",
        "hi 4",
    ]
    assert stored_copies(mem) == []
    _assert_packing_gone_from_the_cache(mem)


# -- (e) every request extends the last --------------------------------------------------


def test_the_prefix_up_to_the_previous_user_message_is_byte_identical(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    mem.configure_server("g1", refresh_cadence=1)  # a nudge every turn after the first
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")
    chat = Chat(mem)
    chat.turn("hi 0", update="We met.")  # this channel's memory, written once
    chat.turn("hi 1")  # one turn since: the nudge is due from the next one on
    clock.advance(minutes=5)
    elsewhere(mem, ROUTE, "Over the pass?")  # 12:05, raw turns only: its text moves with it
    before = chat.turn("hi 2")
    nudge = before.context.nudge
    assert nudge is not None
    top = f"{group(TENTS)}\n\n{memory_block('We met.')}"  # the briefings before the memory
    route = entry("route", "2026-01-05 12:05 UTC", 'User: "Over the pass?"', 'Assistant: "Noted."')
    assert before.contents == [
        SYSTEM,
        top,
        "hi 0",
        "Re: hi 0",
        "hi 1",
        "Re: hi 1",
        "hi 2",
        group(route),
        nudge,  # this turn's alone
    ]

    # 30 minutes pass; the other channels move on (a new #route turn changes its
    # briefing, #packing writes a new summary): nothing before the new user message
    # moves, and the changes of sources already carried wait (they ride the next
    # rewrite, or go after a user message once WAIT_TURNS have passed).
    clock.advance(minutes=30)
    elsewhere(mem, ROUTE, "Or round the lake?", reply="The lake, then.")  # 12:35
    elsewhere(mem, PACKING, "And stoves.", summary="Packing: tents, stoves.")  # 12:35
    after = chat.turn("hi 3")

    previous = before.index("hi 2")
    assert after.index("hi 2") == previous
    assert after.wire(previous + 1) == before.wire(previous + 1)
    # More: all the previous request sent but its nudge is the next one's prefix.
    kept = len(before.request) - 1
    assert after.wire(kept) == before.wire(kept)
    assert after.contents[kept] == "Re: hi 2"
    # The new user message, then the nudge: the changed briefings wait.
    assert after.contents[kept + 1 :] == ["hi 3", nudge]
    assert after.context.nudge == nudge


# -- the briefing's time: the newest quoted turn -----------------------------------------


def test_a_raw_briefing_that_quotes_a_newer_turn_names_that_turn(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    history: list[dict[str, str]] = []
    for said in ("Over the pass?", "Or round the lake?"):  # at 12:00, then 12:30
        history += [{"role": "user", "content": said}, {"role": "assistant", "content": "Noted."}]
        turn = mem.begin_turn(ROUTE, provider="openai", user_message=said)
        mem.capture(ROUTE, history)
        mem.end_turn(turn)
        if said == "Over the pass?":
            clock.advance(minutes=30)
    built = mem.build_context(mem.begin_turn(HERE, provider="openai"))
    # It quotes the 12:30 turn: what it shows last changed at 12:30, not 12:00 (the
    # header the previous version of this briefing carried).
    assert built.content == group(
        entry(
            "route",
            "2026-01-05 12:30 UTC",
            'User: "Over the pass?"',
            'Assistant: "Noted."',
            'User: "Or round the lake?"',
            'Assistant: "Noted."',
        )
    )


# -- (f) a quiet channel is sent nothing on its own ---------------------------------------


def test_a_channel_whose_model_never_wrote_is_sent_no_briefing_between_swaps(
    mem: ShortTermMemory, clock: FrozenClock
) -> None:
    # SPEC §6 "no regret": what is sent on its own stays in the prompt for good when no
    # swap ever comes, so a channel whose model never wrote gets briefings at swaps only.
    mem.configure_server("g1", refresh_cadence=100)  # no nudge in these requests
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem, writes=False)
    chat.turn("hi 1")
    clock.advance(minutes=20)
    elsewhere(mem, PACKING, "And stoves.", summary="Packing: tents, stoves.")  # 12:20
    elsewhere(mem, ROUTE, "Over the pass?", summary="Route: the pass.")  # 12:20
    history = ["hi 1", "Re: hi 1"]
    # Neither the change (past its wait) nor the new source is sent: every request
    # extends the last.
    for n in range(2, WAIT_TURNS + 4):
        sent = chat.turn(f"hi {n}")
        assert sent.context.briefings == ((-1, group(TENTS)),)
        assert sent.contents == [SYSTEM, group(TENTS), *history, f"hi {n}"]
        history += [f"hi {n}", f"Re: hi {n}"]
    assert stored_copies(mem) == [(PACKING_KEY, TENTS)]

    # Its model writes: the swap that shows the memory brings both, in the stable group.
    n = WAIT_TURNS + 4
    said = "We said hi " + ", ".join(str(i) for i in range(1, n + 1)) + "."  # carries each
    chat.turn(f"hi {n}", update=said)
    after = chat.turn(f"hi {n + 1}")
    top = after.contents[1]
    assert "Packing: tents, stoves." in top and "Route: the pass." in top, top
    assert after.context.memory == memory_block(said)


def test_a_channel_that_stops_writing_goes_quiet(mem: ShortTermMemory, clock: FrozenClock) -> None:
    # It wrote before, then ignores NUDGE_TRIES nudges past the cadence: quiet from then.
    mem.configure_server("g1", refresh_cadence=1)
    elsewhere(mem, PACKING, "We need tents.", summary="Packing: tents.")  # 12:00
    chat = Chat(mem)
    for n in range(1, 1 + 1 + NUDGE_TRIES):  # its turns 1-4: tsr 0-3, not quiet yet
        assert chat.turn(f"hi {n}").context.briefings == ((-1, group(TENTS)),)
    clock.advance(minutes=20)
    elsewhere(mem, PACKING, "And stoves.", summary="Packing: tents, stoves.")  # 12:20
    for n in range(5, 5 + WAIT_TURNS + 2):
        sent = chat.turn(f"hi {n}")
        assert sent.context.briefings == ((-1, group(TENTS)),), n
    assert stored_copies(mem) == [(PACKING_KEY, TENTS)]

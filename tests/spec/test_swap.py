"""The swap rule (SPEC §6, "the bill decides"): when a turn's requests show the newest
written memory and when they hold the form shown before, because swapping would bill more
than holding saves. The rule's table (stm_memory.prompt.swap, pure); the rule on a
provider loop; and the shown form as the turn's end stores it, which one swap wins
between processes and hosts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stm_memory import ConfigurationError, MemoryTurn, Scope, ShortTermMemory, TurnOptions
from stm_memory.config import Limits
from stm_memory.kit import drive
from stm_memory.model import MemoryEntry
from stm_memory.model.changes import counted
from stm_memory.model.erasure import erase_user
from stm_memory.model.rates import CACHE_PROFILES, profile_for
from stm_memory.model.shown import ShownState
from stm_memory.prompt.render import THIS_CHANNEL
from stm_memory.prompt.swap import MAX_HORIZON, SwapInputs, decide
from stm_memory.testing import FrozenClock, OfflineModel, offline_openai_client
from stm_memory.wire.openai_chat import CHAT_WIRE
from stm_memory_openai import OpenAIChatLoop

# ------------------------------------------------------------------------------------
# The swap rule as a table (stm_memory.prompt.swap.decide): when showing the newest
# memory pays, at each provider's rates.

OPENAI = CACHE_PROFILES["openai-gpt-5"]  # 0.1x reads, no write fee, minutes retention
OPENAI_DAY = CACHE_PROFILES["openai-gpt-5-24h"]
ANTHROPIC_5M = CACHE_PROFILES["anthropic-sonnet-5m"]  # writes 1.25x
ANTHROPIC_1H = CACHE_PROFILES["anthropic-sonnet-1h"]  # writes 2x

# A warm channel: asked a minute ago, a form shown for ten turns, an agent-sized
# system prompt ahead of the block (past every minimum cacheable size).
WARM = SwapInputs(
    known=True,
    differs=True,
    held=4_000,
    swapped=1_500,
    before=3_000,
    idle=timedelta(minutes=1),
    age=10,
    budget=64_000,
)


def rule(inputs: SwapInputs, profile: object = OPENAI_DAY) -> tuple[bool, str]:
    decision = decide(inputs, profile)  # type: ignore[arg-type]
    return decision.swap, decision.rule


@pytest.mark.parametrize(
    ("case", "inputs", "profile", "expected"),
    [
        ("nothing stored: the newest", replace(WARM, known=False), OPENAI_DAY, (True, "first")),
        ("nothing newer", replace(WARM, differs=False), OPENAI_DAY, (False, "unchanged")),
        (
            "lapsed: the smallest form",
            replace(WARM, idle=timedelta(minutes=6), held=1_600),
            OPENAI,
            (True, "lapsed"),
        ),
        (
            "a day's retention has not lapsed in six minutes",
            replace(WARM, idle=timedelta(minutes=6), held=1_600),
            OPENAI_DAY,
            (False, "hold"),
        ),
        ("warm and small: hold", replace(WARM, held=1_700), OPENAI_DAY, (False, "hold")),
        ("warm and large: swap", WARM, OPENAI_DAY, (True, "pays")),
        (
            "the budget is reached",
            replace(WARM, held=70_000, swapped=69_000, age=1),
            OPENAI_DAY,
            (True, "budget"),
        ),
        (
            "below the minimum cacheable prefix nothing is cached: the newest",
            replace(WARM, before=100, held=600, swapped=700, age=1),
            OPENAI_DAY,
            (True, "uncached"),
        ),
        (
            "a prefix past the minimum is kept",
            replace(WARM, before=500, held=600, swapped=500, age=1),
            OPENAI_DAY,
            (False, "hold"),
        ),
        ("unknown idle time: the bill alone", replace(WARM, idle=None), OPENAI_DAY, (True, "pays")),
    ],
)
def test_the_decision_table(
    case: str, inputs: SwapInputs, profile: object, expected: tuple[bool, str]
) -> None:
    assert rule(inputs, profile) == expected, case


def test_an_anthropic_write_premium_holds_where_openai_swaps() -> None:
    # The swap writes its suffix to the cache: free at OpenAI, 1.25x at Anthropic (5 m),
    # 2x for the hour's TTL. At a saving between those prices only OpenAI swaps.
    inputs = replace(WARM, held=3_000, swapped=1_500, age=10)
    assert rule(inputs, OPENAI_DAY) == (True, "pays")  # 10*0.1*1500 > 1500 - 300
    assert rule(inputs, replace(ANTHROPIC_5M, ttl=timedelta(hours=1))) == (False, "hold")
    bigger = replace(inputs, held=3_600)
    assert rule(bigger, replace(ANTHROPIC_5M, ttl=timedelta(hours=1))) == (True, "pays")
    assert rule(bigger, ANTHROPIC_1H) == (False, "hold")  # the 2x write of a 1 h TTL


def test_a_one_hour_ttl_keeps_a_prefix_the_five_minute_one_lost() -> None:
    idle = replace(WARM, held=1_700, idle=timedelta(minutes=20))
    assert rule(idle, ANTHROPIC_5M) == (True, "lapsed")
    assert rule(idle, ANTHROPIC_1H) == (False, "hold")


def test_the_horizon_grows_with_the_forms_age_up_to_its_bound() -> None:
    # Young forms hold what old ones swap: a swap right after the last costs its write
    # over too few turns to pay.
    inputs = replace(WARM, held=2_500, swapped=1_500)
    assert rule(replace(inputs, age=1)) == (False, "hold")
    assert rule(replace(inputs, age=MAX_HORIZON)) == (True, "pays")
    capped = decide(replace(inputs, age=10 * MAX_HORIZON), OPENAI_DAY)
    assert capped.saving == decide(replace(inputs, age=MAX_HORIZON), OPENAI_DAY).saving


def test_the_decision_says_its_estimate() -> None:
    decision = decide(WARM, OPENAI_DAY)
    assert (decision.held, decision.swapped) == (4_000, 1_500)
    assert decision.saving == pytest.approx(10 * 0.1 * 2_500)
    assert decision.cost == pytest.approx(1_500 - 0.1 * 4_000)
    assert str(decision).startswith("swap (pays): held 4000 tokens, swapped 1500")


# -- the rates in force ------------------------------------------------------------------


def test_an_unknown_profile_is_a_configuration_error_naming_the_field() -> None:
    with pytest.raises(ConfigurationError, match="cache_profile"):
        Limits(cache_profile="openai-gpt-9")
    assert Limits(cache_profile="anthropic-sonnet-1h").cache_profile == "anthropic-sonnet-1h"
    assert Limits.from_env({"STM_CACHE_PROFILE": "openai-gpt-5-24h"}).cache_profile == (
        "openai-gpt-5-24h"
    )


def test_an_unknown_provider_gets_the_default_rates_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="stm_memory"):
        assert profile_for("my-gateway-7") == CACHE_PROFILES["openai-gpt-5"]
        assert profile_for("my-gateway-7") == CACHE_PROFILES["openai-gpt-5"]
    warned = [r for r in caplog.records if "my-gateway-7" in r.getMessage()]
    assert len(warned) == 1
    assert profile_for("anthropic") == ANTHROPIC_5M
    assert profile_for("anthropic", "anthropic-sonnet-1h") == ANTHROPIC_1H


# ------------------------------------------------------------------------------------
# The bill decides when the prompt changes, through a loop and the real OpenAI SDK
# client (in-process offline server): each turn's TurnResult says what it showed and
# why; a turn after a write holds while swapping does not pay (its request extends the
# last) and swaps once it does; the retention the caller asks for is the one priced.

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="plans")
#: About 1,600 tokens: the prefix is past every minimum cacheable size.
SYSTEM = "You are the planner of a long journey; answer briefly and keep track. " * 90


def said(i: int) -> str:
    return f"Leg {i}: " + " ".join(f"stop{i}x{j}" for j in range(60))


@pytest.fixture
def memory(open_memory: Callable[[], ShortTermMemory]) -> ShortTermMemory:
    mem = open_memory()  # the conftest's: this test's SQLite file, the frozen clock
    mem.configure_server("g1", refresh_cadence=3)
    return mem


def converse(
    loop: OpenAIChatLoop, clock: FrozenClock, turns: int, *, minutes: int = 3
) -> list[Any]:
    history: list[Any] = []
    results = []
    for i in range(turns):
        result = loop.run_turn(
            SCOPE, [*history, {"role": "user", "content": said(i)}], system=SYSTEM
        )
        history = list(result.messages)
        results.append(result)
        clock.advance(minutes=minutes)
    return results


def shows_memory(request: dict[str, Any]) -> bool:
    return any(THIS_CHANNEL in str(m.get("content")) for m in request["messages"])


def test_a_turn_after_a_write_holds_until_swapping_pays(
    memory: ShortTermMemory, stm_clock: FrozenClock
) -> None:
    model = OfflineModel()
    loop = OpenAIChatLoop(
        offline_openai_client(model), memory, model="m", prompt_cache_retention="24h"
    )
    results = converse(loop, stm_clock, 14)
    assert all(r.decision is not None for r in results)
    written = [i for i, r in enumerate(results) if r.stm_updated]
    assert written, "the model never wrote its memory"
    rules = [r.decision.rule for r in results]  # type: ignore[union-attr]
    after = written[0] + 1
    assert rules[after] == "hold", rules  # young form: the swap's write does not pay yet
    held, before = results[after].requests[0], results[after - 1].requests[-1]
    assert not shows_memory(held)
    # The held request extends the last: everything up to the previous user message.
    last_user = max(i for i, m in enumerate(before["messages"]) if m["role"] == "user")
    assert held["messages"][:last_user] == before["messages"][:last_user]
    swaps = [i for i, rule in enumerate(rules) if rule == "pays"]
    assert swaps and swaps[0] > after, rules
    assert shows_memory(results[swaps[0]].requests[0])
    assert str(results[swaps[0]].decision).startswith("swap (pays): held ")


def test_the_retention_asked_for_is_the_one_priced(
    memory: ShortTermMemory, stm_clock: FrozenClock
) -> None:
    # Six minutes apart a channel's prefix outlives OpenAI's in-memory minutes only
    # when the caller asks for the day's retention: without it, the turn after the
    # write finds it lapsed and swaps at once.
    def rules(**options: Any) -> list[str]:
        loop = OpenAIChatLoop(offline_openai_client(), memory, model="m", **options)
        results = converse(loop, stm_clock, 8, minutes=6)
        memory.clear_channel(SCOPE.channel_id)
        return [r.decision.rule for r in results]

    in_memory = rules()
    assert "lapsed" in in_memory and "hold" not in in_memory, in_memory
    kept = rules(prompt_cache_retention="24h")
    assert "lapsed" not in kept and "hold" in kept, kept


# ------------------------------------------------------------------------------------
# The shown state as the turn's end stores it (model/changes.counted): one swap wins
# between processes, an erasure wins over a turn in flight, a lost state stays lost
# until the next request swaps.

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


# ------------------------------------------------------------------------------------
# Written vs shown across two processes (SPEC §6, "the bill decides"): two engines on one
# SQLite file and one diskcache directory — what two worker processes of one host share —
# serve one channel. What the channel's requests show is stored with its live entry, so
# the two agree on it: one swap wins, and the other process then shows that same form
# (its requests extend the winner's), whichever of them serves the next turn.

CREW = Scope(channel_id="c1", user_id="u1", server_id="g1")
CREW_SYSTEM = {"role": "system", "content": "You are the crew's planner."}
SUMMARY = "The crew picked the mill and meets at dawn."
#: Turns long enough that the prompt is past every provider's minimum cacheable prefix
#: (a request below it shows the newest memory at once: nothing cached to keep).
LONG = [f"Turn {i}: " + " ".join(f"word{i}_{j}" for j in range(300)) for i in range(8)]


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def hosts(tmp_path: Path, clock: FrozenClock) -> Iterator[tuple[ShortTermMemory, ShortTermMemory]]:
    def engine() -> ShortTermMemory:
        return ShortTermMemory.from_url(
            f"sqlite:///{tmp_path / 'stm.db'}", cache_dir=tmp_path / "cache", clock=clock
        )

    a, b = engine(), engine()
    yield a, b
    a.close()
    b.close()


class Channel:
    """One channel's transcript, served by whichever engine runs the turn."""

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = [CREW_SYSTEM]

    def begin(self, mem: ShortTermMemory, said: str) -> tuple[MemoryTurn, list[dict[str, Any]]]:
        """Begin a turn on ``mem`` and build its first request (the turn decides, once,
        what it shows)."""
        self.history.append({"role": "user", "content": said})
        turn = drive(
            MemoryTurn.begin(mem, CREW, options=TurnOptions(provider="openai"), user_message=said)
        )
        drive(turn.assemble())
        request = turn.prepare(self.history, wire=CHAT_WIRE).messages
        return turn, request

    def finish(self, turn: MemoryTurn, *, write: str | None = None) -> None:
        if write is not None:
            assert drive(turn.memory_call({"summary": write}))["status"] == "completed"
        start = len(self.history) - 1
        self.history.append({"role": "assistant", "content": "Noted."})
        drive(turn.finish(self.history, start=start))

    def turn(self, mem: ShortTermMemory, said: str, *, write: str | None = None) -> list[Any]:
        turn, request = self.begin(mem, said)
        self.finish(turn, write=write)
        return request


def shows_summary(request: list[dict[str, Any]]) -> bool:
    return any(SUMMARY in str(m["content"]) for m in request)


def prefix_to_previous_user(previous: list[Any], request: list[Any]) -> bool:
    """``request`` sends ``previous`` unchanged up to ``previous``'s last user message."""
    last_user = max(i for i, m in enumerate(previous) if m["role"] == "user")
    return request[: last_user + 1] == previous[: last_user + 1]


def test_the_other_process_shows_the_form_the_first_swapped_to(
    hosts: tuple[ShortTermMemory, ShortTermMemory], clock: FrozenClock
) -> None:
    a, b = hosts
    chat = Channel()
    chat.turn(a, LONG[0])
    chat.turn(b, LONG[1])
    chat.turn(a, LONG[2], write=SUMMARY)  # written on host a, durable at once
    held = chat.turn(b, LONG[3])  # host b holds: the cached prefix is warm
    assert not shows_summary(held)
    clock.advance(hours=2)  # the prefix lapsed: the next turn swaps, on host a
    swapped = chat.turn(a, LONG[4])
    assert shows_summary(swapped)
    # Host b, next, shows the same form: its request extends host a's.
    after = chat.turn(b, LONG[5])
    assert shows_summary(after)
    assert prefix_to_previous_user(swapped, after)
    stored_a, stored_b = a.get(CREW), b.get(CREW)
    assert stored_a is not None and stored_b is not None
    assert stored_a.shown == stored_b.shown


def test_two_turns_in_flight_one_swap_wins(
    hosts: tuple[ShortTermMemory, ShortTermMemory], clock: FrozenClock
) -> None:
    a, b = hosts
    chat = Channel()
    chat.turn(a, LONG[0])
    chat.turn(a, LONG[1], write=SUMMARY)
    clock.advance(hours=2)
    # Both hosts begin a turn of the channel at once (two users of a group channel),
    # each deciding on the same stored form: each swaps to the newest.
    turn_a, request_a = chat.begin(a, LONG[2])
    turn_b, request_b = chat.begin(b, "Me too.")
    assert turn_a.status.decision is not None and turn_a.status.decision.swap
    assert turn_b.status.decision is not None and turn_b.status.decision.swap
    assert shows_summary(request_a) and shows_summary(request_b)
    chat.finish(turn_a)  # host a stores its swap first: it wins
    chat.finish(turn_b)  # host b's was read against a form no longer stored: it counts only
    stored_a, stored_b = a.get(CREW), b.get(CREW)
    assert stored_a is not None and stored_b is not None
    assert stored_a.shown is not None and stored_a.shown == stored_b.shown
    assert stored_a.shown.swap == (
        turn_a.status.context.shown.swap if turn_a.status.context.shown else None
    )
    # The next turn, on either host, holds that one form: no second swap.
    for host in (b, a):
        turn, _request = chat.begin(host, "And then?")
        chat.finish(turn)
        assert turn.status.decision is not None and not turn.status.decision.swap, (
            turn.status.decision
        )


def test_an_entry_point_sending_no_dialogue_of_ours_shows_the_newest(
    memory: ShortTermMemory, stm_clock: FrozenClock
) -> None:
    """A classic buffer reads the memory alone (``assemble(dialogue=False)``): nothing a
    held form would save, so the newest shows, decided at once; a turn whose requests
    carry the dialogue holds at the same moment."""
    loop = OpenAIChatLoop(
        offline_openai_client(OfflineModel()), memory, model="m", prompt_cache_retention="24h"
    )
    history: list[Any] = []
    for i in range(14):
        result = loop.run_turn(
            SCOPE, [*history, {"role": "user", "content": said(i)}], system=SYSTEM
        )
        history = list(result.messages)
        stm_clock.advance(minutes=3)
        if result.stm_updated:
            break
    assert result.stm_updated, "the model never wrote its memory"
    entry = memory.get(SCOPE)
    assert entry is not None and entry.summary
    buffer = drive(MemoryTurn.begin(memory, SCOPE, options=TurnOptions()))
    context = drive(buffer.assemble(dialogue=False))
    status = buffer.status
    assert status.decision is not None and status.decision.rule == "newest"
    assert status.context is context and entry.summary in (context.content or "")
    held = loop.run_turn(SCOPE, [*history, {"role": "user", "content": said(99)}], system=SYSTEM)
    assert held.decision is not None and held.decision.rule == "hold"
    assert not shows_memory(held.requests[0])  # the form shown before: no memory yet

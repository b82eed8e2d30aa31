"""Written vs shown across two processes (SPEC §6, "the bill decides"): two engines on one
SQLite file and one diskcache directory — what two worker processes of one host share —
serve one channel. What the channel's requests show is stored with its live entry, so
the two agree on it: one swap wins, and the other process then shows that same form
(its requests extend the winner's), whichever of them serves the next turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stm_memory import MemoryTurn, Scope, ShortTermMemory, TurnOptions
from stm_memory.kit import drive
from stm_memory.testing import FrozenClock

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SYSTEM = {"role": "system", "content": "You are the crew's planner."}
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
        self.history: list[dict[str, Any]] = [SYSTEM]

    def begin(self, mem: ShortTermMemory, said: str) -> tuple[MemoryTurn, list[dict[str, Any]]]:
        """Begin a turn on ``mem`` and build its first request (the turn decides, once,
        what it shows)."""
        self.history.append({"role": "user", "content": said})
        turn = drive(
            MemoryTurn.begin(mem, SCOPE, options=TurnOptions(provider="openai"), user_message=said)
        )
        drive(turn.assemble())
        request = turn.prepare(self.history, api="openai").messages
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
    stored_a, stored_b = a.get(SCOPE), b.get(SCOPE)
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
    assert turn_a.decision is not None and turn_a.decision.swap
    assert turn_b.decision is not None and turn_b.decision.swap
    assert shows_summary(request_a) and shows_summary(request_b)
    chat.finish(turn_a)  # host a stores its swap first: it wins
    chat.finish(turn_b)  # host b's was read against a form no longer stored: it counts only
    stored_a, stored_b = a.get(SCOPE), b.get(SCOPE)
    assert stored_a is not None and stored_b is not None
    assert stored_a.shown is not None and stored_a.shown == stored_b.shown
    assert stored_a.shown.swap == (turn_a.context.shown.swap if turn_a.context.shown else None)
    # The next turn, on either host, holds that one form: no second swap.
    for host in (b, a):
        turn, _request = chat.begin(host, "And then?")
        chat.finish(turn)
        assert turn.decision is not None and not turn.decision.swap, turn.decision

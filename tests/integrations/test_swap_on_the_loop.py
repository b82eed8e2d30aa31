"""The bill decides when the prompt changes, through a loop and the real OpenAI SDK
client (in-process offline server): each turn's TurnResult says what it showed and
why; a turn after a write holds while swapping does not pay (its request extends the
last) and swaps once it does; the retention the caller asks for is the one priced."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from stm_memory import Scope, ShortTermMemory
from stm_memory.prompt.render import THIS_CHANNEL
from stm_memory.testing import FrozenClock, OfflineModel, offline_openai_client
from stm_memory_openai import OpenAIChatLoop

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

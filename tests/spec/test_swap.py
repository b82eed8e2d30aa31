"""The swap rule (SPEC §6): when a turn's requests show the newest written memory and when
they hold the form shown before, because swapping would bill more than holding saves.
The rule's table (stm_memory.prompt.swap, pure), then the rule on a provider loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from stm_memory import ConfigurationError, Scope, ShortTermMemory
from stm_memory.config import Limits
from stm_memory.model.rates import CACHE_PROFILES, profile_for
from stm_memory.prompt.render import THIS_CHANNEL
from stm_memory.prompt.swap import MAX_HORIZON, SwapInputs, decide
from stm_memory.testing import FrozenClock, OfflineModel, offline_openai_client
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

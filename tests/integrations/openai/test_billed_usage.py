"""Predicted vs billed, through the real OpenAI SDK client, replayed from a cassette
recorded against the local fake provider: a turn whose request extended the last one
within the cache's retention, billed by the provider as a miss (it evicted the prefix
while recording), makes the next decision treat the cache as lapsed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import openai
import pytest
from helpers.memory import refresh

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit.replies import TurnResult
from stm_memory.testing import FrozenClock
from stm_memory_openai import OpenAIChatLoop
from tests.fakeprovider import Script
from tests.integrations.conftest import ModelSource

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SYSTEM = "You plan rail journeys in Japan; answer briefly and keep track of every leg. " * 60


@pytest.mark.vcr
@pytest.mark.scripted("openai")
def test_a_billed_miss_makes_the_next_decision_treat_the_cache_as_lapsed(
    openai_source: ModelSource,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    memory = open_memory()
    loop = OpenAIChatLoop(openai_client, memory, model="gpt-5-mini", prompt_cache_retention="24h")
    history: list[object] = []

    def say(text: str) -> TurnResult:
        openai_script.reply_text(f"Noted: {text}")
        history.append({"role": "user", "content": text})
        result = loop.run_turn(SCOPE, history, system=SYSTEM)
        history[:] = result.messages
        stm_clock.advance(timedelta(minutes=3))
        return result

    for i in range(3):
        warm = say(f"Leg {i}: Kyoto to Nara.")
    assert warm.bill is not None and warm.bill.cached_tokens > 0
    if openai_source.server is not None:  # recording: the provider evicts the prefix
        openai_source.server.evict_caches()
    missed = say("Leg 3: Nara to Osaka.")
    assert missed.decision is not None and missed.decision.rule == "unchanged"
    assert missed.bill is not None and missed.bill.predicted_hit and missed.bill.missed
    # A newer memory: a warm cache would weigh holding the form; a lapsed one swaps.
    refresh(memory, SCOPE, "Ann rides Kyoto, Nara and Osaka by train.")
    after = say("Leg 4: Osaka back to Kyoto.")
    assert after.decision is not None and after.decision.rule == "lapsed"

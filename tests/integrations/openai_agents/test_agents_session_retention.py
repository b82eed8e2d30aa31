"""The Agents SDK session prices the turn's decision of what to show at the cache
retention the agent's model settings ask for (``prompt_cache_retention``), as the loops
and the middleware do: with a day's retention, an hour of quiet has not lapsed the
cached prefix, so a written memory is held (every request extends the last); with the
default in-memory retention of minutes, it has, so the memory shows (the smaller form)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ModelSettings, RunConfig, Runner
from agents.testing import ScriptedModel, assistant_message

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import FrozenClock
from stm_memory_openai_agents import ShortTermMemorySession

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SUMMARY = "The crew picked the mill and meets at dawn."
#: Long enough that the session's prompt is past the 1,024-token minimum a provider
#: caches (below it the newest memory shows at once: nothing cached to keep).
LONG = [f"Line {i}: " + " ".join(f"word{i}_{j}" for j in range(300)) for i in range(4)]


async def last_input_after_an_hour(
    mem: ShortTermMemory, clock: FrozenClock, settings: ModelSettings
) -> str:
    session = ShortTermMemorySession(mem, SCOPE)
    config = RunConfig(tracing_disabled=True)
    model = ScriptedModel([[assistant_message("Noted.")] for _ in LONG])
    agent = session.agent(Agent(name="Mira", model=model, model_settings=settings))
    for line in LONG[:3]:
        await Runner.run(agent, line, session=session, run_config=config)
    # Written by another agent of the app, durable at once; then an hour of quiet.
    turn = mem.begin_turn(SCOPE, provider="openai")
    assert mem.update(turn, {"summary": SUMMARY})["status"] == "completed"
    mem.end_turn(turn)
    clock.advance(hours=1)
    await Runner.run(agent, LONG[3], session=session, run_config=config)
    session.close()
    return json.dumps(model.calls[-1].input, default=str)


@pytest.mark.parametrize(
    ("settings", "shown"),
    [
        (ModelSettings(prompt_cache_retention="24h"), False),
        (ModelSettings(extra_args={"prompt_cache_retention": "24h"}), False),
        (ModelSettings(), True),
    ],
)
async def test_the_agents_retention_prices_what_a_turn_shows(
    stm_memory: ShortTermMemory, fake_clock: FrozenClock, settings: ModelSettings, shown: Any
) -> None:
    sent = await last_input_after_an_hour(stm_memory, fake_clock, settings)
    assert (SUMMARY in sent) is shown, sent[:2000]
    assert LONG[3].split()[1] in sent

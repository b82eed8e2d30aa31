"""Open models behind OpenAI-compatible servers: every request of every entry point that
sends OpenAI-style messages renders under chat templates that take one leading system
message and strict alternation, or keep only the first system message — in the portable
form (``memory_role="inline"``), with the memory and the briefings in what the model sees.

The same requests in the default form (``memory_role="system"``) are refused by the
strict template and lose their memory under the other: the test shows it can fail.

The dialogue: one user in two channels of a server, turn by turn (refresh cadence 2, so
each channel's memory is rewritten by the model when nudged, and each channel is
briefed on the other), through the real entry points on the offline model.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest

from stm_memory.engine import ShortTermMemory
from stm_memory.prompt.render import OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.contract import ScriptedModel, SentRequest, shipped_drivers
from stm_memory.testing.contract.integration import hermetic_memory, speaker

from .rendering import Refused, render

#: The entry points that send OpenAI-style messages (the loops, the middleware, the
#: chain, the Agents SDK session).
OPENAI_STYLE = ("chat-loop", "responses-loop", "middleware", "lcel-history", "agents-session")
SERVER = "guild"
LINES = (
    "The dragon sleeps under the old mill.",
    "Apples are cheap at the market today.",
    "Let us wake the dragon at dawn.",
    "The baker sells rye bread on Fridays.",
    "Bring the lantern and the rope.",
    "The fishmonger is away until Monday.",
    "Who else is coming tomorrow?",
    "Pears are cheaper than apples now.",
    "Then we leave before sunrise.",
    "The market closes early on Sundays.",
)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ShortTermMemory]:
    mem = hermetic_memory(tmp_path)
    mem.configure_server(SERVER, refresh_cadence=2)
    yield mem
    mem.close()


def converse(driver_id: str, memory: ShortTermMemory, role: str) -> list[SentRequest]:
    """The dialogue through one entry point; every request the model received."""
    model = ScriptedModel()
    driver = shipped_drivers()[driver_id](memory, model, memory_role=role)
    with asyncio.Runner() as runner:
        try:
            for i, text in enumerate(LINES):
                scope = speaker("alice", ("lobby", "market")[i % 2])
                result = driver.run_turn(scope, text)
                if inspect.isawaitable(result):
                    runner.run(_awaited(result))
        finally:
            closed = driver.close()
            if inspect.isawaitable(closed):
                runner.run(_awaited(closed))
    return model.requests


async def _awaited(value: object) -> object:
    assert inspect.isawaitable(value)
    return await value


def messages_of(request: SentRequest) -> list[dict[str, str]]:
    return [{"role": role, "content": text} for role, text in request.messages]


def rendered(template: str, request: SentRequest) -> str | None:
    try:
        return render(template, messages_of(request))
    except Refused:
        return None


def memory_kept(prompt: str, request: SentRequest) -> bool:
    """Every memory block the request carries is in the rendered prompt."""
    return all(block in prompt for block in request.memory_blocks())


@pytest.mark.parametrize("driver_id", OPENAI_STYLE)
def test_the_portable_form_renders_with_its_memory(driver_id: str, memory: ShortTermMemory) -> None:
    requests = converse(driver_id, memory, "inline")
    # The dialogue exercised what matters: this channel's memory and a briefing.
    assert any(THIS_CHANNEL in r.text for r in requests), driver_id
    assert any(OTHER_CHANNELS in r.text for r in requests), driver_id
    assert memory.get(speaker("alice", "lobby")).summary  # type: ignore[union-attr]
    for index, request in enumerate(requests):
        strict = rendered("strict", request)
        assert strict is not None, (driver_id, index, request.messages)
        assert memory_kept(strict, request), (driver_id, index)
        first_only = rendered("first_system_only", request)
        assert first_only is not None and memory_kept(first_only, request), (driver_id, index)
        # One leading system message at most, and no message of ours added.
        roles = [role for role, _ in request.messages]
        assert "system" not in roles[1:], (driver_id, index, roles)


@pytest.mark.parametrize("driver_id", OPENAI_STYLE)
def test_the_default_form_is_refused_or_loses_its_memory(
    driver_id: str, memory: ShortTermMemory
) -> None:
    requests = converse(driver_id, memory, "system")
    refused = [i for i, r in enumerate(requests) if rendered("strict", r) is None]
    dropped = [
        i
        for i, r in enumerate(requests)
        if not memory_kept(rendered("first_system_only", r) or "", r)
    ]
    assert refused, f"{driver_id}: the strict template refused none of {len(requests)}"
    assert dropped, f"{driver_id}: the first-system-only template dropped no memory"

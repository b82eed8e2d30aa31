"""A caller that keeps its whole history (``result.messages`` fed back) still sends a
short, valid Messages request: the real ``anthropic`` SDK client, replayed from a
cassette recorded against the local fake provider, whose model is the offline model
(it answers, and calls the memory tool when nudged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors

from stm_memory import Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory_anthropic import AnthropicLoop
from tests.fakeprovider import Script
from tests.fakeprovider.offline import offline_replies
from tests.integrations.conftest import at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


pytestmark = [pytest.mark.vcr, pytest.mark.scripted("anthropic")]

MODEL = "claude-haiku-4-5"
SYSTEM = "You are a co-writer. Answer in one sentence."
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="novel")
TURNS = 32
MAX_TURNS_SENT = 7  # cadence 5 + overlap 1 + the current turn


def test_a_full_history_caller_sends_a_bounded_prompt(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    offline_replies(anthropic_script, "anthropic", turns=TURNS)
    mem = open_memory()
    loop = AnthropicLoop(anthropic_client, mem, model=MODEL, max_tokens=256)
    history: list[Any] = []
    sent_turns = []
    updates = 0
    for i in range(TURNS):
        text = f"Turn {i}: the heroine meets character {i} at the harbour and they argue."
        result = loop.run_turn(SCOPE, [*history, {"role": "user", "content": text}], system=SYSTEM)
        history = list(result.messages)
        updates += result.stm_updated
        for request in result.requests:
            assert validity_errors("anthropic", request["messages"]) == [], i
            assert earlier_memory_calls(request["messages"]) == 0, i
            assert turn_count(request["messages"]) <= MAX_TURNS_SENT, i
        sent_turns.append(turn_count(result.requests[0]["messages"]))

    last = result.requests[0]
    assert len(history) >= 2 * TURNS
    assert len(last["messages"]) < len(history) / 4
    assert updates >= TURNS // 6
    assert max(sent_turns) == MAX_TURNS_SENT and min(sent_turns[6:]) == 2
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary
    # Fresh memory sits near the end of the dialogue; older memory ends the system prompt.
    assert CONTENT_HEADER in str(last.get("system")) or CONTENT_HEADER in str(last["messages"])
    assert entry.summary in str(last)

"""A caller that keeps its whole history (``result.messages`` fed back, as a chat app
does) still sends a short, valid prompt: the memory block, the turns since it was
written, the current turn. Real ``openai`` SDK clients, replayed from cassettes
recorded against the local fake provider, whose model is the offline model (it
answers, and calls the memory tool when nudged)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors

from stm_memory import Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import Script
from tests.fakeprovider.offline import offline_replies
from tests.integrations.conftest import at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


pytestmark = [pytest.mark.vcr, pytest.mark.scripted("openai")]

MODEL = "gpt-4.1-mini"
SYSTEM = "You are a co-writer. Answer in one sentence."
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="novel")
TURNS = 32
# Default cadence 5 + overlap 1 + the current turn: the offline model refreshes when
# nudged, so no request carries more dialogue turns than this.
MAX_TURNS_SENT = 7


def user_text(i: int) -> str:
    return f"Turn {i}: the heroine meets character {i} at the harbour and they argue."


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_full_history_caller_sends_a_bounded_prompt(
    api: str,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    offline_replies(openai_script, api, turns=TURNS)
    mem = open_memory()
    loop_class = OpenAIChatLoop if api == "chat" else OpenAIResponsesLoop
    loop = loop_class(openai_client, mem, model=MODEL)
    key = "messages" if api == "chat" else "input"
    fmt = "openai" if api == "chat" else "responses"
    item: Callable[[int], dict[str, Any]] = (
        (lambda i: {"role": "user", "content": user_text(i)})
        if api == "chat"
        else (lambda i: {"type": "message", "role": "user", "content": user_text(i)})
    )

    history: list[Any] = []
    updates = 0
    sent_turns = []
    for i in range(TURNS):
        result = loop.run_turn(SCOPE, [*history, item(i)], system=SYSTEM)
        history = list(result.messages)
        updates += result.stm_updated
        for request in result.requests:
            items = request[key]
            assert validity_errors(fmt, items) == [], i
            assert earlier_memory_calls(items) == 0, i
            assert turn_count(items) <= MAX_TURNS_SENT, i
        sent_turns.append(turn_count(result.requests[0][key]))

    # The caller kept everything; the requests did not.
    last = result.requests[0][key]
    assert len(history) >= 2 * TURNS
    assert updates >= TURNS // 6
    assert len(last) < len(history) / 4
    assert any(CONTENT_HEADER in str(m.get("content")) for m in last)
    # Between two refreshes the window grows by one turn; a refresh brings it back.
    assert max(sent_turns) == MAX_TURNS_SENT and min(sent_turns[6:]) == 2
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary and entry.summary in str(last)

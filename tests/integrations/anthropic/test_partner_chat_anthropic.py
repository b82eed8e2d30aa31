"""``create_agent`` with LangChain's ``ChatAnthropic`` (langchain-anthropic), the memory
middleware and a checkpointer, over a long thread: the checkpoint keeps every
message, the model request carries only what the memory does not cover. Replayed
from a cassette recorded against the local fake provider (offline model)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from helpers.agents import AgentThread
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

from stm_memory import TOOL_NAME, ShortTermMemory
from tests.fakeprovider import Script
from tests.fakeprovider.offline import offline_replies

pytestmark = [pytest.mark.vcr, pytest.mark.scripted("anthropic")]

TURNS = 30
MAX_TURNS_SENT = 7  # cadence 5 + overlap 1 + the current turn


def text(i: int) -> str:
    return f"Turn {i}: the heroine meets character {i} at the harbour and they argue."


def test_a_checkpointed_thread_sends_a_bounded_prompt_and_keeps_every_message(
    anthropic_source: Any,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    offline_replies(anthropic_script, "anthropic", turns=TURNS)
    model = ChatAnthropic(
        model="claude-haiku-4-5", max_tokens=256, **anthropic_source.client_options()
    )
    thread = AgentThread(model, open_memory(), system_prompt="You are a co-writer.")
    turns = thread.run(TURNS, text)

    for i, prompts in enumerate(turns):
        for prompt in prompts:
            assert validity_errors("langchain", prompt) == [], i
            assert earlier_memory_calls(prompt) == 0, i
            assert turn_count(prompt) <= MAX_TURNS_SENT, i
    state = thread.state_messages()
    # Only the request was cut: the checkpoint holds every user message and every
    # memory call the model made (nothing deleted with RemoveMessage).
    humans = [m.content for m in state if isinstance(m, HumanMessage)]
    assert humans == [text(i) for i in range(TURNS)]
    memory_calls = [
        c for m in state if isinstance(m, AIMessage) for c in m.tool_calls if c["name"] == TOOL_NAME
    ]
    assert len(memory_calls) >= TURNS // 6
    last = turns[-1][0]
    assert count_tokens_approximately(last) < count_tokens_approximately(state) / 3

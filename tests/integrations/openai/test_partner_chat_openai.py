"""``create_agent`` with LangChain's ``ChatOpenAI`` (langchain-openai), the memory
middleware and a checkpointer, over a long thread: the checkpoint keeps every
message, the model request carries only what the memory does not cover. Replayed
from a cassette recorded against the local fake provider (offline model)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from helpers.agents import AgentThread, check_long_thread
from langchain_openai import ChatOpenAI

from stm_memory import ShortTermMemory
from tests.fakeprovider import Script
from tests.fakeprovider.offline import offline_replies
from tests.integrations.conftest import ModelSource, at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


pytestmark = [pytest.mark.vcr, pytest.mark.scripted("openai")]

TURNS = 30


def test_a_checkpointed_thread_sends_a_bounded_prompt_and_keeps_every_message(
    openai_source: ModelSource,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    offline_replies(openai_script, "chat", turns=TURNS)
    model = ChatOpenAI(model="gpt-4.1-mini", **openai_source.chat_openai_options())
    thread = AgentThread(model, open_memory(), system_prompt="You are a co-writer.")
    # cadence 5 + overlap 1 + the current turn
    check_long_thread(thread, turns=TURNS, max_turns_sent=7)

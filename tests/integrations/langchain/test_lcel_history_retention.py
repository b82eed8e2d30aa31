"""The LCEL history prices a turn's decision of what to show at the cache retention the
chain's model asks for (``prompt_cache_retention``, bound to the model or in its
``model_kwargs``), as every entry point does. ``RunnableWithMessageHistory`` reads the
history's view before the model runs, so the history learns the retention from the
wrapper on the turns it ran: with a day's retention an hour of quiet has not lapsed the
cached prefix, and a written memory is held (every request extends the last); with the
default retention of minutes it has, and the memory shows."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing.chat_model import OfflineChatModel
from stm_memory.testing.clock import FrozenClock
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SUMMARY = "The crew picked the mill and meets at dawn."
#: Long enough that the prompt is past the 1,024-token minimum a provider caches (below
#: it the newest memory shows at once: nothing cached to keep).
LONG = [f"Line {i}: " + " ".join(f"word{i}_{j}" for j in range(300)) for i in range(4)]


def last_prompt_after_an_hour(
    mem: ShortTermMemory, clock: FrozenClock, model: Any, chat: OfflineChatModel
) -> str:
    history = ShortTermMemoryHistory(mem, SCOPE, raw=True)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You plan the crew's trips."), MessagesPlaceholder("history"), ("human", "{q}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | with_short_term_memory(model),
        lambda _session: history,
        input_messages_key="q",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "s1"}}
    for line in LONG[:3]:
        chain.invoke({"q": line}, config)
    # Written by another agent of the app, durable at once; then an hour of quiet.
    turn = mem.begin_turn(SCOPE, provider="openai")
    assert mem.update(turn, {"summary": SUMMARY})["status"] == "completed"
    mem.end_turn(turn)
    clock.advance(hours=1)
    chain.invoke({"q": LONG[3]}, config)
    return " ".join(str(m.content) for m in chat.prompts[-1])


@pytest.mark.parametrize(
    ("bound", "kwargs", "shown"),
    [
        ({"prompt_cache_retention": "24h"}, {}, False),
        ({}, {"prompt_cache_retention": "24h"}, False),
        ({}, {}, True),
    ],
)
def test_the_chains_retention_prices_what_a_turn_shows(
    stm_memory: ShortTermMemory,
    stm_clock: FrozenClock,
    bound: dict[str, Any],
    kwargs: dict[str, Any],
    shown: bool,
) -> None:
    chat = OfflineChatModel(model_kwargs=kwargs)
    model = chat.bind(**bound) if bound else chat
    sent = last_prompt_after_an_hour(stm_memory, stm_clock, model, chat)
    assert (SUMMARY in sent) is shown, sent[:2000]
    assert LONG[3].split()[1] in sent

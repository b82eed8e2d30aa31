"""``ShortTermMemoryHistory`` and ``with_short_term_memory`` with the offline chat model
(no provider, no cassette): the record, the memory call in ``add_messages``, the
factory's keys, ``clear``, a chain with an output parser, and the wrapper running the
turn itself without ``RunnableWithMessageHistory``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory import TOOL_NAME, Scope, ShortTermMemory, ValidationError
from stm_memory.render import CONTENT_HEADER
from stm_memory.testing.chat_model import OfflineChatModel
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


def text(i: int) -> str:
    return f"Turn {i}: the heroine meets character {i}."


def memory_call(summary: str, call_id: str = "call_m") -> AIMessage:
    return AIMessage(
        "Noted.", tool_calls=[{"name": TOOL_NAME, "args": {"summary": summary}, "id": call_id}]
    )


def results(record: list[BaseMessage]) -> list[dict[str, Any]]:
    return [json.loads(str(m.content)) for m in record if isinstance(m, ToolMessage)]


def test_add_messages_applies_a_memory_call_and_the_next_view_drops_it(
    stm_memory: ShortTermMemory,
) -> None:
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    assert history.messages == []
    history.add_messages([HumanMessage("The heist is on Friday."), memory_call("Heist: Friday.")])

    assert results(history.record.messages) == [{"status": "completed"}]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."
    assert entry.turns_since_refresh == 0  # the turn that refreshed ends at 0
    view = history.messages
    assert earlier_memory_calls([*view, HumanMessage("next")]) == 0
    assert validity_errors("langchain", view) == []
    assert any(CONTENT_HEADER in m.text and "Heist: Friday." in m.text for m in view)
    assert history.messages == view  # read twice in one turn: the same list


def test_a_plain_chain_without_the_tool_is_never_nudged(stm_memory: ShortTermMemory) -> None:
    model = OfflineChatModel()
    chain = RunnableWithMessageHistory(model, lambda session_id: history)
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    for i in range(8):
        chain.invoke(text(i), {"configurable": {"session_id": "c1"}})
    assert all(TOOL_NAME not in m.text for prompt in model.prompts for m in prompt)
    assert all(names == [] for names in model.tools_seen)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 8
    assert [m.content for m in entry.messages][-2:] == [text(7), "Understood: " + text(7)]


def test_the_factory_builds_the_scope_from_the_configured_keys(
    stm_memory: ShortTermMemory,
) -> None:
    factory = ShortTermMemoryHistory.factory(
        stm_memory, keys=("user_id", "channel_id"), server_id="g1"
    )
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | OfflineChatModel() | StrOutputParser()),
        factory,
        input_messages_key="question",
        history_messages_key="history",
        history_factory_config=factory.config_specs,
    )
    config: Any = {"configurable": {"user_id": "u7", "channel_id": 42}}
    answer = chain.invoke({"question": "Where is the map?"}, config)

    assert answer == "Understood: Where is the map?"
    assert factory("u7", 42) is factory(user_id="u7", channel_id=42)
    entry = stm_memory.get(Scope(channel_id="42", user_id="u7", server_id="g1"))
    assert entry is not None and [m.content for m in entry.messages] == [
        "Where is the map?",
        answer,
    ]
    with pytest.raises(ValidationError):
        ShortTermMemoryHistory.factory(stm_memory, keys=())


def test_clear_empties_the_record_and_forgets_the_channel(stm_memory: ShortTermMemory) -> None:
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    _ = history.messages
    history.add_messages([HumanMessage("The heist is on Friday."), memory_call("Friday.")])
    assert stm_memory.get(SCOPE) is not None
    history.clear()
    assert history.record.messages == [] and stm_memory.get(SCOPE) is None
    assert history.messages == []


async def test_the_wrapper_runs_the_turn_itself_without_a_history(
    stm_memory: ShortTermMemory,
) -> None:
    model = OfflineChatModel()
    chain = with_short_term_memory(model, stm_memory, scope=SCOPE)
    transcript: list[BaseMessage] = []
    for i in range(14):
        sent = [*transcript, HumanMessage(text(i))]
        if i % 2:
            reply = await chain.ainvoke(sent)
        else:
            reply = chain.invoke(sent)
        assert isinstance(reply, AIMessage) and reply.tool_calls == []
        transcript = [*sent, reply]
    prompts = model.prompts
    assert all(turn_count(p) <= 7 and earlier_memory_calls(p) == 0 for p in prompts)
    assert model.model.tool_calls_made == 2
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary and entry.last_refreshed_turn == 2
    assert any(entry.summary in m.text for m in prompts[-1])


def test_with_short_term_memory_needs_a_chat_model() -> None:
    with pytest.raises(ValidationError, match="chat model"):
        with_short_term_memory(StrOutputParser())

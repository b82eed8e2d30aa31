"""LCEL chains with history: ``RunnableWithMessageHistory(prompt | model)`` over
:class:`ShortTermMemoryHistory`, with ``with_short_term_memory`` giving the chat model
the memory tool. LangChain's ``ChatOpenAI`` and ``ChatAnthropic`` against the local
fake provider (offline model), replayed from cassettes; invoke, stream, ainvoke and
astream take turns over one long conversation."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from uuid import UUID

import pytest
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors
from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_openai import ChatOpenAI

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory
from tests.fakeprovider import Reply, Script, ToolCall
from tests.fakeprovider.offline import offline_replies
from tests.integrations.conftest import ModelSource, at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


pytestmark = [
    pytest.mark.vcr,
    # RunnableWithMessageHistory is deprecated in langchain-core >= 1.3.3 (LangGraph's
    # persistence is the recommended path, which the middleware serves); it still works.
    pytest.mark.filterwarnings(
        "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
    ),
]

SYSTEM = "You are a co-writer. Answer in one sentence."
TURNS = 24
# Default cadence 5 + overlap 1 + the current turn.
MAX_TURNS_SENT = 7
# "remember this": neither the tool nor the nudge in that turn, though the nudge is
# due then (every sixth turn at cadence 5: turns 5, 11 …); it comes a turn later.
INTENT_TURN = 11
NUDGED_TURNS = [5, 12, 18]
# Each asserts on scripted replies: skipped when recording against that real API.
PROVIDERS = [pytest.param(p, marks=pytest.mark.scripted(p), id=p) for p in ("openai", "anthropic")]


def user_text(i: int) -> str:
    if i == INTENT_TURN:
        return f"Turn {i}: please remember that the heroine hates the sea."
    return f"Turn {i}: the heroine meets character {i} at the harbour and they argue."


class Prompts(BaseCallbackHandler):
    """Every prompt a chat model was sent, with the names of the tools bound to it."""

    def __init__(self) -> None:
        self.sent: list[tuple[list[BaseMessage], list[str]]] = []
        self.params: list[dict[str, Any]] = []  # the invocation params of each call

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        tools = params.get("tools") or []
        names = [str(t.get("name") or (t.get("function") or {}).get("name")) for t in tools]
        self.sent += [(list(m), names) for m in messages]
        self.params += [params for _ in messages]


def chat_model(provider: str, source: Any) -> BaseChatModel:
    if provider == "openai":
        return ChatOpenAI(model="gpt-4.1-mini", **source.chat_openai_options())
    return ChatAnthropic(model="claude-haiku-4-5", max_tokens=256, **source.client_options())


def script_of(provider: str, openai_source: ModelSource, anthropic_source: Any) -> Script:
    return (openai_source if provider == "openai" else anthropic_source).script


def lcel_chain(model: BaseChatModel, memory: ShortTermMemory) -> tuple[Any, Any]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    factory = ShortTermMemoryHistory.factory(memory, user_id="u1", server_id="g1", raw=True)
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | model),
        factory,
        input_messages_key="input",
        history_messages_key="history",
    )
    return chain, factory


async def say(chain: Any, text: str, config: Any, mode: int) -> tuple[AIMessage, list[Any]]:
    """One turn in one of four ways; returns the output and the streamed chunks."""
    value = {"input": text}
    if mode == 0:
        return chain.invoke(value, config), []
    if mode == 1:
        return await chain.ainvoke(value, config), []
    chunks: list[Any] = []
    if mode == 2:
        chunks = list(chain.stream(value, config))
    else:
        chunks = [c async for c in chain.astream(value, config)]
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total, chunks


def nudged(prompt: list[BaseMessage]) -> bool:
    """The prompt asks the model to call the memory tool (the nudge)."""
    return any(f"call {TOOL_NAME}" in m.text for m in prompt if not isinstance(m, AIMessage))


def memory_results(record: list[BaseMessage]) -> list[dict[str, Any]]:
    return [
        json.loads(str(m.content))
        for m in record
        if isinstance(m, ToolMessage) and m.name == TOOL_NAME
    ]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_lcel_chain_with_history_keeps_a_bounded_prompt(
    provider: str,
    openai_source: ModelSource,
    anthropic_source: Any,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    offline_replies(
        script_of(provider, openai_source, anthropic_source),
        "chat" if provider == "openai" else "anthropic",
        turns=TURNS,
    )
    source = openai_source if provider == "openai" else anthropic_source
    mem = open_memory()
    chain, factory = lcel_chain(chat_model(provider, source), mem)
    prompts = Prompts()
    config: Any = {"configurable": {"session_id": "c1"}, "callbacks": [prompts]}

    first_prompts = []
    nudged_turns: list[int] = []
    for i in range(TURNS):
        before = len(prompts.sent)
        output, chunks = await say(chain, user_text(i), config, i % 4)
        sent = prompts.sent[before:]
        assert sent, i
        first_prompts.append(sent[0])
        # The memory call never reaches the chain's output (nor its streamed chunks).
        assert isinstance(output, AIMessage), i
        assert all(c["name"] != TOOL_NAME for c in output.tool_calls), i
        for chunk in chunks:
            if isinstance(chunk, AIMessageChunk):
                assert all(t.get("name") != TOOL_NAME for t in chunk.tool_call_chunks), i
        assert output.text.strip(), i
        # The tool is offered, except in the turn the user asks to remember something.
        offered = [TOOL_NAME in names for _, names in sent]
        assert offered[0] is (i != INTENT_TURN), i
        # The nudge comes with the tool only.
        if nudged(sent[0][0]):
            nudged_turns.append(i)
            assert offered[0], i
        for messages, _ in sent:
            assert validity_errors("langchain", messages) == [], i
            assert earlier_memory_calls(messages) == 0, i
            # (The nudge skipped in the intent turn: the next turn sends one more.)
            assert turn_count(messages) <= MAX_TURNS_SENT + (i == INTENT_TURN + 1), i

    assert nudged_turns == NUDGED_TURNS
    history = factory("c1")
    record = history.record.messages
    scope = Scope(channel_id="c1", user_id="u1", server_id="g1")
    entry = mem.get(scope)
    # The record keeps everything, memory calls and their results included.
    assert [m.content for m in record if isinstance(m, HumanMessage)] == [
        user_text(i) for i in range(TURNS)
    ]
    results = memory_results(record)
    assert len(results) == len(NUDGED_TURNS)  # the offline model follows each nudge
    assert all(r["status"] == "completed" for r in results)
    # The summary is stored and shown (the next prompt, as the wrapper builds it on the
    # record the raw history returns); the prompt stayed bounded.
    assert entry is not None and entry.summary
    assert history.messages == record
    upcoming = history.model_messages([*history.messages, HumanMessage("What next?")])
    shown = "\n".join(m.text for m in upcoming)
    assert CONTENT_HEADER in shown and entry.summary in shown
    assert max(turn_count(p) for p, _ in first_prompts[INTENT_TURN + 2 :]) == MAX_TURNS_SENT
    last, _ = first_prompts[-1]
    assert len(last) < len(record) / 3
    if provider == "anthropic":
        # Memory goes into user turns there: no system message after the leading ones.
        for messages, _ in first_prompts:
            kinds = [m.type for m in messages]
            lead = next(i for i, k in enumerate(kinds) if k != "system")
            assert "system" not in kinds[lead:], kinds


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_second_update_in_one_turn_fails(
    provider: str,
    openai_source: ModelSource,
    anthropic_source: Any,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    script = script_of(provider, openai_source, anthropic_source)
    script.push(
        Reply(
            text="Noted: the heist is on Friday.",
            tool_calls=(
                ToolCall(TOOL_NAME, {"summary": "The heist is on Friday."}),
                ToolCall(TOOL_NAME, {"summary": "Overwritten."}),
            ),
        )
    )
    source = openai_source if provider == "openai" else anthropic_source
    mem = open_memory()
    chain, factory = lcel_chain(chat_model(provider, source), mem)
    config: Any = {"configurable": {"session_id": "c1"}}

    output, _ = await say(chain, "The heist is on Friday.", config, 0)

    assert output.tool_calls == [] and output.text == "Noted: the heist is on Friday."
    results = memory_results(factory("c1").record.messages)
    assert [r["status"] for r in results] == ["completed", "tool_execution_failed"]
    assert "already updated this turn" in results[1]["reason"]
    entry = mem.get(Scope(channel_id="c1", user_id="u1", server_id="g1"))
    assert entry is not None and entry.summary == "The heist is on Friday."


@pytest.mark.parametrize("mode", [0, 3], ids=["invoke", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_reply_that_only_calls_the_memory_tool_gets_one_more_call(
    provider: str,
    mode: int,
    openai_source: ModelSource,
    anthropic_source: Any,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    script = script_of(provider, openai_source, anthropic_source)
    script.push(Reply(tool_calls=(ToolCall(TOOL_NAME, {"summary": "The heist is on Friday."}),)))
    script.push(Reply(text="Friday it is."))
    source = openai_source if provider == "openai" else anthropic_source
    mem = open_memory()
    chain, factory = lcel_chain(chat_model(provider, source), mem)
    prompts = Prompts()
    config: Any = {"configurable": {"session_id": "c1"}, "callbacks": [prompts]}

    output, _ = await say(chain, "The heist is on Friday.", config, mode)

    assert output.text == "Friday it is." and output.tool_calls == []
    assert len(prompts.sent) == 2
    (first, first_tools), (second, second_tools) = prompts.sent
    assert first_tools == [TOOL_NAME]
    # The second request carries the call and its result and extends the first: the
    # tool list is fixed for the turn, so the memory tool is still offered (a second
    # call would get "already updated this turn"), with no tool_choice switch.
    assert isinstance(second[-2], AIMessage) and second[-2].tool_calls
    assert isinstance(second[-1], ToolMessage)
    assert second[: len(first)] == first
    assert validity_errors("langchain", second) == []
    assert second_tools == first_tools == [TOOL_NAME]
    assert prompts.params[1].get("tool_choice") == prompts.params[0].get("tool_choice")
    assert "tool_choice" not in prompts.params[1]
    record = factory("c1").record.messages
    assert [type(m).__name__ for m in record] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "AIMessage",
    ]
    assert memory_results(record) == [{"status": "completed"}]
    entry = mem.get(Scope(channel_id="c1", user_id="u1", server_id="g1"))
    assert entry is not None and entry.summary == "The heist is on Friday."
    assert entry.turns_since_refresh == 0 and entry.last_refreshed_turn == 1
    assert factory("c1").turn is None


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_one_plain_turn(
    provider: str,
    openai_source: ModelSource,
    anthropic_source: Any,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """Holds whatever the model says, so ``make record-cassettes`` records it from the
    real API."""
    script_of(provider, openai_source, anthropic_source).reply_text("Hello!")
    source = openai_source if provider == "openai" else anthropic_source
    mem = open_memory()
    chain, factory = lcel_chain(chat_model(provider, source), mem)
    prompts = Prompts()
    config: Any = {"configurable": {"session_id": "c1"}, "callbacks": [prompts]}
    output, _ = await say(chain, "Say hello in one word.", config, 0)
    assert output.text.strip() and all(c["name"] != TOOL_NAME for c in output.tool_calls)
    assert TOOL_NAME in prompts.sent[0][1]
    assert [m.type for m in factory("c1").record.messages][:1] == ["human"]
    entry = mem.get(Scope(channel_id="c1", user_id="u1", server_id="g1"))
    assert entry is not None and entry.turns_since_refresh + entry.last_refreshed_turn == 1

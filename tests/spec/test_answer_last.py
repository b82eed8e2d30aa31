"""The answer is the last message (issue "the first hour"): a turn whose reply answered
the user and wrote the memory in the same step ends with that answer, after the memory
call and its result, in every entry point that returns the turn's messages. Apps show
the last message; it is never the memory tool's JSON. A later turn's request sends the
answer once and no earlier memory call (the cut strips those)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers.factory import MemFactory
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.kit import answer_last
from stm_memory.testing import OfflineChatModel, offline_anthropic_client, offline_openai_client
from stm_memory.wire import codec_of
from stm_memory_anthropic import AnthropicLoop
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
TURNS = 9

LOOPS: dict[str, Callable[[ShortTermMemory], Any]] = {
    "chat": lambda m: OpenAIChatLoop(offline_openai_client(), m, model="m"),
    "responses": lambda m: OpenAIResponsesLoop(offline_openai_client(), m, model="m"),
    "anthropic": lambda m: AnthropicLoop(offline_anthropic_client(), m, model="m"),
}


def text_of(message: Any) -> str:
    return codec_of(message).text(message)


@pytest.fixture
def mem(make_mem: MemFactory) -> ShortTermMemory:
    memory = make_mem()
    memory.configure_server("g1", refresh_cadence=2)
    return memory


@pytest.mark.parametrize("name", LOOPS)
def test_a_loops_last_message_is_the_answer(mem: ShortTermMemory, name: str) -> None:
    loop = LOOPS[name](mem)
    history: list[Any] = []
    epilogues, answered = 0, ""
    for i in range(TURNS):
        message: dict[str, Any] = {"role": "user", "content": f"the code is {1000 + i}"}
        if name == "responses":
            message["type"] = "message"
        result = loop.run_turn(SCOPE, [*history, message])
        history = list(result.messages)
        last = history[-1]
        assert codec_of(last).role(last) == "assistant" and text_of(last) == result.text
        assert not codec_of(last).memory_call_ids(last, TOOL_NAME)
        if result.stm_updated and result.steps == 1:
            epilogues += 1
            # The memory call and its result are there, before the answer.
            assert TOOL_NAME in json.dumps(history[-3:-1], default=str)
        if i:
            # The answer of the turn before is sent once, its memory call not at all.
            (first, *_) = result.requests
            sent = json.dumps(first, default=str)
            assert TOOL_NAME + '"' not in sent.split('"tools"')[0]
            assert sent.count(json.dumps(answered)[1:-1]) == 1
        answered = result.text
    assert epilogues  # the model wrote its memory with an answer at least once


def test_the_middlewares_last_message_is_the_answer(mem: ShortTermMemory) -> None:
    agent = create_agent(
        OfflineChatModel(),
        middleware=[ShortTermMemoryMiddleware(mem)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"}}
    wrote = 0
    for i in range(TURNS):
        state = agent.invoke({"messages": [HumanMessage(f"the code is {1000 + i}")]}, config)
        last = state["messages"][-1]
        assert isinstance(last, AIMessage) and not last.tool_calls
        assert str(last.content).endswith(f"the code is {1000 + i}")
        wrote += any(m.type == "tool" for m in state["messages"][-3:])
    assert wrote


@pytest.mark.parametrize(
    "reply",
    [
        # OpenAI Chat: one message with text and the call.
        [
            {
                "role": "assistant",
                "content": "Done.",
                "tool_calls": [{"id": "m1", "type": "function", "function": {"name": TOOL_NAME}}],
            }
        ],
        # Responses: a reasoning item, the message, the call.
        [
            {"type": "reasoning", "id": "r1", "summary": []},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Done."}],
            },
            {"type": "function_call", "call_id": "m1", "name": TOOL_NAME, "arguments": "{}"},
        ],
        # Anthropic: text and tool_use blocks.
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Done."},
                    {"type": "tool_use", "id": "m1", "name": TOOL_NAME, "input": {}},
                ],
            }
        ],
    ],
    ids=["chat", "responses", "anthropic"],
)
def test_what_a_later_cut_keeps_is_the_same_either_way(reply: list[Any]) -> None:
    # answer_last moves the text after the results; stripping the memory calls (what
    # a later turn's cut does) leaves the same messages as from the reply as it came.
    from stm_memory.prompt.cut import strip_memory_calls

    results: list[Any] = [{"role": "tool", "tool_call_id": "m1", "content": "{}"}]
    if reply[-1].get("type") == "function_call":
        results = [{"type": "function_call_output", "call_id": "m1", "output": "{}"}]
    elif "tool_use" in json.dumps(reply):
        results = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "m1"}]}]
    moved = answer_last(reply, results)
    assert text_of(moved[-1]) == "Done."
    assert strip_memory_calls(moved) == strip_memory_calls([*reply, *results])

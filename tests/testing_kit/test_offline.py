"""The offline model (``stm_memory.testing``): the scripted core, the OpenAI / Anthropic
response builders, the in-process SDK clients, the LangChain chat model, and the lazy
exports of ``stm_memory.testing``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import Message
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from openai.types.chat import ChatCompletion

import stm_memory.testing as testing
from stm_memory import TOOL_NAME, Category, Scope, ShortTermMemory
from stm_memory.testing import (
    FrozenClock,
    OfflineChatModel,
    OfflineModel,
    OfflineReply,
    anthropic_message_body,
    assert_memory_contains,
    assert_request_carries_memory,
    assert_tool_offered,
    offline_anthropic_client,
    offline_openai_client,
    openai_chat_body,
)
from stm_memory_anthropic import AnthropicLoop
from stm_memory_openai import OpenAIChatLoop

MakeScope = Callable[..., Scope]
SUMMARY_SCHEMA = {"properties": {"summary": {"type": "string"}}}
NUDGE = f"[Short-term memory] After you answer, call {TOOL_NAME} with a compact summary."


# -- the provider-neutral core ---------------------------------------------------------------


def test_answers_come_from_the_script_then_the_default() -> None:
    model = OfflineModel(answers=["First.", "Second."])
    said = [model.respond([("user", f"Question {i}. Details.")]).text for i in range(3)]
    assert said == ["First.", "Second.", "Understood: Question 2."]
    assert model.calls == 3


def test_answers_may_come_from_a_function() -> None:
    model = OfflineModel(answers=lambda text: text.upper())
    assert model.respond([("system", "sys"), ("user", "hi")]) == OfflineReply("HI")


def test_the_model_updates_memory_only_when_nudged_and_offered() -> None:
    dialogue = [("user", "The heist is on Friday. Bring maps."), ("assistant", "ok")]
    tools = {TOOL_NAME: SUMMARY_SCHEMA}
    model = OfflineModel()
    assert model.respond([*dialogue, ("user", "Who drives?")], tools=tools).tool_calls == ()
    nudged = [*dialogue, ("system", NUDGE), ("user", "Who drives?")]
    assert model.respond(nudged).tool_calls == ()  # not offered
    reply = model.respond(nudged, tools=tools)
    assert reply.text == "Understood: Who drives?"
    assert reply.tool_calls == (
        (TOOL_NAME, {"summary": "Recent conversation: The heist is on Friday. | Who drives?"}),
    )
    assert model.tool_calls_made == 1
    # After the tool ran this turn, the model wraps up without calling it again.
    after = [*nudged, ("assistant", reply.text), ("tool", '{"status": "completed"}')]
    assert model.respond(after, tools=tools).tool_calls == ()


def test_category_mode_fills_every_field() -> None:
    schema: dict[str, Any] = {"properties": {"plot": {}, "open_threads": {}}}
    reply = OfflineModel().respond(
        [("system", NUDGE), ("user", "Mira stole the map.")], tools={TOOL_NAME: schema}
    )
    ((name, args),) = reply.tool_calls
    assert name == TOOL_NAME
    assert args == {
        "plot": "plot: Recent conversation: Mira stole the map.",
        "open_threads": "open threads: Recent conversation: Mira stole the map.",
    }


# -- response bodies ---------------------------------------------------------------------------


def _chat_request(*messages: dict[str, Any], tools: bool = True) -> dict[str, Any]:
    request: dict[str, Any] = {"model": "offline", "messages": list(messages)}
    if tools:
        request["tools"] = [
            {"type": "function", "function": {"name": TOOL_NAME, "parameters": SUMMARY_SCHEMA}}
        ]
    return request


def test_openai_chat_body_is_a_valid_chat_completion() -> None:
    model = OfflineModel(answers=["Sure."])
    body = openai_chat_body(
        model,
        _chat_request({"role": "developer", "content": NUDGE}, {"role": "user", "content": "Hi"}),
    )
    completion = ChatCompletion.model_validate(body)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Sure."
    (call,) = choice.message.tool_calls or []
    assert call.id == "call_1_0"
    assert call.type == "function"
    assert call.function.name == TOOL_NAME
    assert json.loads(call.function.arguments) == {"summary": "Recent conversation: Hi"}
    assert completion.id == "chatcmpl-offline-1"
    # Deterministic: the same request to a fresh model gives the same bytes.
    again = openai_chat_body(
        OfflineModel(answers=["Sure."]),
        _chat_request({"role": "developer", "content": NUDGE}, {"role": "user", "content": "Hi"}),
    )
    assert json.dumps(again) == json.dumps(body)


def test_openai_chat_body_without_a_tool_call_stops() -> None:
    body = openai_chat_body(OfflineModel(), _chat_request({"role": "user", "content": "Hi"}))
    choice = ChatCompletion.model_validate(body).choices[0]
    assert (choice.finish_reason, choice.message.content, choice.message.tool_calls) == (
        "stop",
        "Understood: Hi",
        None,
    )


def test_anthropic_message_body_is_a_valid_message() -> None:
    request = {
        "model": "offline",
        "system": NUDGE,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi there."}]}],
        "tools": [{"name": TOOL_NAME, "input_schema": SUMMARY_SCHEMA}],
    }
    message = Message.model_validate(anthropic_message_body(OfflineModel(), request))
    assert message.stop_reason == "tool_use"
    text, use = message.content
    assert text.type == "text" and text.text == "Understood: Hi there."
    assert use.type == "tool_use" and use.id == "toolu_01_0" and use.name == TOOL_NAME
    assert use.input == {"summary": "Recent conversation: Hi there."}


def test_anthropic_message_body_ends_the_turn_after_a_tool_result() -> None:
    request: dict[str, Any] = {
        "model": "offline",
        "system": NUDGE,
        "messages": [{"role": "user", "content": "Hi there."}],
        "tools": [{"name": TOOL_NAME, "input_schema": SUMMARY_SCHEMA}],
    }
    use = Message.model_validate(anthropic_message_body(OfflineModel(), request)).content[-1]
    assert use.type == "tool_use"
    request["messages"] += [
        {"role": "assistant", "content": [use.model_dump()]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id}]},
    ]
    final = Message.model_validate(anthropic_message_body(OfflineModel(), request))
    assert final.stop_reason == "end_turn"


def test_anthropic_message_body_answers_the_users_words_not_the_memory() -> None:
    memory = "[Short-term memory]\nThis channel:\nThe heist is on Friday."
    request = {
        "model": "offline",
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": memory}, {"type": "text", "text": "Hi."}],
            }
        ],
    }
    message = Message.model_validate(anthropic_message_body(OfflineModel(), request))
    assert message.content[0].type == "text"
    assert message.content[0].text == "Understood: Hi."


# -- in-process SDK clients -----------------------------------------------------------------


def test_the_offline_openai_client_speaks_chat_completions() -> None:
    client = offline_openai_client(OfflineModel(answers=["Hello!"]))
    assert isinstance(client, openai.OpenAI)
    completion = client.chat.completions.create(
        model="offline", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "Hello!"
    with pytest.raises(openai.BadRequestError, match="does not stream"):
        client.chat.completions.create(
            model="offline", messages=[{"role": "user", "content": "hi"}], stream=True
        )
    with pytest.raises(openai.NotFoundError, match="no offline route"):
        client.embeddings.create(model="offline", input="hi")


async def test_the_async_offline_clients() -> None:
    oa = offline_openai_client(OfflineModel(answers=["A"]), is_async=True)
    assert isinstance(oa, openai.AsyncOpenAI)
    completion = await oa.chat.completions.create(
        model="offline", messages=[{"role": "user", "content": "hi"}]
    )
    assert completion.choices[0].message.content == "A"
    an = offline_anthropic_client(OfflineModel(answers=["B"]), is_async=True)
    assert isinstance(an, anthropic.AsyncAnthropic)
    message = await an.messages.create(
        model="offline", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert message.content[0].type == "text" and message.content[0].text == "B"


def test_a_chat_loop_refreshes_memory_offline(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    stm_memory.configure_server("test-server", refresh_cadence=1)
    model = OfflineModel()
    loop = OpenAIChatLoop(offline_openai_client(model), stm_memory, model="offline")
    scope = stm_scope("plot")
    first = loop.run_turn(scope, "The heist is on Friday.")
    assert not first.stm_updated
    second = loop.run_turn(scope, [*first.messages, {"role": "user", "content": "Who drives?"}])
    assert second.stm_updated and model.tool_calls_made == 1
    assert_tool_offered(second.requests[0])
    assert_request_carries_memory(second.requests[0], TOOL_NAME)  # the nudge
    assert_memory_contains(stm_memory, scope, "The heist is on Friday.")
    third = loop.run_turn(stm_scope("lore"), "What is magic made of?")
    assert_request_carries_memory(third, "The heist is on Friday.")


def test_an_anthropic_loop_refreshes_category_memory_offline(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    stm_memory.set_categories("test-server", [Category("Plot"), Category("Mood")])
    stm_memory.configure_server("test-server", refresh_cadence=1)
    loop = AnthropicLoop(offline_anthropic_client(), stm_memory, model="offline")
    scope = stm_scope("plot")
    first = loop.run_turn(scope, [{"role": "user", "content": "Mira stole the map."}])
    messages = [*first.messages, {"role": "user", "content": "Ketch betrays her."}]
    assert loop.run_turn(scope, messages).stm_updated
    entry = assert_memory_contains(stm_memory, scope, "Mira stole the map.", part="categories")
    assert list(entry.categories) == ["plot", "mood"]


# -- the LangChain chat model --------------------------------------------------------------------


def test_the_langchain_model_answers_and_calls_the_bound_tool(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    turn = stm_memory.begin_turn(stm_scope())
    memory_tool = stm_memory.tool(turn)
    assert memory_tool is not None
    chat = OfflineChatModel(model=OfflineModel(answers=["On it."]))
    prompt = [SystemMessage(NUDGE), HumanMessage("The heist is on Friday.")]
    reply = chat.bind_tools([memory_tool]).invoke(prompt)
    assert isinstance(reply, AIMessage)
    assert reply.content == "On it."
    assert reply.tool_calls == [
        {
            "name": TOOL_NAME,
            "args": {"summary": "Recent conversation: The heist is on Friday."},
            "id": "call_1_0",
            "type": "tool_call",
        }
    ]
    assert chat.prompts == [prompt]
    result = memory_tool.invoke(reply.tool_calls[0])
    assert isinstance(result, ToolMessage)
    assert json.loads(str(result.content)) == {"status": "completed"}
    # Unbound, or not nudged: just the answer.
    assert OfflineChatModel().invoke([HumanMessage("hi")]).tool_calls == []


def test_the_langchain_model_streams_tool_calls_intact(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    memory_tool = stm_memory.tool(stm_memory.begin_turn(stm_scope()))
    assert memory_tool is not None
    chat = OfflineChatModel().bind_tools([memory_tool])
    chunks = list(chat.stream([SystemMessage(NUDGE), HumanMessage("Mira stole the map.")]))
    assert len(chunks) == 1
    (call,) = chunks[0].tool_calls
    assert call["name"] == TOOL_NAME
    assert call["args"] == {"summary": "Recent conversation: Mira stole the map."}


def test_the_langchain_model_drives_the_middleware(
    stm_memory: ShortTermMemory, stm_clock: FrozenClock
) -> None:
    from langchain.agents import create_agent
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver

    from stm_memory_langchain import ShortTermMemoryMiddleware

    stm_memory.configure_server("test-server", refresh_cadence=1)
    chat = OfflineChatModel()
    agent = create_agent(
        chat,
        tools=[],
        middleware=[ShortTermMemoryMiddleware(stm_memory)],
        checkpointer=InMemorySaver(),
    )
    context = {"user_id": "alice", "server_id": "test-server", "channel_id": "plot"}
    config: RunnableConfig = {"configurable": {"thread_id": "plot"}}
    for text in ("The heist is on Friday.", "Ketch drives."):
        stm_clock.advance(minutes=2)
        inputs: Any = {"messages": [("user", text)]}
        agent.invoke(inputs, config, context=context)
    scope = Scope(channel_id="plot", user_id="alice", server_id="test-server")
    assert_memory_contains(stm_memory, scope, "Ketch drives.")
    assert_request_carries_memory(chat.prompts[-1], TOOL_NAME)


# -- the package's exports ----------------------------------------------------------------------


def test_exports_are_sorted_and_resolve() -> None:
    assert testing.__all__ == sorted(testing.__all__)
    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
        assert name in dir(testing)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        testing.nope  # noqa: B018


def test_importing_the_kit_needs_no_provider_extras() -> None:
    """Run in a fresh interpreter: nothing optional is imported until it is used."""
    code = textwrap.dedent(
        """
        import sys
        import stm_memory.testing as t
        from stm_memory.testing import FrozenClock, OfflineModel, assert_memory_contains
        heavy = ("openai", "anthropic", "langchain", "langgraph", "httpx2", "vcr")
        assert not [m for m in heavy if m in sys.modules], sorted(sys.modules)
        assert "stm_memory.testing.chat_model" not in sys.modules
        assert "stm_memory.testing.clients" not in sys.modules
        t.OfflineChatModel  # langchain-core only
        assert "openai" not in sys.modules and "langchain" not in sys.modules
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

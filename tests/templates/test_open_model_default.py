"""Open models by default (SPEC §8): ``OpenAIChatLoop`` over an ``openai.OpenAI`` client
and ``ShortTermMemoryMiddleware`` over ``ChatOpenAI``, each pointed at a local
OpenAI-compatible server (the fake provider on loopback, as vLLM or Ollama would be)
with **no form named**, send requests that a strict-alternation chat template renders,
with the memory and the other channel's briefing in the rendered prompt. The same
entry points with ``memory_role="system"`` named are refused: the test can fail.

Live against the local fake server (no cassette: what is asserted is what the server
received, rendered as a server renders it)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.prompt.render import OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.contract.integration import hermetic_memory
from tests.fakeprovider import FakeProviderServer
from tests.fakeprovider.script import Reply, ToolCall

from .rendering import Refused, chat_messages, render

SERVER = "guild"
SUMMARY = "The dragon sleeps under the old mill; they wake it at dawn."
#: (channel, what the user says); the first turn's reply writes the memory.
TURNS = [
    ("lobby", "The dragon sleeps under the old mill."),
    ("market", "Apples are cheap at the market today."),
    ("lobby", "Let us wake the dragon at dawn."),
    ("market", "Pears are cheaper than apples now."),
    ("lobby", "Bring the lantern and the rope."),
]


def scope(channel: str) -> Scope:
    return Scope(channel_id=channel, user_id="alice", server_id=SERVER)


def reply(body: dict[str, Any]) -> Reply:
    return Reply(text="Noted.")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ShortTermMemory]:
    mem = hermetic_memory(tmp_path)
    mem.configure_server(SERVER, refresh_cadence=2)
    yield mem
    mem.close()


@pytest.fixture
def server() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as srv:
        yield srv


def script(server: FakeProviderServer) -> None:
    # Turn 1: the answer and the memory call in one reply (the loop ends the turn
    # there), then plain answers.
    server.script.push(
        Reply(text="Noted.", tool_calls=(ToolCall(TOOL_NAME, {"summary": SUMMARY}),))
    )
    for _ in range(40):
        server.script.reply_with(reply)


def chat_loop_turns(server: FakeProviderServer, memory: ShortTermMemory, **named: Any) -> None:
    from stm_memory_openai import OpenAIChatLoop

    client = openai.OpenAI(base_url=server.openai_base_url, api_key="none", max_retries=0)
    loop = OpenAIChatLoop(client, memory, model="llama-3", **named)
    history: dict[str, list[dict[str, Any]]] = {}
    for channel, text in TURNS:
        said = history.setdefault(channel, [{"role": "system", "content": "You are Quill."}])
        said.append({"role": "user", "content": text})
        result = loop.run_turn(scope(channel), said)
        history[channel] = list(result.messages)
    client.close()


def middleware_turns(server: FakeProviderServer, memory: ShortTermMemory, **named: Any) -> None:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver

    from stm_memory_langchain import ShortTermMemoryMiddleware

    model = ChatOpenAI(
        model="llama-3", base_url=server.openai_base_url, api_key="none", max_retries=0
    )
    agent = create_agent(
        model,
        tools=[],
        system_prompt="You are Quill.",
        middleware=[ShortTermMemoryMiddleware(memory, **named)],
        checkpointer=InMemorySaver(),
    )
    for channel, text in TURNS:
        config: Any = {
            "configurable": {"thread_id": channel, "user_id": "alice", "server_id": SERVER}
        }
        agent.invoke({"messages": [{"role": "user", "content": text}]}, config)


ENTRY_POINTS: dict[str, Callable[..., None]] = {
    "chat-loop": chat_loop_turns,
    "middleware": middleware_turns,
}


def sent(server: FakeProviderServer) -> list[list[dict[str, Any]]]:
    return [r.body["messages"] for r in server.requests_to("/v1/chat/completions")]


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_local_server_gets_the_portable_form_with_no_form_named(
    entry: str, server: FakeProviderServer, memory: ShortTermMemory
) -> None:
    script(server)
    ENTRY_POINTS[entry](server, memory)
    requests = sent(server)
    assert len(requests) >= len(TURNS)
    assert memory.get(scope("lobby")).summary == SUMMARY  # type: ignore[union-attr]
    prompts = []
    for index, messages in enumerate(requests):
        prompt = render("strict", chat_messages(messages))  # raises Refused if refused
        roles = [m["role"] for m in messages]
        assert "system" not in roles[1:], (entry, index, roles)
        prompts.append(prompt)
    # The memory is visible to the model: the lobby's memory in its own later turns,
    # each channel's briefing of the other.
    assert any(THIS_CHANNEL in p and SUMMARY in p for p in prompts[2:]), entry
    assert any(OTHER_CHANNELS in p and "Apples are cheap" in p for p in prompts), entry


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_the_system_form_named_is_refused_there(
    entry: str, server: FakeProviderServer, memory: ShortTermMemory
) -> None:
    script(server)
    ENTRY_POINTS[entry](server, memory, memory_role="system")
    refused = 0
    for messages in sent(server):
        try:
            render("strict", chat_messages(messages))
        except Refused:
            refused += 1
    assert refused, f"{entry}: the strict template refused none of the system-form requests"

"""The portable form (SPEC §8, memory_role="inline"): open models behind OpenAI-compatible
servers render what we send. Which form an entry point writes when the caller names none
(settled by the host); every entry point's requests rendered under strict-alternation and
first-system-only chat templates, with the memory and briefings in what the model sees;
and the open-model default end to end against a local server (the same server name and
memory fixture serve both).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from helpers.chat_templates import Refused, chat_messages, render

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.endpoints import hosts
from stm_memory.kit import TurnOptions, form_for_host, note_endpoint
from stm_memory.prompt.render import OTHER_CHANNELS, THIS_CHANNEL
from stm_memory.testing.contract import ScriptedModel, SentRequest, shipped_drivers
from stm_memory.testing.contract.integration import hermetic_memory, speaker
from stm_memory_anthropic import AnthropicLoop
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import FakeProviderServer
from tests.fakeprovider.script import Reply, ToolCall

# ------------------------------------------------------------------------------------
# The form an OpenAI-style entry point writes is settled by its host when the caller
# names none: the portable form (``memory_role="inline"``) for any host but OpenAI's or
# Azure's, where an open model's chat template may render the request. An entry point
# that places the memory before it sees the host (the LCEL history under the chain
# wrapper) keeps the system form and says so, once.


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hosts, "_warned", set())


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


@pytest.mark.parametrize(
    ("named", "base_url", "form"),
    [
        (None, None, "system"),  # the SDK's default host
        (None, "https://api.openai.com/v1", "system"),
        (None, "https://example.openai.azure.com/openai", "system"),
        (None, "http://offline.invalid/v1", "system"),  # the offline stand-in
        (None, "http://localhost:8000/v1", "inline"),  # vLLM, SGLang, TGI …
        (None, "http://127.0.0.1:11434/v1", "inline"),  # Ollama
        (None, "https://api.together.xyz/v1", "inline"),
        ("system", "http://localhost:8000/v1", "system"),  # the caller named a form
        ("user", "http://localhost:8000/v1", "user"),
        ("inline", "https://api.openai.com/v1", "inline"),
    ],
)
def test_the_host_settles_the_form_unless_one_is_named(
    named: str | None, base_url: str | None, form: str
) -> None:
    assert form_for_host(named, base_url) == form  # type: ignore[arg-type]
    options = TurnOptions(memory_role=named).for_host(base_url)  # type: ignore[arg-type]
    assert options.memory_role == options.form == form


def test_unsettled_options_write_the_system_form() -> None:
    assert TurnOptions().memory_role is None and TurnOptions().form == "system"


@pytest.mark.parametrize("loop_class", [OpenAIChatLoop, OpenAIResponsesLoop])
def test_an_openai_loop_for_a_local_server_writes_the_portable_form(
    tmp_path: Path, loop_class: type[OpenAIChatLoop], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    local = openai.OpenAI(api_key="none", base_url="http://127.0.0.1:9/v1")
    hosted = openai.OpenAI(api_key="none")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        assert loop_class(local, mem, model="llama").memory_role == "inline"
        assert loop_class(local, mem, model="llama", memory_role="system").memory_role == "system"
        assert loop_class(hosted, mem, model="gpt-4.1-mini").memory_role == "system"
    assert warnings_of(caplog) == []  # a default, not a warning


def test_the_anthropic_loop_keeps_its_own_form(tmp_path: Path) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="none", base_url="http://127.0.0.1:9")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        assert AnthropicLoop(client, mem, model="claude").options.form == "system"


def test_a_history_placed_before_the_host_is_known_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="stm_memory")
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:8000/v1", None)
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:8000/v1", None)
    [message] = warnings_of(caplog)
    assert "localhost:8000" in message and "memory_role='inline'" in message
    # Nothing is said where a form was named, or for OpenAI's host.
    note_endpoint("ShortTermMemoryChatModel", "http://localhost:9000/v1", "system")
    note_endpoint("ShortTermMemoryChatModel", "https://api.openai.com/v1", None)
    assert len(warnings_of(caplog)) == 1


def test_a_chain_over_chat_openai_for_a_local_server_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    from stm_memory import Scope
    from stm_memory_langchain import with_short_term_memory

    caplog.set_level(logging.WARNING, logger="stm_memory")
    model = ChatOpenAI(
        model="llama", api_key="none", base_url="http://127.0.0.1:9/v1", max_retries=0
    )
    scope = Scope(channel_id="c1", user_id="u1")
    with ShortTermMemory.from_url(f"sqlite:///{tmp_path / 's.db'}") as mem:
        chain = with_short_term_memory(model, mem, scope=scope)
        with pytest.raises(openai.APIConnectionError):  # nothing listens there
            chain.invoke([HumanMessage("hi")])
    # Once, beside the unknown rates of 'llama' the turn is priced at (as the
    # middleware's is): the wrapper names its model.
    [message] = [m for m in warnings_of(caplog) if "talks to" in m]
    assert "ShortTermMemoryChatModel talks to 127.0.0.1:9" in message


# ------------------------------------------------------------------------------------
# Open models behind OpenAI-compatible servers: every request of every entry point that
# sends OpenAI-style messages renders under chat templates that take one leading system
# message and strict alternation, or keep only the first system message — in the portable
# form (``memory_role="inline"``), with the memory and the briefings in what the model sees.
#
# The same requests in the default form (``memory_role="system"``) are refused by the
# strict template and lose their memory under the other: the test shows it can fail.
#
# The dialogue: one user in two channels of a server, turn by turn (refresh cadence 2, so
# each channel's memory is rewritten by the model when nudged, and each channel is
# briefed on the other), through the real entry points on the offline model.

#: The entry points that send OpenAI-style messages (the loops, the middleware, the
#: chain, the Agents SDK session).
OPENAI_STYLE = ("chat-loop", "responses-loop", "middleware", "lcel-history", "agents-session")
SERVER = "guild"
LINES = (
    "The dragon sleeps under the old mill.",
    "Apples are cheap at the market today.",
    "Let us wake the dragon at dawn.",
    "The baker sells rye bread on Fridays.",
    "Bring the lantern and the rope.",
    "The fishmonger is away until Monday.",
    "Who else is coming tomorrow?",
    "Pears are cheaper than apples now.",
    "Then we leave before sunrise.",
    "The market closes early on Sundays.",
)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ShortTermMemory]:
    mem = hermetic_memory(tmp_path)
    mem.configure_server(SERVER, refresh_cadence=2)
    yield mem
    mem.close()


def converse(driver_id: str, memory: ShortTermMemory, role: str) -> list[SentRequest]:
    """The dialogue through one entry point; every request the model received."""
    model = ScriptedModel()
    driver = shipped_drivers()[driver_id](memory, model, memory_role=role)
    with asyncio.Runner() as runner:
        try:
            for i, text in enumerate(LINES):
                scope = speaker("alice", ("lobby", "market")[i % 2])
                result = driver.run_turn(scope, text)
                if inspect.isawaitable(result):
                    runner.run(_awaited(result))
        finally:
            closed = driver.close()
            if inspect.isawaitable(closed):
                runner.run(_awaited(closed))
    return model.requests


async def _awaited(value: object) -> object:
    assert inspect.isawaitable(value)
    return await value


def messages_of(request: SentRequest) -> list[dict[str, str]]:
    return [{"role": role, "content": text} for role, text in request.messages]


def rendered(template: str, request: SentRequest) -> str | None:
    try:
        return render(template, messages_of(request))
    except Refused:
        return None


def memory_kept(prompt: str, request: SentRequest) -> bool:
    """Every memory block the request carries is in the rendered prompt."""
    return all(block in prompt for block in request.memory_blocks())


@pytest.mark.parametrize("driver_id", OPENAI_STYLE)
def test_the_portable_form_renders_with_its_memory(driver_id: str, memory: ShortTermMemory) -> None:
    requests = converse(driver_id, memory, "inline")
    # The dialogue exercised what matters: this channel's memory and a briefing.
    assert any(THIS_CHANNEL in r.text for r in requests), driver_id
    assert any(OTHER_CHANNELS in r.text for r in requests), driver_id
    assert memory.get(speaker("alice", "lobby")).summary  # type: ignore[union-attr]
    for index, request in enumerate(requests):
        strict = rendered("strict", request)
        assert strict is not None, (driver_id, index, request.messages)
        assert memory_kept(strict, request), (driver_id, index)
        first_only = rendered("first_system_only", request)
        assert first_only is not None and memory_kept(first_only, request), (driver_id, index)
        # One leading system message at most, and no message of ours added.
        roles = [role for role, _ in request.messages]
        assert "system" not in roles[1:], (driver_id, index, roles)


@pytest.mark.parametrize("driver_id", OPENAI_STYLE)
def test_the_default_form_is_refused_or_loses_its_memory(
    driver_id: str, memory: ShortTermMemory
) -> None:
    requests = converse(driver_id, memory, "system")
    refused = [i for i, r in enumerate(requests) if rendered("strict", r) is None]
    dropped = [
        i
        for i, r in enumerate(requests)
        if not memory_kept(rendered("first_system_only", r) or "", r)
    ]
    assert refused, f"{driver_id}: the strict template refused none of {len(requests)}"
    assert dropped, f"{driver_id}: the first-system-only template dropped no memory"


# ------------------------------------------------------------------------------------
# Open models by default (SPEC §8): ``OpenAIChatLoop`` over an ``openai.OpenAI`` client
# and ``ShortTermMemoryMiddleware`` over ``ChatOpenAI``, each pointed at a local
# OpenAI-compatible server (the fake provider on loopback, as vLLM or Ollama would be)
# with **no form named**, send requests that a strict-alternation chat template renders,
# with the memory and the other channel's briefing in the rendered prompt. The same
# entry points with ``memory_role="system"`` named are refused: the test can fail.
#
# Live against the local fake server (no cassette: what is asserted is what the server
# received, rendered as a server renders it).

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

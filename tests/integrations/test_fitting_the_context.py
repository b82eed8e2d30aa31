"""Fit the model's context (issue: "fit the model's context"), through the real SDK
clients, replayed from cassettes recorded against the fake provider:

- the history budget is sized from an OpenAI-compatible server's own model listing
  (the fake server answering like vLLM and like llama.cpp's ``llama-server``);
- a request the provider refuses as longer than the model's context, with that
  provider's exact body, is cut to fit and sent once more, the current turn whole;
- a second refusal surfaces the provider's error unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from langchain.agents import create_agent
from langchain_openai import ChatOpenAI

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit import history_budget
from stm_memory.prompt.cut import earlier_turns, turn_tokens
from stm_memory_anthropic import AnthropicLoop
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import FakeProviderServer
from tests.fakeprovider.script import ExceededKind
from tests.integrations.conftest import (
    REPLAY_BASE_URL,
    AnthropicSource,
    ModelSource,
    record_mode,
)

pytestmark = pytest.mark.vcr

MODEL = "gpt-4.1-mini"
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SYSTEM = "You are Wren. Answer briefly."
CURRENT = "And what did we settle about the posters in the end? Please say it whole."
WINDOW = 4096


def history(turns: int) -> list[dict[str, Any]]:
    """``turns`` earlier turns of about a hundred tokens each, then the current one."""
    out: list[dict[str, Any]] = []
    for i in range(turns):
        out.append({"role": "user", "content": f"Turn {i}: " + "plans for the fair " * 10})
        out.append({"role": "assistant", "content": f"Noted {i}: " + "we will see " * 10})
    return [*out, {"role": "user", "content": CURRENT}]


def earlier_tokens(messages: list[Any]) -> int:
    return sum(turn_tokens(t) for t in earlier_turns(messages)[1])


def sent_messages(request: dict[str, Any]) -> list[Any]:
    return list(request.get("messages") or request.get("input") or [])


@pytest.fixture
def memory(open_memory: Callable[[], ShortTermMemory]) -> ShortTermMemory:
    return open_memory()


# -- the budget from the server's listing ------------------------------------------------


@pytest.fixture(params=["vllm", "llamacpp"])
def open_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str | None]]:
    """``(kind, base_url)``: a server describing its model like vLLM or llama.cpp while
    recording; on replay nothing listens and the cassette answers."""
    kind = str(request.param)
    if record_mode(request.config) == "none":
        yield kind, None
        return
    with FakeProviderServer(models_like=kind, context_window=WINDOW, model_id=MODEL) as server:
        server.script.reply_text("The posters go up on Friday.")
        yield kind, server.openai_base_url


def test_the_history_budget_comes_from_the_servers_listing(
    open_server: tuple[str, str | None], memory: ShortTermMemory
) -> None:
    _kind, base_url = open_server
    client = openai.OpenAI(
        base_url=base_url or f"{REPLAY_BASE_URL}/v1", api_key="test", max_retries=0
    )
    loop = OpenAIChatLoop(client, memory, model=MODEL)
    given = history(60)  # about 6,000 tokens: more than the server's 4,096
    result = loop.run_turn(SCOPE, given, system=SYSTEM)
    assert loop.options.context_window == WINDOW
    (request,) = result.requests  # fitted at once: never refused
    sent = sent_messages(request)
    assert 0 < earlier_tokens(sent) <= history_budget(WINDOW) < earlier_tokens(given)
    assert CURRENT in str(sent[-1]["content"])  # the current turn, whole
    assert result.text == "The posters go up on Friday."


# -- refused anyway: cut to fit, once -----------------------------------------------------

#: Each provider's refusal, with the numbers its body states (None: it states none).
REFUSALS: dict[str, tuple[ExceededKind, int | None]] = {
    "openai": ("openai", 3000),
    "llamacpp": ("llamacpp", 3000),
    "llamacpp-at-its-size": ("llamacpp", None),  # refused at exactly n_ctx
    "vllm": ("vllm", 3000),
    "sglang": ("sglang", 3000),
    "responses": ("openai-responses", None),
    "ollama": ("ollama", None),
}


@pytest.mark.scripted("openai")
@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_request_is_cut_to_fit_and_sent_once_more(
    case: str,
    openai_source: ModelSource,
    memory: ShortTermMemory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kind, limit = REFUSALS[case]
    requested = 5000 if limit else 3000
    openai_source.script.context_exceeded(kind, limit=limit or 3000, requested=requested)
    openai_source.script.reply_text("Friday.")
    loop_class = OpenAIResponsesLoop if kind == "openai-responses" else OpenAIChatLoop
    with openai.OpenAI(**openai_source.openai_options()) as client:
        loop = loop_class(client, memory, model=MODEL)
        given = history(40)
        with caplog.at_level(logging.WARNING, logger="stm_memory"):
            result = loop.run_turn(SCOPE, given, system=SYSTEM)
    first, second = result.requests
    assert earlier_tokens(sent_messages(second)) < earlier_tokens(sent_messages(first))
    if limit:  # fitted to what the error stated, our estimate scaled to the server's
        assert earlier_tokens(sent_messages(second)) <= earlier_tokens(given) * limit / requested
    assert CURRENT in str(sent_messages(second)[-1]["content"])
    assert result.text == "Friday."
    assert any("exceeded the model's context" in r.getMessage() for r in caplog.records)


@pytest.mark.scripted("anthropic")
def test_an_anthropic_refusal_is_cut_to_fit_and_sent_once_more(
    anthropic_source: AnthropicSource, memory: ShortTermMemory
) -> None:
    anthropic_source.script.context_exceeded("anthropic", limit=3000, requested=5000)
    anthropic_source.script.reply_text("Friday.")
    with anthropic.Anthropic(**anthropic_source.client_options()) as client:
        loop = AnthropicLoop(client, memory, model="claude-haiku-4-5")
        given = history(40)
        result = loop.run_turn(SCOPE, given, system=SYSTEM)
    first, second = result.requests
    assert earlier_tokens(second["messages"]) < earlier_tokens(first["messages"])
    assert CURRENT in str(second["messages"][-1]["content"])
    assert result.text == "Friday."


@pytest.mark.scripted("openai")
def test_a_second_refusal_surfaces_the_providers_error_unchanged(
    openai_source: ModelSource, memory: ShortTermMemory
) -> None:
    openai_source.script.context_exceeded("llamacpp", limit=3000, requested=5000)
    openai_source.script.context_exceeded("llamacpp", limit=3000, requested=3100)
    with openai.OpenAI(**openai_source.openai_options()) as client:
        loop = OpenAIChatLoop(client, memory, model=MODEL)
        with pytest.raises(openai.BadRequestError) as raised:
            loop.run_turn(SCOPE, history(40), system=SYSTEM)
    body = raised.value.body
    assert isinstance(body, dict)
    assert body["type"] == "exceed_context_size_error" and body["n_prompt_tokens"] == 3100
    entry = memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 1  # the turn still counted


@pytest.mark.scripted("openai")
def test_a_refusal_with_nothing_left_to_cut_surfaces_at_once(
    openai_source: ModelSource, memory: ShortTermMemory
) -> None:
    # The current turn alone is too long: nothing the memory may drop, no second call.
    openai_source.script.context_exceeded("openai", limit=100, requested=5000)
    with openai.OpenAI(**openai_source.openai_options()) as client:
        loop = OpenAIChatLoop(client, memory, model=MODEL)
        with pytest.raises(openai.BadRequestError) as raised:
            loop.run_turn(SCOPE, [{"role": "user", "content": CURRENT * 40}], system=SYSTEM)
    assert raised.value.code == "context_length_exceeded"


@pytest.mark.scripted("openai")
def test_the_middleware_cuts_a_refused_request_to_fit_and_calls_once_more(
    openai_source: ModelSource, memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    openai_source.script.context_exceeded("openai", limit=3000, requested=5000)
    openai_source.script.reply_text("Friday.")
    chat = ChatOpenAI(model=MODEL, **openai_source.chat_openai_options())
    agent = create_agent(
        model=chat, system_prompt=SYSTEM, middleware=[ShortTermMemoryMiddleware(memory)]
    )
    config = {"configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"}}
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        state = agent.invoke({"messages": history(40)}, config)
    assert state["messages"][-1].text == "Friday."
    assert any("exceeded the model's context" in r.getMessage() for r in caplog.records)

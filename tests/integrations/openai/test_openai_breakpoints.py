"""OpenAI's explicit prompt-cache breakpoints, through the real SDK clients, replayed from
cassettes recorded against the local fake provider (which refuses them from a model
before gpt-5.6, as OpenAI does, and bills gpt-5.6's cache by its rules).

From gpt-5.6 on a cached prefix is matched only where a breakpoint ends it, so the
turn marks the stable part of its prompt: the caller's system prompt and the memory
block. Every request of an older model goes without them (it would be a 400).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai
import pytest
from helpers.memory import refresh

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit.loop import TurnResult
from stm_memory.testing import CACHE_PROFILES, CacheUsage, FrozenClock, PromptCache
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import Script
from tests.integrations.conftest import ModelSource

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="trip")
#: About 1,600 tokens: the caller's prompt alone is past the 1,024-token minimum.
SYSTEM = (
    "You are Trip, a patient travel assistant for rail journeys in Japan. "
    "Answer in one or two sentences, name the train line, and never invent timetables. "
) * 40
SUMMARY = "Ann plans Kyoto in April by train; she asked for quiet temples near Nara."


def marked(message: Any) -> bool:
    content = message.get("content") if isinstance(message, dict) else None
    return isinstance(content, list) and any("prompt_cache_breakpoint" in b for b in content)


def text_of(message: Any) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


def items(request: Any) -> list[Any]:
    return list(request.get("messages") or request.get("input") or [])


def two_turns(loop: Any, api: str, script: Script) -> list[TurnResult]:
    script.reply_text("Take the JR Nara line.").reply_text("The Kintetsu line is quicker.")
    first = loop.run_turn(
        SCOPE, [{"role": "user", "content": "Which line goes to Nara?"}], system=SYSTEM
    )
    again = [*first.messages, {"role": "user", "content": "And a quicker one?"}]
    return [first, loop.run_turn(SCOPE, again, system=SYSTEM)]


@pytest.mark.vcr
@pytest.mark.scripted("openai")
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_gpt56_requests_mark_the_system_prompt_and_the_memory(
    api: str,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    memory = open_memory()
    refresh(memory, SCOPE, SUMMARY)
    loop_cls = OpenAIChatLoop if api == "chat" else OpenAIResponsesLoop
    loop = loop_cls(openai_client, memory, model="gpt-5.6-sol")
    turns = two_turns(loop, api, openai_script)
    requests = [request for result in turns for request in result.requests]
    for request in requests:
        sent = items(request)
        memory_at = next(i for i, m in enumerate(sent) if SUMMARY in text_of(m))
        assert marked(sent[memory_at]), "the memory block ends a cached prefix"
        if api == "chat":
            # The caller's system prompt leads the list (Responses sends it as
            # instructions, which take no breakpoint).
            assert sent[0]["role"] == "system" and marked(sent[0])
        assert sum(marked(m) for m in sent) <= 3
    # The fake provider billed each turn as the gpt-5.6 cache model does: the second
    # turn reads the first one's prefix; writes are reported and billed.
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5.6"])
    wire = "openai_chat" if api == "chat" else "openai_responses"
    for result in turns:
        total = sum(
            (cache.observe(request, api=wire) for request in result.requests), CacheUsage(0)
        )
        assert result.usage.input_tokens == total.input_tokens
        assert result.usage.cached_input_tokens == total.cached_tokens
        assert result.usage.cache_write_tokens == total.cache_write_tokens
    assert turns[0].usage.cache_write_tokens >= 1024
    assert turns[1].usage.cached_input_tokens >= turns[0].usage.input_tokens - 64


@pytest.mark.vcr
@pytest.mark.scripted("openai")
@pytest.mark.parametrize("model", ["gpt-5", "gpt-5.4", "gpt-4.1-mini"])
def test_an_older_model_is_never_sent_a_breakpoint(
    model: str,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    memory = open_memory()
    refresh(memory, SCOPE, SUMMARY)
    loop = OpenAIChatLoop(openai_client, memory, model=model)
    turns = two_turns(loop, "chat", openai_script)
    sent = json.dumps([request for result in turns for request in result.requests])
    assert SUMMARY in sent
    assert "prompt_cache_breakpoint" not in sent
    assert "prompt_cache_options" not in sent


@pytest.mark.vcr
@pytest.mark.scripted("openai")
@pytest.mark.parametrize("model", ["gpt-5.6-sol", "gpt-4.1-mini"])
def test_chat_openai_with_the_middleware_marks_the_stable_prefix_for_gpt56_only(
    model: str,
    openai_source: ModelSource,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    from langchain.agents import create_agent
    from langchain_openai import ChatOpenAI

    from stm_memory_langchain import ShortTermMemoryMiddleware

    memory = open_memory()
    refresh(memory, Scope(channel_id="c1", user_id="u1", server_id="g1"), SUMMARY)
    sent: list[dict[str, Any]] = []
    hooks = {"request": [lambda request: sent.append(json.loads(request.read()))]}
    chat = ChatOpenAI(model=model, **openai_source.openai_options(event_hooks=hooks))
    agent = create_agent(
        chat, tools=[], system_prompt=SYSTEM, middleware=[ShortTermMemoryMiddleware(memory)]
    )
    config: Any = {"configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"}}
    openai_script.reply_text("Take the JR Nara line.").reply_text("The Kintetsu line.")
    reported = 0
    for text in ("Which line goes to Nara?", "And a quicker one?"):
        state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        reported += state["messages"][-1].usage_metadata["input_tokens"]
    assert len(sent) == 2
    # The middleware read the usage the API reported: the turns' bills, in the receipt.
    entry = memory.get(Scope(channel_id="c1", user_id="u1", server_id="g1"))
    assert entry is not None
    day = next(iter(entry.receipt.values()))
    assert (day.turns, day.input_tokens) == (2, reported)
    for body in sent:
        messages = items(body)
        memory_at = next(i for i, m in enumerate(messages) if SUMMARY in text_of(m))
        if model.startswith("gpt-5.6"):
            assert marked(messages[0]) and messages[0]["role"] == "system"
            assert marked(messages[memory_at])
        else:
            assert not any(marked(m) for m in messages)

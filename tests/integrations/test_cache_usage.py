"""Prompt-cache usage through the real SDK clients: a turn that repeats a long prefix
reports cached input in ``TurnResult.usage``, summed over the turn's steps.

The cassettes were recorded from the fake provider, whose usage comes from
:class:`stm_memory.testing.PromptCache` (the providers' documented caching rules); the
same model replayed over the requests a loop sent gives the numbers to expect. The
tests are scripted: a real API counts tokens with its own tokenizer. The last tests use
the in-process offline clients, which report usage from the same model (no cassette).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import anthropic
import openai
import pytest

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit.loop import TurnResult, Usage
from stm_memory.testing import (
    CACHE_PROFILES,
    CacheUsage,
    FrozenClock,
    PromptCache,
    offline_anthropic_client,
    offline_openai_client,
)
from stm_memory_anthropic import AnthropicLoop
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import Script
from tests.integrations.conftest import AnthropicSource

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="trip")
#: About 1,600 tokens at four characters a token: above every 1024-token minimum.
SYSTEM = (
    "You are Trip, a patient travel assistant for rail journeys in Japan. "
    "Answer in one or two sentences, name the train line, and never invent timetables. "
) * 40
CACHED_SYSTEM = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
WEATHER = {"city": "Kyoto", "forecast": "sunny", "celsius": 18}


def weather_tool(api: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    if api == "anthropic":
        return {"name": "get_weather", "description": "Weather now.", "input_schema": schema}
    function = {"name": "get_weather", "description": "Weather now.", "parameters": schema}
    if api == "chat":
        return {"type": "function", "function": function}
    return {"type": "function", **function}


def user(text: str, api: str) -> dict[str, Any]:
    message = {"role": "user", "content": text}
    return {**message, "type": "message"} if api == "responses" else message


def two_turns(loop: Any, api: str, script: Script, system: Any) -> tuple[TurnResult, TurnResult]:
    """Turn 1 asks for the weather (a tool call, then the answer: two steps); turn 2
    repeats the system prompt and the first turn."""
    script.reply_tool_call("get_weather", {"city": "Kyoto"}).reply_text("Sunny, 18 C in Kyoto.")
    script.reply_text("Take the JR Nara line from Kyoto station.")
    options = {
        "system": system,
        "tools": [weather_tool(api)],
        "tool_handlers": {"get_weather": lambda args: WEATHER},
    }
    first = loop.run_turn(SCOPE, [user("What's the weather in Kyoto?", api)], **options)
    second = loop.run_turn(
        SCOPE, [*first.messages, user("How do I get to Nara from there?", api)], **options
    )
    return first, second


def expected(profile: str, api: str, turns: Sequence[TurnResult]) -> list[CacheUsage]:
    """Each turn's usage as the cache model prices the requests the loop sent, in order."""
    cache = PromptCache(CACHE_PROFILES[profile])
    out = []
    for turn in turns:
        total = CacheUsage(0)
        for request in turn.requests:
            total = total + cache.observe(request, api=api)
        out.append(total)
    return out


def assert_usage_matches(usage: Usage, cache: CacheUsage) -> None:
    assert usage.input_tokens == cache.input_tokens
    assert usage.cached_input_tokens == cache.cached_tokens
    assert usage.cache_write_tokens == cache.cache_write_tokens


@pytest.fixture
def anthropic_client(anthropic_source: AnthropicSource) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(**anthropic_source.client_options()) as client:
        yield client


# -- through the SDKs, replayed from cassettes -------------------------------------------


@pytest.mark.vcr
@pytest.mark.scripted("openai")
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_turns_report_the_cached_prefix(
    api: str,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    loop_cls = OpenAIChatLoop if api == "chat" else OpenAIResponsesLoop
    loop = loop_cls(openai_client, open_memory(), model="gpt-5-mini")
    first, second = two_turns(loop, api, openai_script, SYSTEM)
    assert first.steps == 2
    # Step 2 of turn 1 repeats step 1's prompt; turn 2 repeats turn 1's.
    assert first.usage.cached_input_tokens >= 1024
    assert second.usage.cached_input_tokens >= 1024
    assert second.usage.cached_input_tokens % 128 == 0
    assert second.usage.input_tokens > second.usage.cached_input_tokens
    assert (first.usage.cache_write_tokens, second.usage.cache_write_tokens) == (0, 0)
    # TurnResult.usage sums the steps' usage, as the provider reported it.
    wire_api = "openai_chat" if api == "chat" else "openai_responses"
    for result, cache in zip(
        (first, second), expected("openai-gpt-5", wire_api, [first, second]), strict=True
    ):
        assert_usage_matches(result.usage, cache)


@pytest.mark.vcr
@pytest.mark.scripted("anthropic")
def test_anthropic_turns_read_and_write_at_the_callers_breakpoint(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    loop = AnthropicLoop(anthropic_client, open_memory(), model="claude-sonnet-4-5")
    first, second = two_turns(loop, "anthropic", anthropic_script, CACHED_SYSTEM)
    assert first.steps == 2
    # The first request writes the system prompt (and what the loop marks after it);
    # later requests read it.
    assert first.usage.cache_write_tokens >= 1024
    assert second.usage.cached_input_tokens >= 1024
    # input_tokens is the whole input: plain + read + written.
    for result in (first, second):
        usage = result.usage
        assert usage.input_tokens >= usage.cached_input_tokens + usage.cache_write_tokens
    for result, cache in zip(
        (first, second), expected("anthropic-sonnet-5m", "anthropic", [first, second]), strict=True
    ):
        assert_usage_matches(result.usage, cache)


# -- the offline clients (in-process, no cassette) ---------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_offline_clients_report_the_cached_prefix(
    api: str, open_memory: Callable[[], ShortTermMemory]
) -> None:
    memory = open_memory()
    if api == "anthropic":
        loop: Any = AnthropicLoop(offline_anthropic_client(), memory, model="claude-sonnet-4-5")
        system: Any = CACHED_SYSTEM
    else:
        loop_cls = OpenAIChatLoop if api == "chat" else OpenAIResponsesLoop
        loop = loop_cls(offline_openai_client(), memory, model="gpt-5-mini")
        system = SYSTEM
    first = loop.run_turn(SCOPE, [user("Hi, I am planning Kyoto.", api)], system=system)
    second = loop.run_turn(
        SCOPE, [*first.messages, user("Which line goes to Nara?", api)], system=system
    )
    assert first.usage.cached_input_tokens == 0
    assert second.usage.cached_input_tokens >= 1024
    if api == "anthropic":
        assert first.usage.cache_write_tokens >= 1024
    profile = "anthropic-sonnet-5m" if api == "anthropic" else "openai-gpt-5"
    wire_api = {"chat": "openai_chat", "responses": "openai_responses"}.get(api, api)
    for result, cache in zip(
        (first, second), expected(profile, wire_api, [first, second]), strict=True
    ):
        assert_usage_matches(result.usage, cache)


def test_offline_clients_take_a_cache_profile() -> None:
    client = offline_anthropic_client(cache_profile="anthropic-haiku-5m")
    body: dict[str, Any] = {
        "model": "claude-haiku-3-5",
        "max_tokens": 50,
        "system": CACHED_SYSTEM,
        "messages": [{"role": "user", "content": "hi"}],
    }
    for _ in range(2):  # ~1,600 tokens: below Haiku 3.5's 2,048
        usage = client.messages.create(**body).usage
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)
    with pytest.raises(ValueError, match="cache_profile"):
        offline_openai_client(cache_profile="anthropic-sonnet-5m")


def test_offline_anthropic_client_refuses_five_breakpoints() -> None:
    marked = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
        for i in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks"):
        offline_anthropic_client().messages.create(
            model="claude-sonnet-4-5",
            max_tokens=50,
            system=marked,
            messages=[{"role": "user", "content": "hi"}],
        )

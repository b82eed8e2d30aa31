"""The prompt-cache model against the providers' documented rules
(``stm_memory.testing.prompt_cache``; sources in its module docstring)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from stm_memory.testing import (
    CACHE_PROFILES,
    CacheUsage,
    PromptCache,
    count_text_tokens,
    detect_api,
    request_parts,
)

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
CC = {"type": "ephemeral"}
CC_1H = {"type": "ephemeral", "ttl": "1h"}


def text_of(tokens: int, wrapper_chars: int, fill: str = "s") -> str:
    """A text whose part (JSON with ``wrapper_chars`` around it) is exactly ``tokens``."""
    return fill * (4 * tokens - wrapper_chars)


# -- OpenAI ------------------------------------------------------------------------------

# '{"content": "' + text + '", "role": "system"}'
SYSTEM_WRAPPER = 33


def chat(system_tokens: int, user: str, **extra: Any) -> dict[str, Any]:
    system = text_of(system_tokens, SYSTEM_WRAPPER)
    return {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ],
        **extra,
    }


def test_count_tokens_is_four_characters_rounded_up() -> None:
    assert [count_text_tokens(t) for t in ("", "a", "abcd", "abcde", "é" * 8)] == [0, 1, 1, 2, 2]


def test_chat_parts_are_the_tools_then_each_message() -> None:
    body = chat(300, "hi", tools=[{"type": "function", "function": {"name": "f"}}])
    parts = request_parts(body, provider="openai_chat")
    assert len(parts) == 3
    assert parts[1].tokens == 300
    assert parts[0].text.startswith('[{"function"')  # one part, keys sorted


def test_responses_parts_are_tools_instructions_then_items() -> None:
    body = {"model": "gpt-5", "tools": [{"name": "f"}], "instructions": "Be brief.", "input": "hi"}
    parts = request_parts(body, provider="openai_responses")
    assert [p.text for p in parts] == [
        '[{"name": "f"}]',
        '"Be brief."',
        '{"content": "hi", "role": "user"}',
    ]


@pytest.mark.parametrize(
    ("system_tokens", "cached"),
    [
        # the shared prefix is the system part plus '{"content": "' of the user message
        # (13 characters = 3 tokens): counted from 1024 on, in steps of 128
        (900, 0),
        (1020, 0),  # 1023 shared
        (1021, 1024),
        (1151, 1152),  # 1154 shared
        (1300, 1280),
        (2000, 1920),
    ],
)
def test_openai_counts_from_1024_tokens_in_steps_of_128(system_tokens: int, cached: int) -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    first = cache.observe(chat(system_tokens, "a question"), at=T0)
    second = cache.observe(chat(system_tokens, "another"), at=T0 + timedelta(seconds=1))
    assert first.cached_tokens == 0
    assert (second.cached_tokens, second.cache_write_tokens) == (cached, 0)
    assert second.input_tokens == sum(
        p.tokens for p in request_parts(chat(system_tokens, "another"))
    )


def test_openai_an_identical_prompt_is_cached_up_to_its_last_whole_step() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    body = chat(1500, "same")
    first, second = cache.observe(body, at=T0), cache.observe(body, at=T0)
    assert first.input_tokens == second.input_tokens
    assert second.cached_tokens == first.input_tokens // 128 * 128


def test_openai_a_changed_first_message_caches_nothing() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    cache.observe(chat(2000, "q"), at=T0)
    other = chat(2000, "q")
    other["messages"][0]["content"] = "X" + other["messages"][0]["content"][1:]
    assert cache.observe(other, at=T0).cached_tokens == 0


@pytest.mark.parametrize(
    ("profile", "extra", "later", "hit"),
    [
        ("openai-gpt-5", {}, timedelta(minutes=4, seconds=59), True),
        ("openai-gpt-5", {}, timedelta(minutes=5), False),
        ("openai-gpt-5-24h", {}, timedelta(hours=23), True),
        ("openai-gpt-5-24h", {}, timedelta(hours=24), False),
        ("openai-gpt-4.1", {"prompt_cache_retention": "24h"}, timedelta(hours=23), True),
        ("openai-gpt-4.1-24h", {"prompt_cache_retention": "in_memory"}, timedelta(hours=1), False),
    ],
)
def test_openai_entries_expire_after_their_retention(
    profile: str, extra: dict[str, Any], later: timedelta, hit: bool
) -> None:
    cache = PromptCache(CACHE_PROFILES[profile])
    cache.observe(chat(1500, "a", **extra), at=T0)
    second = cache.observe(chat(1500, "b", **extra), at=T0 + later)
    assert (second.cached_tokens > 0) is hit


def test_openai_a_read_refreshes_the_prefix() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    cache.observe(chat(1500, "a"), at=T0)
    assert cache.observe(chat(1500, "b"), at=T0 + timedelta(minutes=4)).cached_tokens
    assert cache.observe(chat(1500, "c"), at=T0 + timedelta(minutes=8)).cached_tokens


def test_openai_prices_cached_input_per_model() -> None:
    usage = CacheUsage(2000, 1024, 0)
    assert usage.uncached_tokens == 976
    assert usage.cost(CACHE_PROFILES["openai-gpt-5"]) == pytest.approx(976 + 102.4)
    assert usage.cost(CACHE_PROFILES["openai-gpt-4.1"], output_tokens=10) == pytest.approx(
        976 + 256 + 40
    )


def test_without_a_clock_requests_follow_each_other_at_once() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    cache.observe(chat(1500, "a"))
    assert cache.observe(chat(1500, "b")).cached_tokens == 1408


def test_caches_are_per_model() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5"])
    cache.observe(chat(1500, "a"), at=T0)
    assert cache.observe({**chat(1500, "b"), "model": "gpt-5-mini"}, at=T0).cached_tokens == 0


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        PromptCache(CACHE_PROFILES["openai-gpt-5"]).observe(chat(10, "a"), at=datetime(2026, 1, 1))


# -- Anthropic ---------------------------------------------------------------------------

# '{"text": "' + text + '", "type": "text"}'
BLOCK_WRAPPER = 28


def block(tokens: int, cache_control: dict[str, Any] | None = None, fill: str = "s") -> Any:
    out: dict[str, Any] = {"type": "text", "text": text_of(tokens, BLOCK_WRAPPER, fill)}
    if cache_control is not None:
        out["cache_control"] = cache_control
    return out


def messages_body(system: list[Any], *messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": system, **extra} | {
        "messages": list(messages)
    }


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def sonnet() -> PromptCache:
    return PromptCache(CACHE_PROFILES["anthropic-sonnet-5m"])


def total(body: dict[str, Any]) -> int:
    return sum(p.tokens for p in request_parts(body, provider="anthropic"))


def test_anthropic_parts_strip_cache_control_and_fold_the_role_into_the_first_block() -> None:
    body = messages_body([block(10, CC)], user([block(50), block(50, CC)]), cache_control=CC)
    parts = request_parts(body, provider="anthropic")
    assert [p.cache_ttl for p in parts] == ["5m", None, "5m"]
    # the first block of a message: '{"content": ' + block + ', "role": "user"}' (+29 chars)
    assert [p.tokens for p in parts] == [10, 58, 50]
    assert "cache_control" not in "".join(p.text for p in parts)
    string_form = request_parts({"system": "hi", "messages": [user("yo")]}, provider="anthropic")
    assert [p.text for p in string_form] == [
        '{"text": "hi", "type": "text"}',
        '{"content": {"text": "yo", "type": "text"}, "role": "user"}',
    ]


def test_anthropic_splits_read_write_and_plain_input_at_the_breakpoint() -> None:
    cache = sonnet()
    first = cache.observe(messages_body([block(1500, CC)], user("What now?")), at=T0)
    assert (first.cached_tokens, first.cache_write_tokens) == (0, 1500)
    assert first.uncached_tokens == first.input_tokens - 1500 > 0
    second = cache.observe(messages_body([block(1500, CC)], user("And then?")), at=T0)
    assert (second.cached_tokens, second.cache_write_tokens) == (1500, 0)
    assert second.uncached_tokens == second.input_tokens - 1500


def test_anthropic_reads_the_old_breakpoint_and_writes_up_to_the_new_one() -> None:
    cache = sonnet()
    turn1 = [user([block(100, CC)])]
    cache.observe(messages_body([block(1500, CC)], *turn1), at=T0)
    turn2 = [
        user([block(100)]),
        {"role": "assistant", "content": "Sure."},
        user([block(50, CC)]),
    ]
    body = messages_body([block(1500, CC)], *turn2)
    usage = cache.observe(body, at=T0)
    first_turn = total(messages_body([block(1500)], *turn1))
    assert usage.cached_tokens == first_turn
    assert usage.cache_write_tokens == usage.input_tokens - first_turn
    assert usage.uncached_tokens == 0


@pytest.mark.parametrize(("blocks_after", "hit"), [(19, True), (20, True), (21, False)])
def test_anthropic_looks_back_20_blocks_from_a_breakpoint(blocks_after: int, hit: bool) -> None:
    cache = sonnet()
    cache.observe(messages_body([block(1500, CC)], user("q")), at=T0)
    later = [block(5, fill=str(i % 10)) for i in range(blocks_after - 1)]
    body = messages_body([block(1500)], user([*later, block(5, CC)]))
    usage = cache.observe(body, at=T0)
    assert usage.cached_tokens == (1500 if hit else 0)
    assert usage.cache_write_tokens == usage.input_tokens - usage.cached_tokens


def test_anthropic_caches_nothing_without_a_breakpoint() -> None:
    cache = sonnet()
    body = messages_body([block(3000)], user("q"))
    cache.observe(body, at=T0)
    again = cache.observe(body, at=T0)
    assert (again.cached_tokens, again.cache_write_tokens) == (0, 0)
    assert again.uncached_tokens == again.input_tokens


def test_anthropic_automatic_caching_moves_the_breakpoint_forward() -> None:
    cache = sonnet()
    turn1 = [user("Tell me about trains.")]
    first = cache.observe(messages_body([block(1500)], *turn1, cache_control=CC), at=T0)
    assert (first.cached_tokens, first.cache_write_tokens) == (0, first.input_tokens)
    turn2 = [
        *turn1,
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, block(20)]},
        user("And buses?"),
    ]
    second = cache.observe(messages_body([block(1500)], *turn2, cache_control=CC), at=T0)
    assert second.cached_tokens == first.input_tokens
    assert second.cache_write_tokens == second.input_tokens - first.input_tokens


def test_anthropic_automatic_breakpoint_skips_thinking_blocks() -> None:
    thinking = {"type": "thinking", "thinking": "x", "signature": "s"}
    body = messages_body([], user("q"), {"role": "assistant", "content": [thinking]})
    parts = request_parts({**body, "cache_control": CC}, provider="anthropic")
    assert [p.cache_ttl for p in parts] == ["5m", None]


@pytest.mark.parametrize(
    ("profile", "prefix", "written"),
    [
        ("anthropic-sonnet-5m", 1023, False),
        ("anthropic-sonnet-5m", 1024, True),
        ("anthropic-opus-1h", 1024, True),
        ("anthropic-haiku-5m", 2047, False),
        ("anthropic-haiku-5m", 2048, True),
        ("anthropic-haiku-4.5-5m", 4095, False),
        ("anthropic-opus-4.5-1h", 4096, True),
    ],
)
def test_anthropic_minimum_cacheable_length_per_model(
    profile: str, prefix: int, written: bool
) -> None:
    cache = PromptCache(CACHE_PROFILES[profile])
    body = messages_body([block(prefix, CC)], user("q"))
    first, second = cache.observe(body, at=T0), cache.observe(body, at=T0)
    assert first.cache_write_tokens == (prefix if written else 0)
    assert second.cached_tokens == (prefix if written else 0)


@pytest.mark.parametrize(
    ("ttl", "later", "hit"),
    [
        (CC, timedelta(minutes=4, seconds=59), True),
        (CC, timedelta(minutes=5), False),
        (CC_1H, timedelta(minutes=59), True),
        (CC_1H, timedelta(hours=1), False),
    ],
)
def test_anthropic_entries_expire_after_their_ttl(
    ttl: dict[str, Any], later: timedelta, hit: bool
) -> None:
    cache = sonnet()
    cache.observe(messages_body([block(1500, ttl)], user("a")), at=T0)
    second = cache.observe(messages_body([block(1500, ttl)], user("b")), at=T0 + later)
    assert (second.cached_tokens, second.cache_write_tokens) == ((1500, 0) if hit else (0, 1500))


def test_anthropic_a_read_refreshes_the_entry() -> None:
    cache = sonnet()
    body = messages_body([block(1500, CC)], user("a"))
    cache.observe(body, at=T0)
    assert cache.observe(body, at=T0 + timedelta(minutes=4)).cached_tokens == 1500
    assert cache.observe(body, at=T0 + timedelta(minutes=8)).cached_tokens == 1500


def test_anthropic_a_changed_role_breaks_the_prefix() -> None:
    cache = sonnet()
    cache.observe(messages_body([], user([block(1500, CC)])), at=T0)
    as_assistant = {"role": "assistant", "content": [block(1500, CC)]}
    assert cache.observe(messages_body([], as_assistant), at=T0).cached_tokens == 0
    assert cache.observe(messages_body([], user([block(1500, CC)])), at=T0).cached_tokens


@pytest.mark.parametrize(
    ("explicit", "automatic", "refused"),
    [(4, False, False), (5, False, True), (3, True, False), (4, True, True)],
)
def test_anthropic_refuses_more_than_four_breakpoints(
    explicit: int, automatic: bool, refused: bool
) -> None:
    blocks = [block(10, CC, fill=str(i)) for i in range(explicit)]
    extra = {"cache_control": CC} if automatic else {}
    body = messages_body(blocks, user("q"), **extra)
    if refused:
        with pytest.raises(ValueError, match="A maximum of 4 blocks with cache_control"):
            sonnet().observe(body)
    else:
        sonnet().observe(body)


def test_anthropic_refuses_an_unknown_ttl() -> None:
    with pytest.raises(ValueError, match="ttl"):
        sonnet().observe(messages_body([block(10, {"type": "ephemeral", "ttl": "2h"})], user("q")))


def test_anthropic_prices_writes_by_ttl() -> None:
    usage = CacheUsage(1000, 600, 300)
    assert usage.cost(CACHE_PROFILES["anthropic-sonnet-5m"], output_tokens=10) == pytest.approx(
        100 + 60 + 375 + 40
    )
    assert usage.cost(CACHE_PROFILES["anthropic-sonnet-1h"]) == pytest.approx(100 + 60 + 600)
    assert usage + CacheUsage(10, 1, 2) == CacheUsage(1010, 601, 302)


# -- shared ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "api"),
    [
        ({"model": "m", "messages": [{"role": "system", "content": "s"}]}, "openai_chat"),
        ({"model": "m", "messages": [{"role": "user", "content": "q"}]}, "openai_chat"),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "system", "content": "s"}]},
            "openai_chat",
        ),
        (
            {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "q"}]},
            "anthropic",
        ),
        ({"model": "m", "system": "s", "messages": []}, "anthropic"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
            "anthropic",
        ),
        ({"model": "m", "input": "q"}, "openai_responses"),
        ({"model": "m", "instructions": "s", "input": []}, "openai_responses"),
    ],
)
def test_detect_api(body: dict[str, Any], api: str) -> None:
    assert detect_api(body) == api


def test_the_documented_profiles_exist() -> None:
    names = {
        "openai-gpt-5",
        "openai-gpt-5-24h",
        "openai-gpt-4.1",
        "openai-gpt-4.1-24h",
        "anthropic-sonnet-5m",
        "anthropic-sonnet-1h",
        "anthropic-haiku-5m",
        "anthropic-haiku-1h",
    }
    assert names <= set(CACHE_PROFILES)
    # OpenAI writes are free before gpt-5.6, 1.25x from it on (matched at breakpoints).
    for profile in CACHE_PROFILES.values():
        if profile.provider == "openai":
            assert profile.write_multiplier == (1.25 if profile.breakpoints else 1.0)
    assert CACHE_PROFILES["anthropic-haiku-1h"].write_multiplier == 2.0
    assert CACHE_PROFILES["openai-gpt-5-24h"].ttl == timedelta(hours=24)

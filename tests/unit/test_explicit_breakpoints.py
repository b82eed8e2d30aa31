"""Where OpenAI's explicit cache breakpoints go (``stm_memory.wire.openai_chat``), and how
the cache model bills a model that matches prefixes only at breakpoints (gpt-5.6 on)."""

from __future__ import annotations

from typing import Any

from stm_memory.testing import CACHE_PROFILES, PromptCache
from stm_memory.wire.openai_chat import BREAKPOINT, CHAT, breakpoint_indices, explicit_breakpoints
from stm_memory.wire.responses import RESPONSES

SYSTEM = {"role": "system", "content": "You plan journeys. " * 300}
MEMORY = {"role": "system", "content": "[Short-term memory]\nAnn goes to Kyoto."}
NUDGE = "Update your short-term memory now."


def marks(messages: list[Any]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), list)
        and any("prompt_cache_breakpoint" in b for b in m["content"])
    ]


def test_ours_go_on_the_dialogues_end_the_memory_and_the_callers_prompt() -> None:
    given = [SYSTEM, {"role": "user", "content": "hi"}]
    placed = [SYSTEM, MEMORY, {"role": "user", "content": "hi"}, {"role": "user", "content": NUDGE}]
    # In order of value: the user's message ahead of the nudge, the memory, the caller's.
    assert breakpoint_indices(given, placed, [NUDGE], codec=CHAT) == [2, 1, 0]
    out = explicit_breakpoints(placed, [2, 1, 0], codec=CHAT)
    assert marks(out) == [0, 1, 2]
    assert out[2]["content"] == [
        {"type": "text", "text": "hi", "prompt_cache_breakpoint": dict(BREAKPOINT)}
    ]
    assert placed[2] == {"role": "user", "content": "hi"}  # a copy
    # Without a nudge the implicit breakpoint already ends the dialogue.
    assert breakpoint_indices(given, placed[:3], [NUDGE], codec=CHAT) == [1, 0]


def test_responses_blocks_are_input_text_and_an_assistant_takes_none() -> None:
    placed = [MEMORY, {"role": "assistant", "content": "ok"}]
    out = explicit_breakpoints(placed, [1, 0], codec=RESPONSES)
    assert marks(out) == [0]
    assert out[0]["content"][0]["type"] == "input_text"


def test_the_callers_own_breakpoints_count_first_and_stay() -> None:
    theirs = {
        "role": "user",
        "content": [
            {"type": "text", "text": "a", "prompt_cache_breakpoint": {"mode": "explicit"}},
            {"type": "text", "text": "b", "prompt_cache_breakpoint": {"mode": "explicit"}},
        ],
    }
    placed = [SYSTEM, MEMORY, theirs, {"role": "user", "content": "hi"}]
    # Three are written beside the implicit one: two are the caller's, one is ours.
    assert marks(explicit_breakpoints(placed, [3, 1, 0], codec=CHAT)) == [2, 3]
    # Explicit mode (no implicit breakpoint) writes four.
    assert marks(explicit_breakpoints(placed, [3, 1, 0], codec=CHAT, mode="explicit")) == [1, 2, 3]
    assert (
        explicit_breakpoints(placed, [2], codec=CHAT)[2] is theirs
    )  # a marked message stays as it is


def chat(*messages: Any) -> dict[str, Any]:
    return {"model": "gpt-5.6", "messages": list(messages)}


def test_a_breakpoint_model_reads_only_where_a_breakpoint_was_written() -> None:
    cache = PromptCache(CACHE_PROFILES["openai-gpt-5.6"])
    marked = explicit_breakpoints([SYSTEM, MEMORY], [1, 0], codec=CHAT)
    first = cache.observe(chat(*marked, {"role": "user", "content": "hi"}))
    assert (first.cached_tokens, first.cache_write_tokens) == (0, first.input_tokens)
    # A new memory: the caller's prompt is read at its breakpoint, the rest written.
    swapped = explicit_breakpoints(
        [SYSTEM, {**MEMORY, "content": "[Short-term memory]\nNara."}], [1, 0], codec=CHAT
    )
    second = cache.observe(chat(*swapped, {"role": "user", "content": "hi"}))
    system_tokens = cache.observe(chat(*marked[:1])).cached_tokens
    assert second.cached_tokens == system_tokens > 1024
    assert second.cache_write_tokens == second.input_tokens - second.cached_tokens
    # The marker is not content: the same messages unmarked read the same prefix.
    third = cache.observe(chat(SYSTEM, MEMORY, {"role": "user", "content": "hi"}))
    assert third.cached_tokens == third.input_tokens
    assert third.cache_write_tokens == 0


def test_without_explicit_breakpoints_a_changed_tail_misses_everything() -> None:
    for profile, hit in (("openai-gpt-5", True), ("openai-gpt-5.6", False)):
        cache = PromptCache(CACHE_PROFILES[profile])
        cache.observe(chat(SYSTEM, MEMORY, {"role": "user", "content": "hi"}))
        usage = cache.observe(
            chat(SYSTEM, {**MEMORY, "content": "new"}, {"role": "user", "content": "x"})
        )
        # Before gpt-5.6 the longest shared prefix is read; from it on, only a breakpoint.
        assert (usage.cached_tokens > 1024) is hit

"""Provider prompt-cache hints (kit/cache_hints, wire/anthropic): one OpenAI key per
channel, Anthropic breakpoints where the stable prefix ends, never more than four."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from stm_memory import Scope
from stm_memory.kit import prompt_cache_key
from stm_memory.wire.anthropic import MAX_BREAKPOINTS, anthropic_breakpoints, count_breakpoints

CC = {"type": "ephemeral"}
# The Messages API refuses a request with more than four cache_control breakpoints
# (Anthropic's prompt-caching documentation). Written out, not imported: an oracle
# read from the code under test would widen with it.
ANTHROPIC_LIMIT = 4


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def test_the_exported_limit_is_the_apis() -> None:
    assert MAX_BREAKPOINTS == ANTHROPIC_LIMIT


def test_one_key_per_server_and_persona() -> None:
    a = Scope(channel_id="c1", user_id="u1", server_id="g1")
    b = Scope(channel_id="c1", user_id="u2", server_id="g1")  # same channel, another user
    c = Scope(channel_id="c2", user_id="u1", server_id="g1")  # another channel
    p = Scope(channel_id="c1", user_id="u1", server_id="g1", persona_id="p1")
    g = Scope(channel_id="c1", user_id="u1", server_id="g2")  # another server
    keys = [prompt_cache_key(s) for s in (a, b, c, p, g)]
    # A server's channels share the agent's prefix: one cache, whoever speaks where.
    assert keys[0] == keys[1] == keys[2]
    assert len({keys[0], keys[3], keys[4]}) == 3  # a persona's prompt is its own
    # In DMs, per user: a user's conversations route together, not with another user's.
    dm = [
        prompt_cache_key(Scope(channel_id=c, user_id=u))
        for c, u in (("d1", "u1"), ("d2", "u1"), ("d1", "u2"))
    ]
    assert dm[0] == dm[1] != dm[2]
    # A user id that equals a server id routes apart from that server.
    assert prompt_cache_key(Scope(channel_id="d1", user_id="g1")) != keys[0]
    # Opaque: no id in the clear (hex digits cannot spell "general").
    named = prompt_cache_key(Scope(channel_id="c", user_id="u1", server_id="general"))
    assert named.startswith("stm-") and "general" not in named


def request(system: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "messages": [
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": [text("a1")]},
            {"role": "user", "content": [text("u2"), text("briefing")]},
        ],
        **extra,
    }
    if system is not None:
        body["system"] = system
    return body


def test_breakpoints_at_the_dialogue_end_the_memory_and_the_callers_prompt() -> None:
    body = request(system=[text("caller"), text("memory")])
    before = copy.deepcopy(body)
    out = anthropic_breakpoints(body, caller_system_blocks=1, injected=["briefing"])
    assert body == before  # nothing mutated
    # The user's own last block, ahead of the briefing merged after it: the next turn
    # (where "u2" stands alone) reads it back; the per-turn tail is not cached.
    assert out["messages"][2]["content"] == [text("u2", cache_control=CC), text("briefing")]
    assert out["messages"][1] == body["messages"][1]
    assert out["system"] == [text("caller", cache_control=CC), text("memory", cache_control=CC)]
    assert count_breakpoints(out) == 3


def test_a_string_message_becomes_a_block_to_carry_the_breakpoint() -> None:
    body = request()
    body["messages"][2] = {"role": "user", "content": "u2"}
    out = anthropic_breakpoints(body)
    assert out["messages"][2]["content"] == [text("u2", cache_control=CC)]
    assert "system" not in out


def test_without_a_block_of_its_own_the_message_before_carries_it() -> None:
    body = request()
    body["messages"][2] = {"role": "user", "content": [text("briefing")]}
    out = anthropic_breakpoints(body, injected=["briefing"])
    assert out["messages"][1]["content"] == [text("a1", cache_control=CC)]
    assert out["messages"][2] == body["messages"][2]


def test_the_callers_breakpoints_are_kept_and_counted() -> None:
    tools = [{"name": f"t{i}", "input_schema": {}, "cache_control": CC} for i in range(3)]
    body = request(system=[text("caller"), text("memory")], tools=tools)
    out = anthropic_breakpoints(body, caller_system_blocks=1, injected=["briefing"])
    assert count_breakpoints(out) == ANTHROPIC_LIMIT
    assert out["tools"] == tools
    # The one left goes where it is worth most: the end of the dialogue.
    assert out["messages"][2]["content"][0]["cache_control"] == CC
    assert "cache_control" not in out["system"][-1]


def test_ours_take_the_ttl_the_caller_uses() -> None:
    long = {"type": "ephemeral", "ttl": "1h"}
    out = anthropic_breakpoints(request(system=[text("caller", cache_control=long)]))
    assert out["messages"][2]["content"][-1]["cache_control"] == long


def test_no_breakpoint_on_blocks_that_cannot_carry_one() -> None:
    body = request()
    body["messages"][2] = {"role": "user", "content": [text("briefing")]}
    body["messages"][1] = {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}
    assert anthropic_breakpoints(body, injected=["briefing"])["messages"] == body["messages"]
    body["messages"][1] = {"role": "assistant", "content": ""}
    assert anthropic_breakpoints(body, injected=["briefing"])["messages"] == body["messages"]
    briefing_only = {"model": "m", "messages": [{"role": "user", "content": [text("briefing")]}]}
    assert anthropic_breakpoints(briefing_only, injected=["briefing"]) == briefing_only


_MARK = st.sampled_from([None, CC, {"type": "ephemeral", "ttl": "1h"}])


def _block(t: str, mark: Any) -> dict[str, Any]:
    return text(t, cache_control=mark) if mark else text(t)


@settings(max_examples=200, deadline=None)
@given(
    tool_marks=st.lists(_MARK, max_size=4),
    system_marks=st.lists(_MARK, max_size=4),
    message_marks=st.lists(_MARK, min_size=1, max_size=7),
    automatic=st.booleans(),
    caller_blocks=st.integers(min_value=0, max_value=4),
)
def test_never_more_than_four_breakpoints(
    tool_marks: list[Any],
    system_marks: list[Any],
    message_marks: list[Any],
    automatic: bool,
    caller_blocks: int,
) -> None:
    messages = []
    for i, mark in enumerate(message_marks):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [_block(f"m{i}", mark)]})
    body: dict[str, Any] = {"model": "m", "max_tokens": 1, "messages": messages}
    if tool_marks:
        body["tools"] = [
            {"name": f"t{i}", "input_schema": {}, **({"cache_control": m} if m else {})}
            for i, m in enumerate(tool_marks)
        ]
    if system_marks:
        body["system"] = [_block(f"s{i}", m) for i, m in enumerate(system_marks)]
    if automatic:
        body["cache_control"] = CC
    caller = count_breakpoints(body)
    out = anthropic_breakpoints(body, caller_system_blocks=min(caller_blocks, len(system_marks)))
    assert count_breakpoints(out) <= max(ANTHROPIC_LIMIT, caller)
    if caller < ANTHROPIC_LIMIT:
        assert count_breakpoints(out) >= caller
    # Every breakpoint the caller set is still there, unchanged.
    assert out.get("tools") == body.get("tools")
    for old, new in zip(body.get("system") or [], out.get("system") or [], strict=True):
        if old.get("cache_control"):
            assert new == old
    for old, new in zip(body["messages"], out["messages"], strict=True):
        for a, b in zip(old["content"], new["content"], strict=True):
            if a.get("cache_control"):
                assert a == b

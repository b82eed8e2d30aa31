"""Prompt-cache hints on the wire, for every integration (the loops sync and async, the
LangChain middleware and LCEL chain with ``ChatOpenAI`` and ``ChatAnthropic``, the
Agents SDK session), through the real SDK clients, replayed from cassettes recorded
against the local fake provider (which refuses a fifth Anthropic breakpoint with a 400).

The tests read every request body that reached the HTTP layer (``wire``): OpenAI
requests carry one ``prompt_cache_key`` per server (its channels share one cache),
Anthropic requests ``cache_control`` breakpoints — at most four, on blocks that can
carry them, 1-hour ones before 5-minute ones; ``cache_hints=False`` sends none; the
caller's own hints win.
"""

from __future__ import annotations

import pytest
from helpers.cache_hints import (
    BY_ID,
    HOUR,
    LONG_SYSTEM,
    MINE,
    SUMMARIES,
    SYSTEM,
    Entry,
    Env,
    Setup,
    check_breakpoints,
    driver,
    entries,
    keys,
    marks,
    our_key,
    scope,
    three_turns,
    turn,
)
from helpers.memory import refresh

pytestmark = [
    pytest.mark.vcr,
    # RunnableWithMessageHistory is deprecated in langchain-core >= 1.3.3; it still works.
    pytest.mark.filterwarnings(
        "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
    ),
]


@pytest.mark.parametrize("entry", entries())
async def test_hints_are_on_the_wire_by_default(entry: Entry, env: Env) -> None:
    first, other, second = await three_turns(env, entry, Setup())
    if entry.provider == "openai":
        # One key per server: c1's turns and c2's share it (one cache for the agent's
        # prefix), and it is ours.
        assert keys(first, second) == keys(other) == {our_key("c1")}
        assert our_key("c1") == our_key("c2") and our_key("c1").startswith("stm-")
    else:
        # Every request asks for caching (c1, c2's first turn, c1 again).
        counts = [check_breakpoints(t.bodies[0]) for t in (first, other, second)]
        assert all(count >= 1 for count in counts), counts


@pytest.mark.parametrize("entry", entries())
async def test_no_hints_with_cache_hints_off(entry: Entry, env: Env) -> None:
    first, other, second = await three_turns(env, entry, Setup(hints=False))
    bodies = [t.bodies[0] for t in (first, other, second)]
    if entry.id == "agents":
        # The Agents SDK keys a session's requests itself; that key is not ours.
        sent = {b.get("prompt_cache_key") for b in bodies}
        assert not sent & {our_key("c1"), our_key("c2")}
        assert not any(str(key).startswith("stm-") for key in sent)
    elif entry.provider == "openai":
        assert all("prompt_cache_key" not in b for b in bodies)
    else:
        assert [marks(b) for b in bodies] == [[], [], []]


@pytest.mark.parametrize("entry", entries())
async def test_the_callers_own_hints_win(entry: Entry, env: Env) -> None:
    """OpenAI: the caller's key (a loop request option, ``ChatOpenAI`` ``model_kwargs``
    under the middleware, bound on the LCEL chain's model, the agent's model settings).
    Anthropic: the caller's system block and three tools with breakpoints — four."""
    first, other, second = await three_turns(env, entry, Setup(caller="own"))
    if entry.provider == "openai":
        assert keys(first, other, second) == {MINE}
        return
    for t in (first, other, second):
        body = t.bodies[0]
        assert check_breakpoints(body) == 4
        found = [(where, block.get("name") or block["text"]) for where, block, _ in marks(body)]
        assert found == [
            ("tool", "lookup_0"),
            ("tool", "lookup_1"),
            ("tool", "lookup_2"),
            ("system", SYSTEM),
        ]


@pytest.mark.parametrize("entry", entries("chat", "chat-async", "responses", "responses-async"))
async def test_prompt_cache_retention_goes_along_with_our_key(entry: Entry, env: Env) -> None:
    drive = driver(env, entry, Setup(options={"prompt_cache_retention": "24h"}))
    body = (await turn(env, entry, drive, "c1", "Which line goes from Kyoto to Nara?")).bodies[0]
    assert (body["prompt_cache_retention"], body["prompt_cache_key"]) == ("24h", our_key("c1"))


@pytest.mark.parametrize(
    "entry", entries("anthropic", "anthropic-async", "middleware-anthropic", "lcel-anthropic")
)
async def test_anthropic_breakpoints_keep_the_callers_ttl(entry: Entry, env: Env) -> None:
    """The caller caches for an hour (the loops: its system block; the middleware:
    ``AnthropicPromptCachingMiddleware(ttl="1h")``; the chain: a bound top-level
    ``cache_control``). Ours are added, and never as a 5-minute breakpoint before a
    1-hour one, which the Messages API refuses."""
    refresh(env.memory, scope("c1"), SUMMARIES["c1"])
    drive = driver(env, entry, Setup(caller="1h"))
    first = await turn(env, entry, drive, "c1", "Which line goes from Kyoto to Nara?")
    second = await turn(env, entry, drive, "c1", "And from Nara back to Osaka?")
    callers = 3 if entry.id == "middleware-anthropic" else 1  # system, last tool, automatic
    for t in (first, second):
        found = marks(t.bodies[0])
        assert sum(marker == HOUR for _, _, marker in found) >= callers
        assert len(found) > callers  # ours are there too
        check_breakpoints(t.bodies[0])


@pytest.mark.scripted("anthropic")
@pytest.mark.parametrize("order", ["after", "before"])
async def test_the_middleware_beside_anthropic_prompt_caching(order: str, env: Env) -> None:
    """``AnthropicPromptCachingMiddleware`` inside ours (``after`` it in the list) or
    around it (``before``): the fake server, which answers a fifth breakpoint with a
    400, accepts every request; the caching middleware's breakpoints and ours are
    there, four at most, and the second turn is read from the cache."""
    entry = BY_ID["middleware-anthropic"]
    refresh(env.memory, scope("c1"), SUMMARIES["c1"])
    drive = driver(env, entry, Setup(system=LONG_SYSTEM, caching=order))
    first = await turn(env, entry, drive, "c1", "Which line goes from Kyoto to Nara?")
    second = await turn(env, entry, drive, "c1", "And from Nara back to Osaka?")
    for t in (first, second):
        check_breakpoints(t.bodies[0])
    first_marks, second_marks = marks(first.bodies[0]), marks(second.bodies[0])
    # The caching middleware's: the caller's system prompt and the automatic one.
    for found in (first_marks, second_marks):
        texts = [block.get("text") for where, block, _ in found if where == "system"]
        assert LONG_SYSTEM in texts
        assert "automatic" in [where for where, _, _ in found]
    # Ours: the user's own words in the current message, ahead of the briefings after
    # them (the next turn sends them unchanged and reads them from the cache).
    assert ("user", "Which line goes from Kyoto to Nara?") in [
        (where, block.get("text")) for where, block, _ in first_marks
    ]
    assert ("user", "And from Nara back to Osaka?") in [
        (where, block.get("text")) for where, block, _ in second_marks
    ]
    assert second.cached >= 1024

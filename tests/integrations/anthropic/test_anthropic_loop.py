"""Cassette tests: AnthropicLoop / AsyncAnthropicLoop over the Messages API.

Recorded from the local fake provider (``--record-mode=once``), replayed offline.
Assertions read ``TurnResult.requests`` / ``.messages`` and the cassette's request
bodies, never a server's records: in replay no server runs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import Any

import anthropic
import pytest

from stm_memory import TOOL_NAME, MemoryEntry, Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.testing import FrozenClock
from stm_memory_anthropic import AnthropicLoop, AsyncAnthropicLoop, TurnResult
from tests.fakeprovider import Script

pytestmark = pytest.mark.vcr
scripted = pytest.mark.scripted("anthropic")

MODEL = "claude-haiku-4-5"
SYSTEM = "You are a concise travel assistant."
NUDGE_MARK = f"After you answer, call {TOOL_NAME}"
WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="trip")
OTHER = Scope(channel_id="c2", user_id="u1", server_id="g1", channel_name="planning")
S1 = "Ann plans a Kyoto trip in April; asked about temples and the weather (sunny, 18 C)."
S2 = "Ann plans a Kyoto trip in April: temples, sunny weather, yudofu near Nanzen-ji."


# -- helpers -----------------------------------------------------------------------------


def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def assert_valid_request(request: dict[str, Any]) -> None:
    """What the Messages API demands of a request's conversation."""
    messages = request["messages"]
    assert messages and messages[0]["role"] == "user"
    for message in messages:
        assert set(message) == {"role", "content"}
    for prev, cur in itertools.pairwise(messages):
        assert prev["role"] != cur["role"], "roles must strictly alternate"
    for i, message in enumerate(messages):
        uses = [b["id"] for b in blocks(message) if b["type"] == "tool_use"]
        if message["role"] == "assistant" and uses:
            answer = blocks(messages[i + 1])
            results = [b["tool_use_id"] for b in answer if b["type"] == "tool_result"]
            assert results == uses, "each tool_use is answered in the next message"
            assert [b["type"] for b in answer[: len(uses)]] == ["tool_result"] * len(uses)
        if message["role"] == "user":
            for block in blocks(message):
                if block["type"] == "tool_result":
                    previous = blocks(messages[i - 1]) if i else []
                    assert block["tool_use_id"] in [b.get("id") for b in previous]
    has_tool_blocks = any(
        b["type"] in ("tool_use", "tool_result") for m in messages for b in blocks(m)
    )
    if has_tool_blocks:
        assert request.get("tools"), "the API refuses tool blocks without tools"


def as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def wire_bodies(cassette: Any) -> list[dict[str, Any]]:
    """The request bodies in the cassette: what the SDK put on the wire."""
    return [json.loads(request.body) for request in cassette.requests]


def text_of(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def system_texts(request: dict[str, Any]) -> list[str]:
    """The ``system`` parameter's texts, block by block (cache breakpoints aside)."""
    system = request.get("system")
    if system is None:
        return []
    return [system] if isinstance(system, str) else [b["text"] for b in system]


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["name"] for t in request.get("tools", [])]


def tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    assert message["role"] == "user"
    return [b for b in blocks(message) if b["type"] == "tool_result"]


def assert_clean_transcript(result: TurnResult) -> None:
    """TurnResult.messages is the dialogue: no injected memory, no nudge."""
    dumped = text_of(result.messages)
    assert CONTENT_HEADER not in dumped
    assert NUDGE_MARK not in dumped


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def seed_other_channel(mem: ShortTermMemory) -> None:
    """Another channel of the server with a summary and raw turns."""
    mem.capture(
        OTHER,
        [
            {"role": "user", "content": "Book the ryokan for April 3.", "name": "Ann"},
            {"role": "assistant", "content": "Booked it."},
        ],
    )
    turn = mem.begin_turn(OTHER, provider="anthropic", user_message="Book the ryokan")
    assert mem.update(turn, {"summary": "Ryokan booked for April 3."})["status"] == "completed"
    mem.end_turn(turn)


def live(mem: ShortTermMemory) -> MemoryEntry:
    entry = mem.get(SCOPE)
    assert entry is not None
    return entry


def counter(mem: ShortTermMemory) -> int:
    return live(mem).turns_since_refresh


def check_all(results: Sequence[TurnResult]) -> list[dict[str, Any]]:
    requests = [r for result in results for r in result.requests]
    for request in requests:
        assert_valid_request(as_json(request))
    for result in results:
        assert_clean_transcript(result)
    return requests


# -- the multi-turn scenario (sync) --------------------------------------------------------


@scripted
def test_multi_turn_scenario(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
    vcr: Any,
) -> None:
    mem = open_memory()
    mem.configure_server("g1", refresh_cadence=2, render_mode="supersede")
    seed_other_channel(mem)
    calls: list[dict[str, Any]] = []

    def get_weather(args: dict[str, Any]) -> dict[str, Any]:
        calls.append(args)
        return {"city": args["city"], "sky": "sunny", "celsius": 18}

    loop = AnthropicLoop(anthropic_client, mem, model=MODEL, max_tokens=256)

    def run(history: list[dict[str, Any]]) -> TurnResult:
        return loop.run_turn(
            SCOPE,
            history,
            system=SYSTEM,
            tools=[WEATHER_TOOL],
            tool_handlers={"get_weather": get_weather},
        )

    # Turn 1: the other channel shows (supersede: its raw turns omitted); no live
    # entry here yet, so no nudge. The channel's first turn: the briefing goes into
    # the stable group at the top (a system block after the caller's prompt), with an
    # absolute time, before the user's words.
    anthropic_script.reply_text("Lovely! Cherry blossoms usually peak in early April.")
    history = [user("I'm planning a trip to Kyoto in April.")]
    r1 = run(history)
    (req,) = r1.requests
    caller, briefing_block = system_texts(req)
    assert caller == SYSTEM
    assert briefing_block.startswith(CONTENT_HEADER)
    assert "- #planning, 2026-01-05 12:00 UTC:" in briefing_block
    assert "Ryokan booked for April 3." in briefing_block
    assert "ago:" not in text_of(req)  # no relative times
    (first,) = req["messages"]
    # Only the user's words in the message: nothing of the briefing after them.
    assert [b["text"] for b in blocks(first)] == ["I'm planning a trip to Kyoto in April."]
    assert "#planning" not in text_of(req["messages"])
    assert "Book the ryokan" not in text_of(req)  # supersede: no raw turns
    assert NUDGE_MARK not in text_of(req)
    assert tool_names(req) == [TOOL_NAME, "get_weather"]
    assert r1.messages == [
        *history,
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Lovely! Cherry blossoms usually peak in early April."}
            ],
        },
    ]
    assert (r1.text, r1.stm_updated, r1.steps) == (
        "Lovely! Cherry blossoms usually peak in early April.",
        False,
        1,
    )
    assert r1.usage.input_tokens > 0 and r1.usage.output_tokens > 0
    assert counter(mem) == 1

    # Turn 2: one turn since the last refresh, cadence 2: still no nudge.
    anthropic_script.reply_text("Kiyomizu-dera, Fushimi Inari and Nanzen-ji.")
    history = [*r1.messages, user("Which temples should I see?")]
    r2 = run(history)
    assert NUDGE_MARK not in text_of(r2.requests)
    assert counter(mem) == 2

    # Turn 3: the nudge fires; the model calls the caller's tool beside the memory
    # tool, and a second memory update in the same turn fails.
    anthropic_script.reply_tool_calls(
        [
            ("get_weather", {"city": "Kyoto"}),
            (TOOL_NAME, {"summary": S1}),
            (TOOL_NAME, {"summary": "A second summary in the same turn."}),
        ]
    )
    anthropic_script.reply_text("It's sunny and 18 C in Kyoto right now.")
    history = [*r2.messages, user("What's the weather like there?")]
    r3 = run(history)
    nudged, after = r3.requests
    assert NUDGE_MARK in text_of(nudged["messages"])
    assert NUDGE_MARK not in text_of(nudged.get("system"))
    assert tool_names(nudged) == [TOOL_NAME, "get_weather"]
    assert calls == [{"city": "Kyoto"}]
    weather, stored, second = tool_results(r3.messages[-2])
    assert json.loads(weather["content"]) == {"city": "Kyoto", "sky": "sunny", "celsius": 18}
    assert weather["is_error"] is False
    assert json.loads(stored["content"])["status"] == "completed"
    assert stored["is_error"] is False
    refused = json.loads(second["content"])
    assert refused["status"] == "tool_execution_failed"
    assert "already updated" in refused["reason"]
    assert second["is_error"] is True
    # After the update every step of the turn extends the last: the same tools
    # (the memory tool still offered; a second call fails, as above), the same
    # system, the nudge kept right after the current user message.
    assert tool_names(after) == tool_names(nudged) == [TOOL_NAME, "get_weather"]
    assert after["tools"] == nudged["tools"]
    assert after.get("tool_choice") == nudged.get("tool_choice")
    assert after["system"] == nudged["system"]
    assert after["messages"][: len(nudged["messages"])] == nudged["messages"]
    assert NUDGE_MARK in text_of(after["messages"])
    assert after["messages"][-1] == as_json(r3.messages[-2])
    assert (r3.text, r3.stm_updated, r3.steps) == (
        "It's sunny and 18 C in Kyoto right now.",
        True,
        2,
    )
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == S1
    assert (entry.turns_since_refresh, entry.last_refreshed_turn) == (0, 1)

    # Turn 4: the request carries the summary. A truncated memory call
    # (stop_reason max_tokens) is not executed.
    anthropic_script.reply_truncated_tool_call(TOOL_NAME, '{"summary": "Ann plans a Kyo')
    anthropic_script.reply_text("Try yudofu (simmered tofu) near Nanzen-ji.")
    history = [*r3.messages, user("Any food tips?")]
    r4 = run(history)
    cut, retry = r4.requests
    # This channel's memory: a system block of its own after the caller's prompt, a
    # prefix the cache keeps until the memory is rewritten.
    caller, memory_block = system_texts(cut)
    # (The summary leaves the temples' names out: they are quoted before its notes.)
    assert caller == SYSTEM and memory_block.endswith(f"Notes:\n  {S1}")
    # The first turn after the rewrite: the briefing joins the stable group after it.
    assert "- #planning, 2026-01-05 12:00 UTC:" in memory_block
    assert "#planning" not in text_of(cut["messages"])
    assert "This channel:" not in text_of(cut["messages"])
    (skipped,) = tool_results(r4.messages[-2])
    assert skipped["is_error"] is True
    assert "cut off" in json.loads(skipped["content"])["reason"]
    assert TOOL_NAME in tool_names(retry)  # still offered: nothing was stored
    assert (r4.stm_updated, r4.steps) == (False, 2)
    assert live(mem).summary == S1
    assert counter(mem) == 1

    # Turn 5: visible text and a memory call in one reply end the turn at once.
    anthropic_script.reply_tool_call(
        TOOL_NAME, {"summary": S2}, text_before="Have a wonderful trip!"
    )
    history = [*r4.messages, user("Thanks, that's all for now.")]
    r5 = run(history)
    assert (r5.text, r5.stm_updated, r5.steps, len(r5.requests)) == (
        "Have a wonderful trip!",
        True,
        1,
        1,
    )
    (done,) = tool_results(r5.messages[-2])
    assert json.loads(done["content"])["status"] == "completed"
    # The turn's last message is the answer (what an app shows), after the memory call's
    # result; the call keeps its place before it.
    assert r5.messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Have a wonderful trip!"}],
    }
    assert [b["type"] for b in blocks(r5.messages[-3])] == ["tool_use"]
    assert live(mem).summary == S2

    # Turn 6: a restart (a new ShortTermMemory on the same paths) still shows the
    # summary, in its system block after the caller's prompt.
    mem.close()
    stm_clock.advance(hours=2)
    mem2 = open_memory()
    loop = AnthropicLoop(anthropic_client, mem2, model=MODEL, max_tokens=256)
    anthropic_script.reply_text("Welcome back! Still on for Kyoto in April?")
    # The dialogue ended with the memory call, its result and the answer; the request
    # drops that call from the earlier turn (the memory block shows what it wrote).
    history = [*r5.messages, user("I'm back.")]
    r6 = run(history)
    (req,) = r6.requests
    system, content = system_texts(req)
    assert system == SYSTEM
    assert content.startswith(CONTENT_HEADER)
    assert f"Notes:\n  {S2}" in content  # after the details it leaves out
    # The first turn after turn 5's rewrite: the unchanged briefing is in the stable
    # group after this channel's memory, its absolute time unchanged two hours later.
    assert "- #planning, 2026-01-05 12:00 UTC:" in content
    assert "#planning" not in text_of(req["messages"])
    last = blocks(req["messages"][-1])
    assert [b["text"] for b in last] == ["I'm back."]
    assert req["messages"][-2] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Have a wonderful trip!"}],
    }
    assert TOOL_NAME not in json.dumps(req["messages"])
    assert r6.messages[-2:-1] == [user("I'm back.")]
    assert counter(mem2) == 1

    # Turn 7: a provider error propagates as-is, after the turn was closed.
    anthropic_script.reply_error(529, "Overloaded")
    with pytest.raises(anthropic.APIStatusError) as err:
        run([*r6.messages, user("Are you there?")])
    assert err.value.status_code == 529
    assert counter(mem2) == 2  # end_turn ran

    results = [r1, r2, r3, r4, r5, r6]
    requests = check_all(results)
    sent = wire_bodies(vcr)
    assert len(sent) == len(requests) + 1
    assert sent[:-1] == as_json(requests)
    for body in sent:
        assert_valid_request(body)


# -- the async scenario ---------------------------------------------------------------------


@scripted
async def test_async_scenario(
    async_anthropic_client: anthropic.AsyncAnthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
    vcr: Any,
) -> None:
    mem = open_memory()
    mem.configure_server("g1", refresh_cadence=2, render_mode="supersede")
    loop = AsyncAnthropicLoop(async_anthropic_client, mem, model=MODEL, max_tokens=256)
    seen: list[dict[str, Any]] = []

    async def get_weather(args: dict[str, Any]) -> str:
        seen.append(args)
        return "sunny, 18 C"

    async def run(history: list[dict[str, Any]]) -> TurnResult:
        return await loop.run_turn(
            SCOPE,
            history,
            system=[{"type": "text", "text": SYSTEM}],
            tools=[WEATHER_TOOL],
            tool_handlers={"get_weather": get_weather},
        )

    anthropic_script.reply_text("Hello Ann!").reply_text("Kiyomizu-dera is a must.")
    r1 = await run([user("Hi, I'm Ann.")])
    r2 = await run([*r1.messages, user("Which temple first?")])
    assert NUDGE_MARK not in text_of([r1.requests, r2.requests])
    assert system_texts(r1.requests[0]) == [SYSTEM]

    anthropic_script.reply_tool_calls(
        [("get_weather", {"city": "Kyoto"}), (TOOL_NAME, {"summary": S1})]
    )
    anthropic_script.reply_text("Sunny, 18 C.")
    r3 = await run([*r2.messages, user("Weather?")])
    nudged, after = r3.requests
    assert NUDGE_MARK in text_of(nudged["messages"])
    assert seen == [{"city": "Kyoto"}]
    weather, stored = tool_results(r3.messages[-2])
    assert (weather["content"], weather["is_error"]) == ("sunny, 18 C", False)
    assert json.loads(stored["content"])["status"] == "completed"
    # The step after the update offers the same tools and keeps the nudge.
    assert tool_names(after) == tool_names(nudged) == [TOOL_NAME, "get_weather"]
    assert after["tools"] == nudged["tools"]
    assert after["messages"][: len(nudged["messages"])] == nudged["messages"]
    assert NUDGE_MARK in text_of(after["messages"])
    entry = await mem.aget(SCOPE)
    assert r3.stm_updated and entry is not None and entry.summary == S1

    # The next request carries the summary, after the caller's system blocks.
    anthropic_script.reply_text("Yudofu.")
    r4 = await run([*r3.messages, user("Food?")])
    base, memory_text = system_texts(r4.requests[0])
    assert base == SYSTEM and memory_text.endswith(f"Notes:\n  {S1}")

    # Restart on the same paths, later: the summary is still at the end of the system blocks.
    mem.close()
    stm_clock.advance(hours=3)
    mem2 = open_memory()
    loop = AsyncAnthropicLoop(async_anthropic_client, mem2, model=MODEL, max_tokens=256)
    anthropic_script.reply_text("Welcome back.")
    r5 = await run([*r4.messages, user("Back again.")])
    base, memory_block = r5.requests[0]["system"]
    assert base["text"] == SYSTEM
    assert memory_block["text"].startswith(CONTENT_HEADER) and S1 in memory_block["text"]

    # A provider error propagates; the turn was ended first.
    before = counter(mem2)
    anthropic_script.reply_error(429, "Slow down")
    with pytest.raises(anthropic.RateLimitError):
        await run([*r5.messages, user("Still there?")])
    assert counter(mem2) == before + 1

    requests = check_all([r1, r2, r3, r4, r5])
    sent = wire_bodies(vcr)
    assert sent[:-1] == as_json(requests)
    for body in sent:
        assert_valid_request(body)


# -- tools stay defined after the update ------------------------------------------------


@scripted
def test_history_with_tool_blocks_keeps_tools_defined(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """No caller tools; after the update the next request still offers the memory
    tool (the tool list is fixed for the turn, and the API refuses tool blocks
    without tools), with no tool_choice switch; a second call would fail."""
    mem = open_memory()
    loop = AnthropicLoop(anthropic_client, mem, model=MODEL)
    anthropic_script.reply_tool_call(TOOL_NAME, {"summary": "Ann greeted us."})
    anthropic_script.reply_text("Hello Ann!")
    result = loop.run_turn(SCOPE, [user("Hello, I'm Ann.")], system=SYSTEM)
    first, second = result.requests
    assert tool_names(first) == [TOOL_NAME] and "tool_choice" not in first
    assert second["tools"] == first["tools"] and "tool_choice" not in second
    (stored,) = tool_results(result.messages[-2])
    assert json.loads(stored["content"])["status"] == "completed"
    assert (result.text, result.stm_updated, result.steps) == ("Hello Ann!", True, 2)
    check_all([result])


# -- streaming -----------------------------------------------------------------------------


@scripted
def test_streamed_text_then_memory_call_ends_turn(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    mem = open_memory()
    loop = AnthropicLoop(anthropic_client, mem, model=MODEL)
    chunks: list[str] = []
    anthropic_script.reply_tool_call(
        TOOL_NAME,
        {"summary": "Ann said hello and asked for a haiku."},
        text_before="Autumn moonlight — a worm digs silently into the chestnut.",
    )
    result = loop.run_turn(SCOPE, [user("Hello! A haiku, please.")], on_text=chunks.append)
    assert "".join(chunks) == result.text
    assert result.text == "Autumn moonlight — a worm digs silently into the chestnut."
    assert (result.stm_updated, result.steps) == (True, 1)
    assert live(mem).summary == "Ann said hello and asked for a haiku."
    # The answer is the last message, after the memory call's result.
    assert result.messages[-2]["content"][0]["type"] == "tool_result"
    assert blocks(result.messages[-1]) == [{"type": "text", "text": result.text}]
    check_all([result])


@scripted
async def test_async_streaming_skips_truncated_call(
    async_anthropic_client: anthropic.AsyncAnthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    mem = open_memory()
    loop = AsyncAnthropicLoop(async_anthropic_client, mem, model=MODEL, max_tokens=64)
    chunks: list[str] = []

    async def on_text(text: str) -> None:
        chunks.append(text)

    anthropic_script.reply_truncated_tool_call(TOOL_NAME, '{"summary": "Ann asked ab')
    anthropic_script.reply_text("Here is where we stand.")
    result = await loop.run_turn(SCOPE, [user("Summarise us.")], on_text=on_text)
    assert "".join(chunks) == "Here is where we stand."
    assert [b["type"] for b in result.messages[1]["content"]] == ["tool_use"]
    (skipped,) = tool_results(result.messages[2])
    assert skipped["is_error"] is True
    assert (result.text, result.stm_updated, result.steps) == ("Here is where we stand.", False, 2)
    assert live(mem).summary is None
    check_all([result])


# -- behaviour-agnostic: also recorded against the real API (make record-cassettes) ----------


def test_nudged_turn_against_any_model(
    anthropic_client: anthropic.Anthropic,
    anthropic_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    vcr: Any,
) -> None:
    mem = open_memory()
    mem.configure_server("g1", refresh_cadence=1)
    loop = AnthropicLoop(anthropic_client, mem, model=MODEL, max_tokens=512)
    anthropic_script.reply_text("Hi Ann! Kyoto in April is beautiful.")
    anthropic_script.reply_tool_call(
        TOOL_NAME,
        {"summary": "Ann is planning a Kyoto trip in April and asked what to pack."},
        text_before="Pack layers and comfortable walking shoes.",
    )
    r1 = loop.run_turn(
        SCOPE, [user("Hi! I'm Ann, planning a trip to Kyoto in April.")], system=SYSTEM
    )
    r2 = loop.run_turn(SCOPE, [*r1.messages, user("What should I pack?")], system=SYSTEM)
    assert r1.text.strip()
    assert NUDGE_MARK in text_of(r2.requests[0]["messages"])
    assert r2.text.strip() or r2.stm_updated
    if r2.stm_updated:
        entry = mem.get(SCOPE)
        assert entry is not None and entry.summary
    requests = check_all([r1, r2])
    assert wire_bodies(vcr) == as_json(requests)

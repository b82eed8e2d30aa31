"""The OpenAI loops end to end through the real SDK, replayed from cassettes.

Each scenario runs for Chat Completions and for Responses (``api`` parameter). The
model's replies are scripted on the local fake provider when recording; on replay the
cassette answers, so assertions look only at what the loop sent and kept
(``TurnResult.requests`` / ``.messages``) and at the memory itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.kit.loop import TurnResult
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.testing import FrozenClock
from stm_memory_openai import (
    AsyncOpenAIChatLoop,
    AsyncOpenAIResponsesLoop,
    OpenAIChatLoop,
    OpenAIResponsesLoop,
)
from tests.fakeprovider import Reply, Script, ToolCall

pytestmark = pytest.mark.vcr

MODEL = "gpt-4.1-mini"
SYSTEM = "You are Trip, a friendly travel assistant. Answer in one or two sentences."
SCOPE = Scope(
    channel_id="c1", user_id="u1", server_id="g1", channel_name="trip-planning", user_name="Ann"
)
OTHER_SCOPE = Scope(
    channel_id="c2", user_id="u1", server_id="g1", channel_name="general", user_name="Ann"
)
SUMMARY = "Ann plans a trip to Kyoto in April; she prefers trains and quiet temples."
WEATHER_ARGS = {"city": "Kyoto"}


@dataclass(frozen=True)
class Api:
    """How the two OpenAI APIs differ, as far as these tests look."""

    name: str
    sync_loop: type[Any]
    async_loop: type[Any]

    @property
    def items_key(self) -> str:
        return "messages" if self.name == "chat" else "input"

    def tool(self, name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
        function = {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
                "additionalProperties": False,
            },
            "strict": True,
        }
        if self.name == "chat":
            return {"type": "function", "function": function}
        return {"type": "function", **function}

    def tool_names(self, request: dict[str, Any]) -> list[str]:
        tools = request.get("tools", [])
        if self.name == "chat":
            return [t["function"]["name"] for t in tools]
        return [t["name"] for t in tools]

    def injected(self, request: dict[str, Any]) -> list[str]:
        """Texts the loop placed into the request (system messages other than ours)."""
        return [
            m["content"]
            for m in request[self.items_key]
            if m.get("role") == "system" and m["content"] != SYSTEM
        ]

    def content(self, request: dict[str, Any]) -> str | None:
        found = [t for t in self.injected(request) if t.startswith(CONTENT_HEADER + "\n")]
        assert len(found) <= 1
        return found[0] if found else None

    def nudge(self, request: dict[str, Any]) -> str | None:
        found = [t for t in self.injected(request) if not t.startswith(CONTENT_HEADER + "\n")]
        assert len(found) <= 1
        return found[0] if found else None

    def system_prompt(self, request: dict[str, Any]) -> str | None:
        if self.name == "responses":
            return request.get("instructions")
        first = request["messages"][0]
        return first["content"] if first["role"] == "system" else None

    def calls(self, messages: list[Any]) -> list[str]:
        """Names of the tool calls in a transcript, in order."""
        if self.name == "chat":
            return [
                c["function"]["name"]
                for m in messages
                if m.get("role") == "assistant"
                for c in m.get("tool_calls") or ()
            ]
        return [m["name"] for m in messages if m.get("type") == "function_call"]

    def outputs(self, messages: list[Any]) -> list[Any]:
        """Tool results in a transcript, in order, JSON-decoded when they are JSON."""
        if self.name == "chat":
            raw = [m["content"] for m in messages if m.get("role") == "tool"]
        else:
            raw = [m["output"] for m in messages if m.get("type") == "function_call_output"]
        return [_decoded(r) for r in raw]


def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


CHAT = Api("chat", OpenAIChatLoop, AsyncOpenAIChatLoop)
RESPONSES = Api("responses", OpenAIResponsesLoop, AsyncOpenAIResponsesLoop)


@pytest.fixture(params=[CHAT, RESPONSES], ids=lambda api: api.name)
def api(request: pytest.FixtureRequest) -> Api:
    return request.param  # type: ignore[no-any-return]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "name": "Ann"}


def weather_tool(api: Api) -> dict[str, Any]:
    return api.tool("get_weather", "Current weather for a city.", {"city": {"type": "string"}})


class WeatherHandler:
    """A caller's tool: records the parsed arguments it was called with."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(args)
        return {"city": args.get("city"), "forecast": "sunny", "celsius": 18}


def configured(memory: ShortTermMemory) -> ShortTermMemory:
    memory.configure_server("g1", refresh_cadence=2, render_mode="supersede")
    return memory


def turns(memory: ShortTermMemory, scope: Scope = SCOPE) -> int:
    entry = memory.get(scope)
    assert entry is not None
    return entry.turns_since_refresh


# -- the memory cycle --------------------------------------------------------------------


@pytest.mark.scripted("openai")
def test_memory_cycle(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    stm_clock: FrozenClock,
) -> None:
    """Cadence → nudge → the model updates the memory beside the caller's own tool → a
    second update in the turn fails → the next turn shows the summary instead of a nudge
    → another channel shows it without raw turns (supersede)."""
    memory = configured(open_memory())
    loop = api.sync_loop(openai_client, memory, model=MODEL, temperature=0)
    weather = WeatherHandler()
    tools = [weather_tool(api)]
    handlers = {"get_weather": weather}

    # Turns 1 and 2: below the cadence, no nudge; no memory yet, no content.
    openai_script.reply_text("Kyoto is a great choice! When are you going?")
    r1 = loop.run_turn(
        SCOPE,
        [user("Hi! I want to plan a trip to Kyoto.")],
        system=SYSTEM,
        tools=tools,
        tool_handlers=handlers,
    )
    assert api.injected(r1.requests[0]) == []
    assert api.system_prompt(r1.requests[0]) == SYSTEM
    assert api.tool_names(r1.requests[0]) == [TOOL_NAME, "get_weather"]
    assert (r1.steps, r1.stm_updated, turns(memory)) == (1, False, 1)
    stm_clock.advance(minutes=1)

    openai_script.reply_text("April is lovely: cherry blossoms. Trains are the easiest way around.")
    r2 = loop.run_turn(
        SCOPE,
        [*r1.messages, user("In April. I like trains and quiet temples.")],
        system=SYSTEM,
        tools=tools,
        tool_handlers=handlers,
    )
    assert api.nudge(r2.requests[0]) is None
    assert turns(memory) == 2
    stm_clock.advance(minutes=1)

    # Turn 3: the cadence is reached, so the nudge appears. The model answers through
    # the caller's tool and the memory tool in one reply, then tries a second update.
    openai_script.reply_tool_calls(
        [(TOOL_NAME, {"summary": SUMMARY}), ("get_weather", WEATHER_ARGS)]
    )
    openai_script.reply_tool_call(TOOL_NAME, {"summary": "A second update in the same turn."})
    openai_script.reply_text("It is sunny in Kyoto today, 18 °C.")
    r3 = loop.run_turn(
        SCOPE,
        [*r2.messages, user("What's the weather there right now?")],
        system=SYSTEM,
        tools=tools,
        tool_handlers=handlers,
    )
    nudge = api.nudge(r3.requests[0])
    assert nudge is not None and TOOL_NAME in nudge
    assert r3.steps == 3 and r3.stm_updated
    assert r3.text == "It is sunny in Kyoto today, 18 °C."
    assert weather.calls == [WEATHER_ARGS]
    assert api.calls(r3.messages) == [TOOL_NAME, "get_weather", TOOL_NAME]
    first, forecast, second = api.outputs(r3.messages)
    assert first["status"] == "completed"
    assert forecast == {"city": "Kyoto", "forecast": "sunny", "celsius": 18}
    assert second["status"] == "tool_execution_failed"
    assert second["tool_name"] == TOOL_NAME and "already updated" in second["reason"]
    # Every step of the turn extends the last: after the update the memory tool is
    # still offered (the second call above failed when it ran) and the nudge stays.
    for request in r3.requests[1:]:
        assert api.nudge(request) == nudge
        assert api.tool_names(request) == [TOOL_NAME, "get_weather"]
        assert api.system_prompt(request) == api.system_prompt(r3.requests[0])
    entry = memory.get(SCOPE)
    assert entry is not None
    assert (entry.summary, entry.turns_since_refresh) == (SUMMARY, 0)
    # The transcript kept is the dialogue only: no memory was injected into it.
    assert not any(m.get("role") == "system" for m in r3.messages)
    stm_clock.advance(minutes=1)

    # Turn 4: the summary is shown; no nudge (the counter was reset).
    openai_script.reply_text("Fushimi Inari early in the morning is quiet and easy by train.")
    r4 = loop.run_turn(
        SCOPE,
        [*r3.messages, user("Which temple should I visit first?")],
        system=SYSTEM,
        tools=tools,
        tool_handlers=handlers,
    )
    content = api.content(r4.requests[0])
    assert content is not None and f"This channel:\n  {SUMMARY}" in content
    assert api.nudge(r4.requests[0]) is None
    stm_clock.advance(minutes=5)

    # Another channel of the server sees the summary, without raw turns (supersede).
    openai_script.reply_text("Hello Ann!")
    r5 = loop.run_turn(OTHER_SCOPE, [user("Hello!")], system=SYSTEM)
    other = api.content(r5.requests[0])
    assert other is not None
    # Its first turn: the briefing is in the stable group, with the absolute time of
    # turn 3's update (12:00 + 2 minutes on the frozen clock), not "N minutes ago".
    assert "Other channels:\n- #trip-planning, 2026-01-05 12:02 UTC:\n  " + SUMMARY in other
    assert "ago:" not in other
    assert "Recent messages:" not in other and "Fushimi" not in other


@pytest.mark.scripted("openai")
def test_truncated_calls_are_never_executed(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    loop = api.sync_loop(openai_client, memory, model=MODEL)
    weather = WeatherHandler()
    # One reply cut at the output limit: a complete caller call and a cut memory call.
    openai_script.push(
        Reply(
            tool_calls=(
                ToolCall("get_weather", WEATHER_ARGS),
                ToolCall(TOOL_NAME, '{"summary": "Ann plans a trip to Ky'),
            ),
            truncated=True,
        )
    )
    openai_script.reply_text("Kyoto sounds wonderful.")
    result = loop.run_turn(
        SCOPE,
        [user("Let's plan Kyoto.")],
        tools=[weather_tool(api)],
        tool_handlers={"get_weather": weather},
    )
    assert weather.calls == []  # nothing from a truncated reply runs
    outputs = api.outputs(result.messages)
    assert [o["status"] for o in outputs] == ["tool_execution_failed"] * 2
    assert all("cut off" in o["reason"] for o in outputs)
    assert result.steps == 2 and not result.stm_updated
    entry = memory.get(SCOPE)
    assert entry is not None and entry.summary is None


@pytest.mark.scripted("openai")
def test_summary_survives_restart(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    openai_script.reply_tool_call(TOOL_NAME, {"summary": SUMMARY}).reply_text(
        "Noted, Kyoto in April!"
    )
    first = api.sync_loop(openai_client, memory, model=MODEL).run_turn(
        SCOPE, [user("Kyoto in April, trains and temples.")], system=SYSTEM
    )
    assert first.stm_updated
    memory.close()

    restarted = open_memory()  # a new process on the same database and cache directory
    openai_script.reply_text("Welcome back! Shall we book the Shinkansen?")
    second = api.sync_loop(openai_client, restarted, model=MODEL).run_turn(
        SCOPE, [*first.messages, user("I'm back.")], system=SYSTEM
    )
    content = api.content(second.requests[0])
    assert content is not None and SUMMARY in content


@pytest.mark.scripted("openai")
def test_visible_text_then_memory_call_ends_the_turn(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    answer = "Kyoto in April is lovely; take the train from Osaka."
    openai_script.reply_tool_call(TOOL_NAME, {"summary": SUMMARY}, text_before=answer)
    result = api.sync_loop(openai_client, memory, model=MODEL).run_turn(
        SCOPE, [user("How do I get to Kyoto?")], system=SYSTEM
    )
    # The user already saw the answer: no second model call after the memory tool.
    assert (result.text, result.steps, len(result.requests)) == (answer, 1, 1)
    assert result.stm_updated
    assert api.outputs(result.messages) == [{"status": "completed"}]
    entry = memory.get(SCOPE)
    assert entry is not None and entry.summary == SUMMARY


@pytest.mark.scripted("openai")
def test_unknown_tool_gets_an_error_result(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    openai_script.reply_tool_call("book_flight", {"to": "KIX"}).reply_text("I can't book flights.")
    result = api.sync_loop(openai_client, memory, model=MODEL).run_turn(
        SCOPE, [user("Book me a flight to Osaka.")]
    )
    assert api.outputs(result.messages) == [
        {"status": "error", "reason": "Unknown tool 'book_flight'."}
    ]
    assert (result.text, result.steps) == ("I can't book flights.", 2)


@pytest.mark.scripted("openai")
def test_provider_error_propagates_after_the_turn_is_closed(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    loop = api.sync_loop(openai_client, memory, model=MODEL)
    openai_script.reply_text("Hi Ann!")
    loop.run_turn(SCOPE, [user("Hi!")])
    assert turns(memory) == 1

    openai_script.reply_error(429, "Rate limit reached for gpt-4.1-mini.")
    with pytest.raises(openai.RateLimitError, match="Rate limit reached"):
        loop.run_turn(SCOPE, [user("Are you there?")])
    assert turns(memory) == 2  # end_turn ran before the error surfaced


# -- streaming ----------------------------------------------------------------------------


@pytest.mark.scripted("openai")
def test_streaming_text_then_memory_call_ends_the_turn(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = configured(open_memory())
    weather = WeatherHandler()
    answer = "It's sunny in Kyoto, 18 °C: a good day for Kiyomizu-dera."
    openai_script.reply_tool_call("get_weather", WEATHER_ARGS)
    openai_script.reply_tool_call(TOOL_NAME, {"summary": SUMMARY}, text_before=answer)
    deltas: list[str] = []
    result = api.sync_loop(openai_client, memory, model=MODEL).run_turn(
        SCOPE,
        [user("Weather in Kyoto?")],
        system=SYSTEM,
        tools=[weather_tool(api)],
        tool_handlers={"get_weather": weather},
        on_text=deltas.append,
    )
    assert all(r.get("stream") is True for r in result.requests)
    assert weather.calls == [WEATHER_ARGS]  # arguments reassembled from the stream
    assert len(deltas) > 1 and "".join(deltas) == answer == result.text
    assert (result.steps, result.stm_updated) == (2, True)
    assert api.outputs(result.messages)[-1]["status"] == "completed"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


# -- async --------------------------------------------------------------------------------


@pytest.mark.scripted("openai")
async def test_async_memory_cycle(
    api: Api,
    async_openai_client: openai.AsyncOpenAI,
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    memory = open_memory()
    memory.configure_server("g1", refresh_cadence=1, render_mode="supersede")
    loop = api.async_loop(async_openai_client, memory, model=MODEL)
    seen: list[dict[str, Any]] = []

    async def get_weather(args: dict[str, Any]) -> str:
        seen.append(args)
        return "sunny, 18 °C"

    tools = [weather_tool(api)]
    handlers = {"get_weather": get_weather}
    openai_script.reply_text("Kyoto it is!")
    r1 = await loop.run_turn(SCOPE, [user("Plan Kyoto with me.")], system=SYSTEM, tools=tools)
    assert api.nudge(r1.requests[0]) is None

    openai_script.reply_tool_calls(
        [("get_weather", WEATHER_ARGS), (TOOL_NAME, {"summary": SUMMARY})]
    )
    openai_script.reply_text("Sunny, 18 °C.")
    deltas: list[str] = []

    async def on_text(delta: str) -> None:
        deltas.append(delta)

    r2: TurnResult = await loop.run_turn(
        SCOPE,
        [*r1.messages, user("Weather?")],
        system=SYSTEM,
        tools=tools,
        tool_handlers=handlers,
        on_text=on_text,
    )
    assert api.nudge(r2.requests[0]) is not None
    assert seen == [WEATHER_ARGS]
    weather, wrote = api.outputs(r2.messages)
    assert weather == "sunny, 18 °C" and wrote["status"] == "completed"
    assert r2.stm_updated and "".join(deltas) == "Sunny, 18 °C." == r2.text

    openai_script.reply_error(429, "Rate limit reached for gpt-4.1-mini.")
    with pytest.raises(openai.RateLimitError):
        await loop.run_turn(SCOPE, [*r2.messages, user("And tomorrow?")], system=SYSTEM)
    assert turns(memory) == 1  # the failed turn still counted


# -- determinism and real traffic ----------------------------------------------------------


@pytest.mark.scripted("openai")
def test_requests_are_byte_identical_across_runs(
    api: Api,
    openai_client: openai.OpenAI,
    openai_script: Script,
    openai_source: Any,
    tmp_path: Path,
) -> None:
    def run(folder: Path) -> list[bytes]:
        openai_source.reset()  # the fake server's ids start afresh, as in a new process
        openai_script.reply_tool_call(TOOL_NAME, {"summary": SUMMARY}).reply_text("Noted!")
        openai_script.reply_text("Welcome back!")
        with ShortTermMemory.from_url(
            f"sqlite:///{folder}/stm.db", cache_dir=folder / "cache", clock=FrozenClock()
        ) as memory:
            configured(memory)
            loop = api.sync_loop(openai_client, memory, model=MODEL, top_p=1.0, temperature=0)
            first = loop.run_turn(SCOPE, [user("Kyoto in April.")], system=SYSTEM)
            second = loop.run_turn(SCOPE, [*first.messages, user("Hi again.")], system=SYSTEM)
        return [json.dumps(r).encode() for r in (*first.requests, *second.requests)]

    one, two = run(tmp_path / "one"), run(tmp_path / "two")
    assert len(one) == 3 and one == two
    assert SUMMARY.encode() in one[-1]


def test_one_plain_turn(
    api: Api,
    openai_client: openai.OpenAI,
    openai_source: Any,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """Holds whatever the model says, so ``make record-cassettes`` records it from the
    real API."""
    memory = configured(open_memory())
    openai_source.script.reply_text("Hello!")
    result = api.sync_loop(openai_client, memory, model=MODEL, max_steps=2).run_turn(
        SCOPE, "Say hello in one word.", system=SYSTEM
    )
    assert TOOL_NAME in api.tool_names(result.requests[0])
    assert result.text.strip() and result.usage.total_tokens > 0
    entry = memory.get(SCOPE)
    assert entry is not None and [m.role for m in entry.messages][:1] == ["user"]

"""The assertion helpers of ``stm_memory.testing``: pass cases, and fail cases whose
messages say what was there instead. Uses the plugin's fixtures (loaded through the
``pytest11`` entry point, as for any user)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from stm_memory import Category, Scope, ShortTermMemory, TurnContext
from stm_memory.kit.loop import TurnResult, Usage
from stm_memory.testing import (
    FrozenClock,
    StmAssertions,
    assert_memory_contains,
    assert_request_carries_memory,
    assert_request_lacks_memory,
    assert_tool_not_offered,
    assert_tool_offered,
    injected_memory,
    offered_tools,
)
from stm_memory.tool.schema import tool_spec
from stm_memory.wire.anthropic import messages_tool
from stm_memory.wire.openai_chat import chat_tool
from stm_memory.wire.responses import responses_tool

MakeScope = Callable[..., Scope]
MEMORY = "[Short-term memory]\nThis channel:\nThe heist is on Friday."
NUDGE = "[Short-term memory] After you answer, call update_short_term_memory with a summary."


def _refresh(memory: ShortTermMemory, scope: Scope, args: dict[str, str]) -> TurnContext:
    turn = memory.begin_turn(scope)
    assert memory.update(turn, args)["status"] == "completed"
    return turn


# -- assert_memory_contains ------------------------------------------------------------


def test_memory_contains_finds_the_summary_and_returns_the_entry(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    scope = stm_scope("plot")
    _refresh(stm_memory, scope, {"summary": "The heist is on Friday."})
    entry = assert_memory_contains(stm_memory, scope, "Friday")
    assert entry.summary == "The heist is on Friday."
    assert_memory_contains(stm_memory, scope, re.compile(r"heist .* Fri"))
    assert_memory_contains(stm_memory, scope, "Friday", part="summary")


def test_memory_contains_fails_showing_what_the_memory_holds(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    scope = stm_scope("plot")
    stm_memory.capture(scope, [{"role": "user", "content": "Monday works", "name": "Ann"}])
    _refresh(stm_memory, scope, {"summary": "The heist is on Friday."})
    with pytest.raises(AssertionError) as failure:
        assert_memory_contains(stm_memory, scope, "Monday")
    message = str(failure.value)
    assert "short-term memory of shortterm:server:test-server:plot does not contain 'Monday'" in (
        message
    )
    assert "searched: summary, categories" in message
    assert "summary: 'The heist is on Friday.'" in message
    assert 'messages: 1 captured (not searched; pass part="messages" or "any")' in message
    # The raw turns are searched when asked for.
    assert_memory_contains(stm_memory, scope, "Monday", part="messages")
    assert_memory_contains(stm_memory, scope, "Monday", part="any")
    with pytest.raises(AssertionError, match=r"(?s)searched: messages.*Ann: 'Monday works'"):
        assert_memory_contains(stm_memory, scope, "Sunday", part="messages")


def test_memory_contains_searches_category_values(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    stm_memory.set_categories("test-server", [Category("Plot"), Category("Mood")])
    scope = stm_scope("plot")
    _refresh(stm_memory, scope, {"plot": "A heist on Friday", "mood": "tense"})
    assert_memory_contains(stm_memory, scope, "tense")
    assert_memory_contains(stm_memory, scope, "Friday", part="categories")
    with pytest.raises(AssertionError) as failure:
        assert_memory_contains(stm_memory, scope, "cheerful")
    assert "summary: (none)" in str(failure.value)
    assert "    plot: 'A heist on Friday'\n    mood: 'tense'" in str(failure.value)
    with pytest.raises(AssertionError, match=r"searched: summary\)"):
        assert_memory_contains(stm_memory, scope, "tense", part="summary")


def test_memory_contains_says_when_nothing_was_stored(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    with pytest.raises(AssertionError) as failure:
        assert_memory_contains(stm_memory, stm_scope(dm=True), "anything")
    assert str(failure.value) == (
        "expected the short-term memory of shortterm:user:alice:general to contain "
        "'anything', but there is none: nothing was stored for this scope"
    )


def test_memory_contains_says_when_the_memory_expired(
    stm_memory: ShortTermMemory, stm_scope: MakeScope, stm_clock: FrozenClock
) -> None:
    scope = stm_scope()
    _refresh(stm_memory, scope, {"summary": "The heist is on Friday."})
    stm_clock.advance(hours=25)
    with pytest.raises(AssertionError) as failure:
        assert_memory_contains(stm_memory, scope, "Friday")
    assert str(failure.value) == (
        "expected the short-term memory of shortterm:server:test-server:general to contain "
        "'Friday', but there is none live: it expired (last updated "
        "2026-01-05T12:00:00+00:00, 25 h before the memory's clock "
        "2026-01-06T13:00:00+00:00; summary TTL 24 h)"
    )


def test_memory_contains_rejects_bad_arguments(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    with pytest.raises(TypeError, match="non-empty string"):
        assert_memory_contains(stm_memory, stm_scope(), "")
    with pytest.raises(TypeError, match="must be a Scope"):
        assert_memory_contains(stm_memory, "general", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="part must be one of"):
        assert_memory_contains(stm_memory, stm_scope(), "x", part="everything")  # type: ignore[arg-type]


# -- assert_tool_offered / assert_tool_not_offered ----------------------------------------


def test_tool_offer_of_a_memory_and_scope(
    stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    scope = stm_scope()
    assert_tool_offered(stm_memory, scope)
    assert_tool_not_offered(stm_memory, scope, user_message="Please remember this forever")
    assert_tool_not_offered(stm_memory, scope, provider="novelai")
    with pytest.raises(AssertionError) as failure:
        assert_tool_offered(stm_memory, scope, provider="novelai")
    assert str(failure.value) == (
        "expected update_short_term_memory to be offered, but the turn in "
        "shortterm:server:test-server:general hides it: update_short_term_memory is not "
        "available for provider 'novelai'."
    )
    with pytest.raises(TypeError, match="pass the Scope too"):
        assert_tool_offered(stm_memory)
    # Checking starts no turn that counts.
    assert stm_memory.get(scope) is None


def test_tool_offer_of_a_turn(stm_memory: ShortTermMemory, stm_scope: MakeScope) -> None:
    scope = stm_scope()
    turn = stm_memory.begin_turn(scope)
    assert_tool_offered(turn)
    with pytest.raises(AssertionError) as failure:
        assert_tool_not_offered(turn)
    assert str(failure.value) == (
        "expected update_short_term_memory not to be offered, but the turn in "
        "shortterm:server:test-server:general offers it (no guard applies)"
    )
    stm_memory.update(turn, {"summary": "done"})
    assert_tool_not_offered(turn)
    with pytest.raises(AssertionError, match="hides it: Short-term memory was already updated"):
        assert_tool_offered(turn)


def test_tool_offer_of_a_disabled_server(stm_memory: ShortTermMemory, stm_scope: MakeScope) -> None:
    stm_memory.configure_server("test-server", short_term_memory_enabled=False)
    with pytest.raises(AssertionError, match="disabled for this server"):
        assert_tool_offered(stm_memory, stm_scope())


@pytest.fixture
def turn(stm_memory: ShortTermMemory, stm_scope: MakeScope) -> TurnContext:
    return stm_memory.begin_turn(stm_scope())


def test_tool_offer_of_request_bodies(turn: TurnContext) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    chat = {"model": "m", "messages": [], "tools": [chat_tool(tool_spec(turn)), weather]}
    responses = {"model": "m", "input": [], "tools": [responses_tool(tool_spec(turn))]}
    claude = {"model": "m", "messages": [], "tools": [messages_tool(tool_spec(turn))]}
    for body in (chat, responses, claude, json.dumps(chat), json.dumps(claude).encode()):
        assert_tool_offered(body)
    assert offered_tools(chat) == ["update_short_term_memory", "get_weather"]
    assert offered_tools(json.dumps(responses)) == ["update_short_term_memory"]

    without = {"model": "m", "messages": [], "tools": [weather]}
    assert_tool_not_offered(without)
    with pytest.raises(AssertionError) as failure:
        assert_tool_offered(without)
    assert str(failure.value) == (
        "expected update_short_term_memory to be offered, but the request offers tools "
        "['get_weather']"
    )
    with pytest.raises(AssertionError, match=r"but the request offers no tools$"):
        assert_tool_offered({"model": "m", "messages": []})
    with pytest.raises(AssertionError, match=r"offers tools \['update_short_term_memory'"):
        assert_tool_not_offered(chat)


def test_a_tool_defined_with_tool_choice_none_is_not_offered(turn: TurnContext) -> None:
    # How the Anthropic loop keeps tool history valid while hiding the tool.
    body = {
        "messages": [],
        "tools": [messages_tool(tool_spec(turn))],
        "tool_choice": {"type": "none"},
    }
    assert_tool_not_offered(body)
    with pytest.raises(AssertionError, match="defined with tool_choice none"):
        assert_tool_offered(body)
    assert_tool_not_offered(
        {"messages": [], "tools": [chat_tool(tool_spec(turn))], "tool_choice": "none"}
    )


def test_tool_offer_of_a_turn_result(turn: TurnContext) -> None:
    offered = {"messages": [], "tools": [chat_tool(tool_spec(turn))]}
    result = TurnResult("hi", [], False, Usage(), 2, [offered, {"messages": []}])
    assert_tool_offered(result)
    with pytest.raises(AssertionError) as failure:
        assert_tool_not_offered(result)
    assert str(failure.value) == (
        "expected update_short_term_memory not to be offered, but across the turn's requests:\n"
        "  request 0: the request offers tools ['update_short_term_memory']\n"
        "  request 1: the request offers no tools"
    )
    assert_tool_not_offered(TurnResult("hi", [], False, Usage(), 1, [{"messages": []}]))
    with pytest.raises(AssertionError, match="the turn sent no requests"):
        assert_tool_offered(TurnResult("", [], False, Usage(), 0, []))


def test_tool_offer_of_langchain_tools(stm_memory: ShortTermMemory, turn: TurnContext) -> None:
    @tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    memory_tool = stm_memory.tool(turn)
    assert memory_tool is not None
    assert_tool_offered([get_weather, memory_tool])
    assert_tool_not_offered([get_weather])
    with pytest.raises(AssertionError, match=r"but the tools are \['get_weather'\]"):
        assert_tool_offered([get_weather])

    class Request:  # a LangChain ModelRequest has .tools and .messages
        def __init__(self) -> None:
            self.tools = [memory_tool]
            self.messages = [SystemMessage(MEMORY), HumanMessage("hi")]

    assert_tool_offered(Request())
    assert_request_carries_memory(Request(), "Friday")
    with pytest.raises(TypeError, match="expected a ShortTermMemory"):
        assert_tool_offered(42)


# -- assert_request_carries_memory / assert_request_lacks_memory --------------------------


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(
            {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "system", "content": MEMORY},
                    {"role": "user", "content": "hi"},
                ],
            },
            id="openai-chat",
        ),
        pytest.param(
            {
                "model": "m",
                "instructions": "Be brief.",
                "input": [
                    {"role": "system", "content": MEMORY},
                    {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                    {"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{}"},
                ],
            },
            id="openai-responses",
        ),
        pytest.param(
            {"model": "m", "system": f"Be brief.\n\n{MEMORY}", "messages": []},
            id="anthropic-system-string",
        ),
        pytest.param(
            {
                "model": "m",
                "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": MEMORY}],
                "messages": [{"role": "user", "content": "hi"}],
            },
            id="anthropic-system-blocks",
        ),
        pytest.param(
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": MEMORY},
                            {"type": "text", "text": "hi"},
                        ],
                    }
                ],
            },
            id="anthropic-user-blocks",
        ),
        pytest.param(
            [SystemMessage("Be brief."), SystemMessage(MEMORY), HumanMessage("hi")],
            id="langchain-system",
        ),
        pytest.param(
            [SystemMessage("Be brief."), HumanMessage(f"{MEMORY}\n\nhi"), AIMessage("yo")],
            id="langchain-merged-into-human",
        ),
        pytest.param([("system", MEMORY), ("user", "hi")], id="langchain-tuples"),
        pytest.param(
            json.dumps({"messages": [{"role": "developer", "content": MEMORY}]}).encode(),
            id="json-bytes",
        ),
    ],
)
def test_request_carries_memory_in_every_shape(request_body: Any) -> None:
    (text,) = assert_request_carries_memory(request_body, "Friday")
    # From the header on; merged into a user turn, the user's words follow it.
    assert text == MEMORY or text.startswith(f"{MEMORY}\n\n")
    assert_request_carries_memory(request_body)
    assert_request_lacks_memory(request_body, "Saturday")
    with pytest.raises(AssertionError, match="does not contain 'Saturday'"):
        assert_request_carries_memory(request_body, "Saturday")
    with pytest.raises(AssertionError, match="expected the request to carry no short-term"):
        assert_request_lacks_memory(request_body)


def test_request_carries_memory_fails_showing_the_memory_it_carries() -> None:
    body = {"messages": [{"role": "system", "content": MEMORY}, {"role": "user", "content": "hi"}]}
    with pytest.raises(AssertionError) as failure:
        assert_request_carries_memory(body, re.compile("Satur?day"))
    assert str(failure.value) == (
        "the short-term memory the request carries does not contain pattern 'Satur?day'; "
        "it carries:\n"
        "  memory text 0:\n"
        "    [Short-term memory]\n"
        "    This channel:\n"
        "    The heist is on Friday."
    )


def test_request_without_memory_fails_showing_what_it_carries() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What day is the heist?"},
        ],
    }
    with pytest.raises(AssertionError) as failure:
        assert_request_carries_memory(body, "Friday")
    assert str(failure.value) == (
        "expected the request to carry short-term memory with 'Friday', but no text part has "
        "the '[Short-term memory]' header. What it carries:\n"
        "request 0: 2 text parts\n"
        "  message 0 (system): 'Be brief.'\n"
        "  message 1 (user): 'What day is the heist?'"
    )
    assert_request_lacks_memory(body)
    assert_request_lacks_memory(body, "Friday")


def test_the_users_own_words_are_not_memory() -> None:
    """Only injected text counts: the user saying "Friday" is not the memory saying it."""
    body = {"messages": [{"role": "user", "content": "Is the heist on Friday?"}]}
    with pytest.raises(AssertionError, match="no text part has the"):
        assert_request_carries_memory(body, "Friday")


def test_request_lacks_memory_shows_the_offending_text() -> None:
    body = {
        "messages": [{"role": "system", "content": MEMORY}, {"role": "system", "content": NUDGE}]
    }
    assert injected_memory(body) == [MEMORY, NUDGE]
    assert_request_lacks_memory(body, "Saturday")
    with pytest.raises(AssertionError) as failure:
        assert_request_lacks_memory(body, "Friday")
    assert str(failure.value) == (
        "expected the request to carry no short-term memory with 'Friday', but it carries:\n"
        "  memory text 0:\n"
        "    [Short-term memory]\n"
        "    This channel:\n"
        "    The heist is on Friday."
    )


def test_turn_results_and_lists_of_bodies_count_every_request() -> None:
    first = {"messages": [{"role": "user", "content": "hi"}]}
    second = {"messages": [{"role": "system", "content": MEMORY}]}
    result = TurnResult("ok", [], False, Usage(), 2, [first, second])
    assert_request_carries_memory(result, "Friday")
    assert_request_carries_memory([first, second], "Friday")
    assert_request_carries_memory([json.dumps(first).encode(), json.dumps(second).encode()])
    with pytest.raises(AssertionError, match=r"request 0: 1 text parts\n.*\nrequest 1: "):
        assert_request_carries_memory(TurnResult("ok", [], False, Usage(), 2, [first, first]))

    class Recorded:  # a vcrpy request: the body as bytes
        body = json.dumps(second).encode()

    assert_request_carries_memory(Recorded(), "Friday")


def test_request_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="JSON request body"):
        assert_request_carries_memory("not json")
    with pytest.raises(TypeError, match="expected a request body"):
        assert_request_carries_memory(42)
    with pytest.raises(TypeError, match="non-empty string"):
        assert_request_lacks_memory({"messages": []}, "")


# -- the stm_assert fixture ----------------------------------------------------------------


def test_stm_assert_is_bound_to_the_fixture_memory(
    stm_assert: StmAssertions, stm_memory: ShortTermMemory, stm_scope: MakeScope
) -> None:
    assert stm_assert.memory is stm_memory
    scope = stm_scope("plot")
    stm_assert.tool_offered(scope)
    stm_assert.tool_not_offered(scope, user_message="remember this for future conversations")
    turn = _refresh(stm_memory, scope, {"summary": "The heist is on Friday."})
    stm_assert.tool_not_offered(turn)
    assert stm_assert.memory_contains(scope, "Friday").summary == "The heist is on Friday."
    with pytest.raises(AssertionError, match="does not contain 'Monday'"):
        stm_assert.memory_contains(scope, "Monday")
    with pytest.raises(AssertionError, match="hides it: The user explicitly asked"):
        stm_assert.tool_offered(scope, user_message="remember this for future conversations")
    with pytest.raises(AssertionError, match="offers it"):
        stm_assert.tool_not_offered(scope)
    context = stm_memory.build_context(stm_memory.begin_turn(stm_scope("lore")))
    request = context.apply([{"role": "user", "content": "hi"}])
    assert stm_assert.request_carries_memory(request, "Friday")
    stm_assert.request_lacks_memory(request, "Monday")
    with pytest.raises(AssertionError, match="carry no short-term memory with 'Friday'"):
        stm_assert.request_lacks_memory(request, "Friday")

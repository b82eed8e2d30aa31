"""The OpenAI adapters without the network: construction checks, parsing of replies,
request shape and determinism, memory placement into Responses input items."""

from __future__ import annotations

import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

import stm_memory_openai
from stm_memory import ConfigurationError, MemoryTurn, Scope, ShortTermMemory, ValidationError
from stm_memory.kit import drive, prompt_cache_key
from stm_memory.prompt.placement import MemoryContext
from stm_memory.wire.responses import RESPONSES_WIRE
from stm_memory_openai import (
    AsyncOpenAIChatLoop,
    AsyncOpenAIResponsesLoop,
    OpenAIChatLoop,
    OpenAIResponsesLoop,
)
from stm_memory_openai._chat import ChatCompletionsAdapter, parse_completion
from stm_memory_openai._responses import ResponsesAdapter

OFFLINE = {"api_key": "test", "base_url": "http://127.0.0.1:9/v1", "max_retries": 0}
CONTEXT = MemoryContext(content="[memory]", nudge="[nudge]", content_depth=-1, nudge_depth=2)
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


@pytest.fixture
def clients() -> Iterator[tuple[openai.OpenAI, openai.AsyncOpenAI]]:
    with openai.OpenAI(**OFFLINE) as sync_client:
        yield sync_client, openai.AsyncOpenAI(**OFFLINE)


@pytest.fixture
def memory(open_memory: Callable[[], ShortTermMemory]) -> ShortTermMemory:
    return open_memory()


@pytest.fixture
def turn(memory: ShortTermMemory) -> MemoryTurn:
    return drive(MemoryTurn.begin(memory, SCOPE))


def adapter(kind: type[Any], **options: Any) -> Any:
    return kind(lambda **_: None, model="m", request_options=options, on_text=None)


# -- package surface ------------------------------------------------------------------------


def test_public_names() -> None:
    assert stm_memory_openai.__all__ == sorted(stm_memory_openai.__all__)
    assert {
        "OpenAIChatLoop",
        "OpenAIResponsesLoop",
        "AsyncOpenAIChatLoop",
        "AsyncOpenAIResponsesLoop",
        "TurnResult",
    } <= set(stm_memory_openai.__all__)


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.split(".")[0] == "stm_memory_openai"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "openai", None)  # "not installed"
    with pytest.raises(ImportError, match=re.escape('pip install "stm-memory[openai]"')):
        importlib.import_module("stm_memory_openai")


@pytest.mark.parametrize("loop", [OpenAIChatLoop, OpenAIResponsesLoop])
def test_sync_loops_refuse_an_async_client(
    loop: type[Any], clients: tuple[openai.OpenAI, openai.AsyncOpenAI], memory: ShortTermMemory
) -> None:
    with pytest.raises(ConfigurationError, match=r"needs an openai\.OpenAI client"):
        loop(clients[1], memory, model="m")


@pytest.mark.parametrize("loop", [AsyncOpenAIChatLoop, AsyncOpenAIResponsesLoop])
def test_async_loops_refuse_a_sync_client(
    loop: type[Any], clients: tuple[openai.OpenAI, openai.AsyncOpenAI], memory: ShortTermMemory
) -> None:
    with pytest.raises(ConfigurationError, match=r"needs an openai\.AsyncOpenAI client"):
        loop(clients[0], memory, model="m")


@pytest.mark.parametrize(
    ("loop", "option"),
    [(OpenAIChatLoop, "messages"), (OpenAIChatLoop, "stream"), (OpenAIResponsesLoop, "input")],
)
def test_options_the_loop_manages_are_refused(
    loop: type[Any],
    option: str,
    clients: tuple[openai.OpenAI, openai.AsyncOpenAI],
    memory: ShortTermMemory,
) -> None:
    with pytest.raises(ConfigurationError, match=option):
        loop(clients[0], memory, model="m", **{option: 1})


@pytest.mark.parametrize("bad", [{"model": ""}, {"model": "m", "max_steps": 0}])
def test_bad_settings_are_refused(
    bad: dict[str, Any], clients: tuple[openai.OpenAI, openai.AsyncOpenAI], memory: ShortTermMemory
) -> None:
    with pytest.raises(ConfigurationError):
        OpenAIChatLoop(clients[0], memory, **bad)


def test_sync_loop_refuses_async_tool_handlers(
    clients: tuple[openai.OpenAI, openai.AsyncOpenAI], memory: ShortTermMemory
) -> None:
    async def handler(args: dict[str, Any]) -> str:
        return "x"

    loop = OpenAIChatLoop(clients[0], memory, model="m")
    with pytest.raises(ValidationError, match="AsyncOpenAIChatLoop"):
        loop.run_turn(Scope(channel_id="c1", user_id="u1"), "hi", tool_handlers={"t": handler})


# -- Chat Completions -------------------------------------------------------------------------


def completion(message: dict[str, Any], finish_reason: str) -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        }
    )


def test_chat_length_marks_every_call_truncated() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": '}},
    ]
    reply = parse_completion(
        completion({"role": "assistant", "content": None, "tool_calls": calls}, "length")
    )
    assert [(c.id, c.name, c.truncated) for c in reply.tool_calls] == [
        ("a", "f", True),
        ("b", "g", True),
    ]
    assert reply.transcript == (
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": '{"x": '}},
            ],
        },
    )
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (5, 7)


def test_chat_complete_calls_are_not_truncated_and_refusals_are_kept() -> None:
    reply = parse_completion(
        completion({"role": "assistant", "content": None, "refusal": "No."}, "stop")
    )
    assert reply.text == "" and reply.tool_calls == ()
    assert reply.transcript == ({"role": "assistant", "content": None, "refusal": "No."},)


def test_chat_without_choices_is_an_empty_reply() -> None:
    empty = ChatCompletion.model_validate(
        {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}
    )
    reply = parse_completion(empty)
    assert (reply.text, reply.tool_calls, reply.transcript) == ("", (), ())


def test_chat_request_shape_and_determinism(turn: MemoryTurn) -> None:
    chat = adapter(ChatCompletionsAdapter, top_p=1, temperature=0)
    transcript = [{"role": "user", "content": "hi"}]
    before = json.dumps(transcript)
    request = chat.build_request(transcript, "sys", [{"type": "function"}], turn, context=CONTEXT)
    assert list(request) == [
        "model",
        "messages",
        "tools",
        "temperature",
        "top_p",
        "prompt_cache_key",
    ]
    assert request["prompt_cache_key"] == prompt_cache_key(SCOPE)
    assert request["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "[memory]"},
        {"role": "system", "content": "[nudge]"},
        {"role": "user", "content": "hi"},
    ]
    assert json.dumps(transcript) == before  # the caller's transcript is untouched
    again = adapter(ChatCompletionsAdapter, temperature=0, top_p=1).build_request(
        transcript, "sys", [{"type": "function"}], turn, context=CONTEXT
    )
    assert json.dumps(again) == json.dumps(request)


def test_chat_streaming_request(turn: MemoryTurn) -> None:
    chat = ChatCompletionsAdapter(lambda **_: None, model="m", request_options={}, on_text=print)
    hi = [{"role": "user", "content": "hi"}]
    request = chat.build_request(hi, None, [], turn, context=MemoryContext())
    assert request == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [chat.memory_tool(turn.tool_spec())],
        "stream": True,
        "stream_options": {"include_usage": True},
        "prompt_cache_key": prompt_cache_key(SCOPE),
    }


@pytest.mark.parametrize("kind", [ChatCompletionsAdapter, ResponsesAdapter])
def test_cache_key_hint_yields_to_the_callers_and_turns_off(turn: MemoryTurn, kind: Any) -> None:
    hi = [{"role": "user", "content": "hi"}]
    own = adapter(kind, prompt_cache_key="mine", prompt_cache_retention="24h")
    request = own.build_request(hi, None, [], turn, context=MemoryContext())
    assert (request["prompt_cache_key"], request["prompt_cache_retention"]) == ("mine", "24h")
    off = kind(
        lambda **_: None,
        model="m",
        request_options={},
        on_text=None,
        cache_hints=False,
    )
    assert "prompt_cache_key" not in off.build_request(hi, None, [], turn, context=MemoryContext())


def test_chat_memory_tool_is_strict(turn: MemoryTurn) -> None:
    tool = adapter(ChatCompletionsAdapter).memory_tool(turn.tool_spec())
    assert tool["function"]["name"] == "update_short_term_memory"
    assert tool["function"]["strict"] is True


# -- Responses --------------------------------------------------------------------------------


def response(status: str, output: list[dict[str, Any]], **extra: Any) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "model": "m",
            "status": status,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 3,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": 4,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 7,
            },
            **extra,
        }
    )


FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "f",
    "arguments": '{"a": ',
    "status": "incomplete",
}


def test_responses_incomplete_at_the_output_limit_marks_calls_truncated() -> None:
    reply = adapter(ResponsesAdapter).parse(
        response("incomplete", [FUNCTION_CALL], incomplete_details={"reason": "max_output_tokens"})
    )
    assert [(c.id, c.truncated) for c in reply.tool_calls] == [("call_1", True)]
    assert reply.transcript == (FUNCTION_CALL,)
    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (3, 4)


def test_responses_incomplete_for_another_reason_is_not_truncation() -> None:
    done = {**FUNCTION_CALL, "arguments": "{}", "status": "completed"}
    reply = adapter(ResponsesAdapter).parse(
        response("incomplete", [done], incomplete_details={"reason": "content_filter"})
    )
    assert [c.truncated for c in reply.tool_calls] == [False]


def test_responses_failed_raises() -> None:
    failed = response("failed", [], error={"code": "server_error", "message": "boom"})
    with pytest.raises(openai.OpenAIError, match="server_error: boom"):
        adapter(ResponsesAdapter).parse(failed)


def test_responses_custom_tool_results_use_their_own_item_type() -> None:
    responses = adapter(ResponsesAdapter)
    custom = {"type": "custom_tool_call", "call_id": "c9", "name": "grep", "input": "foo"}
    reply = responses.parse(response("completed", [custom, {**FUNCTION_CALL, "arguments": "{}"}]))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("grep", {"input": "foo"}),
        ("f", "{}"),
    ]
    results = responses.tool_results([(reply.tool_calls[0], "ok"), (reply.tool_calls[1], "ok")])
    assert [r["type"] for r in results] == ["custom_tool_call_output", "function_call_output"]


def test_responses_request_shape(turn: MemoryTurn) -> None:
    responses = adapter(ResponsesAdapter, store=False)
    request = responses.build_request(
        [{"role": "user", "content": "hi"}], "sys", [], turn, context=CONTEXT
    )
    assert request == {
        "model": "m",
        "instructions": "sys",
        "input": [
            {"role": "system", "content": "[memory]"},
            {"role": "system", "content": "[nudge]"},
            {"role": "user", "content": "hi"},
        ],
        # The turn offers the memory tool; the adapter writes it in the API's format.
        "tools": [responses.memory_tool(turn.tool_spec())],
        "store": False,
        "prompt_cache_key": prompt_cache_key(SCOPE),
    }


def _call(n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"}


def _output(n: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"}


@pytest.mark.parametrize(
    ("reasoning", "depth", "expected"),
    [
        *((True, depth, 1) for depth in (1, 2, 3, 4)),
        (True, 5, 0),
        *((False, depth, 1) for depth in (1, 2, 3)),
        (False, 4, 0),
    ],
)
def test_responses_placement_keeps_a_reply_and_its_calls_together(
    depth: int, expected: int, reasoning: bool
) -> None:
    text = {"type": "message", "role": "assistant", "content": [{"type": "output_text"}]}
    head = [{"type": "reasoning", "id": "rs_1", "summary": []}] if reasoning else []
    items = [{"role": "user", "content": "q"}, *head, text, _call(1), _call(2), _output(1)]
    items.append(_output(2))
    context = MemoryContext(nudge="[nudge]", nudge_depth=depth)
    placed = RESPONSES_WIRE.place(context, items, None, None)[1]
    nudge = {"role": "system", "content": "[nudge]"}
    # Before the reply (and its reasoning), never between its parts; the items are the
    # caller's own objects, in order.
    assert placed == [*items[:expected], nudge, *items[expected:]]
    assert all(a is b for a, b in zip([p for p in placed if p != nudge], items, strict=True))


def test_responses_placement_of_a_lone_call() -> None:
    items = [{"role": "user", "content": "q"}, _call(1), _output(1)]
    items.append({"role": "user", "content": "r"})
    context = MemoryContext(nudge="[nudge]", nudge_depth=2)
    placed = RESPONSES_WIRE.place(context, items, None, None)[1]
    assert placed[1] == {"role": "system", "content": "[nudge]"}

"""Drive FakeProviderServer through the real openai / anthropic SDK clients."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from stm_memory.testing import count_text_tokens
from tests.fakeprovider import ErrorReply, FakeProviderServer, Reply, ToolCall, parse_partial_json
from tests.fakeprovider.script import EXCEEDED_KINDS, context_exceeded_body

USER_HI: list[Any] = [{"role": "user", "content": "hi"}]
CHAT_TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "update_short_term_memory",
            "description": "Store a summary.",
            "parameters": {
                "type": "object",
                "properties": {"summary": {"type": "string"}},
                "required": ["summary"],
            },
        },
    }
]
RESPONSES_TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "update_short_term_memory",
        "description": "Store a summary.",
        "parameters": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        },
        "strict": False,
    }
]
ANTHROPIC_TOOLS: list[Any] = [
    {
        "name": "update_short_term_memory",
        "description": "Store a summary.",
        "input_schema": {
            "type": "object",
            "properties": {"summary": {"type": "string"}},
            "required": ["summary"],
        },
    }
]


@pytest.fixture
def srv() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def oai(srv: FakeProviderServer) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    yield client
    client.close()


@pytest.fixture
def ant(srv: FakeProviderServer) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(base_url=srv.base_url, api_key="test", max_retries=0)
    yield client
    client.close()


# ---------------------------------------------------------------------------------------
# Server basics
# ---------------------------------------------------------------------------------------


def _raw_post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def test_base_url_and_clean_stop() -> None:
    server = FakeProviderServer()
    with server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.openai_base_url == server.base_url + "/v1"
        port = server.port
        # a pooled keep-alive connection must not block stop()
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        server.script.reply_text("x")
        client.chat.completions.create(model="m", messages=USER_HI)
        started = time.monotonic()
    assert time.monotonic() - started < 3
    client.close()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=2)


def test_responses_are_byte_stable_across_servers() -> None:
    body = {"model": "gpt-test", "messages": USER_HI, "stream": True}
    outputs = []
    for _ in range(2):
        with FakeProviderServer() as server:
            server.script.reply_tool_call("lookup", {"q": "x"}, text_before="Let me check.")
            server.script.reply_text("plain")
            first = _raw_post(server.openai_base_url + "/chat/completions", body)
            second = _raw_post(server.base_url + "/v1/messages", {**body, "max_tokens": 10})
            outputs.append((first, second))
    assert outputs[0] == outputs[1]
    (status, headers, payload), _ = outputs[0]
    assert status == 200
    assert headers["Date"] == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert headers["Server"] == "FakeProvider/1.0"
    assert payload.endswith(b"data: [DONE]\n\n")


def _vcr_session(base_url: str) -> list[str]:
    oai = openai.OpenAI(base_url=base_url + "/v1", api_key="test", max_retries=0)
    ant = anthropic.Anthropic(base_url=base_url, api_key="test", max_retries=0)
    try:
        chat = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
        with oai.responses.stream(model="gpt-test", input="hi") as rstream:
            response = rstream.get_final_response()
        with ant.messages.stream(model="claude-test", max_tokens=16, messages=USER_HI) as astream:
            message = astream.get_final_message()
    finally:
        oai.close()
        ant.close()
    tool = message.content[0]
    assert tool.type == "tool_use"
    return [chat.choices[0].message.content or "", response.output_text, json.dumps(tool.input)]


def test_vcr_cassettes_are_byte_stable_and_replay(tmp_path: Path) -> None:
    vcr = pytest.importorskip("vcr")
    match_on = ["method", "path", "body"]
    recorder = vcr.VCR(record_mode="all", filter_headers=["authorization"], match_on=match_on)
    port = 0
    results = []
    for name in ("first.yaml", "second.yaml"):
        with FakeProviderServer(port=port) as server:
            port = server.port  # same port both times so the recorded URIs match
            server.script.reply_text("chat says hi").reply_text("streamed words")
            server.script.reply_tool_call("update_short_term_memory", {"summary": "s"})
            with recorder.use_cassette(str(tmp_path / name)):
                results.append(_vcr_session(server.base_url))
    first = (tmp_path / "first.yaml").read_bytes()
    assert first == (tmp_path / "second.yaml").read_bytes()
    assert b"Bearer test" not in first
    assert results[0] == ["chat says hi", "streamed words", '{"summary": "s"}']

    # replay with the server gone: the SDKs parse the recorded JSON and SSE bodies
    replayer = vcr.VCR(record_mode="none", match_on=match_on)
    with replayer.use_cassette(str(tmp_path / "first.yaml")):
        assert _vcr_session(f"http://127.0.0.1:{port}") == results[0]


def test_unknown_path_is_404(srv: FakeProviderServer) -> None:
    status, _, payload = _raw_post(srv.base_url + "/v1/nope", {})
    assert status == 404
    assert "Invalid URL (POST /v1/nope)" in json.loads(payload)["error"]["message"]


def test_requests_are_recorded(
    srv: FakeProviderServer, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> None:
    srv.script.reply_text("a").reply_text("b")
    oai.chat.completions.create(model="gpt-test", messages=USER_HI, temperature=0)
    ant.messages.create(model="claude-test", max_tokens=16, messages=USER_HI, system="be brief")
    first, second = srv.requests
    path, body, headers = first
    assert path == "/v1/chat/completions"
    assert body == {"model": "gpt-test", "messages": USER_HI, "temperature": 0}
    assert headers["authorization"] == "Bearer test"
    assert second.path == "/v1/messages"
    assert second.body["system"] == "be brief"
    # this anthropic SDK sends api_key as a bearer token, not x-api-key
    assert second.headers["authorization"] == "Bearer test"
    assert "anthropic-version" in second.headers
    assert srv.last_request == second
    assert srv.requests_to("/v1/messages") == [second]
    srv.reset()
    assert srv.requests == [] and srv.script.remaining == 0


def test_empty_script_is_500_with_clear_message(
    srv: FakeProviderServer, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> None:
    with pytest.raises(openai.InternalServerError) as oai_err:
        oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert "script is empty" in str(oai_err.value)
    assert oai_err.value.response.headers["x-should-retry"] == "false"
    with pytest.raises(anthropic.InternalServerError) as ant_err:
        ant.messages.create(model="claude-test", max_tokens=16, messages=USER_HI)
    assert ant_err.value.api_message is not None
    assert "script is empty" in ant_err.value.api_message
    # even a client with default retries gives up at once
    retrying = openai.OpenAI(base_url=srv.openai_base_url, api_key="test")
    with pytest.raises(openai.InternalServerError):
        retrying.chat.completions.create(model="gpt-test", messages=USER_HI)
    retrying.close()
    assert len(srv.requests) == 3


def test_reply_with_callable_sees_request(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    seen: list[dict[str, Any]] = []

    def echo(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return Reply(text="echo: " + body["messages"][-1]["content"])

    srv.script.reply_with(echo)
    result = oai.chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "ping"}]
    )
    assert result.choices[0].message.content == "echo: ping"
    assert seen[0]["model"] == "gpt-test"

    srv.script.reply_with(lambda body: 1 / 0)  # type: ignore[arg-type, return-value]
    with pytest.raises(openai.InternalServerError, match="ZeroDivisionError"):
        oai.chat.completions.create(model="gpt-test", messages=USER_HI)


def test_scripted_errors(
    srv: FakeProviderServer, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> None:
    srv.script.reply_error(429, "slow down").push(ErrorReply(status=529, message="busy"))
    with pytest.raises(openai.RateLimitError) as oai_err:
        oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert oai_err.value.body == {
        "message": "slow down",
        "type": "rate_limit_exceeded",
        "param": None,
        "code": None,
    }
    with pytest.raises(anthropic.APIStatusError) as ant_err:
        ant.messages.create(model="claude-test", max_tokens=16, messages=USER_HI)
    assert ant_err.value.status_code == 529
    assert ant_err.value.type == "overloaded_error"


def test_parse_partial_json() -> None:
    assert parse_partial_json('{"a": 1, "b": "unfin') == {"a": 1}
    assert parse_partial_json('{"a": [1, 2, {"c": tr') == {"a": [1, 2, {}]}
    assert parse_partial_json('{"a": {"b": "x"}, "c": 12') == {"a": {"b": "x"}, "c": 12}
    assert parse_partial_json('{"a": "x", "b') == {"a": "x"}
    assert parse_partial_json('{"a": "esc\\"aped", ') == {"a": 'esc"aped'}
    assert parse_partial_json("") is None
    assert parse_partial_json('{"a": 1}') == {"a": 1}


# ---------------------------------------------------------------------------------------
# OpenAI Chat Completions
# ---------------------------------------------------------------------------------------


def test_chat_text(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_text("Hello!")
    result = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assert result.id == "chatcmpl-1"
    assert result.object == "chat.completion"
    assert result.created == 1_700_000_000
    assert result.model == "gpt-test"
    choice = result.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello!"
    assert choice.message.tool_calls is None
    assert result.usage is not None
    # one part per message, four characters a token (stm_memory.testing.count_text_tokens)
    assert result.usage.prompt_tokens == count_text_tokens(json.dumps(USER_HI[0], sort_keys=True))
    assert result.usage.total_tokens == result.usage.prompt_tokens + result.usage.completion_tokens


def test_chat_tool_calls(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_tool_call("update_short_term_memory", {"summary": "user said hi"})
    srv.script.reply_tool_calls(
        [("a", {"x": 1}), ToolCall("b", {"y": [1, 2]}, id="call_custom")], text_before="Two things."
    )
    first = oai.chat.completions.create(model="gpt-test", messages=USER_HI, tools=CHAT_TOOLS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert choice.message.tool_calls is not None
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.id == "call_1"
    assert call.function.name == "update_short_term_memory"
    assert json.loads(call.function.arguments) == {"summary": "user said hi"}

    second = oai.chat.completions.create(model="gpt-test", messages=USER_HI, tools=CHAT_TOOLS)
    message = second.choices[0].message
    assert message.content == "Two things."
    assert message.tool_calls is not None
    assert [(c.id, c.function.name) for c in message.tool_calls if c.type == "function"] == [
        ("call_2", "a"),
        ("call_custom", "b"),
    ]


def test_chat_stream_with_tool_call_deltas_and_usage(
    srv: FakeProviderServer, oai: openai.OpenAI
) -> None:
    long_summary = "a summary long enough to be split into several argument deltas"
    srv.script.reply_tool_calls(
        [("update_short_term_memory", {"summary": long_summary}), ("noop", {})],
        text_before="Saving now.",
    )
    stream = oai.chat.completions.create(
        model="gpt-test",
        messages=USER_HI,
        tools=CHAT_TOOLS,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert all(c.object == "chat.completion.chunk" and c.id == "chatcmpl-1" for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Saving now."
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for delta in (c.choices[0].delta.tool_calls or []) if c.choices else []:
            entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += delta.id or ""
            if delta.function is not None:
                entry["name"] += delta.function.name or ""
                entry["arguments"] += delta.function.arguments or ""
    assert calls[0]["id"] == "call_1" and calls[1]["id"] == "call_2"
    assert json.loads(calls[0]["arguments"]) == {"summary": long_summary}
    assert calls[1]["name"] == "noop"
    argument_deltas = [
        d
        for c in chunks
        if c.choices
        for d in (c.choices[0].delta.tool_calls or [])
        if d.index == 0
    ]
    assert len(argument_deltas) > 3
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["tool_calls"]
    usage_chunk = chunks[-1]
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None and usage_chunk.usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_stream_helper_final_completion(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_tool_call("update_short_term_memory", {"summary": "s"}, text_before="ok")
    with oai.chat.completions.stream(
        model="gpt-test",
        messages=USER_HI,
        tools=CHAT_TOOLS,
        stream_options={"include_usage": True},
    ) as stream:
        events = [event.type for event in stream]
        final = stream.get_final_completion()
    assert "content.delta" in events
    assert "tool_calls.function.arguments.done" in events
    message = final.choices[0].message
    assert message.content == "ok"
    assert message.tool_calls is not None
    assert message.tool_calls[0].function.name == "update_short_term_memory"
    assert json.loads(message.tool_calls[0].function.arguments) == {"summary": "s"}
    assert final.usage is not None and final.usage.completion_tokens > 0


def test_chat_stream_without_usage_option(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_text("one two three")
    chunks = list(oai.chat.completions.create(model="gpt-test", messages=USER_HI, stream=True))
    assert all(c.usage is None and c.choices for c in chunks)
    assert [c.choices[0].delta.content for c in chunks[1:-1]] == ["one", " two", " three"]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_chat_truncated(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    partial = '{"summary": "the user wa'
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial)
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial, text_before="Noting:")
    srv.script.reply_truncated_text("Once upon a")
    result = oai.chat.completions.create(model="gpt-test", messages=USER_HI, max_tokens=5)
    assert result.choices[0].finish_reason == "length"
    calls = result.choices[0].message.tool_calls
    assert calls is not None and calls[0].type == "function"
    assert calls[0].function.arguments == partial

    # The SDK's stream helper refuses to finalize a "length" completion; the snapshot
    # it carries on the error is what a caller can inspect.
    with (
        oai.chat.completions.stream(model="gpt-test", messages=USER_HI, max_tokens=5) as stream,
        pytest.raises(openai.LengthFinishReasonError) as length_err,
    ):
        stream.get_final_completion()
    final = length_err.value.completion
    assert final.choices[0].finish_reason == "length"
    assert final.choices[0].message.content == "Noting:"
    streamed_calls = final.choices[0].message.tool_calls
    assert streamed_calls is not None and streamed_calls[0].type == "function"
    assert streamed_calls[0].function.arguments == partial

    text = oai.chat.completions.create(model="gpt-test", messages=USER_HI, max_tokens=5)
    assert text.choices[0].finish_reason == "length"
    assert text.choices[0].message.content == "Once upon a"


def test_chat_tool_round_trip_and_validation(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_tool_calls([("a", {}), ("b", {})])
    first = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    assistant = first.choices[0].message.model_dump(exclude_none=True)
    ids = [c["id"] for c in assistant["tool_calls"]]
    history: list[Any] = [*USER_HI, assistant]

    # one tool result missing -> 400, and the scripted reply is not consumed
    srv.script.reply_text("done")
    with pytest.raises(openai.BadRequestError) as err:
        oai.chat.completions.create(
            model="gpt-test",
            messages=[*history, {"role": "tool", "tool_call_id": ids[0], "content": "ok"}],
        )
    assert err.value.status_code == 400
    assert isinstance(err.value.body, dict)
    assert ids[1] in err.value.body["message"]
    assert err.value.body["type"] == "invalid_request_error"
    assert err.value.body["param"] == "messages.[1].role"
    assert err.value.body["code"] is None
    assert srv.script.remaining == 1

    # a user message between the assistant and its tool results -> 400
    with pytest.raises(openai.BadRequestError):
        oai.chat.completions.create(
            model="gpt-test",
            messages=[
                *history,
                {"role": "user", "content": "?"},
                {"role": "tool", "tool_call_id": ids[0], "content": "ok"},
                {"role": "tool", "tool_call_id": ids[1], "content": "ok"},
            ],
        )

    # a tool message answering nothing -> 400
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding message"):
        oai.chat.completions.create(
            model="gpt-test",
            messages=[*USER_HI, {"role": "tool", "tool_call_id": "call_nope", "content": "x"}],
        )

    complete = [*history, *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids)]
    final = oai.chat.completions.create(model="gpt-test", messages=complete)
    assert final.choices[0].message.content == "done"


def test_async_openai_chat_and_responses(srv: FakeProviderServer) -> None:
    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            srv.script.reply_text("async hello")
            result = await client.chat.completions.create(model="gpt-test", messages=USER_HI)
            assert result.choices[0].message.content == "async hello"

            srv.script.reply_tool_call("update_short_term_memory", {"summary": "s"})
            stream = await client.chat.completions.create(
                model="gpt-test",
                messages=USER_HI,
                stream=True,
                stream_options={"include_usage": True},
            )
            arguments = ""
            async for chunk in stream:
                for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                    arguments += delta.function.arguments or "" if delta.function else ""
            assert json.loads(arguments) == {"summary": "s"}

            srv.script.reply_text("streamed response")
            async with client.responses.stream(model="gpt-test", input="hi") as rstream:
                deltas = [e.delta async for e in rstream if e.type == "response.output_text.delta"]
                final = await rstream.get_final_response()
            assert "".join(deltas) == "streamed response"
            assert final.output_text == "streamed response"

            srv.script.reply_error(400, "bad")
            with pytest.raises(openai.BadRequestError):
                await client.responses.create(model="gpt-test", input="hi")
        finally:
            await client.close()

    asyncio.run(run())


# ---------------------------------------------------------------------------------------
# OpenAI Responses
# ---------------------------------------------------------------------------------------


def test_responses_text_and_function_calls(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_text("Hi there")
    srv.script.reply_tool_calls(
        [("update_short_term_memory", {"summary": "s"}), ("noop", {})], text_before="Calling."
    )
    first = oai.responses.create(model="gpt-test", input="hi", instructions="be nice")
    assert first.id == "resp_1"
    assert first.object == "response"
    assert first.status == "completed"
    assert first.created_at == 1_700_000_000
    assert first.incomplete_details is None
    assert first.instructions == "be nice"
    assert first.output_text == "Hi there"
    message = first.output[0]
    assert message.type == "message" and message.id == "msg_1" and message.status == "completed"
    assert message.content[0].type == "output_text"
    assert first.usage is not None
    assert first.usage.total_tokens == first.usage.input_tokens + first.usage.output_tokens
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert first.usage.output_tokens_details.reasoning_tokens == 0

    second = oai.responses.create(
        model="gpt-test", input=[{"role": "user", "content": "go"}], tools=RESPONSES_TOOLS
    )
    assert [item.type for item in second.output] == ["message", "function_call", "function_call"]
    calls = [item for item in second.output if item.type == "function_call"]
    assert [(c.call_id, c.name, c.id, c.status) for c in calls] == [
        ("call_1", "update_short_term_memory", "fc_1", "completed"),
        ("call_2", "noop", "fc_2", "completed"),
    ]
    assert json.loads(calls[0].arguments) == {"summary": "s"}


def test_responses_stream_events(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_tool_call(
        "update_short_term_memory", {"summary": "streaming summary"}, text_before="Okay then."
    )
    stream = oai.responses.create(model="gpt-test", input="hi", tools=RESPONSES_TOOLS, stream=True)
    events = list(stream)
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    for expected in (
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
    ):
        assert expected in types
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Okay then."
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"summary": "streaming summary"}
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.status == "completed"
    assert completed.response.usage is not None


def test_responses_stream_helper(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    srv.script.reply_tool_calls([("update_short_term_memory", {"summary": "x" * 40}), ("noop", {})])
    with oai.responses.stream(model="gpt-test", input="hi", tools=RESPONSES_TOOLS) as stream:
        snapshots = [
            e.snapshot
            for e in stream
            if e.type == "response.function_call_arguments.delta" and e.output_index == 0
        ]
        final = stream.get_final_response()
    assert snapshots[-1] == json.dumps({"summary": "x" * 40}, separators=(",", ":"))
    calls = [item for item in final.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["update_short_term_memory", "noop"]
    assert final.status == "completed"


def test_responses_truncated(srv: FakeProviderServer, oai: openai.OpenAI) -> None:
    partial = '{"summary": "cut'
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial)
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial, text_before="Hmm")
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial)

    result = oai.responses.create(model="gpt-test", input="hi", max_output_tokens=16)
    assert result.status == "incomplete"
    assert result.incomplete_details is not None
    assert result.incomplete_details.reason == "max_output_tokens"
    assert result.max_output_tokens == 16
    call = result.output[-1]
    assert call.type == "function_call" and call.status == "incomplete"
    assert call.arguments == partial

    events = list(
        oai.responses.create(model="gpt-test", input="hi", max_output_tokens=16, stream=True)
    )
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.incomplete_details is not None
    assert last.response.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in last.response.output] == ["message", "function_call"]
    assert "response.function_call_arguments.done" not in [e.type for e in events]

    # The SDK's stream helper only finalizes on response.completed.
    with oai.responses.stream(model="gpt-test", input="hi", max_output_tokens=16) as stream:
        incomplete = [e for e in stream if e.type == "response.incomplete"]
        with pytest.raises(RuntimeError, match=r"response\.completed"):
            stream.get_final_response()
    assert incomplete[0].response.status == "incomplete"


def test_responses_function_call_validation_and_chaining(
    srv: FakeProviderServer, oai: openai.OpenAI
) -> None:
    srv.script.reply_tool_call("update_short_term_memory", {"summary": "s"})
    first = oai.responses.create(model="gpt-test", input="hi", tools=RESPONSES_TOOLS)
    call = first.output[0]
    assert call.type == "function_call"

    # output for an unknown call id -> 400
    with pytest.raises(openai.BadRequestError, match="No tool call found"):
        oai.responses.create(
            model="gpt-test",
            input=[{"type": "function_call_output", "call_id": "call_nope", "output": "x"}],
        )
    # chained via previous_response_id without the tool output -> 400
    with pytest.raises(openai.BadRequestError, match="No tool output found"):
        oai.responses.create(model="gpt-test", previous_response_id=first.id, input="and?")
    # unknown previous response -> 400
    with pytest.raises(openai.BadRequestError, match="not found"):
        oai.responses.create(model="gpt-test", previous_response_id="resp_999", input="x")

    srv.script.reply_text("chained").reply_text("stateless")
    chained = oai.responses.create(
        model="gpt-test",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "saved"}],
    )
    assert chained.output_text == "chained"
    assert chained.previous_response_id == first.id

    # stateless: replay the output item itself, then its result
    stateless = oai.responses.create(
        model="gpt-test",
        input=[
            {"role": "user", "content": "hi"},
            call.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"type": "function_call_output", "call_id": call.call_id, "output": "saved"},
        ],
    )
    assert stateless.output_text == "stateless"


# ---------------------------------------------------------------------------------------
# Anthropic Messages
# ---------------------------------------------------------------------------------------


def test_anthropic_text_and_tool_use(srv: FakeProviderServer, ant: anthropic.Anthropic) -> None:
    srv.script.reply_text("Hello from Claude")
    srv.script.reply_tool_call("update_short_term_memory", {"summary": "s"}, text_before="Saving.")
    srv.script.reply_tool_calls([("a", {"x": 1}), ("b", {})])

    first = ant.messages.create(model="claude-test", max_tokens=64, messages=USER_HI)
    assert first.id == "msg_01"
    assert first.type == "message"
    assert first.role == "assistant"
    assert first.model == "claude-test"
    assert first.stop_reason == "end_turn"
    assert first.content[0].type == "text"
    assert first.content[0].text == "Hello from Claude"
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0

    second = ant.messages.create(
        model="claude-test", max_tokens=64, messages=USER_HI, tools=ANTHROPIC_TOOLS
    )
    assert second.stop_reason == "tool_use"
    text, tool = second.content
    assert text.type == "text" and text.text == "Saving."
    assert tool.type == "tool_use"
    assert (tool.id, tool.name, tool.input) == (
        "toolu_01",
        "update_short_term_memory",
        {"summary": "s"},
    )

    third = ant.messages.create(model="claude-test", max_tokens=64, messages=USER_HI)
    assert [(b.type, getattr(b, "id", None)) for b in third.content] == [
        ("tool_use", "toolu_02"),
        ("tool_use", "toolu_03"),
    ]


def test_anthropic_stream(srv: FakeProviderServer, ant: anthropic.Anthropic) -> None:
    srv.script.reply_text("streaming words arrive")
    srv.script.reply_tool_call(
        "update_short_term_memory", {"summary": "a longer summary text"}, text_before="One sec."
    )

    with ant.messages.stream(model="claude-test", max_tokens=64, messages=USER_HI) as stream:
        pieces = list(stream.text_stream)
        message = stream.get_final_message()
    assert pieces == ["streaming", " words", " arrive"]
    assert message.content[0].type == "text" and message.content[0].text == "streaming words arrive"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens > 1

    raw = list(
        ant.messages.create(
            model="claude-test", max_tokens=64, messages=USER_HI, tools=ANTHROPIC_TOOLS, stream=True
        )
    )
    types = [e.type for e in raw]
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert types[-2] == "message_delta"
    json_deltas = [
        e.delta.partial_json
        for e in raw
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert json.loads("".join(json_deltas)) == {"summary": "a longer summary text"}
    starts = [e.content_block for e in raw if e.type == "content_block_start"]
    assert [b.type for b in starts] == ["text", "tool_use"]
    delta = raw[-2]
    assert delta.type == "message_delta" and delta.delta.stop_reason == "tool_use"


def test_anthropic_stream_helper_tool_use(
    srv: FakeProviderServer, ant: anthropic.Anthropic
) -> None:
    srv.script.reply_tool_calls([("update_short_term_memory", {"summary": "s" * 30}), ("noop", {})])
    with ant.messages.stream(
        model="claude-test", max_tokens=64, messages=USER_HI, tools=ANTHROPIC_TOOLS
    ) as stream:
        message = stream.get_final_message()
    assert message.stop_reason == "tool_use"
    blocks = [b for b in message.content if b.type == "tool_use"]
    assert [(b.id, b.name, b.input) for b in blocks] == [
        ("toolu_01", "update_short_term_memory", {"summary": "s" * 30}),
        ("toolu_02", "noop", {}),
    ]


def test_anthropic_truncated(srv: FakeProviderServer, ant: anthropic.Anthropic) -> None:
    partial = '{"summary": "done", "details": "half'
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial, text_before="Writing")
    srv.script.reply_truncated_tool_call("update_short_term_memory", partial)
    srv.script.reply_truncated_text("It was the best of")

    result = ant.messages.create(model="claude-test", max_tokens=8, messages=USER_HI)
    assert result.stop_reason == "max_tokens"
    tool = result.content[-1]
    assert tool.type == "tool_use" and tool.input == {"summary": "done"}

    with ant.messages.stream(model="claude-test", max_tokens=8, messages=USER_HI) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "max_tokens"
    assert streamed.content[0].type == "tool_use"
    assert streamed.content[0].input == {"summary": "done"}

    text = ant.messages.create(model="claude-test", max_tokens=8, messages=USER_HI)
    assert text.stop_reason == "max_tokens"
    assert text.content[0].type == "text" and text.content[0].text == "It was the best of"


def _tool_result(tool_use_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": "ok"}


def test_anthropic_validation(srv: FakeProviderServer, ant: anthropic.Anthropic) -> None:
    srv.script.reply_tool_call("update_short_term_memory", {"summary": "s"})
    first = ant.messages.create(
        model="claude-test", max_tokens=64, messages=USER_HI, tools=ANTHROPIC_TOOLS
    )
    tool_id = first.content[0].id if first.content[0].type == "tool_use" else ""
    history: list[Any] = [*USER_HI, {"role": "assistant", "content": first.to_param()["content"]}]
    srv.script.reply_text("done")

    def bad(messages: list[Any]) -> str:
        with pytest.raises(anthropic.BadRequestError) as err:
            ant.messages.create(model="claude-test", max_tokens=64, messages=messages)
        assert err.value.status_code == 400
        assert isinstance(err.value.body, dict)
        assert err.value.body["type"] == "error"
        assert err.value.type == "invalid_request_error"
        assert err.value.api_message is not None
        return err.value.api_message

    assert "first message" in bad([{"role": "assistant", "content": "hi"}])
    assert "alternate" in bad([*USER_HI, {"role": "user", "content": "again"}])
    assert "unexpected `tool_use_id`" in bad(
        [*history, {"role": "user", "content": [_tool_result("toolu_99")]}]
    )
    assert "without `tool_result`" in bad([*history, {"role": "user", "content": "never mind"}])
    # a tool_result answering a tool_use from an older turn is rejected too
    assert "unexpected `tool_use_id`" in bad(
        [
            *history,
            {"role": "user", "content": [_tool_result(tool_id)]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [_tool_result(tool_id)]},
        ]
    )
    assert srv.script.remaining == 1

    answered: list[Any] = [
        *history,
        {"role": "user", "content": [_tool_result(tool_id), {"type": "text", "text": "go"}]},
    ]
    final = ant.messages.create(model="claude-test", max_tokens=64, messages=answered)
    assert final.content[0].type == "text" and final.content[0].text == "done"


def test_anthropic_lenient_alternation() -> None:
    with FakeProviderServer(strict_anthropic_alternation=False) as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        server.script.reply_text("merged")
        result = client.messages.create(
            model="claude-test",
            max_tokens=16,
            messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
        )
        assert result.content[0].type == "text" and result.content[0].text == "merged"
        client.close()


def test_same_script_any_endpoint(
    srv: FakeProviderServer, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> None:
    for _ in range(3):
        srv.script.reply_tool_call("update_short_term_memory", {"summary": "same"})
    chat = oai.chat.completions.create(model="gpt-test", messages=USER_HI)
    resp = oai.responses.create(model="gpt-test", input="hi")
    msg = ant.messages.create(model="claude-test", max_tokens=16, messages=USER_HI)
    chat_calls = chat.choices[0].message.tool_calls
    assert chat_calls is not None and chat_calls[0].type == "function"
    resp_call = resp.output[0]
    assert resp_call.type == "function_call"
    ant_call = msg.content[0]
    assert ant_call.type == "tool_use"
    assert (
        json.loads(chat_calls[0].function.arguments)
        == json.loads(resp_call.arguments)
        == ant_call.input
        == {"summary": "same"}
    )


# -- prompt caching (stm_memory.testing.PromptCache; its rules are in tests/unit) ------------

LONG = "You are Trip, a travel assistant who knows every train in Japan. " * 80  # ~1300 tokens


def test_chat_reports_a_repeated_prefix_as_cached(
    srv: FakeProviderServer, oai: openai.OpenAI
) -> None:
    srv.script.reply_text("One.").reply_text("Two.")
    system: Any = {"role": "system", "content": LONG}
    more: list[Any] = [system, {"role": "user", "content": "more"}]
    first = oai.chat.completions.create(model="gpt-test", messages=[system, *USER_HI])
    stream = oai.chat.completions.create(
        model="gpt-test",
        messages=more,
        stream=True,
        stream_options={"include_usage": True},
    )
    usages = [chunk.usage for chunk in stream if chunk.usage is not None]
    assert first.usage is not None and first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    assert len(usages) == 1 and usages[0].prompt_tokens_details is not None
    cached = usages[0].prompt_tokens_details.cached_tokens
    assert cached is not None and cached >= 1024 and cached % 128 == 0
    assert usages[0].prompt_tokens > cached


def test_responses_cache_the_stored_history_of_a_chain(
    srv: FakeProviderServer, oai: openai.OpenAI
) -> None:
    srv.script.reply_text("One.").reply_text("Two.")
    first = oai.responses.create(model="gpt-test", instructions=LONG, input="hi")
    second = oai.responses.create(
        model="gpt-test", instructions=LONG, input="more", previous_response_id=first.id
    )
    assert first.usage is not None and second.usage is not None
    assert first.usage.input_tokens_details.cached_tokens == 0
    assert second.usage.input_tokens_details.cached_tokens >= 1024
    assert second.usage.input_tokens > first.usage.input_tokens  # the history is input too


def test_anthropic_reports_reads_and_writes_at_breakpoints(
    srv: FakeProviderServer, ant: anthropic.Anthropic
) -> None:
    srv.script.reply_text("One.").reply_text("Two.").reply_text("Three.")
    system: Any = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    first = ant.messages.create(model="claude-test", max_tokens=50, system=system, messages=USER_HI)
    with ant.messages.stream(
        model="claude-test", max_tokens=50, system=system, messages=USER_HI
    ) as stream:
        second = stream.get_final_message()
    plain = ant.messages.create(model="claude-test", max_tokens=50, system=LONG, messages=USER_HI)
    written = first.usage.cache_creation_input_tokens
    assert written is not None and written >= 1024
    assert (first.usage.cache_read_input_tokens, second.usage.cache_creation_input_tokens) == (0, 0)
    assert second.usage.cache_read_input_tokens == written
    assert second.usage.input_tokens == first.usage.input_tokens < 20  # only after the breakpoint
    # without a breakpoint nothing is read or written; all of it is plain input
    assert (plain.usage.cache_read_input_tokens, plain.usage.cache_creation_input_tokens) == (0, 0)
    assert plain.usage.input_tokens == written + first.usage.input_tokens


def test_anthropic_more_than_four_breakpoints_is_a_400(
    srv: FakeProviderServer, ant: anthropic.Anthropic
) -> None:
    srv.script.reply_text("never")
    marked: Any = [
        {"type": "text", "text": f"part {i}", "cache_control": {"type": "ephemeral"}}
        for i in range(5)
    ]
    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks with cache_control"):
        ant.messages.create(model="claude-test", max_tokens=50, system=marked, messages=USER_HI)
    assert srv.script.remaining == 1  # refused before the script


def test_cache_profile_and_reset() -> None:
    system: Any = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    with FakeProviderServer(cache_profile="anthropic-haiku-5m") as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        server.script.reply_text("a").reply_text("b")
        for _ in range(2):  # ~1300 tokens is below Haiku's 2048
            reply = client.messages.create(
                model="claude-test", max_tokens=50, system=system, messages=USER_HI
            )
            usage = reply.usage
            assert not usage.cache_creation_input_tokens and not usage.cache_read_input_tokens
        client.close()
    with FakeProviderServer() as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
        server.script.reply_text("a")
        client.messages.create(model="claude-test", max_tokens=50, system=system, messages=USER_HI)
        server.reset()  # forgets the cached prefix too
        server.script.reply_text("b")
        again = client.messages.create(
            model="claude-test", max_tokens=50, system=system, messages=USER_HI
        )
        assert again.usage.cache_read_input_tokens == 0
        client.close()


# ---------------------------------------------------------------------------------------
# Open-model servers: model listings and "context length exceeded"
# ---------------------------------------------------------------------------------------


def _raw_get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_no_listing_routes_unless_asked(srv: FakeProviderServer) -> None:
    status, payload = _raw_get(srv.openai_base_url + "/models")
    assert status == 404
    assert "Invalid URL (GET /v1/models)" in payload["error"]["message"]


def test_listing_like_vllm() -> None:
    with FakeProviderServer(models_like="vllm", context_window=8192, model_id="m") as server:
        status, listing = _raw_get(server.openai_base_url + "/models")
        assert status == 200
        (card,) = listing["data"]
        assert card["id"] == "m" and card["owned_by"] == "vllm"
        assert card["max_model_len"] == 8192
        assert card["permission"][0]["object"] == "model_permission"
        # vLLM serves neither a single-model route nor /props
        assert _raw_get(server.openai_base_url + "/models/m") == (404, {"detail": "Not Found"})
        assert _raw_get(server.base_url + "/props") == (404, {"detail": "Not Found"})


def test_listing_like_sglang() -> None:
    with FakeProviderServer(models_like="sglang", context_window=32768, model_id="org/m") as server:
        status, card = _raw_get(server.openai_base_url + "/models/org/m")
        assert status == 200 and card["max_model_len"] == 32768 and card["owned_by"] == "sglang"
        status, missing = _raw_get(server.openai_base_url + "/models/other")
        assert status == 404 and missing["error"]["code"] == "model_not_found"
        oai = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        try:
            model = oai.models.retrieve("org/m")
            assert model.model_extra == {"root": "org/m", "parent": None, "max_model_len": 32768}
        finally:
            oai.close()


def test_listing_like_llamacpp() -> None:
    with FakeProviderServer(
        models_like="llamacpp", context_window=8192, n_ctx_train=8192 * 16
    ) as server:
        status, listing = _raw_get(server.openai_base_url + "/models")
        assert status == 200
        (card,) = listing["data"]
        assert card["owned_by"] == "llamacpp"
        assert card["meta"]["n_ctx_train"] == 131072 and "n_ctx" not in card["meta"]
        status, props = _raw_get(server.base_url + "/props")
        assert status == 200 and props["default_generation_settings"]["n_ctx"] == 8192
        status, missing = _raw_get(server.openai_base_url + "/models/fake-model")
        assert status == 404 and missing["error"]["type"] == "not_found_error"
        assert [r.path for r in server.requests] == [
            "/v1/models",
            "/props",
            "/v1/models/fake-model",
        ]


@pytest.mark.parametrize("kind", EXCEEDED_KINDS)
def test_scripted_context_exceeded_bodies_are_sent_verbatim(
    srv: FakeProviderServer, kind: Any
) -> None:
    expected = context_exceeded_body(kind, limit=8192, requested=9000, completion=1000)
    srv.script.context_exceeded(kind, limit=8192, requested=9000, completion=1000)
    status, _, payload = _raw_post(
        srv.openai_base_url + "/chat/completions",
        {
            "model": "m",
            "messages": USER_HI,
        },
    )
    assert status == 400
    assert json.loads(payload) == expected
    assert srv.script.remaining == 0


def test_scripted_context_exceeded_on_each_endpoint(
    srv: FakeProviderServer, oai: openai.OpenAI, ant: anthropic.Anthropic
) -> None:
    srv.script.context_exceeded("llamacpp", limit=8192, requested=11854)
    srv.script.context_exceeded("openai-responses", limit=1, requested=2)
    srv.script.context_exceeded("anthropic", limit=200000, requested=210000)
    with pytest.raises(openai.BadRequestError) as chat:
        oai.chat.completions.create(model="m", messages=USER_HI)
    assert chat.value.body == {
        "code": 400,
        "message": "request (11854 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 11854,
        "n_ctx": 8192,
    }
    with pytest.raises(openai.BadRequestError) as responses:
        oai.responses.create(model="m", input="hi")
    assert responses.value.code == "context_length_exceeded"
    with pytest.raises(anthropic.BadRequestError) as messages:
        ant.messages.create(model="claude-test", max_tokens=16, messages=USER_HI)
    assert messages.value.response.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
        "request_id": messages.value.response.headers["request-id"],
    }


def test_error_reply_body_is_verbatim(srv: FakeProviderServer) -> None:
    srv.script.push(ErrorReply(status=413, message="big", body={"detail": "too big"}))
    status, _, payload = _raw_post(
        srv.openai_base_url + "/chat/completions",
        {
            "model": "m",
            "messages": USER_HI,
        },
    )
    assert (status, json.loads(payload)) == (413, {"detail": "too big"})


def _request_tokens(body: dict[str, Any]) -> int:
    return -(-len(json.dumps(body, ensure_ascii=False, separators=(",", ":"))) // 4)


@pytest.mark.parametrize(
    ("like", "exceeded_like", "path", "expected_kind"),
    [
        ("vllm", None, "/v1/chat/completions", "vllm"),
        ("sglang", None, "/v1/chat/completions", "sglang"),
        ("llamacpp", None, "/v1/chat/completions", "llamacpp"),
        (None, None, "/v1/chat/completions", "openai"),
        (None, None, "/v1/responses", "openai-responses"),
        (None, None, "/v1/messages", "anthropic"),
        (None, "llamacpp-old", "/v1/chat/completions", "llamacpp-old"),
    ],
)
def test_a_request_over_the_window_is_refused(
    like: Any, exceeded_like: Any, path: str, expected_kind: Any
) -> None:
    long = "word " * 200
    if path == "/v1/responses":
        body: dict[str, Any] = {"model": "m", "input": long}
    elif path == "/v1/messages":
        body = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": long}]}
    else:
        body = {"model": "m", "messages": [{"role": "user", "content": long}]}
    with FakeProviderServer(
        models_like=like, context_window=100, exceeded_like=exceeded_like
    ) as server:
        server.script.reply_text("never sent")
        status, _, payload = _raw_post(server.base_url + path, body)
        assert server.script.remaining == 1  # refused before the model "ran"
    tokens = _request_tokens(body)
    assert tokens > 100
    assert status == 400
    assert json.loads(payload) == context_exceeded_body(
        expected_kind, limit=100, requested=tokens
    ) | ({"request_id": "req_1"} if expected_kind == "anthropic" else {})


def test_vllm_counts_the_reply_reserve() -> None:
    body = {"model": "m", "messages": USER_HI, "max_tokens": 200}
    tokens = _request_tokens(body)
    with FakeProviderServer(models_like="vllm", context_window=tokens + 100) as server:
        status, _, payload = _raw_post(server.openai_base_url + "/chat/completions", body)
    assert status == 400
    assert json.loads(payload) == context_exceeded_body(
        "vllm", limit=tokens + 100, requested=tokens + 200, completion=200
    )
    # llama.cpp refuses only a prompt that fills its slot
    with FakeProviderServer(models_like="llamacpp", context_window=tokens + 1) as server:
        server.script.reply_text("ok")
        status, _, _ = _raw_post(server.openai_base_url + "/chat/completions", body)
    assert status == 200


def test_context_exceeded_body_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown context-exceeded kind"):
        context_exceeded_body("nope", limit=1, requested=2)  # type: ignore[arg-type]


def test_explicit_breakpoints_are_refused_before_gpt56_and_billed_from_it(
    srv: FakeProviderServer, oai: openai.OpenAI
) -> None:
    system = "You plan rail journeys in Japan; answer briefly. " * 120  # ~1,500 tokens
    marked = {
        "role": "system",
        "content": [
            {"type": "text", "text": system, "prompt_cache_breakpoint": {"mode": "explicit"}}
        ],
    }
    for model in ("gpt-5.4", "gpt-4.1-mini"):
        with pytest.raises(openai.BadRequestError, match="not supported with the model"):
            oai.chat.completions.create(
                model=model, messages=[marked, {"role": "user", "content": "hi"}]
            )
        with pytest.raises(openai.BadRequestError, match="not supported with the model"):
            oai.responses.create(
                model=model,
                input=[{"role": "user", "content": "hi"}],
                extra_body={"prompt_cache_options": {"mode": "implicit"}},
            )
    srv.script.reply_text("one").reply_text("two").reply_text("three")
    usages = [
        oai.chat.completions.create(
            model="gpt-5.6", messages=[marked, {"role": "user", "content": text}]
        ).usage
        for text in ("hi", "hello")
    ]
    first, second = (u.prompt_tokens_details for u in usages if u is not None)
    assert first is not None and second is not None
    # The first request writes (billed 1.25x); the second reads the system prompt at its
    # breakpoint, and writes only its own newest message past it.
    assert first.cache_write_tokens == usages[0].prompt_tokens  # type: ignore[union-attr]
    assert second.cached_tokens is not None and second.cached_tokens >= 1024
    assert second.cache_write_tokens == usages[1].prompt_tokens - second.cached_tokens  # type: ignore[union-attr]
    # Without an explicit breakpoint, two requests that share a long system prompt
    # share no breakpoint: the second misses (before gpt-5.6 it read the prompt).
    other = {"role": "system", "content": "Another assistant. " * 400}
    srv.script.reply_text("four")
    for text in ("hi", "hello"):
        usage = oai.chat.completions.create(
            model="gpt-5.6", messages=[other, {"role": "user", "content": text}]
        ).usage
        assert usage is not None and usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == 0

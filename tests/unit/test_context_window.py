"""The model's context window (stm_memory.endpoints.window): each provider's real
"context length exceeded" body, each server's own model description, the hosted table,
and discovery with the real ``openai`` client against the fake provider answering like
vLLM, SGLang and llama.cpp."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from stm_memory.endpoints.window import (
    HOSTED_WINDOWS,
    ContextExceeded,
    adiscover_window,
    context_exceeded,
    context_exceeded_error,
    discover_window,
    history_budget,
    hosted_window,
    window_from_listing,
)
from stm_memory.errors import ConfigurationError
from tests.fakeprovider.script import EXCEEDED_KINDS, context_exceeded_body
from tests.fakeprovider.server import FakeProviderServer
from tests.fakeprovider.wire_common import WireResult, json_result

HI: list[Any] = [{"role": "user", "content": "hi"}]

# ---------------------------------------------------------------------------------------
# "Context length exceeded": each provider's exact body
# ---------------------------------------------------------------------------------------

#: (name, status, body as the server sends it, limit, requested)
EXCEEDED_BODIES: list[tuple[str, int | None, object, int | None, int | None]] = [
    (
        "openai chat",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, "
                "your messages resulted in 130532 tokens. Please reduce the length of the "
                "messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        128000,
        130532,
    ),
    (
        "openai chat, completion counted",
        400,
        '{"error":{"message":"This model\'s maximum context length is 4097 tokens. However, '
        "you requested 4120 tokens (3120 in the messages, 1000 in the completion). Please "
        'reduce the length of the messages or completion.","type":"invalid_request_error",'
        '"param":"messages","code":"context_length_exceeded"}}',
        4097,
        4120,
    ),
    (
        "openai gpt-5 input cap",
        400,
        {
            "error": {
                "message": "Input tokens exceed the configured limit of 272,000 tokens. Your "
                "messages resulted in 297,006 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        272000,
        297006,
    ),
    (
        "openai responses",
        400,
        {
            "error": {
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
                "message": "Your input exceeds the context window of this model. Please "
                "adjust your input and try again.",
                "param": "input",
            }
        },
        None,
        None,
    ),
    (
        "llama.cpp, as measured in issue #48",
        400,
        b'{"error":{"code":400,"message":"request (11854 tokens) exceeds the available '
        b'context size (8192 tokens), try increasing it","type":"exceed_context_size_error"}}',
        8192,
        11854,
    ),
    (
        "llama.cpp with n_prompt_tokens / n_ctx",
        400,
        {
            "error": {
                "code": 400,
                "message": "request (13392 tokens) exceeds the available context size (8192 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 13392,
                "n_ctx": 8192,
            }
        },
        8192,
        13392,
    ),
    (
        "llama.cpp, non-splittable batch",
        400,
        {
            "error": {
                "code": 400,
                "message": "input (9000 tokens) is larger than the max context size (8192 "
                "tokens). skipping",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
        8192,
        9000,
    ),
    (
        "llama.cpp, fields only",
        400,
        {"error": {"code": 400, "message": "", "type": "exceed_context_size_error", "n_ctx": 4096}},
        4096,
        None,
    ),
    (
        "vllm (renderers/params.py)",
        400,
        {
            "error": {
                "message": "You passed 8000 input tokens and requested 1000 output tokens. "
                "However, the model's context length is only 8192 tokens, resulting in a "
                "maximum input length of 7192 tokens. Please reduce the length of the input "
                "prompt. (parameter=input_tokens, value=8000)",
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        },
        8192,
        9000,
    ),
    (
        "vllm, in characters",
        400,
        {
            "error": {
                "message": "You passed 90000 input characters and requested 1000 output "
                "tokens. However, the model's context length is only 8192 tokens, resulting "
                "in a maximum input length of 7192 tokens (at most 57536 characters). Please "
                "reduce the length of the input prompt. (parameter=input_text, value=90000)",
                "type": "BadRequestError",
                "param": "input_text",
                "code": 400,
            }
        },
        8192,
        None,
    ),
    (
        "vllm, at least",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 131072 tokens. However, "
                "you requested 1024 output tokens and your prompt contains at least 130049 "
                "input tokens, for a total of at least 131073 tokens. Please reduce the "
                "length of the input prompt or the number of requested output tokens. "
                "(parameter=input_tokens, value=130049)",
                "type": "BadRequestError",
                "param": "input_tokens",
                "code": 400,
            }
        },
        131072,
        131073,
    ),
    (
        "vllm, classic top-level error",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 8192 tokens. However, you "
            "requested 9000 tokens (8000 in the messages, 1000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        8192,
        9000,
    ),
    (
        "vllm, max_tokens too large",
        400,
        {
            "error": {
                "message": "'max_tokens' or 'max_completion_tokens' is too large: 8000. This "
                "model's maximum context length is 4096 tokens and your request has 2778 "
                "input tokens (8000 > 4096 - 2778). None",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        4096,
        10778,
    ),
    (
        "vllm engine",
        400,
        {
            "error": {
                "message": "The decoder prompt (length 12290) is longer than the maximum "
                "model length of 12288. Make sure that `max_model_len` is no smaller than "
                "the number of text tokens.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        12288,
        12290,
    ),
    (
        "sglang, input",
        400,
        '{"object":"error","message":"The input (400013 tokens) is longer than the model\'s '
        'context length (262144 tokens).","type":"BadRequestError","param":null,"code":400}',
        262144,
        400013,
    ),
    (
        "sglang, input and completion",
        400,
        {
            "object": "error",
            "message": "Requested token count exceeds the model's maximum context length of "
            "64000 tokens. You requested a total of 71897 tokens: 7897 tokens from the input "
            "messages and 64000 tokens for the completion. Please reduce the number of tokens "
            "in the input messages or the completion to fit within the limit.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        64000,
        71897,
    ),
    (
        "anthropic",
        400,
        '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too '
        'long: 208310 tokens > 200000 maximum"},"request_id":"req_011CVQe1dLrGNMJyE1ghG1av"}',
        200000,
        208310,
    ),
    (
        "anthropic, with max_tokens",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 178959 + 64000 "
                "> 200000, decrease input length or `max_tokens` and try again",
            },
            "request_id": "req_011CUB2XUHWkFnQzxcKBbjpF",
        },
        200000,
        242959,
    ),
    (
        "ollama /v1",
        400,
        {
            "error": {
                "message": "the prompt is longer than the context length currently available "
                "to the model; shorten the prompt, adjust the context length in settings, or "
                "use a model with a longer context length",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        None,
        None,
    ),
    (
        "ollama native",
        400,
        {"error": "the input length exceeds the context length"},
        None,
        None,
    ),
    (
        "openrouter",
        400,
        {
            "error": {
                "message": "This endpoint's maximum context length is 32768 tokens. However, "
                "you requested about 42832 tokens (42832 of text input). Please reduce the "
                'length of either one, or use the "middle-out" transform to compress your '
                "prompt automatically.",
                "code": 400,
            }
        },
        32768,
        42832,
    ),
    (
        "no status given",
        None,
        "prompt is too long: 210000 tokens > 200000 maximum",
        200000,
        210000,
    ),
]


@pytest.mark.parametrize(
    ("status", "body", "limit", "requested"),
    [case[1:] for case in EXCEEDED_BODIES],
    ids=[case[0] for case in EXCEEDED_BODIES],
)
def test_each_providers_body_is_recognised(
    status: int | None, body: object, limit: int | None, requested: int | None
) -> None:
    found = context_exceeded(status, body)
    assert found is not None
    assert (found.limit, found.requested) == (limit, requested)
    assert isinstance(found.message, str)


def test_the_message_is_the_providers() -> None:
    body = EXCEEDED_BODIES[0][2]
    assert isinstance(body, dict)
    found = context_exceeded(400, body)
    assert found == ContextExceeded(128000, 130532, body["error"]["message"])


NOT_EXCEEDED: list[tuple[str, int | None, object]] = [
    (
        "openai max_tokens too large",
        400,
        {
            "error": {
                "message": "max_tokens is too large: 100000. This model supports at most 16384 "
                "completion tokens, whereas you provided 100000.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": "invalid_value",
            }
        },
    ),
    (
        "openai tool pairing",
        400,
        {
            "error": {
                "message": "An assistant message with 'tool_calls' must be followed by tool "
                "messages responding to each 'tool_call_id'.",
                "type": "invalid_request_error",
                "param": "messages.[2].role",
                "code": None,
            }
        },
    ),
    (
        "anthropic alternation",
        400,
        '{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles '
        'must alternate between \\"user\\" and \\"assistant\\""}}',
    ),
    (
        "llama.cpp template",
        400,
        {
            "error": {
                "code": 400,
                "message": "Conversation roles must alternate user/assistant/user/assistant/...",
                "type": "invalid_request_error",
            }
        },
    ),
    (
        "llama.cpp batch size (a server error)",
        500,
        {
            "error": {
                "code": 500,
                "message": "input (9000 tokens) is too large to process. increase the "
                "physical batch size (current batch size: 512)",
                "type": "server_error",
            }
        },
    ),
    ("rate limit", 429, {"error": {"message": "Too many tokens", "code": "rate_limit_exceeded"}}),
    ("context words on a 500", 500, "prompt is too long: 210000 tokens > 200000 maximum"),
    ("200", 200, {"error": {"code": "context_length_exceeded", "message": "x"}}),
    ("empty body", 400, b""),
    ("not json", 400, "Bad Request"),
    ("a list", 400, [1, 2]),
    ("none", 400, None),
]


@pytest.mark.parametrize(
    ("status", "body"), [c[1:] for c in NOT_EXCEEDED], ids=[c[0] for c in NOT_EXCEEDED]
)
def test_other_errors_are_not_context_errors(status: int | None, body: object) -> None:
    assert context_exceeded(status, body) is None


@pytest.mark.parametrize("kind", EXCEEDED_KINDS)
def test_every_fake_provider_body_is_recognised(kind: Any) -> None:
    body = context_exceeded_body(kind, limit=8192, requested=9000, completion=1000)
    found = context_exceeded(400, json.dumps(body))
    assert found is not None
    if kind not in ("openai-responses", "ollama"):  # the ones that state no numbers
        assert (found.limit, found.requested) == (8192, 9000)


# ---------------------------------------------------------------------------------------
# The same, off the SDKs' exceptions
# ---------------------------------------------------------------------------------------


@pytest.fixture
def srv() -> Iterator[FakeProviderServer]:
    with FakeProviderServer() as server:
        yield server


def _openai_error(srv: FakeProviderServer, kind: Any, **numbers: int) -> openai.APIStatusError:
    srv.script.context_exceeded(kind, **numbers)
    client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    try:
        with pytest.raises(openai.APIStatusError) as raised:
            client.chat.completions.create(model="m", messages=HI)
    finally:
        client.close()
    return raised.value


@pytest.mark.parametrize(
    "kind", ["openai", "llamacpp", "llamacpp-old", "vllm", "vllm-older", "vllm-oldest", "sglang"]
)
def test_openai_sdk_errors_are_read(srv: FakeProviderServer, kind: Any) -> None:
    error = _openai_error(srv, kind, limit=8192, requested=11854)
    assert error.status_code == 400
    found = context_exceeded_error(error)
    assert found is not None
    assert (found.limit, found.requested) == (8192, 11854)


def test_anthropic_sdk_errors_are_read(srv: FakeProviderServer) -> None:
    srv.script.context_exceeded("anthropic", limit=200000, requested=210000)
    client = anthropic.Anthropic(base_url=srv.base_url, api_key="test", max_retries=0)
    try:
        with pytest.raises(anthropic.BadRequestError) as raised:
            client.messages.create(model="claude-test", max_tokens=16, messages=HI)
    finally:
        client.close()
    # the SDK keeps the whole body: {"type": "error", "error": {...}, "request_id": ...}
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum",
    }
    found = context_exceeded_error(raised.value)
    assert found is not None and (found.limit, found.requested) == (200000, 210000)


def test_a_wrapped_error_is_found_through_its_cause(srv: FakeProviderServer) -> None:
    error = _openai_error(srv, "llamacpp", limit=8192, requested=11854)
    try:
        try:
            raise error
        except openai.APIStatusError as exc:
            raise RuntimeError("the framework's own error") from exc
    except RuntimeError as wrapped:
        found = context_exceeded_error(wrapped)
    assert found is not None and found.limit == 8192


def test_langchain_openai_error_is_read(srv: FakeProviderServer) -> None:
    langchain_openai = pytest.importorskip("langchain_openai")
    srv.script.context_exceeded("llamacpp", limit=8192, requested=11854)
    model = langchain_openai.ChatOpenAI(
        model="m", base_url=srv.openai_base_url, api_key="test", max_retries=0
    )
    with pytest.raises(Exception) as raised:
        model.invoke("hi")
    found = context_exceeded_error(raised.value)
    assert found is not None and (found.limit, found.requested) == (8192, 11854)


def test_an_error_without_a_body_reads_the_response_text() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/v1/chat/completions")
    text = '{"error":{"code":400,"message":"request (10 tokens) exceeds the available context '
    text += 'size (8 tokens), try increasing it","type":"exceed_context_size_error"}}'
    response = httpx.Response(400, request=request, text=text)

    class Raised(Exception):
        status_code = 400
        body = None

        def __init__(self) -> None:
            super().__init__("Error code: 400")
            self.response = response

    found = context_exceeded_error(Raised())
    assert found is not None and (found.limit, found.requested) == (8, 10)


def test_other_exceptions_are_not_context_errors(srv: FakeProviderServer) -> None:
    srv.script.reply_error(400, "messages: roles must alternate")
    client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="m", messages=HI)
    finally:
        client.close()
    assert context_exceeded_error(raised.value) is None
    assert context_exceeded_error(ValueError("prompt is too long: 9 tokens > 8 maximum")) is None
    assert context_exceeded_error(KeyError("x")) is None


# ---------------------------------------------------------------------------------------
# A server's own description of the model
# ---------------------------------------------------------------------------------------

LISTINGS: list[tuple[str, dict[str, Any], int | None]] = [
    (
        "vllm /v1/models entry",
        {"id": "m", "object": "model", "owned_by": "vllm", "root": "m", "max_model_len": 8192},
        8192,
    ),
    (
        "sglang /v1/models entry",
        {"id": "m", "object": "model", "owned_by": "sglang", "max_model_len": 262144},
        262144,
    ),
    (
        "llama.cpp /props",
        {"default_generation_settings": {"params": {"n_predict": -1}, "n_ctx": 8192}},
        8192,
    ),
    (
        "llama.cpp /v1/models entry, newer build",
        {"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx": 8192, "n_ctx_train": 131072}},
        8192,
    ),
    (
        "llama.cpp /v1/models entry, n_ctx_train only",
        {"id": "m", "owned_by": "llamacpp", "meta": {"n_vocab": 49152, "n_ctx_train": 2048}},
        2048,
    ),
    (
        "ollama /api/show, num_ctx set",
        {
            "parameters": "num_ctx                        8192\n"
            'stop                           "<|im_end|>"',
            "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
        },
        8192,
    ),
    (
        "ollama /api/show, trained length",
        {
            "parameters": 'stop                           "<end_of_turn>"',
            "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 32768},
        },
        32768,
    ),
    ("ollama /api/ps entry", {"name": "m", "context_length": 4096}, 4096),
    (
        "lm studio /api/v0/models entry",
        {"id": "m", "object": "model", "state": "loaded", "max_context_length": 32768},
        32768,
    ),
    (
        "lm studio /api/v1/models entry, loaded",
        {
            "key": "m",
            "max_context_length": 131072,
            "loaded_instances": [{"id": "m", "config": {"context_length": 16384}}],
        },
        16384,
    ),
    (
        "a whole listing of one model",
        {"object": "list", "data": [{"id": "m", "max_model_len": 4096}]},
        4096,
    ),
    ("not a positive int: zero", {"max_model_len": 0}, None),
    ("not a positive int: negative", {"max_model_len": -8192}, None),
    ("not a positive int: bool", {"max_model_len": True}, None),
    ("not a positive int: float", {"max_model_len": 8192.0}, None),
    ("not a positive int: string", {"max_model_len": "8192"}, None),
    ("not a positive int: null", {"max_model_len": None}, None),
    ("bad /props", {"default_generation_settings": {"n_ctx": "8192"}}, None),
    ("bad meta", {"meta": {"n_ctx": -1, "n_ctx_train": None}}, None),
    ("no window stated", {"id": "m", "object": "model", "owned_by": "openai"}, None),
    ("a listing of two", {"data": [{"max_model_len": 1}, {"max_model_len": 2}]}, None),
    ("empty", {}, None),
]


@pytest.mark.parametrize(
    ("data", "window"), [c[1:] for c in LISTINGS], ids=[c[0] for c in LISTINGS]
)
def test_window_from_each_listing_shape(data: dict[str, Any], window: int | None) -> None:
    assert window_from_listing(data) == window


def test_a_bad_served_value_falls_back_to_the_trained_one() -> None:
    data = {"meta": {"n_ctx": 0, "n_ctx_train": 4096}, "max_model_len": "x"}
    assert window_from_listing(data) == 4096


# ---------------------------------------------------------------------------------------
# Hosted models and the budget
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("gpt-4.1-nano", 1_047_576),
        ("gpt-4-turbo", 128_000),
        ("gpt-4-0613", 8_192),
        ("gpt-5", 272_000),
        ("gpt-5-mini", 272_000),
        ("gpt-5.1-2025-11-13", 272_000),
        ("gpt-5-chat-latest", 128_000),
        ("gpt-5.4", 922_000),
        ("gpt-5.4-nano", 272_000),
        ("o1-mini", 128_000),
        ("o3-mini-high", 200_000),
        ("o4-mini", 200_000),
        ("claude-3-5-haiku-latest", 200_000),
        ("claude-3-7-sonnet-20250219", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-6", 1_000_000),
        ("claude-opus-4-1-20250805", 200_000),
        ("claude-opus-4-6", 1_000_000),
        ("claude-haiku-4-5-20251001", 200_000),
        ("claude-opus-5-5", 1_000_000),
        ("openai/gpt-4o", 128_000),
        ("anthropic/claude-sonnet-4-6", 1_000_000),
        ("GPT-4o", 128_000),
        ("llama3.1:8b", None),
        ("SmolLM2-135M-Instruct", None),
        ("", None),
    ],
)
def test_hosted_window(model: str, window: int | None) -> None:
    assert hosted_window(model) == window


def test_hosted_table_values_are_positive_ints() -> None:
    for name, window in HOSTED_WINDOWS.items():
        assert name == name.casefold()
        assert isinstance(window, int) and window > 0


@pytest.mark.parametrize(("window", "budget"), [(8192, 6144), (1, 0), (128_000, 96_000)])
def test_history_budget_is_three_quarters(window: int, budget: int) -> None:
    assert history_budget(window) == budget


@pytest.mark.parametrize("window", [0, -1, True, 8192.0, "8192", None])
def test_history_budget_refuses_a_bad_window(window: Any) -> None:
    with pytest.raises(ConfigurationError, match="context_window"):
        history_budget(window)


# ---------------------------------------------------------------------------------------
# Discovery with the real openai client
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("like", ["vllm", "sglang", "llamacpp"])
def test_discovery_against_each_server(like: Any) -> None:
    with FakeProviderServer(models_like=like, context_window=8192, model_id="m") as srv:
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            assert discover_window(client, "m") == 8192
            # a server of one model answers whatever name the caller gave
            assert discover_window(client, "whatever-the-caller-calls-it") == 8192
        finally:
            client.close()
        paths = [r.path for r in srv.requests]
    expected = {
        # vLLM has no retrieve route: its listing answers
        "vllm": ["/v1/models/m", "/v1/models"],
        "sglang": ["/v1/models/m"],
        # llama.cpp's listing states only the trained context: /props says the slot's
        "llamacpp": ["/v1/models/m", "/v1/models", "/props"],
    }[like]
    assert paths[: len(expected)] == expected


async def test_async_discovery() -> None:
    with FakeProviderServer(models_like="llamacpp", context_window=4096) as srv:
        client = openai.AsyncOpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            assert await adiscover_window(client, "fake-model") == 4096
        finally:
            await client.close()


def test_llamacpp_without_props_falls_back_to_the_trained_context() -> None:
    with FakeProviderServer(models_like="llamacpp", context_window=None, n_ctx_train=2048) as srv:
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            assert discover_window(client, "fake-model") == 2048
        finally:
            client.close()
        paths = [r.path for r in srv.requests]
    assert paths == [
        "/v1/models/fake-model",
        "/v1/models",
        "/props",
        "/api/show",
        "/api/v0/models/fake-model",
    ]


def test_a_server_that_states_nothing_gives_none(caplog: pytest.LogCaptureFixture) -> None:
    with FakeProviderServer() as srv:  # no listing routes: every request is a 404
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            with caplog.at_level(logging.DEBUG, logger="stm_memory"):
                assert discover_window(client, "m") is None
        finally:
            client.close()
    assert "context-window discovery for m" in caplog.text


def test_a_server_error_gives_none(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(method: str, path: str, headers: object, body: bytes) -> WireResult:
        error = {"error": {"message": "down", "type": "server_error", "code": 500}}
        return json_result(500, error, {"x-should-retry": "false"})

    with FakeProviderServer(models_like="vllm", context_window=8192) as srv:
        monkeypatch.setattr(srv, "handle", down)
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            with caplog.at_level(logging.DEBUG, logger="stm_memory"):
                assert discover_window(client, "fake-model") is None
        finally:
            client.close()
    assert "InternalServerError" in caplog.text or "500" in caplog.text


def test_an_unreachable_server_gives_none() -> None:
    with FakeProviderServer() as srv:
        base_url = srv.openai_base_url
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    try:
        assert discover_window(client, "m") is None
    finally:
        client.close()


async def test_async_discovery_of_an_unreachable_server_gives_none() -> None:
    with FakeProviderServer() as srv:
        base_url = srv.openai_base_url
    client = openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0)
    try:
        assert await adiscover_window(client, "m") is None
    finally:
        await client.close()


@pytest.mark.parametrize(
    "base_url",
    [
        "https://api.openai.com/v1",
        "https://myres.openai.azure.com/openai/v1",
        "https://api.anthropic.com",
        "http://offline.invalid/v1",
    ],
)
def test_hosted_hosts_are_never_asked(base_url: str) -> None:
    class Never:
        def __getattr__(self, name: str) -> Any:
            raise AssertionError(f"asked {name}")

    class Client:
        models = Never()

        def __init__(self) -> None:
            self.base_url = base_url

        def get(self, *_a: object, **_k: object) -> Any:
            raise AssertionError("asked")

    assert discover_window(Client(), "gpt-4o") is None


def test_not_a_client_gives_none() -> None:
    assert discover_window(object(), "m") is None


# ---------------------------------------------------------------------------------------
# The fake provider refusing a request over its window, as the real servers do
# ---------------------------------------------------------------------------------------


def _long_messages(chars: int) -> list[Any]:
    return [{"role": "user", "content": "x" * chars}]


def test_fake_llamacpp_refuses_a_long_request_with_its_body() -> None:
    with FakeProviderServer(models_like="llamacpp", context_window=64) as srv:
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            with pytest.raises(openai.BadRequestError) as raised:
                client.chat.completions.create(model="fake-model", messages=_long_messages(400))
        finally:
            client.close()
        sent = srv.requests[0].body
    tokens = math.ceil(len(json.dumps(sent, separators=(",", ":"), ensure_ascii=False)) / 4)
    assert raised.value.body == {
        "code": 400,
        "message": f"request ({tokens} tokens) exceeds the available context size (64 "
        "tokens), try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": tokens,
        "n_ctx": 64,
    }
    found = context_exceeded_error(raised.value)
    assert found is not None and (found.limit, found.requested) == (64, tokens)
    assert srv.script.remaining == 0  # the refusal consumed nothing


def test_fake_server_answers_a_request_that_fits() -> None:
    with FakeProviderServer(models_like="vllm", context_window=8192) as srv:
        srv.script.reply_text("fits")
        client = openai.OpenAI(base_url=srv.openai_base_url, api_key="test", max_retries=0)
        try:
            reply = client.chat.completions.create(model="fake-model", messages=HI, max_tokens=16)
        finally:
            client.close()
    assert reply.choices[0].message.content == "fits"


class _StubOllama:
    """A duck-typed OpenAI client in front of Ollama: ``/v1/models`` states no window,
    ``/api/show`` and ``/api/ps`` answer as ``api/types.go`` describes them."""

    base_url = "http://127.0.0.1:11434/v1/"

    def __init__(self, show: dict[str, Any], ps: dict[str, Any]) -> None:
        self.answers = {"http://127.0.0.1:11434/api/show": show}
        self.answers["http://127.0.0.1:11434/api/ps"] = ps
        self.asked: list[str] = []
        self.models = self

    def with_options(self, **_options: object) -> _StubOllama:
        return self

    def retrieve(self, model: str) -> dict[str, Any]:
        self.asked.append("retrieve")
        return {"id": model, "object": "model", "created": 0, "owned_by": "library"}

    def list(self) -> list[dict[str, Any]]:
        self.asked.append("list")
        return []

    def _answer(self, url: str) -> str:
        self.asked.append(url.removeprefix("http://127.0.0.1:11434"))
        if url not in self.answers:
            raise LookupError(f"404 {url}")  # what the SDK raises does not matter here
        return json.dumps(self.answers[url])

    def get(self, url: str, *, cast_to: type[str]) -> str:
        return self._answer(url)

    def post(self, url: str, *, cast_to: type[str], body: dict[str, Any]) -> str:
        assert body == {"model": "qwen2.5:7b"}
        return self._answer(url)


SHOW_NUM_CTX = {
    "parameters": "num_ctx                        8192",
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
SHOW_TRAINED = {"model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768}}
PS = {"models": [{"name": "qwen2.5:7b", "model": "qwen2.5:7b", "context_length": 4096}]}


@pytest.mark.parametrize(
    ("show", "ps", "window", "asked"),
    [
        (SHOW_NUM_CTX, PS, 8192, ["/api/show"]),
        (SHOW_TRAINED, PS, 4096, ["/api/show", "/api/ps"]),
        (
            SHOW_TRAINED,
            {"models": []},
            32768,
            ["/api/show", "/api/ps", "/api/v0/models/qwen2.5%3A7b"],
        ),
    ],
    ids=["num_ctx", "loaded", "trained"],
)
def test_discovery_against_ollama(
    show: dict[str, Any], ps: dict[str, Any], window: int, asked: list[str]
) -> None:
    client = _StubOllama(show, ps)
    assert discover_window(client, "qwen2.5:7b") == window
    assert client.asked == ["retrieve", "list", "/props", *asked]

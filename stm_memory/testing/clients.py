"""Real OpenAI / Anthropic SDK clients whose transport answers in-process from an
:class:`OfflineModel` — no network, no key, the SDK's own parsing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from stm_memory.testing.offline import (
    OfflineModel,
    anthropic_message_body,
    openai_chat_body,
    openai_responses_body,
)

__all__ = ["offline_anthropic_client", "offline_openai_client"]


def _httpx() -> Any:
    # openai >= 3 and anthropic >= 2 ship on httpx2; older releases on httpx.
    try:
        import httpx2

        return httpx2
    except ImportError:
        import httpx

        return httpx


def _transport(
    handlers: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]], *, is_async: bool
) -> Any:
    httpx = _httpx()

    def handle(request: Any) -> Any:
        path = request.url.path
        for suffix, build in handlers.items():
            if path.endswith(suffix):
                body = json.loads(request.content or b"{}")
                if body.get("stream"):
                    return httpx.Response(
                        400, json={"error": {"message": "offline model does not stream"}}
                    )
                return httpx.Response(200, json=build(body))
        return httpx.Response(404, json={"error": {"message": f"no offline route for {path}"}})

    if is_async:

        async def ahandle(request: Any) -> Any:
            await request.aread()
            return handle(request)

        return httpx.MockTransport(ahandle)
    return httpx.MockTransport(handle)


def _build(
    sync_cls: Any,
    async_cls: Any,
    base_url: str,
    routes: Mapping[str, Callable[[Mapping[str, Any]], dict[str, Any]]],
    *,
    is_async: bool,
) -> Any:
    httpx = _httpx()
    transport = _transport(routes, is_async=is_async)
    http_client = (httpx.AsyncClient if is_async else httpx.Client)(transport=transport)
    client_cls = async_cls if is_async else sync_cls
    return client_cls(api_key="offline", base_url=base_url, max_retries=0, http_client=http_client)


def offline_openai_client(model: OfflineModel | None = None, *, is_async: bool = False) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) served by ``model`` in-process: Chat
    Completions and Responses."""
    import openai

    model = model or OfflineModel()
    routes = {
        "/chat/completions": lambda body: openai_chat_body(model, body),
        "/responses": lambda body: openai_responses_body(model, body),
    }
    return _build(
        openai.OpenAI, openai.AsyncOpenAI, "http://offline.invalid/v1", routes, is_async=is_async
    )


def offline_anthropic_client(model: OfflineModel | None = None, *, is_async: bool = False) -> Any:
    """An ``anthropic.Anthropic`` (or ``AsyncAnthropic``) served by ``model`` in-process."""
    import anthropic

    model = model or OfflineModel()
    routes = {"/v1/messages": lambda body: anthropic_message_body(model, body)}
    return _build(
        anthropic.Anthropic,
        anthropic.AsyncAnthropic,
        "http://offline.invalid",
        routes,
        is_async=is_async,
    )

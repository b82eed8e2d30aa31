"""Real OpenAI / Anthropic SDK clients whose transport answers in-process from an
:class:`OfflineModel` — no network, no key, the SDK's own parsing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .offline import (
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


def offline_openai_client(model: OfflineModel | None = None, *, is_async: bool = False) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) served by ``model`` in-process: Chat
    Completions and Responses."""
    import openai

    model = model or OfflineModel()
    httpx = _httpx()
    routes = {
        "/chat/completions": lambda body: openai_chat_body(model, body),
        "/responses": lambda body: openai_responses_body(model, body),
    }
    transport = _transport(routes, is_async=is_async)
    if is_async:
        return openai.AsyncOpenAI(
            api_key="offline",
            base_url="http://offline.invalid/v1",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=transport),
        )
    return openai.OpenAI(
        api_key="offline",
        base_url="http://offline.invalid/v1",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )


def offline_anthropic_client(model: OfflineModel | None = None, *, is_async: bool = False) -> Any:
    """An ``anthropic.Anthropic`` (or ``AsyncAnthropic``) served by ``model`` in-process."""
    import anthropic

    model = model or OfflineModel()
    httpx = _httpx()
    routes = {"/v1/messages": lambda body: anthropic_message_body(model, body)}
    transport = _transport(routes, is_async=is_async)
    if is_async:
        return anthropic.AsyncAnthropic(
            api_key="offline",
            base_url="http://offline.invalid",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=transport),
        )
    return anthropic.Anthropic(
        api_key="offline",
        base_url="http://offline.invalid",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )

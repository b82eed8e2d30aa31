"""Real OpenAI / Anthropic SDK clients whose transport answers in-process from an
:class:`OfflineModel` — no network, no key, the SDK's own parsing.

Each client has one :class:`~stm_memory.testing.PromptCache` (its ``cache_profile``), so
the usage it reports counts a repeated prompt prefix as cached, as the provider does.
Requests follow each other at once (the cache's counter clock), so nothing expires."""

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
from stm_memory.testing.prompt_cache import CACHE_PROFILES, CacheProfile, PromptCache

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
                try:
                    answer = build(body)
                except ValueError as exc:  # a request the provider refuses with a 400
                    error = {"type": "invalid_request_error", "message": str(exc)}
                    return httpx.Response(400, json={"type": "error", "error": error})
                return httpx.Response(200, json=answer)
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


def _cache(profile: str | CacheProfile, provider: str) -> PromptCache:
    found = CACHE_PROFILES.get(profile) if isinstance(profile, str) else profile
    if found is None or found.provider != provider:
        names = sorted(n for n, p in CACHE_PROFILES.items() if p.provider == provider)
        raise ValueError(f"cache_profile must be one of {names}, got {profile!r}")
    return PromptCache(found)


def offline_openai_client(
    model: OfflineModel | None = None,
    *,
    is_async: bool = False,
    cache_profile: str | CacheProfile = "openai-gpt-5",
) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) served by ``model`` in-process: Chat
    Completions and Responses, sharing one prompt cache (``cache_profile``)."""
    import openai

    model = model or OfflineModel()
    cache = _cache(cache_profile, "openai")
    routes = {
        "/chat/completions": lambda body: openai_chat_body(model, body, cache=cache),
        "/responses": lambda body: openai_responses_body(model, body, cache=cache),
    }
    return _build(
        openai.OpenAI, openai.AsyncOpenAI, "http://offline.invalid/v1", routes, is_async=is_async
    )


def offline_anthropic_client(
    model: OfflineModel | None = None,
    *,
    is_async: bool = False,
    cache_profile: str | CacheProfile = "anthropic-sonnet-5m",
) -> Any:
    """An ``anthropic.Anthropic`` (or ``AsyncAnthropic``) served by ``model`` in-process,
    with a prompt cache (``cache_profile``); more than four ``cache_control`` breakpoints
    get a 400, as from the API."""
    import anthropic

    model = model or OfflineModel()
    cache = _cache(cache_profile, "anthropic")
    routes = {"/v1/messages": lambda body: anthropic_message_body(model, body, cache=cache)}
    return _build(
        anthropic.Anthropic,
        anthropic.AsyncAnthropic,
        "http://offline.invalid",
        routes,
        is_async=is_async,
    )

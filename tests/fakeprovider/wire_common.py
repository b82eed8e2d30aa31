"""Pieces shared by the provider wire formats: results, errors, ids, chunking."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from stm_memory.model.rates import model_profile
from stm_memory.testing.prompt_cache import CACHE_PROFILES, CacheProfile, CacheUsage, PromptCache

from .script import ErrorReply, Reply

__all__ = [
    "Endpoint",
    "IdGen",
    "WireContext",
    "WireError",
    "WireResult",
    "chunk_json",
    "chunk_text",
    "dumps",
    "input_usage",
    "json_result",
    "prompt_caches",
    "sse_result",
]

#: The prompt-cache profile of each provider unless the server is given another.
DEFAULT_CACHE_PROFILES = {"openai": "openai-gpt-5", "anthropic": "anthropic-sonnet-5m"}


def dumps(obj: Any) -> str:
    """Compact, deterministic JSON (insertion-ordered keys, UTF-8 kept as is)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass
class WireResult:
    """A complete HTTP response: status, extra headers and body bytes."""

    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def json_result(status: int, obj: Any, headers: dict[str, str] | None = None) -> WireResult:
    return WireResult(status, "application/json", dumps(obj).encode("utf-8"), dict(headers or {}))


def sse_result(
    events: Iterable[tuple[str | None, str]], headers: dict[str, str] | None = None
) -> WireResult:
    """Build a ``text/event-stream`` body from ``(event name or None, data)`` pairs."""
    parts: list[str] = []
    for event, data in events:
        if event is not None:
            parts.append(f"event: {event}\n")
        parts.append(f"data: {data}\n\n")
    return WireResult(
        200, "text/event-stream; charset=utf-8", "".join(parts).encode("utf-8"), dict(headers or {})
    )


class WireError(Exception):
    """A request the real provider would reject; rendered in its error shape."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param
        self.code = code
        self.error_type = error_type


class IdGen:
    """Thread-safe counters giving deterministic ids such as ``call_1``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[tuple[str, int], int] = {}

    def next(self, prefix: str, width: int = 0) -> str:
        """Next id for ``prefix``; each (prefix, width) pair counts on its own."""
        key = (prefix, width)
        with self._lock:
            n = self._counters.get(key, 0) + 1
            self._counters[key] = n
        return f"{prefix}{n:0{width}d}"

    def reset(self) -> None:
        with self._lock:
            self._counters.clear()


def prompt_caches(
    cache_profile: str | CacheProfile | Iterable[str | CacheProfile] | None,
) -> dict[str, PromptCache]:
    """One :class:`PromptCache` per provider: each profile given goes to its provider
    (``"anthropic-haiku-5m"``, or several), the others keep their default."""
    given = [cache_profile] if isinstance(cache_profile, (str, CacheProfile)) else cache_profile
    chosen = {name: CACHE_PROFILES[default] for name, default in DEFAULT_CACHE_PROFILES.items()}
    for item in given or ():
        profile = CACHE_PROFILES[item] if isinstance(item, str) else item
        chosen[profile.provider] = profile
    return {provider: PromptCache(profile) for provider, profile in chosen.items()}


@dataclass
class WireContext:
    """Server-wide state the wire formats need (ids, clock, stored responses, the
    providers' prompt caches)."""

    ids: IdGen
    created: int
    strict_anthropic_alternation: bool = True
    # Responses API: response id -> full item list (history + input + output), so
    # `previous_response_id` chains can be validated like the real service does.
    stored_responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # "openai" / "anthropic" -> the provider's prompt cache, shared by every request to
    # it; requests follow each other on the cache's counter clock (the server has none).
    caches: dict[str, PromptCache] = field(default_factory=lambda: prompt_caches(None))

    def reset(self) -> None:
        self.ids.reset()
        with self.lock:
            self.stored_responses.clear()
        for cache in self.caches.values():
            cache.clear()


class Endpoint(Protocol):
    """One provider endpoint: validates a request, renders replies and errors."""

    def validate(self, body: dict[str, Any]) -> None:
        """Raise :class:`WireError` when the real provider would reject ``body``."""

    def render(self, reply: Reply, body: dict[str, Any], request_id: str) -> WireResult: ...

    def render_error(self, error: ErrorReply | WireError, request_id: str) -> WireResult: ...


_WORD_RE = re.compile(r"\s*\S+|\s+")


def chunk_text(text: str) -> list[str]:
    """Split text into word-sized deltas (leading whitespace stays with its word)."""
    return _WORD_RE.findall(text) if text else []


def chunk_json(text: str, size: int = 12) -> list[str]:
    """Split serialized arguments into fixed-size deltas."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def cache_for(ctx: WireContext, api: str, body: dict[str, Any]) -> PromptCache:
    """The prompt cache that bills ``body``: its provider's, or, for a model whose cache
    works otherwise (OpenAI's gpt-5.6 family and later, matched at breakpoints, its
    writes billed), that family's, chosen from the model's name as the service does."""
    provider = "anthropic" if api == "anthropic" else "openai"
    family = model_profile(str(body.get("model", "")))
    if provider == "openai" and family is not None and family.breakpoints:
        with ctx.lock:
            return ctx.caches.setdefault(family.name, PromptCache(family))
    return ctx.caches[provider]


def refuse_breakpoints(body: dict[str, Any], items: Iterable[Any], param: str) -> None:
    """OpenAI refuses explicit cache breakpoints and ``prompt_cache_options`` from a model
    before gpt-5.6 (400), as it does ``prompt_cache_options`` beside
    ``prompt_cache_retention``."""
    family = model_profile(str(body.get("model", "")))
    marked = any(
        isinstance(block, dict) and "prompt_cache_breakpoint" in block
        for item in items
        if isinstance(item, dict) and isinstance(item.get("content"), list)
        for block in item["content"]
    )
    if (marked or "prompt_cache_options" in body) and not (family and family.breakpoints):
        raise WireError(
            f"Prompt cache breakpoints are not supported with the model '{body.get('model')}'.",
            param=param,
            code="unsupported_parameter",
        )
    if "prompt_cache_options" in body and "prompt_cache_retention" in body:
        raise WireError(
            "prompt_cache_retention cannot be combined with prompt_cache_options.",
            param="prompt_cache_retention",
        )


def input_usage(ctx: WireContext, api: str, body: dict[str, Any], reply: Reply) -> CacheUsage:
    """The request's input tokens as the provider's prompt cache splits them (the request
    is recorded in the cache); ``reply.input_tokens`` overrides the count, uncached."""
    cache = cache_for(ctx, api, body)
    usage = cache.observe(body, api=api)
    return usage if reply.input_tokens is None else CacheUsage(reply.input_tokens)


def reply_output_tokens(reply: Reply) -> int:
    if reply.output_tokens is not None:
        return reply.output_tokens
    size = len(reply.text or "") + sum(
        len(c.name) + len(c.arguments_json()) for c in reply.tool_calls
    )
    return max(1, size // 4)

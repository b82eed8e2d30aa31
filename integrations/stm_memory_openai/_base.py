"""What the Chat Completions and Responses loops share: the SDK clients they take and the
adapter basics. The turn and the sync/async shells are the kit's
(:mod:`stm_memory.kit`); nothing here re-implements them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from stm_memory.kit import missing_extra

try:
    from openai import AsyncOpenAI, OpenAI, OpenAIError
except ImportError as exc:
    raise missing_extra("stm_memory_openai", "the OpenAI SDK", "openai") from exc

from stm_memory.kit import (
    LoopShell,
    ModelReply,
    OnText,
    Op,
    Usage,
    aemit_text,
    emit_text,
    prompt_cache_key,
)

if TYPE_CHECKING:
    from stm_memory import MemoryTurn

# The SDK names the API modules use are imported here, behind the one guard.
__all__ = [
    "AdapterBase",
    "AsyncOpenAI",
    "ClientT",
    "OpenAI",
    "OpenAIError",
    "OpenAILoop",
    "usage_of",
]

ClientT = TypeVar("ClientT", bound="OpenAI | AsyncOpenAI")


def usage_of(usage: Any, *, prompt: str, output: str, details: str) -> Usage:
    """The SDK's usage object as a :class:`~stm_memory.kit.Usage`. Both APIs count
    the cached tokens in the prompt total; ``details`` says how many (and, for models
    that bill cache writes, how many were written). Chat and Responses differ only in
    the field names."""
    if usage is None:
        return Usage()
    found = getattr(usage, details, None)
    return Usage(
        getattr(usage, prompt, None) or 0,
        getattr(usage, output, None) or 0,
        getattr(found, "cached_tokens", None) or 0,
        getattr(found, "cache_write_tokens", None) or 0,
    )


class AdapterBase(ABC):
    """Per-turn adapter state shared by both APIs (see ``ProviderAdapter``): a request
    is sent with ``create``, streamed when it asks for it."""

    provider = "openai"
    api: ClassVar[str]  # the label of the Ops: "chat", "responses"

    def __init__(
        self,
        create: Callable[..., Any],
        *,
        model: str,
        request_options: Mapping[str, Any],
        summary_limit: int,
        on_text: OnText | None,
        cache_hints: bool = True,
    ) -> None:
        self.create = create  # client.chat.completions.create / client.responses.create
        self.model = model
        self.request_options = request_options
        self.summary_limit = summary_limit
        self.on_text = on_text
        self.cache_hints = cache_hints

    def finish_request(self, request: dict[str, Any], turn: MemoryTurn) -> dict[str, Any]:
        # Sorted so two loops built with the same options in another order send
        # byte-identical requests (prompt caches and cassettes depend on it).
        options = self.request_options
        request.update((key, options[key]) for key in sorted(options))
        if self.cache_hints and turn.scope is not None and "prompt_cache_key" not in request:
            # One key per server: its channels share a cache (the caller's key wins).
            request["prompt_cache_key"] = prompt_cache_key(turn.scope)
        return request

    @abstractmethod
    def parse(self, response: Any) -> ModelReply:
        """The API's whole response as a :class:`~stm_memory.kit.ModelReply`."""

    @abstractmethod
    def _stream(self, request: dict[str, Any]) -> ModelReply:
        """Send ``request`` streamed (blocking), passing text deltas to ``emit``."""

    @abstractmethod
    async def _astream(self, request: dict[str, Any]) -> ModelReply:
        """Send ``request`` streamed (async), passing text deltas to ``aemit``."""

    def call_op(self, request: dict[str, Any]) -> Op:
        if request.get("stream"):
            return Op(
                lambda: self._stream(request), lambda: self._astream(request), f"{self.api}.stream"
            )
        return Op(
            lambda: self.parse(self.create(**request)),
            lambda: self._acreate(request),
            f"{self.api}.create",
        )

    async def _acreate(self, request: dict[str, Any]) -> ModelReply:
        return self.parse(await self.create(**request))

    def emit(self, delta: str) -> None:
        emit_text(self.on_text, delta)

    async def aemit(self, delta: str) -> None:
        await aemit_text(self.on_text, delta)


class OpenAILoop(LoopShell[ClientT]):
    """An OpenAI loop: ``(client, memory, *, model, max_steps=8, trim_history=True,
    memory_role=None, provider=None, cache_hints=True, **request_options)`` (see
    :class:`~stm_memory.kit.LoopShell`)."""

    CLIENTS: ClassVar[tuple[type[Any], type[Any]]] = (OpenAI, AsyncOpenAI)

    def _built(self) -> None:
        # Another host than OpenAI's may render requests with an open model's chat
        # template: with no form named, the portable one (kit/endpoints.py).
        self.options = self.options.for_host(getattr(self.client, "base_url", None))

    def _adapter_args(self, on_text: OnText | None) -> dict[str, Any]:
        return {
            "model": self.model,
            "request_options": self.request_options,
            "summary_limit": self.memory.limits.max_summary_length,
            "on_text": on_text,
            "cache_hints": self.cache_hints,
        }

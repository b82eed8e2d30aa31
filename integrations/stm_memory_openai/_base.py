"""What the Chat Completions and Responses loops share: the SDK clients they take and the
adapter basics. The turn and the sync/async shells are the kit's
(:mod:`stm_memory.kit`); nothing here re-implements them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
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
    adiscover_window,
    aemit_text,
    discover_window,
    emit_text,
    is_openai_host,
)

if TYPE_CHECKING:
    from stm_memory import MemoryTurn
    from stm_memory.kit import PreparedRequest, ToolSpec

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
    is sent with ``create``, streamed when it asks for it. ``cache_hints`` (None: the
    turn's options') overrides whether the turn's requests carry the cache hints."""

    provider = "openai"
    api: ClassVar[str]  # the label of the Ops: "chat", "responses"

    def __init__(
        self,
        create: Callable[..., Any],
        *,
        model: str,
        request_options: Mapping[str, Any],
        on_text: OnText | None,
        cache_hints: bool | None = None,
    ) -> None:
        self.create = create  # client.chat.completions.create / client.responses.create
        self.model = model
        self.request_options = request_options
        self.on_text = on_text
        self.cache_hints = cache_hints

    def tools_of(
        self, prepared: PreparedRequest, tools: Sequence[Any], turn: MemoryTurn
    ) -> list[Any]:
        """The request's tools: ours first (the memory tool when the turn offers or
        describes it, the retrieval tool), then the caller's."""
        return [*(self.memory_tool(spec) for spec in prepared.specs), *tools]

    def finish_request(self, request: dict[str, Any], prepared: PreparedRequest) -> dict[str, Any]:
        # Sorted so two loops built with the same options in another order send
        # byte-identical requests (prompt caches and cassettes depend on it).
        options = self.request_options
        request.update((key, options[key]) for key in sorted(options))
        if prepared.tool_choice is None:
            request.pop("tool_choice", None)
        else:
            request["tool_choice"] = prepared.tool_choice
        # The turn's hints (one prompt_cache_key per server; the caller's key wins).
        request.update(prepared.hints)
        return request

    @abstractmethod
    def memory_tool(self, spec: ToolSpec) -> Any:
        """The memory tool's definition in the API's format."""

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
        # template: with no form named, the portable one (endpoints/hosts.py).
        self.options = self.options.for_host(getattr(self.client, "base_url", None))

    def _window_op(self) -> Op | None:
        base_url = getattr(self.client, "base_url", None)
        if self._window_asked or self.options.context_window is not None:
            return None
        if is_openai_host(base_url):
            return None  # OpenAI lists no window: the hosted table has them
        client, model = self.client, self.model
        return Op(
            lambda: discover_window(client, model),
            lambda: adiscover_window(client, model),
            "models",
        )

    def _adapter_args(self, on_text: OnText | None) -> dict[str, Any]:
        return {
            "model": self.model,
            "request_options": self.request_options,
            "on_text": on_text,
        }

"""What the Chat Completions and Responses loops share: the SDK clients they take and the
adapter basics. The turn and the sync/async shells are the kit's
(:mod:`stm_memory.providers`); nothing here re-implements them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from stm_memory.providers import missing_extra

try:
    import openai
except ImportError as exc:
    raise missing_extra("stm_memory_openai", "the OpenAI SDK", "openai") from exc

from stm_memory.providers import LoopShell, OnText, aemit_text, emit_text, last_user_text

__all__ = ["AdapterBase", "ClientT", "OpenAILoop"]

ClientT = TypeVar("ClientT", bound="openai.OpenAI | openai.AsyncOpenAI")


class AdapterBase:
    """Per-turn adapter state shared by both APIs (see ``ProviderAdapter``)."""

    provider = "openai"

    def __init__(
        self,
        create: Callable[..., Any],
        *,
        model: str,
        options: Mapping[str, Any],
        limit: int,
        on_text: OnText | None,
    ) -> None:
        self.create = create  # client.chat.completions.create / client.responses.create
        self.model = model
        self.options = options
        self.limit = limit
        self.on_text = on_text

    def user_text(self, messages: Sequence[Any]) -> str | None:
        return last_user_text(messages)

    def finish_request(self, request: dict[str, Any]) -> dict[str, Any]:
        # Sorted so two loops built with the same options in another order send
        # byte-identical requests (prompt caches and cassettes depend on it).
        request.update((key, self.options[key]) for key in sorted(self.options))
        return request

    def emit(self, delta: str) -> None:
        emit_text(self.on_text, delta)

    async def aemit(self, delta: str) -> None:
        await aemit_text(self.on_text, delta)


class OpenAILoop(LoopShell[ClientT]):
    """An OpenAI loop: ``(client, memory, *, model, max_steps=8, trim_history=True,
    memory_role="system", **request_options)`` (see :class:`~stm_memory.providers.LoopShell`)."""

    CLIENTS: ClassVar[tuple[type[Any], type[Any]]] = (openai.OpenAI, openai.AsyncOpenAI)

    def _adapter_args(self, on_text: OnText | None) -> dict[str, Any]:
        return {
            "model": self.model,
            "options": self.request_options,
            "limit": self.memory.limits.max_summary_length,
            "on_text": on_text,
        }

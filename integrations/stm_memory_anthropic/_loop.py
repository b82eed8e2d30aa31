"""The Anthropic Messages loops, sync and async: the settings (``max_tokens`` beside the
shell's), the checks of ``run_turn``'s arguments and the adapter of one turn. The
turn itself and the sync/async shells are the kit's (:mod:`stm_memory.kit`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from stm_memory.kit import missing_extra

try:
    import anthropic
except ImportError as exc:
    raise missing_extra("stm_memory_anthropic", "the Anthropic SDK", "anthropic") from exc

from stm_memory.kit import (
    AsyncLoop,
    LoopShell,
    MemoryRole,
    OnText,
    SyncLoop,
    ToolHandler,
    WriterLike,
    check_message_list,
    check_positive_int,
    check_tools,
)
from stm_memory.wire.anthropic import anthropic_system

from ._messages import AnthropicMessagesAdapter
from ._wire import MessagesClient, astreamer, async_only, streamer, sync_only

if TYPE_CHECKING:
    from stm_memory import ShortTermMemory

__all__ = ["AnthropicLoop", "AsyncAnthropicLoop", "MessagesLoop"]

_WHAT = "Messages API"


class MessagesLoop(LoopShell[MessagesClient]):
    """``(client, memory, *, model, max_tokens=1024, max_steps=8, trim_history=True,
    memory_role=None, provider=None, cache_hints=True, **request_options)``.

    ``request_options`` (``temperature``, ``tool_choice``, ``metadata``, ``thinking``,
    ``extra_headers``, ``timeout`` …) go into every ``messages.create`` call.
    """

    RESERVED: ClassVar[frozenset[str]] = frozenset(
        {"model", "max_tokens", "messages", "system", "tools", "stream"}
    )
    CLIENTS: ClassVar[tuple[type[Any], type[Any]]] = (anthropic.Anthropic, anthropic.AsyncAnthropic)
    CREATE = "messages.create"

    def __init__(
        self,
        client: MessagesClient,
        memory: ShortTermMemory,
        *,
        model: str,
        max_tokens: int = 1024,
        max_steps: int = 8,
        trim_history: bool = True,
        memory_role: MemoryRole | None = None,
        provider: str | None = None,
        cache_hints: bool = True,
        tool_calling: bool = True,
        context_window: int | None = None,
        keep_tool_results: Sequence[str] = (),
        writer: WriterLike | None = None,
        **request_options: Any,
    ) -> None:
        super().__init__(
            client,
            memory,
            model=model,
            max_steps=max_steps,
            trim_history=trim_history,
            memory_role=memory_role,
            provider=provider,
            cache_hints=cache_hints,
            tool_calling=tool_calling,
            context_window=context_window,
            keep_tool_results=keep_tool_results,
            writer=writer,
            **request_options,
        )
        check_positive_int("max_tokens", max_tokens)
        self.max_tokens = max_tokens

    def _adapter(self, on_text: OnText | None) -> AnthropicMessagesAdapter:
        client = self.client
        # Each loop gets the sender of its own kind; the other one explains the mix-up.
        if self._is_async:
            asend = self._acreate if on_text is None else astreamer(client, on_text)
            send: Any = async_only
        else:
            send = self._create if on_text is None else streamer(client, on_text)
            asend = sync_only
        return AnthropicMessagesAdapter(
            model=self.model,
            max_tokens=self.max_tokens,
            send=send,
            asend=asend,
            request_options=self.request_options,
        )

    def _messages(self, messages: Any) -> list[Any]:
        return check_message_list(messages, what=_WHAT)

    def _system(self, system: Any) -> Any:
        return anthropic_system(system)

    def _tools(self, tools: Any, tool_handlers: Mapping[str, ToolHandler] | None) -> list[Any]:
        return check_tools(tools, tool_handlers, what=_WHAT)

    def _create(self, request: dict[str, Any]) -> Any:
        return self.client.messages.create(**request)

    async def _acreate(self, request: dict[str, Any]) -> Any:
        return await self.client.messages.create(**request)


class AnthropicLoop(SyncLoop[MessagesClient], MessagesLoop):
    """Agent tool loop over ``anthropic.Anthropic`` (Messages API) with short-term memory.

    ``loop.run_turn(scope, messages, system=None, tools=(), tool_handlers=None,
    on_text=None) -> TurnResult``: ``messages`` is the dialogue so far (Messages API
    dicts), ending with the user's message; ``system`` a string or text blocks.
    """


class AsyncAnthropicLoop(AsyncLoop[MessagesClient], MessagesLoop):
    """:class:`AnthropicLoop` over ``anthropic.AsyncAnthropic``; tool handlers and
    ``on_text`` may be async callables."""

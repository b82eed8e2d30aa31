"""The Anthropic SDK side of a Messages turn: a ``Message`` read into a
:class:`~stm_memory.kit.ModelReply`, and the senders (create or stream) the
loops hand to the adapter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from stm_memory.kit import ModelReply, OnText, ToolCall, Usage, aemit_text, emit_text

__all__ = [
    "ASend",
    "MessagesClient",
    "Send",
    "astreamer",
    "async_only",
    "parse_message",
    "streamer",
    "sync_only",
]

Send = Callable[[dict[str, Any]], Any]
ASend = Callable[[dict[str, Any]], Awaitable[Any]]


class MessagesClient(Protocol):
    """Anything with ``.messages.create``/``.messages.stream``: ``anthropic.Anthropic``,
    ``AnthropicBedrock``, ``AnthropicVertex`` … (or their async twins)."""

    @property
    def messages(self) -> Any: ...


def parse_message(message: Any) -> ModelReply:
    """A Messages API ``Message`` as a :class:`~stm_memory.kit.ModelReply`.

    Every block is kept in the transcript as the API sent it (thinking blocks and their
    signatures must be sent back unchanged). With ``stop_reason == "max_tokens"`` the
    reply was cut at the output limit, so its tool calls are marked truncated and are
    never executed.
    """
    blocks = [block.to_dict(mode="json", exclude_none=True) for block in message.content]
    truncated = message.stop_reason == "max_tokens"
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    calls = tuple(
        ToolCall(str(b["id"]), str(b["name"]), b.get("input") or {}, truncated)
        for b in blocks
        if b.get("type") == "tool_use"
    )
    # An assistant message with no content is refused in a later request; drop it.
    transcript = ({"role": "assistant", "content": blocks},) if blocks else ()
    return ModelReply(text, calls, transcript, _usage(message.usage))


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    # input_tokens counts only what follows the last cache breakpoint; cache reads and
    # writes are input too (OpenAI's prompt_tokens count them the same way).
    read = int(getattr(usage, "cache_read_input_tokens", None) or 0)
    written = int(getattr(usage, "cache_creation_input_tokens", None) or 0)
    return Usage(
        int(usage.input_tokens or 0) + read + written, int(usage.output_tokens or 0), read, written
    )


def streamer(client: MessagesClient, on_text: OnText) -> Send:
    """A blocking sender that streams, passing each text delta to ``on_text``."""

    def send(request: dict[str, Any]) -> Any:
        with client.messages.stream(**request) as stream:
            for text in stream.text_stream:
                emit_text(on_text, text)
            return stream.get_final_message()

    return send


def astreamer(client: MessagesClient, on_text: OnText) -> ASend:
    """The async twin of :func:`streamer` (``on_text`` may be async)."""

    async def asend(request: dict[str, Any]) -> Any:
        async with client.messages.stream(**request) as stream:
            async for text in stream.text_stream:
                await aemit_text(on_text, text)
            return await stream.get_final_message()

    return asend


def sync_only(request: dict[str, Any]) -> Awaitable[Any]:
    raise TypeError("AnthropicLoop is synchronous; drive it with stm_memory.kit.drive")


def async_only(request: dict[str, Any]) -> Any:
    raise TypeError("AsyncAnthropicLoop is asynchronous; drive it with stm_memory.kit.adrive")

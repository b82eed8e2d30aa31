"""Chat Completions: ``client.chat.completions.create`` with the memory tool beside yours.

Request: ``system`` as a leading system message, memory content and nudge placed into a
copy of the dialogue by the turn (``MemoryTurn.prepare``), then the memory tool
(strict function schema) and the caller's tools. Reply: the assistant message (with its
``tool_calls``) joins the transcript; tool results go back as ``role: "tool"`` messages.
A reply cut at the output limit (``finish_reason == "length"``) marks its tool calls
truncated, so none of them runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stm_memory.kit import (
    Ask,
    AsyncLoop,
    ModelReply,
    OnText,
    ProviderAdapter,
    SyncLoop,
    ToolCall,
    Usage,
    is_truncated,
)
from stm_memory.wire.openai_chat import (
    CHAT_WIRE,
    chat_tool,
    chat_tool_call,
    chat_tool_results,
    function_call,
)

from ._base import AdapterBase, AsyncOpenAI, ClientT, OpenAI, OpenAILoop, usage_of

if TYPE_CHECKING:
    from stm_memory import MemoryTurn
    from stm_memory.kit import MemoryContext, ToolSpec

__all__ = ["AsyncOpenAIChatLoop", "ChatCompletionsAdapter", "OpenAIChatLoop"]


def _usage(usage: Any) -> Usage:
    return usage_of(
        usage, prompt="prompt_tokens", output="completion_tokens", details="prompt_tokens_details"
    )


def chat_reply(
    content: str | None,
    refusal: str | None,
    tool_calls: Sequence[Mapping[str, Any]],
    finish_reason: str | None,
    usage: Usage,
) -> ModelReply:
    """The parsed reply; the same for a whole completion and an accumulated stream."""
    truncated = is_truncated(finish_reason=finish_reason)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal:
        message["refusal"] = refusal
    if tool_calls:
        message["tool_calls"] = [dict(call) for call in tool_calls]
    return ModelReply(
        text=content or "",
        tool_calls=tuple(chat_tool_call(call, truncated) for call in tool_calls),
        transcript=(message,),
        usage=usage,
    )


def parse_completion(completion: Any) -> ModelReply:
    """A ``ChatCompletion`` → :class:`ModelReply` (first choice)."""
    if not completion.choices:
        return ModelReply("", (), (), _usage(completion.usage))
    choice = completion.choices[0]
    message = choice.message
    calls: list[dict[str, Any]] = []
    for call in message.tool_calls or ():
        if call.type == "function":
            calls.append(function_call(call.id, call.function.name, call.function.arguments))
        else:
            calls.append(call.model_dump(mode="json", exclude_none=True))
    return chat_reply(
        message.content, message.refusal, calls, choice.finish_reason, _usage(completion.usage)
    )


class _ChatStream:
    """Accumulates ``ChatCompletionChunk`` deltas into what :func:`chat_reply` needs."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()

    def feed(self, chunk: Any) -> str:
        """Take one chunk; returns its visible text delta."""
        if getattr(chunk, "usage", None) is not None:
            self.usage = _usage(chunk.usage)
        text = ""
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta.content:
                self.content.append(delta.content)
                text += delta.content
            if delta.refusal:
                self.refusal.append(delta.refusal)
            for part in delta.tool_calls or ():
                slot = self.calls.setdefault(part.index, function_call("", "", ""))
                if part.id:
                    slot["id"] = part.id
                if part.function is not None:
                    slot["function"]["name"] += part.function.name or ""
                    slot["function"]["arguments"] += part.function.arguments or ""
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return text

    def reply(self) -> ModelReply:
        content = "".join(self.content) if self.content else None
        refusal = "".join(self.refusal) if self.refusal else None
        calls = [self.calls[i] for i in sorted(self.calls)]
        return chat_reply(content, refusal, calls, self.finish_reason, self.usage)


class ChatCompletionsAdapter(AdapterBase):
    """:class:`~stm_memory.kit.ProviderAdapter` for Chat Completions."""

    api = "chat"

    def build_request(
        self,
        transcript: Sequence[Any],
        system: str | None,
        tools: Sequence[Any],
        turn: MemoryTurn,
        *,
        context: MemoryContext | None = None,
    ) -> dict[str, Any]:
        messages: list[Any] = [{"role": "system", "content": system}] if system else []
        messages.extend(transcript)
        prepared = turn.prepare(
            messages,
            wire=CHAT_WIRE,
            ask=Ask.of_options(
                self.request_options,
                tools,
                cache_hints=self.cache_hints,
                provider=self.provider,
                context=context,
            ),
        )
        request: dict[str, Any] = {"model": self.model, "messages": prepared.messages}
        listed = self.tools_of(prepared, tools, turn)
        if listed:
            request["tools"] = listed
        if self.on_text is not None:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}
        return self.finish_request(request, prepared)

    def parse(self, completion: Any) -> ModelReply:
        return parse_completion(completion)

    def _stream(self, request: dict[str, Any]) -> ModelReply:
        acc = _ChatStream()
        with self.create(**request) as stream:
            for chunk in stream:
                self.emit(acc.feed(chunk))
        return acc.reply()

    async def _astream(self, request: dict[str, Any]) -> ModelReply:
        acc = _ChatStream()
        async with await self.create(**request) as stream:
            async for chunk in stream:
                await self.aemit(acc.feed(chunk))
        return acc.reply()

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]:
        return chat_tool_results(results)

    def memory_tool(self, spec: ToolSpec) -> Any:
        return chat_tool(spec)


class _ChatLoop(OpenAILoop[ClientT]):
    RESERVED = frozenset({"model", "messages", "tools", "stream"})
    CREATE = "chat.completions.create"

    def _adapter(self, on_text: OnText | None) -> ProviderAdapter:
        create = self.client.chat.completions.create
        return ChatCompletionsAdapter(create, **self._adapter_args(on_text))


class OpenAIChatLoop(SyncLoop[OpenAI], _ChatLoop[OpenAI]):
    """Chat Completions tool loop with short-term memory (blocking ``openai.OpenAI``).

    ``loop.run_turn(scope, messages, system=None, tools=(), tool_handlers=None,
    on_text=None) -> TurnResult``.
    """


class AsyncOpenAIChatLoop(AsyncLoop[AsyncOpenAI], _ChatLoop[AsyncOpenAI]):
    """Chat Completions tool loop with short-term memory (``openai.AsyncOpenAI``).

    ``await loop.run_turn(...)``; tool handlers and ``on_text`` may be async.
    """

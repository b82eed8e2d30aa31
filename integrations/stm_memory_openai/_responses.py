"""Responses API: ``client.responses.create`` with the memory tool beside yours.

Stateless by design: every step sends the whole transcript as ``input`` (no
``previous_response_id``), so memory injections never pile up in stored responses.
Request: ``system`` as ``instructions``, memory content and nudge placed into a copy of
the input items by the turn (``MemoryTurn.prepare``, form ``"responses"``: an assistant
message and the call items after it kept together, so a reply's parallel calls are
never split). Reply: the output items join the transcript as input items;
tool results go back as ``function_call_output`` items. A response cut at the output
limit (``status == "incomplete"``, ``incomplete_details.reason == "max_output_tokens"``)
marks its calls truncated, so none of them runs.
"""

from __future__ import annotations

from collections.abc import Sequence
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
from stm_memory.wire.responses import RESPONSES_WIRE, responses_tool, responses_tool_results

from ._base import AdapterBase, AsyncOpenAI, ClientT, OpenAI, OpenAIError, OpenAILoop, usage_of

if TYPE_CHECKING:
    from stm_memory import MemoryTurn
    from stm_memory.kit import MemoryContext, ToolSpec

__all__ = ["AsyncOpenAIResponsesLoop", "OpenAIResponsesLoop", "ResponsesAdapter"]

_TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _usage(usage: Any) -> Usage:
    return usage_of(
        usage, prompt="input_tokens", output="output_tokens", details="input_tokens_details"
    )


class ResponsesAdapter(AdapterBase):
    """:class:`~stm_memory.kit.ProviderAdapter` for the Responses API."""

    api = "responses"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Call ids of custom (free-text) tool calls: their results are
        # custom_tool_call_output items, not function_call_output.
        self._custom_calls: set[str] = set()

    def build_request(
        self,
        transcript: Sequence[Any],
        system: str | None,
        tools: Sequence[Any],
        turn: MemoryTurn,
        *,
        context: MemoryContext | None = None,
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model}
        prepared = turn.prepare(
            transcript,
            wire=RESPONSES_WIRE,
            ask=Ask.of_options(
                self.request_options,
                tools,
                cache_hints=self.cache_hints,
                system=system,
                context=context,
            ),
        )
        if prepared.system:
            request["instructions"] = prepared.system
        request["input"] = prepared.messages
        listed = self.tools_of(prepared, tools, turn)
        if listed:
            request["tools"] = listed
        if self.on_text is not None:
            request["stream"] = True
        return self.finish_request(request, prepared)

    def parse(self, response: Any) -> ModelReply:
        """A ``Response`` → :class:`ModelReply`."""
        if response.status == "failed":
            error = response.error
            detail = f"{error.code}: {error.message}" if error is not None else "no details"
            raise OpenAIError(f"The response failed ({detail}).")
        details = response.incomplete_details
        truncated = response.status == "incomplete" and is_truncated(
            incomplete_reason=details.reason if details is not None else None
        )
        calls: list[ToolCall] = []
        for item in response.output:
            if item.type == "function_call":
                calls.append(ToolCall(item.call_id, item.name, item.arguments, truncated))
            elif item.type == "custom_tool_call":
                self._custom_calls.add(item.call_id)
                calls.append(ToolCall(item.call_id, item.name, {"input": item.input}, truncated))
        return ModelReply(
            text=response.output_text,
            tool_calls=tuple(calls),
            # Output items are valid input items; exclude_unset keeps what the API sent.
            transcript=tuple(
                item.model_dump(mode="json", exclude_unset=True) for item in response.output
            ),
            usage=_usage(response.usage),
        )

    @staticmethod
    def _final(event: Any, final: Any) -> Any:
        if event.type == "error":
            raise OpenAIError(f"The response stream failed: {event.message}")
        return event.response if event.type in _TERMINAL_EVENTS else final

    def _finish(self, final: Any) -> ModelReply:
        if final is None:
            raise OpenAIError("The response stream ended without a final response.")
        return self.parse(final)

    def _stream(self, request: dict[str, Any]) -> ModelReply:
        final = None
        with self.create(**request) as stream:
            for event in stream:
                if event.type == "response.output_text.delta":
                    self.emit(event.delta)
                final = self._final(event, final)
        return self._finish(final)

    async def _astream(self, request: dict[str, Any]) -> ModelReply:
        final = None
        async with await self.create(**request) as stream:
            async for event in stream:
                if event.type == "response.output_text.delta":
                    await self.aemit(event.delta)
                final = self._final(event, final)
        return self._finish(final)

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]:
        return responses_tool_results(results, self._custom_calls)

    def memory_tool(self, spec: ToolSpec) -> Any:
        return responses_tool(spec)


class _ResponsesLoop(OpenAILoop[ClientT]):
    RESERVED = frozenset(
        {
            "model",
            "input",
            "instructions",
            "tools",
            "stream",
            "previous_response_id",
            "conversation",
        }
    )
    CREATE = "responses.create"

    def _adapter(self, on_text: OnText | None) -> ProviderAdapter:
        create = self.client.responses.create
        return ResponsesAdapter(create, **self._adapter_args(on_text))


class OpenAIResponsesLoop(SyncLoop[OpenAI], _ResponsesLoop[OpenAI]):
    """Responses API tool loop with short-term memory (blocking ``openai.OpenAI``).

    ``loop.run_turn(scope, input_items, system=None, tools=(), tool_handlers=None,
    on_text=None) -> TurnResult``; ``system`` becomes ``instructions``.
    """


class AsyncOpenAIResponsesLoop(AsyncLoop[AsyncOpenAI], _ResponsesLoop[AsyncOpenAI]):
    """Responses API tool loop with short-term memory (``openai.AsyncOpenAI``).

    ``await loop.run_turn(...)``; tool handlers and ``on_text`` may be async.
    """

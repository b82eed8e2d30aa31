"""The Messages API half of a turn: where memory goes in a request, and how tool results
go back (:class:`~stm_memory.kit.ProviderAdapter`).

Request shape, per step:

- Top-position memory content is appended to ``system`` (after the caller's system
  prompt, so a cached prefix stays cached); the nudge and any non-top content are
  merged as text blocks into a neighbouring user turn, so roles keep alternating and
  an assistant ``tool_use`` is never separated from the user ``tool_result`` answering it.
- ``tools`` is the memory tool (while a guard does not hide it) followed by the
  caller's tools. The Messages API refuses ``tool_use``/``tool_result`` blocks in a
  request that defines no tools, so when nothing is offered but the history holds
  tool traffic the memory tool is defined with ``tool_choice: none`` (never callable).
- ``messages`` carry only ``role`` and ``content`` (a speaker ``name`` kept for
  capture is not an API field), with consecutive same-role messages merged into one
  turn: several users speaking in a row, or the next user message after a turn that
  ended with tool results, still make a strictly alternating conversation.
- All tool results of one assistant message go back in ONE user message, with
  ``is_error`` set when the result reports a failure.

``TurnResult.messages`` is the dialogue as the caller gave it plus the model's
messages and the tool results: no injected memory, no nudge. Feed it back, with the
next user message appended, on the next turn.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from stm_memory import MemoryTurn
from stm_memory.kit import Ask, MemoryContext, ModelReply, Op, System, ToolCall, ToolSpec
from stm_memory.wire.anthropic import (
    ANTHROPIC_WIRE,
    anthropic_system,
    anthropic_tool_results,
    messages_tool,
)

from ._wire import ASend, Send, parse_message

__all__ = ["PROVIDER", "AnthropicMessagesAdapter"]

PROVIDER = "anthropic"


class AnthropicMessagesAdapter:
    """The Messages API half of a turn (:class:`stm_memory.kit.ProviderAdapter`).

    ``send``/``asend`` take the request dict and return an ``anthropic.types.Message``;
    the loops provide them. Use this class directly only to drive
    :func:`stm_memory.kit.run_turn_steps` yourself.
    """

    provider = PROVIDER

    def __init__(
        self,
        *,
        model: str,
        max_tokens: int,
        send: Send,
        asend: ASend,
        request_options: Mapping[str, Any] | None = None,
        system: System = None,
        cache_hints: bool | None = None,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.request_options = dict(request_options or {})
        self.system = anthropic_system(system)
        self.cache_hints = cache_hints
        self._send = send
        self._asend = asend

    def build_request(
        self,
        transcript: Sequence[Any],
        system: Any,
        tools: Sequence[Any],
        turn: MemoryTurn,
        *,
        context: MemoryContext | None = None,
    ) -> dict[str, Any]:
        caller_system = system if system is not None else self.system
        prepared = turn.prepare(
            transcript,
            wire=ANTHROPIC_WIRE,
            ask=Ask.of_options(
                self.request_options,
                tools,
                cache_hints=self.cache_hints,
                system=caller_system,
                provider=PROVIDER,
                context=context,
            ),
        )
        # A private copy: the caller may reuse or mutate its messages after the turn,
        # and TurnResult.requests must keep showing what was sent.
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": copy.deepcopy(prepared.messages),
        }
        if prepared.system:
            request["system"] = copy.deepcopy(prepared.system)
        request.update(self.request_options)
        # Ours first: the memory tool as the turn offers it (or describes it,
        # uncallable), the retrieval tool.
        ours = [self.memory_tool(spec) for spec in prepared.specs]
        if ours or tools:
            request["tools"] = copy.deepcopy([*ours, *tools])
        if prepared.tool_choice is None:
            request.pop("tool_choice", None)
        else:
            request["tool_choice"] = prepared.tool_choice
        return prepared.with_breakpoints(request)

    def call_op(self, request: dict[str, Any]) -> Op:
        async def arun() -> ModelReply:
            return parse_message(await self._asend(request))

        return Op(lambda: parse_message(self._send(request)), arun, "anthropic.messages")

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]:
        return anthropic_tool_results(results)

    def memory_tool(self, spec: ToolSpec) -> Any:
        return messages_tool(spec)

"""What the Chat Completions and Responses loops share: construction, the sync and async
``run_turn`` shells around :func:`stm_memory.providers.loop.run_turn_steps`, and adapter basics.

The turn itself (begin → assemble → model ↔ tools → capture → end) lives in
``stm_memory.providers.loop``; nothing here re-implements it.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import openai

from stm_memory.errors import ValidationError
from stm_memory.model.messages import message_text
from stm_memory.prompt.placement import MemoryRole
from stm_memory.providers.loop import (
    Op,
    ProviderAdapter,
    TurnResult,
    adrive,
    check_memory_role,
    drive,
    run_turn_steps,
)

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.model import Scope

__all__ = ["AdapterBase", "AsyncLoop", "BaseLoop", "OnText", "SyncLoop", "ToolHandler"]

ClientT = TypeVar("ClientT", bound="openai.OpenAI | openai.AsyncOpenAI")
#: Called with each visible text delta while streaming (may return an awaitable in
#: the async loops).
OnText = Callable[[str], object]
#: A caller's tool: parsed JSON arguments in, a string or JSON-able value out.
ToolHandler = Callable[[dict[str, Any]], Any]


def as_messages(messages: str | Sequence[Any]) -> list[Any]:
    """The caller's dialogue as a new list; a bare string is one user message."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if isinstance(messages, bytes | Mapping) or not isinstance(messages, Sequence):
        raise ValidationError("messages must be a list of messages (or one user string)")
    return list(messages)


def last_user_text(messages: Sequence[Any]) -> str | None:
    """Text of the last user message: Chat messages and Responses message items alike."""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            try:
                return message_text(message.get("content"))
            except ValidationError:
                return None
    return None


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
        if delta and self.on_text is not None:
            self.on_text(delta)

    async def aemit(self, delta: str) -> None:
        if delta and self.on_text is not None:
            result = self.on_text(delta)
            if inspect.isawaitable(result):
                await result


class BaseLoop(ABC, Generic[ClientT]):
    """``(client, memory, *, model, max_steps=8, trim_history=True, **request_options)``.

    ``messages`` given to ``run_turn`` may be the whole history (``result.messages`` fed
    back): each request carries the memory block, the turns the memory does not cover
    and the current turn (:mod:`stm_memory.prompt.cut`). ``trim_history=False`` sends
    every message given, for a caller that keeps its own window. ``memory_role="user"``
    injects memory and nudge as user messages instead of system messages.

    ``request_options`` go into every request (``temperature``, ``max_tokens``,
    ``tool_choice``, ``extra_headers``, ``timeout`` …); the keys the loop manages itself
    (``RESERVED``) are refused.
    """

    RESERVED: ClassVar[frozenset[str]] = frozenset()
    _is_async: ClassVar[bool] = False

    def __init__(
        self,
        client: ClientT,
        memory: ShortTermMemory,
        *,
        model: str,
        max_steps: int = 8,
        trim_history: bool = True,
        memory_role: MemoryRole = "system",
        **request_options: Any,
    ) -> None:
        wrong = openai.OpenAI if self._is_async else openai.AsyncOpenAI
        if isinstance(client, wrong):
            right = "an openai.AsyncOpenAI" if self._is_async else "an openai.OpenAI"
            raise TypeError(f"{type(self).__name__} needs {right} client")
        if not isinstance(model, str) or not model:
            raise ValueError("model must be a non-empty string")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError("max_steps must be an integer >= 1")
        clash = sorted(self.RESERVED & request_options.keys())
        if clash:
            raise TypeError(f"{type(self).__name__} sets {', '.join(clash)} itself")
        self.client = client
        self.memory = memory
        self.model = model
        self.max_steps = max_steps
        # False for a caller that windows its own history: nothing is cut.
        self.trim_history = bool(trim_history)
        check_memory_role(memory_role)
        self.memory_role: MemoryRole = memory_role
        self.request_options = dict(request_options)

    @abstractmethod
    def _adapter(self, on_text: OnText | None) -> ProviderAdapter:
        """The API-specific adapter (Chat Completions or Responses) for one turn."""

    def _adapter_args(self, on_text: OnText | None) -> dict[str, Any]:
        return {
            "model": self.model,
            "options": self.request_options,
            "limit": self.memory.limits.max_summary_length,
            "on_text": on_text,
        }

    def _steps(
        self,
        scope: Scope,
        messages: str | Sequence[Any],
        system: str | None,
        tools: Sequence[Any],
        tool_handlers: Mapping[str, ToolHandler] | None,
        on_text: OnText | None,
    ) -> Generator[Op, Any, TurnResult]:
        return run_turn_steps(
            self.memory,
            self._adapter(on_text),
            scope,
            as_messages(messages),
            system=system,
            tools=list(tools),
            tool_handlers=tool_handlers,
            max_steps=self.max_steps,
            trim_history=self.trim_history,
            memory_role=self.memory_role,
        )


class SyncLoop(BaseLoop[ClientT]):
    def run_turn(
        self,
        scope: Scope,
        messages: str | Sequence[Any],
        *,
        system: str | None = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: OnText | None = None,
    ) -> TurnResult:
        """Run one turn. ``messages`` ends with the new user message (a string is taken
        as one); ``tools`` are your own tool definitions in this API's format, run by
        ``tool_handlers[name](args)``. With ``on_text`` the reply is streamed and each
        visible text delta is passed to it. Provider errors propagate after the turn
        is closed."""
        for name, handler in (tool_handlers or {}).items():
            if inspect.iscoroutinefunction(handler):
                raise TypeError(
                    f"tool handler {name!r} is async; use the Async{type(self).__name__}"
                )
        return drive(self._steps(scope, messages, system, tools, tool_handlers, on_text))


class AsyncLoop(BaseLoop[ClientT]):
    _is_async = True

    async def run_turn(
        self,
        scope: Scope,
        messages: str | Sequence[Any],
        *,
        system: str | None = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: OnText | None = None,
    ) -> TurnResult:
        """As the sync ``run_turn``; tool handlers and ``on_text`` may be async."""
        return await adrive(self._steps(scope, messages, system, tools, tool_handlers, on_text))

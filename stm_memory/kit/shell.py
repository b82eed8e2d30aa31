"""The sync and async loop shells every provider loop subclasses.

A provider loop is ``(client, memory, *, model, max_steps=8, trim_history=True,
memory_role=None, provider=None, cache_hints=True, **request_options)`` with
``run_turn(scope, messages, *, system=None, tools=(), tool_handlers=None,
on_text=None) -> TurnResult``. The shell checks the settings once, builds the turn
(:func:`~stm_memory.kit.loop.run_turn_steps`) and runs it with blocking calls
(:class:`SyncLoop`) or awaits (:class:`AsyncLoop`); a provider only says which SDK
clients it takes, which request keys it owns, how it reads the caller's arguments and
which :class:`~stm_memory.kit.loop.ProviderAdapter` speaks its API.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from stm_memory._ops import Op, adrive, drive
from stm_memory.config import unknown_options
from stm_memory.errors import ValidationError
from stm_memory.kit.checks import (
    as_messages,
    check_memory,
    check_model,
    check_positive_int,
    refuse_async_callables,
    refuse_reserved,
    refuse_wrong_client,
)
from stm_memory.kit.loop import ProviderAdapter, ToolHandler, TurnResult, run_turn_steps
from stm_memory.kit.options import OptionsView, TurnOptions
from stm_memory.kit.writer import WriterLike
from stm_memory.model import Scope

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.prompt.placement import MemoryRole

__all__ = ["AsyncLoop", "LoopShell", "OnText", "SyncLoop", "System", "aemit_text", "emit_text"]

ClientT = TypeVar("ClientT")
#: Called with each visible text delta while streaming (may return an awaitable in
#: the async loops).
OnText = Callable[[str], object]
#: ``system=``: a string, or a list of the provider's text blocks (Anthropic
#: ``cache_control`` …).
System = str | Sequence[Mapping[str, Any]] | None


def emit_text(on_text: OnText | None, delta: str) -> None:
    if delta and on_text is not None:
        on_text(delta)


async def aemit_text(on_text: OnText | None, delta: str) -> None:
    if delta and on_text is not None:
        result = on_text(delta)
        if inspect.isawaitable(result):
            await result


def refuse_unknown_request_options(
    loop: LoopShell[Any], client: object, options: Mapping[str, Any]
) -> None:
    """A request option the SDK's call does not take either (a typo of one of the loop's
    own options, ``refresh_cadance``) is a :class:`~stm_memory.ConfigurationError` now,
    not a ``TypeError`` at the first turn."""
    if not options or not loop.CREATE:
        return
    create: object = client
    for part in loop.CREATE.split("."):
        create = getattr(create, part, None)
    try:
        taken = inspect.signature(create).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return  # not an SDK method we can read: the SDK will say
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        return
    unknown = set(options) - set(taken)
    if unknown:
        own = [n for n in inspect.signature(type(loop).__init__).parameters if n != "self"]
        known = [n for n in (*own, *taken) if n not in loop.RESERVED and n != "request_options"]
        raise unknown_options(f"{type(loop).__name__} ({loop.CREATE})", unknown, known)


class LoopShell(OptionsView, ABC, Generic[ClientT]):
    """Settings, checks and the turn of a provider loop (see the module docstring).

    ``messages`` given to ``run_turn`` may be the whole history (``result.messages`` fed
    back): each request carries the memory block, the turns the memory does not cover
    and the current turn (:mod:`stm_memory.prompt.cut`). ``trim_history=False`` sends
    every message given, for a caller that keeps its own window. ``memory_role="user"``
    injects memory and nudge as user messages instead of system messages,
    ``"inline"`` writes the portable form; ``None`` (default) lets the host decide
    (:meth:`~stm_memory.kit.TurnOptions.for_host`: the OpenAI loops write the portable
    form for a host other than OpenAI's or Azure's).

    ``provider`` names the provider for memory's own rules (the provider exclusion),
    for an API-compatible endpoint in front of another provider; it never reaches the
    SDK call. Default: the API's own provider (``openai``, ``anthropic``).

    ``cache_hints`` (default on) sends the provider's prompt-cache hints
    (:mod:`stm_memory.kit.cache_hints`): OpenAI ``prompt_cache_key`` per server,
    Anthropic ``cache_control`` breakpoints. ``False`` sends none of them; hints the
    caller set in ``request_options`` are always kept.

    ``request_options`` go into every request (``temperature``, ``tool_choice``,
    ``extra_headers``, ``timeout``, ``prompt_cache_retention`` …); the keys the loop
    manages itself (``RESERVED``) are refused.
    """

    #: Request keys the loop sets itself.
    RESERVED: ClassVar[frozenset[str]] = frozenset()
    #: The SDK call the request options go to (``"chat.completions.create"``): an
    #: option neither the loop nor that call takes is refused when the loop is built.
    CREATE: ClassVar[str] = ""
    #: The SDK's (sync, async) client classes: the other kind's client is refused.
    CLIENTS: ClassVar[tuple[type[Any], type[Any]]]
    _is_async: ClassVar[bool] = False

    def __init__(
        self,
        client: ClientT,
        memory: ShortTermMemory,
        *,
        model: str,
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
        sync_client, async_client = self.CLIENTS
        needs, wrong = (async_client, sync_client) if self._is_async else self.CLIENTS
        refuse_wrong_client(self._name, client, needs=needs, wrong=wrong, twin=self._twin)
        check_memory(self._name, memory)
        check_model(model)
        check_positive_int("max_steps", max_steps)
        refuse_reserved(self._name, request_options, self.RESERVED)
        refuse_unknown_request_options(self, client, request_options)
        self.client = client
        self.memory = memory
        self.model = model
        self.max_steps = max_steps
        #: The memory turn's options, checked here (one place for every entry point).
        self.options = TurnOptions.given(
            memory,
            provider=provider,
            trim_history=trim_history,
            memory_role=memory_role,
            cache_hints=cache_hints,
            tool_calling=tool_calling,
            context_window=context_window,
            keep_tool_results=keep_tool_results,
            writer=writer,
        )
        self.request_options = dict(request_options)
        self._window_asked = False
        self._built()

    def _built(self) -> None:
        """Called once the loop is built and checked: a provider's own word on it (the
        OpenAI loops name the portable form for another host than OpenAI's)."""

    @property
    def _name(self) -> str:
        return type(self).__name__

    @property
    def _twin(self) -> str:
        """The loop of the other kind (``AsyncX`` for ``X`` and back)."""
        name = self._name
        return name.removeprefix("Async") if self._is_async else f"Async{name}"

    @abstractmethod
    def _adapter(self, on_text: OnText | None) -> ProviderAdapter:
        """The API-specific adapter for one turn."""

    def _messages(self, messages: Any) -> list[Any]:
        """The caller's dialogue, checked (default: a list, or one user string)."""
        return as_messages(messages)

    def _system(self, system: Any) -> Any:
        """The caller's ``system``, checked, as the adapter takes it."""
        return system

    def _tools(self, tools: Any, tool_handlers: Mapping[str, ToolHandler] | None) -> list[Any]:
        """The caller's tool definitions, checked."""
        return list(tools)

    def _steps(
        self,
        scope: Scope,
        messages: Any,
        system: Any,
        tools: Sequence[Any],
        tool_handlers: Mapping[str, ToolHandler] | None,
        on_text: OnText | None,
    ) -> Generator[Op, Any, TurnResult]:
        # Everything is checked here, before the generator starts: a wrong argument
        # fails before the turn begins (nothing counted, nothing sent).
        if not isinstance(scope, Scope):
            raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")
        return self._turn(
            scope,
            self._adapter(on_text),
            self._messages(messages),
            self._system(system),
            self._tools(tools, tool_handlers),
            tool_handlers,
        )

    def _turn(
        self,
        scope: Scope,
        adapter: ProviderAdapter,
        messages: list[Any],
        system: Any,
        tools: list[Any],
        tool_handlers: Mapping[str, ToolHandler] | None,
    ) -> Generator[Op, Any, TurnResult]:
        ask = self._window_op()
        if ask is not None:
            # Once per loop: the model's context window, from its server's own listing.
            self._window_asked = True
            found = yield ask
            if isinstance(found, int) and found > 0 and self.options.context_window is None:
                self.options = replace(self.options, context_window=found)
        return (
            yield from run_turn_steps(
                self.memory,
                adapter,
                scope,
                messages,
                system=system,
                tools=tools,
                tool_handlers=tool_handlers,
                max_steps=self.max_steps,
                options=self.options,
                model=self.model,
            )
        )

    def _window_op(self) -> Op | None:
        """An Op asking the model's server for its context window (an int, or None), or
        None: nothing to ask (named, asked already, or a host that lists none: the turn
        looks a hosted model up in its table)."""
        return None


class SyncLoop(LoopShell[ClientT]):
    def run_turn(
        self,
        scope: Scope,
        messages: str | Sequence[Any],
        *,
        system: System = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: OnText | None = None,
    ) -> TurnResult:
        """Run one turn. ``messages`` is the dialogue so far, ending with the user's new
        message; ``tools`` are your own tool definitions in this API's format, run by
        ``tool_handlers[name](args)``. With ``on_text`` the reply is streamed and each
        visible text delta is passed to it. Provider errors propagate after the turn
        is closed."""
        refuse_async_callables(self._name, self._twin, tool_handlers, on_text)
        return drive(self._steps(scope, messages, system, tools, tool_handlers, on_text))


class AsyncLoop(LoopShell[ClientT]):
    _is_async = True

    async def run_turn(
        self,
        scope: Scope,
        messages: str | Sequence[Any],
        *,
        system: System = None,
        tools: Sequence[Any] = (),
        tool_handlers: Mapping[str, ToolHandler] | None = None,
        on_text: OnText | None = None,
    ) -> TurnResult:
        """As the sync ``run_turn``; tool handlers and ``on_text`` may be async."""
        return await adrive(self._steps(scope, messages, system, tools, tool_handlers, on_text))

"""A provider-neutral agent turn, written once as a sans-I/O generator.

The turn (begin → assemble → model ↔ tools → capture → end) is a generator that
*yields* operations (call the model, run a caller's tool, touch memory) and receives
their results. :func:`drive` runs it with blocking calls and :func:`adrive` with
awaits, so the sync and async loops of every provider share one body (the habit
httpx taught: I/O-free logic in one place, thin sync/async shells around it).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stm_memory.errors import ValidationError
from stm_memory.tool.turn import TOOL_NAME, TurnContext
from stm_memory.tool.vetting import check_tool_call

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.model import Scope
    from stm_memory.prompt.placement import MemoryContext, MemoryRole

__all__ = [
    "MEMORY_ROLES",
    "ModelReply",
    "Op",
    "ProviderAdapter",
    "ToolCall",
    "TurnResult",
    "Usage",
    "adrive",
    "check_memory_role",
    "drive",
    "run_turn_steps",
]

log = logging.getLogger("stm_memory")
T = TypeVar("T")

#: The roles memory can be injected with (see ``MemoryContext.role``).
MEMORY_ROLES = ("system", "user")


def check_memory_role(value: object) -> None:
    """Refuse a ``memory_role`` the loops do not know (a developer error)."""
    if value not in MEMORY_ROLES:
        raise ValidationError(f"memory_role must be 'system' or 'user', got {value!r}")


@dataclass(frozen=True, slots=True)
class Op:
    """One I/O operation: ``run`` for blocking drivers, ``arun`` for async ones."""

    run: Callable[[], Any]
    arun: Callable[[], Awaitable[Any]]
    label: str = ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str | Mapping[str, Any] | None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What an adapter parsed from one model response."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    transcript: tuple[Any, ...]  # provider-format messages/items to append to the dialogue
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of ``run_turn``."""

    text: str
    messages: list[Any]
    stm_updated: bool
    usage: Usage
    steps: int
    requests: list[dict[str, Any]] = field(default_factory=list, repr=False)


class ProviderAdapter(Protocol):
    """The provider-specific half of a loop: request shape, parsing, tool results."""

    provider: str

    def build_request(
        self,
        transcript: Sequence[Any],
        context: MemoryContext,
        system: str | None,
        tools: Sequence[Any],
        turn: TurnContext,
    ) -> dict[str, Any]: ...

    def call_op(self, request: dict[str, Any]) -> Op:
        """An Op that sends ``request`` and returns a parsed :class:`ModelReply`."""
        ...

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]: ...

    def memory_tool(self, turn: TurnContext) -> Any: ...

    def user_text(self, messages: Sequence[Any]) -> str | None: ...


ToolHandler = Callable[[dict[str, Any]], Any]


def _sync_and_async(fn: Callable[..., T], afn: Callable[..., Awaitable[T]], *args: Any) -> Op:
    return Op(lambda: fn(*args), lambda: afn(*args), getattr(fn, "__name__", ""))


def _tool_content(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _handler_op(handler: ToolHandler, args: dict[str, Any], name: str) -> Op:
    async def arun() -> Any:
        result = handler(args)
        if isinstance(result, Awaitable):
            result = await result
        return result

    return Op(lambda: handler(args), arun, f"tool:{name}")


def run_turn_steps(
    memory: ShortTermMemory,
    adapter: ProviderAdapter,
    scope: Scope,
    messages: Sequence[Any],
    *,
    system: str | None = None,
    tools: Sequence[Any] = (),
    tool_handlers: Mapping[str, ToolHandler] | None = None,
    max_steps: int = 8,
    trim_history: bool = True,
    memory_role: MemoryRole = "system",
) -> Generator[Op, Any, TurnResult]:
    """The turn as a generator of :class:`Op` (see the module docstring).

    ``messages`` may be the caller's whole history: each request carries only what
    the memory leaves (the history cut, :mod:`stm_memory.prompt.cut`), unless
    ``trim_history=False``; ``TurnResult.messages`` is still the whole transcript."""
    handlers = dict(tool_handlers or {})
    turn: TurnContext = yield _sync_and_async(
        lambda: memory.begin_turn(
            scope, provider=adapter.provider, user_message=adapter.user_text(messages)
        ),
        lambda: memory.abegin_turn(
            scope, provider=adapter.provider, user_message=adapter.user_text(messages)
        ),
    )
    context: MemoryContext = yield _sync_and_async(
        memory.build_context, memory.abuild_context, turn
    )
    context = replace(context, role=memory_role)
    if not trim_history:
        context = replace(context, history=None)
    transcript = list(messages)
    usage = Usage()
    text = ""
    steps = 0
    requests: list[dict[str, Any]] = []
    try:
        while steps < max_steps:
            steps += 1
            offered = [adapter.memory_tool(turn)] if turn.tool_offered else []
            # After this turn's update the nudge has done its job; keep the content.
            step_context = replace(context, nudge=None) if turn.updated else context
            request = adapter.build_request(
                transcript, step_context, system, [*offered, *tools], turn
            )
            requests.append(request)
            reply: ModelReply = yield adapter.call_op(request)
            usage = usage + reply.usage
            transcript.extend(reply.transcript)
            text = reply.text
            if not reply.tool_calls:
                break
            results: list[tuple[ToolCall, str]] = []
            memory_called = False
            for call in reply.tool_calls:
                content = yield from _execute(memory, turn, call, handlers)
                memory_called = memory_called or call.name == TOOL_NAME
                results.append((call, content))
            transcript.extend(adapter.tool_results(results))
            if memory_called and reply.text.strip():
                # The user already saw the answer; the memory call was the epilogue.
                break
    except BaseException:
        # Close the turn cleanly, then let the provider's error surface as-is.
        yield _sync_and_async(memory.end_turn, memory.aend_turn, turn)
        raise
    yield _sync_and_async(memory.capture, memory.acapture, scope, transcript)
    yield _sync_and_async(memory.end_turn, memory.aend_turn, turn)
    return TurnResult(text, transcript, turn.updated, usage, steps, requests)


def _execute(
    memory: ShortTermMemory,
    turn: TurnContext,
    call: ToolCall,
    handlers: Mapping[str, ToolHandler],
) -> Generator[Op, Any, str]:
    check = check_tool_call(call.arguments, truncated=call.truncated)
    if not check.ok or check.args is None:
        return _tool_content(check.result)
    if call.name == TOOL_NAME:
        result = yield _sync_and_async(memory.update, memory.aupdate, turn, check.args)
        return _tool_content(result)
    handler = handlers.get(call.name)
    if handler is None:
        return _tool_content({"status": "error", "reason": f"Unknown tool {call.name!r}."})
    try:
        value = yield _handler_op(handler, check.args, call.name)
    except Exception as exc:  # a caller's tool failing is reported to the model
        log.warning("stm-memory: tool %s raised %s", call.name, exc)
        return _tool_content({"status": "error", "reason": f"{type(exc).__name__}: {exc}"})
    return _tool_content(value)


def drive(steps: Generator[Op, Any, T]) -> T:
    """Run a step generator with blocking calls."""
    try:
        op = next(steps)
        while True:
            try:
                result = op.run()
            except BaseException as exc:
                op = steps.throw(exc)
                continue
            op = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(steps: Generator[Op, Any, T]) -> T:
    """Run a step generator with awaits."""
    try:
        op = next(steps)
        while True:
            try:
                result = await op.arun()
            except BaseException as exc:
                op = steps.throw(exc)
                continue
            op = steps.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]

"""A provider-neutral agent turn, written once as a sans-I/O generator.

The turn (begin → assemble → model ↔ tools → capture → end) is a generator that
*yields* operations (call the model, run a caller's tool, touch memory) and receives
their results (:mod:`stm_memory._ops`), so the sync and async loops of every
provider share one body. What differs per API is a :class:`ProviderAdapter`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stm_memory._ops import Op
from stm_memory.kit.options import TurnOptions

# The reply and result types live in a leaf module (a ToolCall in the wire modules, which
# read it off replies); re-exported here, where they were first declared.
from stm_memory.kit.replies import (
    ModelReply,
    ToolCall,
    TurnResult,
    Usage,
    answer_last,
    answered_then_remembered,
)
from stm_memory.kit.requests import current_user_text
from stm_memory.kit.turn import MemoryTurn
from stm_memory.prompt.clearing import RECALL_TOOL
from stm_memory.prompt.placement import current_turn_index
from stm_memory.tool.turn import TOOL_NAME
from stm_memory.tool.vetting import check_tool_call, tool_result_text
from stm_memory.wire.base import ToolSpec

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.model import Scope
    from stm_memory.prompt.placement import MemoryContext

__all__ = [
    "ModelReply",
    "ProviderAdapter",
    "ToolCall",
    "ToolHandler",
    "TurnResult",
    "Usage",
    "call_fitted",
    "model_steps",
    "run_turn_steps",
]

log = logging.getLogger("stm_memory")
R = TypeVar("R")

#: A caller's tool: parsed JSON arguments in, a string or JSON-able value out (an
#: awaitable of one in the async loops).
ToolHandler = Callable[[dict[str, Any]], Any]


class ProviderAdapter(Protocol):
    """The provider-specific half of a loop: request shape, parsing, tool results.

    ``build_request`` writes the request ``turn.prepare`` returns in the API's form,
    deciding nothing: the messages and system prompt as placed, the memory tool
    (``memory_tool``) ahead of the caller's ``tools`` when the prepared request offers
    or describes it, its ``tool_choice`` and its cache hints (``PreparedRequest``)."""

    provider: str

    def build_request(
        self,
        transcript: Sequence[Any],
        system: Any,
        tools: Sequence[Any],
        turn: MemoryTurn,
        *,
        context: MemoryContext | None = None,
    ) -> dict[str, Any]:
        """The request of one step: ``transcript`` with the turn's memory placed
        (``turn.prepare``; ``context``: a context of the caller's instead), the
        caller's ``system`` and ``tools``."""
        ...

    def call_op(self, request: dict[str, Any]) -> Op:
        """An Op that sends ``request`` and returns a parsed :class:`ModelReply`."""
        ...

    def tool_results(self, results: Sequence[tuple[ToolCall, str]]) -> list[Any]: ...

    def memory_tool(self, spec: ToolSpec) -> Any: ...


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
    system: Any = None,
    tools: Sequence[Any] = (),
    tool_handlers: Mapping[str, ToolHandler] | None = None,
    max_steps: int = 8,
    options: TurnOptions | None = None,
    model: str | None = None,
) -> Generator[Op, Any, TurnResult]:
    """The turn as a generator of :class:`Op` (see the module docstring): the
    :class:`~stm_memory.kit.turn.MemoryTurn`'s lifecycle around the model ↔ tools
    steps.

    ``messages`` may be the caller's whole history: each request carries only what
    the memory leaves (the history cut, :mod:`stm_memory.prompt.cut`), unless
    ``options.trim_history`` is off; ``TurnResult.messages`` is still the whole
    transcript. ``options.provider`` names the provider for memory's rules (default:
    the adapter's API)."""
    options = options or TurnOptions()
    if options.provider is None:
        options = replace(options, provider=adapter.provider)
    turn: MemoryTurn = yield from MemoryTurn.begin(
        memory,
        scope,
        options=options,
        user_message=current_user_text(messages),
        model=model,
    )
    yield from turn.assemble()
    transcript = list(messages)
    try:
        outcome = yield from _model_steps(
            adapter, turn, transcript, system, tools, dict(tool_handlers or {}), max_steps
        )
    except BaseException:
        # Close the turn cleanly, then let the provider's error surface as-is.
        yield from turn.abandon()
        raise
    text, usages, steps, requests = outcome
    yield from turn.finish(transcript, start=current_turn_index(messages), usage=usages)
    status = turn.status
    return TurnResult(
        text,
        transcript,
        status.updated,
        sum(usages, Usage()),
        steps,
        requests,
        decision=status.decision,
        writing=status.writing,
        bill=status.bill,
    )


def _model_steps(
    adapter: ProviderAdapter,
    turn: MemoryTurn,
    transcript: list[Any],
    system: Any,
    tools: Sequence[Any],
    handlers: Mapping[str, ToolHandler],
    max_steps: int,
) -> Generator[Op, Any, tuple[str, list[Usage], int, list[dict[str, Any]]]]:
    """Model calls and tool calls until a plain answer (or ``max_steps``); extends
    ``transcript`` in place. Returns the answer's text, each call's usage, the steps
    taken and the requests sent."""
    usage: list[Usage] = []
    text = ""

    def build() -> dict[str, Any]:
        # The adapter writes the request the turn prepares (the nudge only while the
        # tool is still offered; the memory tool, its tool_choice, the cache hints
        # beside the caller's tools).
        return adapter.build_request(transcript, system, tools, turn)

    def after(reply: ModelReply) -> Generator[Op, Any, bool]:
        nonlocal text
        usage.append(reply.usage)
        text = reply.text
        start = len(transcript)
        transcript.extend(reply.transcript)
        if not reply.tool_calls:
            if (yield from turn.text_call(reply.text)) is None:
                return False  # the answer
            # The reply was the memory write as text, not an answer: it goes, and the
            # model is asked once more, without the tool (the turn withdrew it).
            del transcript[start:]
            return True
        results: list[tuple[ToolCall, str]] = []
        for call in reply.tool_calls:
            results.append((call, (yield from _execute(turn, call, handlers))))
        said = adapter.tool_results(results)
        if answered_then_remembered(reply.text, [c.name for c in reply.tool_calls]):
            # The turn ends here: its last message is the answer, not our JSON.
            transcript[start:] = answer_last(transcript[start:], said)
            return False
        transcript.extend(said)
        return True

    _, steps, requests = yield from model_steps(
        turn,
        lambda: transcript,
        build=build,
        send=adapter.call_op,
        after=after,
        max_steps=max_steps,
    )
    return text, usage, steps, requests


def call_fitted(
    turn: MemoryTurn,
    messages: Sequence[Any],
    build: Callable[[], R],
    send: Callable[[R], Op],
    *,
    refit: bool = True,
) -> Generator[Op, Any, tuple[list[R], Any]]:
    """Send the request ``build`` makes; when the provider refuses it as longer than the
    model's context, the turn cuts ``messages`` to fit (:meth:`MemoryTurn.refit`) and it
    is built and sent once more (not at all when ``refit`` is False: this turn refitted
    already). Any other error, or a second refusal, surfaces as the provider raised it.
    Returns the requests sent and the reply."""
    request = build()
    sent = [request]
    try:
        reply = yield send(request)
    except Exception as exc:
        if not refit or not turn.refit(messages, exc):
            raise
        request = build()
        sent.append(request)
        reply = yield send(request)
    return sent, reply


def model_steps(
    turn: MemoryTurn,
    transcript: Callable[[], Sequence[Any]],
    *,
    build: Callable[[], R],
    send: Callable[[R], Op],
    after: Callable[[Any], Generator[Op, Any, bool]],
    max_steps: int,
) -> Generator[Op, Any, tuple[Any, int, list[R]]]:
    """The one model ↔ tools step loop (the provider loops and the LCEL chain): each step
    sends the request ``build`` makes (:func:`call_fitted`, refitting to the model's
    context once a turn), then ``after`` runs the reply's calls and says whether another
    step follows; at most ``max_steps``. Returns the last reply, the steps taken and
    the requests sent."""
    reply: Any = None
    requests: list[R] = []
    steps, refitted = 0, False
    while steps < max_steps:
        steps += 1
        sent, reply = yield from call_fitted(turn, transcript(), build, send, refit=not refitted)
        requests += sent
        refitted = refitted or len(sent) > 1
        if not (yield from after(reply)):
            break
    return reply, steps, requests


def _execute(
    turn: MemoryTurn, call: ToolCall, handlers: Mapping[str, ToolHandler]
) -> Generator[Op, Any, str]:
    if call.name == TOOL_NAME:
        result = yield from turn.memory_call(call.arguments, truncated=call.truncated)
        return tool_result_text(result)
    if call.name == RECALL_TOOL:
        return (yield from turn.recall_call(call.arguments))
    check = check_tool_call(call.arguments, truncated=call.truncated)
    if not check.ok or check.args is None:
        return tool_result_text(check.result)
    handler = handlers.get(call.name)
    if handler is None:
        return tool_result_text({"status": "error", "reason": f"Unknown tool {call.name!r}."})
    try:
        value = yield _handler_op(handler, check.args, call.name)
    except Exception as exc:  # a caller's tool failing is reported to the model
        log.warning("stm-memory: tool %s raised %s", call.name, exc)
        return tool_result_text({"status": "error", "reason": f"{type(exc).__name__}: {exc}"})
    return tool_result_text(value)

"""``with_short_term_memory``: the memory tool for a plain LCEL chain, no agent loop.

    chain = with_short_term_memory(prompt | ChatOpenAI(model="gpt-4.1-mini"), mem)
    with_history = RunnableWithMessageHistory(
        chain, ShortTermMemoryHistory.factory(mem, user_id="u1", server_id="g1"),
        input_messages_key="input", history_messages_key="history",
    )

The chat model of the chain is wrapped (the other steps stay as they are). On each
call the wrapper finds the turn of the :class:`ShortTermMemoryHistory` that
``RunnableWithMessageHistory`` put in the run's config, binds that turn's
``update_short_term_memory`` tool next to the model's own tools (hidden while a guard
hides it) and calls the model:

- a reply with text and a memory call: the call runs at once (one update per turn,
  every guard), and the chain returns the reply *without* the call; the turn ends
  there (SPEC §8), with no second model call;
- a reply that only calls the memory tool: the call runs, the model is called again
  with its result (up to ``max_steps`` calls), and the chain returns that answer;
- the memory call and its result are kept for the history, which stores them in its
  full record (the next turns' cut drops them again).

Other tool calls are returned untouched, as a plain chain does. ``invoke``,
``ainvoke``, ``stream`` and ``astream`` all work; streamed chunks of the memory call
are held back.

Without a :class:`ShortTermMemoryHistory` in the config (a chain called directly),
the wrapper runs the turn itself when it was given ``memory``: the scope comes from
``scope=`` or ``config["configurable"]`` (``channel_id`` / ``thread_id``, ``user_id``
…), the input messages are the history, and the exchange is captured. Without
``memory`` it calls the model unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableSequence,
    RunnableSerializable,
)
from langchain_core.tools import BaseTool
from pydantic import ConfigDict

from stm_memory import TOOL_NAME, ShortTermMemory, ValidationError
from stm_memory.history import strip_memory_calls
from stm_memory.loop import Op, adrive, drive

from ._dialogue import cut_short, is_summary_message, provider_of, text_of
from ._history import MessageRecord, ShortTermMemoryHistory, _without_invalid_memory_calls
from ._scope import ScopeSource, resolve_scope

__all__ = ["ShortTermMemoryChatModel", "with_short_term_memory"]

log = logging.getLogger("stm_memory.langchain")


def _base_model(runnable: Runnable[Any, Any]) -> BaseChatModel | None:
    """The chat model inside ``runnable`` (itself, or under ``bind``/``bind_tools``)."""
    while isinstance(runnable, RunnableBinding):
        runnable = runnable.bound
    return runnable if isinstance(runnable, BaseChatModel) else None


def _bindings(runnable: Runnable[Any, Any]) -> tuple[dict[str, Any], list[RunnableConfig]]:
    """The keyword arguments and configs bound around the chat model, outermost last."""
    kwargs: dict[str, Any] = {}
    configs: list[RunnableConfig] = []
    chain: list[RunnableBinding[Any, Any]] = []
    while isinstance(runnable, RunnableBinding):
        chain.append(runnable)
        runnable = runnable.bound
    for binding in reversed(chain):  # inner bindings first, outer ones override
        kwargs.update(binding.kwargs)
        if binding.config:
            configs.append(binding.config)
    return kwargs, configs


def _with_tool(model: Runnable[Any, Any], tool: BaseTool | None) -> Runnable[Any, Any]:
    """``model`` with ``tool`` beside the tools it already has (its own options win)."""
    if tool is None:
        return model
    base = _base_model(model)
    if base is None:  # pragma: no cover - with_short_term_memory checked it
        return model
    kwargs, configs = _bindings(model)
    ours = base.bind_tools([tool])
    own_kwargs = ours.kwargs if isinstance(ours, RunnableBinding) else {}
    theirs = [t for t in kwargs.get("tools") or [] if _tool_name(t) != TOOL_NAME]
    merged = {**own_kwargs, **kwargs, "tools": [*theirs, *own_kwargs.get("tools", [])]}
    bound: Runnable[Any, Any] = base.bind(**merged)
    for config in configs:
        bound = bound.with_config(config)
    return bound


def _tool_name(tool: Any) -> str | None:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
        return name if isinstance(name, str) else None
    return getattr(tool, "name", None)


def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, PromptValue):
        return list(value.to_messages())
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, BaseMessage):
        return [value]
    return list(convert_to_messages(value))


def _last_user_text(messages: Sequence[BaseMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and not is_summary_message(message):
            return text_of(message) or None
    return None


def _memory_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [dict(c) for c in message.tool_calls if c.get("name") == TOOL_NAME]


def _has_memory_call(message: AIMessage) -> bool:
    return bool(_memory_calls(message)) or any(
        c.get("name") == TOOL_NAME for c in message.invalid_tool_calls
    )


def _visible(message: AIMessage) -> AIMessage:
    """``message`` as the user sees it: without memory calls (valid or not)."""
    message = _without_invalid_memory_calls(message)
    rest = strip_memory_calls([message])
    if rest:
        return cast(AIMessage, rest[0])
    return AIMessage(
        content="",
        id=message.id,
        response_metadata=message.response_metadata,
        usage_metadata=message.usage_metadata,
    )


def _strip_chunk(chunk: AIMessageChunk, memory_indexes: set[Any]) -> AIMessageChunk | None:
    """A streamed chunk without the parts of memory calls (None when nothing is left)."""
    for tcc in chunk.tool_call_chunks:
        if tcc.get("name") == TOOL_NAME:
            memory_indexes.add(tcc.get("index"))
    kept = [t for t in chunk.tool_call_chunks if t.get("index") not in memory_indexes]
    content: Any = chunk.content
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (
                isinstance(b, Mapping)
                and b.get("type") != "text"
                and b.get("index") in memory_indexes
                and b.get("index") is not None
            )
        ]
    if len(kept) == len(chunk.tool_call_chunks) and content == chunk.content:
        return chunk
    if not kept and not content and not chunk.usage_metadata and not chunk.response_metadata:
        return None
    return AIMessageChunk(
        content=content,
        additional_kwargs=chunk.additional_kwargs,
        response_metadata=chunk.response_metadata,
        usage_metadata=chunk.usage_metadata,
        id=chunk.id,
        name=chunk.name,
        tool_call_chunks=kept,
        chunk_position=chunk.chunk_position,
    )


@dataclass
class _Plan:
    """One call's memory: its history, the messages to send and, when the wrapper
    runs the turn itself (no history in the config), the turn's own input."""

    history: ShortTermMemoryHistory
    messages: list[BaseMessage]
    current: list[BaseMessage] | None = None


class ShortTermMemoryChatModel(RunnableSerializable[Any, BaseMessage]):
    """The chat model of a chain, with the memory tool of the current turn (see the
    module docstring). Built by :func:`with_short_term_memory`."""

    model: Runnable[Any, Any]
    memory: ShortTermMemory | None = None
    scope: Any = None  # ScopeSource
    max_steps: int = 3

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # -- Runnable --------------------------------------------------------------------------

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> BaseMessage:
        return drive(self._invoke_steps(input, config or {}, kwargs))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> BaseMessage:
        return await adrive(self._invoke_steps(input, config or {}, kwargs))

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[BaseMessage]:
        config = config or {}
        plan = drive(self._plan(input, config))
        if plan is None:
            yield from self.model.stream(input, config, **kwargs)
            return
        history, messages = plan.history, plan.messages
        exchange: list[BaseMessage] = []
        answer: AIMessage | None = None
        for step in range(self.max_steps):
            tool = drive(self._tool_steps(history))
            model = _with_tool(self.model, tool)
            memory_indexes: set[Any] = set()
            total: AIMessageChunk | None = None
            for chunk in model.stream(messages, config, **kwargs):
                if not isinstance(chunk, AIMessageChunk):
                    yield chunk
                    continue
                total = chunk if total is None else total + chunk
                out = _strip_chunk(chunk, memory_indexes)
                if out is not None:
                    yield out
            reply = cast(AIMessage, message_chunk_to_message(total)) if total else AIMessage("")
            more = drive(self._after_reply(history, reply, exchange, step))
            if more is None:
                answer = reply
                break
            messages = [*messages, *more]
        drive(self._finish(plan, exchange, answer))

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[BaseMessage]:
        config = config or {}
        plan = await adrive(self._plan(input, config))
        if plan is None:
            async for chunk in self.model.astream(input, config, **kwargs):
                yield chunk
            return
        history, messages = plan.history, plan.messages
        exchange: list[BaseMessage] = []
        answer: AIMessage | None = None
        for step in range(self.max_steps):
            tool = await adrive(self._tool_steps(history))
            model = _with_tool(self.model, tool)
            memory_indexes: set[Any] = set()
            total: AIMessageChunk | None = None
            async for chunk in model.astream(messages, config, **kwargs):
                if not isinstance(chunk, AIMessageChunk):
                    yield chunk
                    continue
                total = chunk if total is None else total + chunk
                out = _strip_chunk(chunk, memory_indexes)
                if out is not None:
                    yield out
            reply = cast(AIMessage, message_chunk_to_message(total)) if total else AIMessage("")
            more = await adrive(self._after_reply(history, reply, exchange, step))
            if more is None:
                answer = reply
                break
            messages = [*messages, *more]
        await adrive(self._finish(plan, exchange, answer))

    # -- the body, written once ---------------------------------------------------------

    def _invoke_steps(
        self, input: Any, config: RunnableConfig, kwargs: Mapping[str, Any]
    ) -> Generator[Op, Any, BaseMessage]:
        plan = yield from self._plan(input, config)
        if plan is None:
            return (yield _model_op(self.model, input, config, kwargs))  # type: ignore[no-any-return]
        history, messages = plan.history, plan.messages
        exchange: list[BaseMessage] = []
        answer: AIMessage | None = None
        visible: AIMessage | None = None
        for step in range(self.max_steps):
            tool = yield from self._tool_steps(history)
            model = _with_tool(self.model, tool)
            reply = yield _model_op(model, messages, config, kwargs)
            if not isinstance(reply, AIMessage):
                return reply  # type: ignore[no-any-return]
            more = yield from self._after_reply(history, reply, exchange, step)
            visible = _visible(reply)
            if more is None:
                answer = reply
                break
            messages = [*messages, *more]
        yield from self._finish(plan, exchange, answer)
        return visible if visible is not None else AIMessage("")

    def _plan(self, input: Any, config: RunnableConfig) -> Generator[Op, Any, _Plan | None]:
        """This call's memory, or None: no memory here (the model is called unchanged)."""
        configurable = config.get("configurable") or {}
        history = configurable.get("message_history")
        messages = _as_messages(input)
        current: list[BaseMessage] | None = None
        if not isinstance(history, ShortTermMemoryHistory):
            if self.memory is None:
                return None
            history, current = self._standalone(messages, config)
            if history is None:
                return None
        if history.provider is None:
            history.provider = provider_of(_base_model(self.model))
        history.offers_tool = True
        yield from history._turn_steps()
        history.note_user_message(_last_user_text(messages))
        if current is not None:
            view = yield from history._view_steps()
            messages = [*view, *current]
        return _Plan(history, messages, current)

    def _standalone(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> tuple[ShortTermMemoryHistory | None, list[BaseMessage] | None]:
        """A one-call history over the input messages: earlier ones are its record,
        the trailing user messages the current turn (returned)."""
        assert self.memory is not None
        try:
            scope = resolve_scope(cast(ScopeSource, self.scope), None, config)
        except ValidationError as exc:
            log.warning("stm-memory: short-term memory is off for this call: %s", exc)
            return None, None
        if scope is None:
            return None, None
        split = len(messages)
        while split > 0 and isinstance(messages[split - 1], HumanMessage):
            split -= 1
        record = MessageRecord(messages[:split])
        return ShortTermMemoryHistory(self.memory, scope, history=record), messages[split:]

    def _tool_steps(self, history: ShortTermMemoryHistory) -> Generator[Op, Any, BaseTool | None]:
        state = yield from history._turn_steps()
        turn = state.turn
        if turn is None or not turn.tool_offered:
            return None
        return history.memory.tool(turn)

    def _after_reply(
        self,
        history: ShortTermMemoryHistory,
        reply: AIMessage,
        exchange: list[BaseMessage],
        step: int,
    ) -> Generator[Op, Any, list[BaseMessage] | None]:
        """Run the reply's memory calls; the messages to send for another model call,
        or None when this reply is the answer."""
        if not _has_memory_call(reply):
            return None
        turn = history.turn
        stored = _without_invalid_memory_calls(reply)
        results: list[BaseMessage] = []
        for call in _memory_calls(stored):
            if turn is None:  # pragma: no cover - the tool is only offered with a turn
                continue
            results.append((yield from history._run_call(turn, call, truncated=cut_short(reply))))
        exchange.extend([stored, *results])
        others = [c for c in reply.tool_calls if c.get("name") != TOOL_NAME]
        if text_of(reply).strip() or others or step + 1 >= self.max_steps:
            return None  # the answer is out (or the caller's tools are next): done
        return [stored, *results]

    def _finish(
        self, plan: _Plan, exchange: list[BaseMessage], answer: AIMessage | None
    ) -> Generator[Op, Any, None]:
        history = plan.history
        if exchange:
            included = answer is not None and any(_same(m, answer) for m in exchange)
            history.keep_exchange(exchange, answer_included=included)
        if plan.current is not None:  # no RunnableWithMessageHistory: end the turn here
            final = answer if answer is not None else AIMessage("")
            yield from history._add_steps([*plan.current, final])


def _same(message: BaseMessage, answer: AIMessage) -> bool:
    return message is answer or (
        isinstance(message, AIMessage) and message.id is not None and message.id == answer.id
    )


def _model_op(
    model: Runnable[Any, Any], input: Any, config: RunnableConfig, kwargs: Mapping[str, Any]
) -> Op:
    return Op(
        lambda: model.invoke(input, config, **kwargs),
        lambda: model.ainvoke(input, config, **kwargs),
        "model",
    )


def with_short_term_memory(
    chain: Runnable[Any, Any],
    memory: ShortTermMemory | None = None,
    *,
    scope: ScopeSource = None,
    max_steps: int = 3,
) -> Runnable[Any, Any]:
    """``chain`` (a chat model, or a sequence such as ``prompt | model | parser``) with
    its chat model wrapped in :class:`ShortTermMemoryChatModel` (see the module
    docstring). ``memory`` and ``scope`` serve calls without a
    :class:`ShortTermMemoryHistory` in the config."""
    if memory is not None and not isinstance(memory, ShortTermMemory):
        raise ValidationError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValidationError("max_steps must be an integer >= 1")

    def wrap(model: Runnable[Any, Any]) -> ShortTermMemoryChatModel:
        return ShortTermMemoryChatModel(
            model=model, memory=memory, scope=scope, max_steps=max_steps
        )

    if _base_model(chain) is not None:
        return wrap(chain)
    if isinstance(chain, RunnableSequence):
        steps = list(chain.steps)
        for i in range(len(steps) - 1, -1, -1):
            if _base_model(steps[i]) is not None:
                steps[i] = wrap(steps[i])
                return RunnableSequence(*steps, name=chain.name)
    raise ValidationError(
        "with_short_term_memory needs a chat model or a sequence with one "
        f"(prompt | model …), got {type(chain).__name__}"
    )

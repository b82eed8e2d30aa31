"""``with_short_term_memory``: the memory tool for a plain LCEL chain, no agent loop.

    chain = with_short_term_memory(prompt | ChatOpenAI(model="gpt-4.1-mini"), mem)
    with_history = RunnableWithMessageHistory(
        chain, ShortTermMemoryHistory.factory(mem, user_id="u1", server_id="g1"),
        input_messages_key="input", history_messages_key="history",
    )

The chat model of the chain is wrapped (the other steps stay as they are). On each
call the wrapper finds the turn of the :class:`ShortTermMemoryHistory` that
``RunnableWithMessageHistory`` put in the run's config, hands it the user's message
(the "remember this" guard), binds that turn's ``update_short_term_memory`` tool next
to the model's own tools (hidden while a guard hides it), places the nudge when it is
due (:meth:`ShortTermMemoryHistory.model_messages`) and calls the model:

- a reply with text and a memory call: the call runs at once (one update per turn,
  every guard), and the chain returns the reply *without* the call; the turn ends
  there (the user already has the answer), with no second model call;
- a reply that only calls the memory tool: the call runs, the model is called again
  with its result (up to ``max_steps`` calls), and the chain returns that answer
  (Anthropic is sent the tool with ``tool_choice`` none then, as the Messages API
  wants ``tools`` beside tool blocks);
- the memory call and its result are kept for the history, which stores them in its
  full record (the next turns' cut drops them again).

Each memory call is a tool run in the call's callbacks (LangSmith sees it as any tool;
``_tracing``). Other tool calls are returned untouched, as a plain chain does. ``invoke``,
``ainvoke``, ``stream`` and ``astream`` all work; streamed chunks of the memory call
are held back. A call that fails (the model raises, the stream is abandoned) ends its
turn, as the loops do; so does the next input after a chain that failed past the
model without reaching ``add_messages``.

The wrapper holds no turn state of its own: it drives the history's open turn
(:meth:`ShortTermMemoryHistory.open_turn`, a :class:`HistoryTurn` whose
:class:`~stm_memory.kit.MemoryTurn` offers the tool and runs the memory calls)
through the history's public methods, and a model loop of its own (``max_steps``).

Without a :class:`ShortTermMemoryHistory` in the config (a chain called directly),
the wrapper runs the turn itself when it was given ``memory``: the scope comes from
``scope=`` or ``config["configurable"]`` (``channel_id`` / ``thread_id``, ``user_id``
…; none of them is a :class:`~stm_memory.ValidationError`), the input messages are the
history, and the exchange is captured. Without ``memory`` it calls the model
unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

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
    RunnableConfig,
    RunnableSequence,
    RunnableSerializable,
)
from langchain_core.tools import BaseTool
from pydantic import ConfigDict

from stm_memory import TOOL_NAME, ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.kit import (
    MemoryTurn,
    Op,
    TurnOptions,
    adrive,
    check_memory_setup,
    check_positive_int,
    current_user_text,
    drive,
    note_endpoint,
    op,
    strip_memory_calls,
    text_of,
)

from ._binding import base_model, bindings, own_tools, with_tool
from ._dialogue import (
    cut_short,
    memory_calls,
    provider_of,
    without_invalid_memory_calls,
)
from ._hints import anthropic_dialogue_breakpoint, breakpoints_in, cache_settings
from ._history import HistoryTurn, ShortTermMemoryHistory
from ._record import MessageRecord
from ._scope import ScopeSource, resolve_scope
from ._tracing import memory_call_steps

__all__ = ["ShortTermMemoryChatModel", "with_short_term_memory"]

# config["configurable"] keys naming the channel of a call without a history.
_CHANNEL_KEYS = ("channel_id", "thread_id")


def _as_messages(value: Any) -> list[BaseMessage]:
    if isinstance(value, PromptValue):
        return list(value.to_messages())
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, BaseMessage):
        return [value]
    return list(convert_to_messages(value))


def _has_memory_call(message: AIMessage) -> bool:
    return bool(memory_calls(message)) or any(
        c.get("name") == TOOL_NAME for c in message.invalid_tool_calls
    )


def _visible(message: AIMessage) -> AIMessage:
    """``message`` as the user sees it: without memory calls (valid or not)."""
    message = without_invalid_memory_calls(message)
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
    """One call's memory: its history and turn, the messages to send (before the
    nudge, which each step places) and, when the wrapper runs the turn itself (no
    history in the config), the turn's own input."""

    history: ShortTermMemoryHistory
    state: HistoryTurn
    messages: list[BaseMessage]
    current: list[BaseMessage] | None = None
    provider: str | None = None
    config: RunnableConfig | None = None


class _Chunks:
    """One streamed model call: the chunks shown to the caller (memory-call parts held
    back) and their sum, the reply."""

    def __init__(self) -> None:
        self.memory_indexes: set[Any] = set()
        self.total: AIMessageChunk | None = None

    def shown(self, chunk: Any) -> list[Any]:
        if not isinstance(chunk, AIMessageChunk):
            return [chunk]
        self.total = chunk if self.total is None else self.total + chunk
        out = _strip_chunk(chunk, self.memory_indexes)
        return [] if out is None else [out]

    def reply(self) -> AIMessage:
        total = self.total
        return cast(AIMessage, message_chunk_to_message(total)) if total else AIMessage("")


class _Calls:
    """The model calls of one chain call (up to ``max_steps``): what to send next, the
    memory exchange so far and the answer, for ``invoke`` and ``stream`` alike."""

    def __init__(self, owner: ShortTermMemoryChatModel, plan: _Plan) -> None:
        self.owner = owner
        self.plan = plan
        self.messages = plan.messages
        self.exchange: list[BaseMessage] = []
        self.answer: AIMessage | None = None
        self.step = 0
        self.done = False

    def next(self) -> tuple[Runnable[Any, Any], list[BaseMessage]] | None:
        """The model (with this step's tool) and its input; None when the call is over."""
        owner, plan = self.owner, self.plan
        if self.done or self.step >= owner.max_steps:
            return None
        model = with_tool(owner.model, *owner._tool_for(plan, self.step))
        messages = plan.history.model_messages(self.messages, turn=plan.state)
        if owner.cache_hints:
            model, messages = _hinted(model, messages, plan)
        return model, messages

    def after(self, reply: AIMessage) -> Generator[Op, Any, None]:
        more = yield from self.owner._after_reply(self.plan, reply, self.exchange, self.step)
        self.step += 1
        if more is None:
            self.answer, self.done = reply, True
        else:
            self.messages = [*self.messages, *more]

    def finish(self) -> Generator[Op, Any, None]:
        yield from self.owner._finish(self.plan, self.exchange, self.answer)


class ShortTermMemoryChatModel(RunnableSerializable[Any, BaseMessage]):
    """The chat model of a chain, with the memory tool of the current turn (see the
    module docstring). Built by :func:`with_short_term_memory`."""

    model: Runnable[Any, Any]
    memory: ShortTermMemory | None = None
    scope: Any = None  # ScopeSource
    max_steps: int = 8
    cache_hints: bool = True

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
        calls = _Calls(self, plan)
        try:
            while (call := calls.next()) is not None:
                chunks = _Chunks()
                for chunk in call[0].stream(call[1], config, **kwargs):
                    yield from chunks.shown(chunk)
                drive(calls.after(chunks.reply()))
            drive(calls.finish())
        except BaseException:  # the consumer stopping early included
            plan.history.abandon_turn(plan.state)
            raise

    async def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[BaseMessage]:
        config = config or {}
        plan = await adrive(self._plan(input, config))
        if plan is None:
            async for chunk in self.model.astream(input, config, **kwargs):
                yield chunk
            return
        calls = _Calls(self, plan)
        try:
            while (call := calls.next()) is not None:
                chunks = _Chunks()
                async for chunk in call[0].astream(call[1], config, **kwargs):
                    for shown in chunks.shown(chunk):
                        yield shown
                await adrive(calls.after(chunks.reply()))
            await adrive(calls.finish())
        except BaseException:  # the consumer stopping early included
            await plan.history.aabandon_turn(plan.state)
            raise

    # -- the body, written once ---------------------------------------------------------

    def _invoke_steps(
        self, input: Any, config: RunnableConfig, kwargs: Mapping[str, Any]
    ) -> Generator[Op, Any, BaseMessage]:
        plan = yield from self._plan(input, config)
        if plan is None:
            return (yield _model_op(self.model, input, config, kwargs))  # type: ignore[no-any-return]
        calls = _Calls(self, plan)
        visible: AIMessage | None = None
        try:
            while (call := calls.next()) is not None:
                reply = yield _model_op(*call, config, kwargs)
                if not isinstance(reply, AIMessage):
                    yield from calls.finish()
                    return reply  # type: ignore[no-any-return]
                yield from calls.after(reply)
                visible = _visible(reply)
            yield from calls.finish()
        except GeneratorExit:  # closed unfinished: nothing can run any more
            raise
        except BaseException:
            # The model (or memory) failed: end the turn, as the loops do, so the next
            # input begins its own (counted, its own user message for the guards).
            yield op(plan.history.abandon_turn, plan.history.aabandon_turn, plan.state)
            raise
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
        provider = provider_of(base_model(self.model))
        if history.provider is None:
            history.provider = provider
        if provider == "openai":  # ChatOpenAI(base_url=...) may serve an open model
            base_url = getattr(base_model(self.model), "openai_api_base", None)
            note_endpoint(type(self).__name__, base_url, history.options.memory_role)
        state: HistoryTurn = yield op(history.open_turn, history.aopen_turn)
        if state.model_called:
            # This history's last run called the model and never reached add_messages
            # (the chain failed after the model): that turn is over; this is a new one.
            yield op(history.abandon_turn, history.aabandon_turn, state)
            state = yield op(history.open_turn, history.aopen_turn)
        state.model_called = True
        state.turn.note_user_message(current_user_text(messages))
        if current is not None:
            view = yield op(lambda: history.messages, history.aget_messages)
            messages = [*view, *current]
        return _Plan(history, state, messages, current, provider, config)

    def _standalone(
        self, messages: list[BaseMessage], config: RunnableConfig
    ) -> tuple[ShortTermMemoryHistory | None, list[BaseMessage] | None]:
        """A one-call history over the input messages: earlier ones are its record,
        the trailing user messages the current turn (returned)."""
        assert self.memory is not None
        if self.scope is None:
            configurable = config.get("configurable") or {}
            missing = [
                name
                for name, keys in (("user_id", ("user_id",)), ("channel_id", _CHANNEL_KEYS))
                if all(configurable.get(k) is None for k in keys)
            ]
            if missing:
                raise ValidationError(
                    f"with_short_term_memory: no {' and '.join(missing)} for this call. "
                    "Called without a ShortTermMemoryHistory in its config (as "
                    "RunnableWithMessageHistory puts it), the wrapper needs the "
                    "conversation: pass with_short_term_memory(..., scope=Scope(...)) (or "
                    "a callable (runtime, config) -> Scope | None), or user_id and "
                    "channel_id (or thread_id) in config['configurable']"
                )
        scope = resolve_scope(cast(ScopeSource, self.scope), None, config)
        if scope is None:  # a resolver declined: no memory for this call
            return None, None
        split = len(messages)
        while split > 0 and isinstance(messages[split - 1], HumanMessage):
            split -= 1
        record = MessageRecord(messages[:split])
        return ShortTermMemoryHistory(self.memory, scope, history=record), messages[split:]

    def _tool_for(self, plan: _Plan, step: int) -> tuple[BaseTool | None, Any]:
        """The memory tool to bind for this step, and the ``tool_choice`` to bind it
        with (None: the model's own)."""
        turn = plan.state.turn
        if turn.state is None:
            return None, None
        # After a step the request carries this turn's tool_use/tool_result blocks.
        offer = turn.tool_offer(
            other_tools=own_tools(self.model), tool_traffic=step > 0, provider=plan.provider
        )
        if offer == "describe":
            return turn.tool(hidden=True), {"type": "none"}
        return (turn.tool(), None) if offer == "offer" else (None, None)

    def _after_reply(
        self,
        plan: _Plan,
        reply: AIMessage,
        exchange: list[BaseMessage],
        step: int,
    ) -> Generator[Op, Any, list[BaseMessage] | None]:
        """Run the reply's memory calls; the messages to send for another model call,
        or None when this reply is the answer."""
        if not _has_memory_call(reply):
            return None
        turn = plan.state.turn
        stored = without_invalid_memory_calls(reply)
        results: list[BaseMessage] = []
        for call in memory_calls(stored):
            result, _ = yield from memory_call_steps(
                turn, call, truncated=cut_short(reply), config=plan.config
            )
            results.append(result)
        exchange.extend([stored, *results])
        names = [str(c.get("name")) for c in reply.tool_calls]
        # The turn's one end-of-turn rule; the caller's own tools are the caller's to
        # run (the chain returns the reply to it), so a reply calling them ends here too.
        if MemoryTurn.answered_then_remembered(text_of(reply), names):
            return None
        if any(name != TOOL_NAME for name in names) or step + 1 >= self.max_steps:
            return None
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
            yield op(history.add_messages, history.aadd_messages, [*plan.current, final])


def _hinted(
    model: Runnable[Any, Any], messages: list[BaseMessage], plan: _Plan
) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
    """The model call with the provider's prompt-cache hints (see ``_hints``)."""
    kwargs = bindings(model)[0]
    added = cache_settings(model, plan.provider, plan.history.scope, kwargs)
    if added:
        return model.bind(**added), messages
    if plan.provider != "anthropic":
        return model, messages
    context = plan.state.turn.context
    return model, anthropic_dialogue_breakpoint(
        messages,
        markers=breakpoints_in(messages, tools=kwargs.get("tools") or (), settings=kwargs),
        automatic=bool(kwargs.get("cache_control")),
        injected=context.transient,
    )


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
    max_steps: int = 8,
    cache_hints: bool = True,
) -> Runnable[Any, Any]:
    """``chain`` (a chat model, or a sequence such as ``prompt | model | parser``) with
    its chat model wrapped in :class:`ShortTermMemoryChatModel` (see the module
    docstring). ``memory`` and ``scope`` serve calls without a
    :class:`ShortTermMemoryHistory` in the config. ``cache_hints`` (default on) sends
    the provider's prompt-cache hints, as the middleware does (``_hints``)."""
    if memory is not None:
        check_memory_setup(memory)
    if scope is not None and not isinstance(scope, Scope) and not callable(scope):
        raise ConfigurationError(
            "scope must be a Scope or a callable (runtime, config) -> Scope | None, "
            f"got {type(scope).__name__}"
        )
    if scope is not None and memory is None:
        raise ConfigurationError(
            "scope= serves calls without a ShortTermMemoryHistory, which need memory= too"
        )
    check_positive_int("max_steps", max_steps)
    # The chain's one option of a turn (the others are the history's): checked as every
    # entry point's options are.
    options = TurnOptions(cache_hints=cache_hints)

    def wrap(model: Runnable[Any, Any]) -> ShortTermMemoryChatModel:
        return ShortTermMemoryChatModel(
            model=model,
            memory=memory,
            scope=scope,
            max_steps=max_steps,
            cache_hints=options.cache_hints,
        )

    if base_model(chain) is not None:
        return wrap(chain)
    if isinstance(chain, RunnableSequence):
        steps = list(chain.steps)
        for i in range(len(steps) - 1, -1, -1):
            if base_model(steps[i]) is not None:
                steps[i] = wrap(steps[i])
                return RunnableSequence(*steps, name=chain.name)
    raise ConfigurationError(
        "with_short_term_memory needs a chat model or a sequence with one "
        f"(prompt | model …), got {type(chain).__name__}"
    )

"""``with_short_term_memory``: the memory tool for a plain LCEL chain, no agent loop.

    chain = with_short_term_memory(prompt | ChatOpenAI(model="gpt-4.1-mini"), mem)
    with_history = RunnableWithMessageHistory(
        chain, ShortTermMemoryHistory.factory(mem, user_id="u1", server_id="g1", raw=True),
        input_messages_key="input", history_messages_key="history",
    )

The chat model of the chain is wrapped (the other steps stay as they are). On each
call the wrapper finds the turn of the :class:`ShortTermMemoryHistory` that
``RunnableWithMessageHistory`` put in the run's config (a ``raw=True`` one: it returns
the record, and the wrapper places the memory in each model request, the chain's one
placement point; a history that places its own is refused), hands it the user's message
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
``_tracing``). Other tool calls are returned untouched, as a plain chain does. A call
that fails (the model raises, the stream's consumer stops early) ends its turn, as the
loops do; so does the next input after a chain that failed past the model without
reaching ``add_messages``.

``invoke``, ``ainvoke``, ``stream`` and ``astream`` run one body, a generator of
:class:`~stm_memory.kit.Op` as the loops' turn is: the model calls and memory calls of
one chain call, the steps rule of the loops (``max_steps``, the turn's
``answered_then_remembered``; each step's request, its tool offer and its cache hints
prepared by the turn). ``drive``/``adrive`` send each model call with
``invoke``/``ainvoke``; the two streaming drivers stream it, yielding its chunks with
the memory call's parts held back, and hand the body their sum.

The wrapper holds no turn state of its own: it asks the history for the turn of this
model input (:meth:`ShortTermMemoryHistory.model_turn`, a :class:`HistoryTurn` whose
:class:`~stm_memory.kit.MemoryTurn` offers the tool and runs the memory calls), has
each request prepared by it (:meth:`~ShortTermMemoryHistory.model_request`: the
messages, the memory tool to bind and its ``tool_choice``, the cache hints, which the
wrapper only maps onto the model) and hands it
the memory exchange (:meth:`~ShortTermMemoryHistory.keep_exchange`) or the failure
(:meth:`~ShortTermMemoryHistory.abandon_turn`).

Without a :class:`ShortTermMemoryHistory` in the config (a chain called directly),
the wrapper runs the turn itself when it was given ``memory``: the scope comes from
``scope=`` or ``config["configurable"]`` (``channel_id`` / ``thread_id``, ``user_id``
…; none of them is a :class:`~stm_memory.ValidationError`), the input messages are the
history, and the exchange is captured. Without ``memory`` it calls the model
unchanged.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
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
from pydantic import ConfigDict

from stm_memory import TOOL_NAME, ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.kit import (
    RECALL_TOOL,
    Ask,
    Op,
    TurnOptions,
    adrive,
    answered_then_remembered,
    cache_retention,
    check_memory_setup,
    check_positive_int,
    current_user_text,
    drive,
    model_name,
    model_steps,
    named_options,
    note_endpoint,
    op,
    strip_calls,
    strip_memory_calls,
    text_of,
    wire_for,
)

from ._binding import base_model, bindings, own_tools, with_tools
from ._dialogue import (
    cut_short,
    memory_calls,
    provider_of,
    without_invalid_memory_calls,
)
from ._hints import hinted, request_settings
from ._history import PLACED_TWICE, HistoryTurn, ShortTermMemoryHistory
from ._record import MessageRecord
from ._scope import ScopeSource, resolve_scope
from ._tool import recall_tool, turn_tool
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


#: The retrieval tool as the chain binds it (answered in the steps, never the caller's).
_RECALL = recall_tool()
#: Our tools: their calls are the chain's to run and never reach the caller.
_OURS = frozenset({TOOL_NAME, RECALL_TOOL})


def _has_our_call(message: AIMessage) -> bool:
    return any(c.get("name") in _OURS for c in (*message.tool_calls, *message.invalid_tool_calls))


def _recall_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [dict(c) for c in message.tool_calls if c.get("name") == RECALL_TOOL]


def _visible(message: AIMessage) -> AIMessage:
    """``message`` as the user sees it: without our calls (valid or not)."""
    message = without_invalid_memory_calls(message)
    recalls = {str(c.get("id")) for c in _recall_calls(message)}
    rest = strip_memory_calls(strip_calls([message], recalls))
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
        if tcc.get("name") in _OURS:
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
    #: The caller's request settings (the model's kwargs and bindings): the same for
    #: every step of the call.
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class _ModelCall(Op):
    """One model call of the body: ``invoke``/``ainvoke`` for the blocking and awaiting
    drivers (``run``/``arun``); the streaming drivers stream it instead, showing its
    chunks (memory-call parts held back unless ``raw``) and sending back their sum."""

    model: Runnable[Any, Any]
    input: Any
    config: RunnableConfig
    kwargs: Mapping[str, Any]
    raw: bool = False

    @classmethod
    def of(
        cls,
        model: Runnable[Any, Any],
        input: Any,
        config: RunnableConfig,
        kwargs: Mapping[str, Any],
        *,
        raw: bool = False,
    ) -> _ModelCall:
        return cls(
            run=lambda: model.invoke(input, config, **kwargs),
            arun=lambda: model.ainvoke(input, config, **kwargs),
            label="model",
            model=model,
            input=input,
            config=config,
            kwargs=kwargs,
            raw=raw,
        )

    def stream(self) -> Iterator[Any]:
        return self.model.stream(self.input, self.config, **self.kwargs)

    def astream(self) -> AsyncIterator[Any]:
        return self.model.astream(self.input, self.config, **self.kwargs)


class _Chunks:
    """One streamed model call: the chunks shown to the caller (memory-call parts held
    back) and their sum, the reply."""

    def __init__(self, raw: bool) -> None:
        self.raw = raw
        self.memory_indexes: set[Any] = set()
        self.total: AIMessageChunk | None = None

    def shown(self, chunk: Any) -> list[Any]:
        if not isinstance(chunk, AIMessageChunk):
            return [chunk]
        self.total = chunk if self.total is None else self.total + chunk
        if self.raw:
            return [chunk]
        out = _strip_chunk(chunk, self.memory_indexes)
        return [] if out is None else [out]

    def reply(self) -> AIMessage | None:
        """The reply the chunks add up to (None: the model streamed no message)."""
        total = self.total
        return cast(AIMessage, message_chunk_to_message(total)) if total is not None else None


class _Stopped(BaseException):
    """Thrown into the body when the consumer of a stream stops early: the body ends
    its turn as for any failure (a BaseException, so nothing treats it as the model's
    error)."""


def _stream(steps: Generator[Op, Any, Any]) -> Iterator[Any]:
    """Run the body, streaming its model calls: their chunks are this iterator's."""
    sent: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(sent)
        except StopIteration:
            return
        sent, error = None, None
        try:
            if isinstance(step, _ModelCall):
                chunks = _Chunks(step.raw)
                for chunk in step.stream():
                    yield from chunks.shown(chunk)
                sent = chunks.reply()
            else:
                sent = step.run()
        except GeneratorExit:  # the consumer stopped: the body ends its turn first
            _stop(steps)
            raise
        except BaseException as exc:
            error = exc


async def _astream(steps: Generator[Op, Any, Any]) -> AsyncIterator[Any]:
    """:func:`_stream` with awaits."""
    sent: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = steps.throw(error) if error is not None else steps.send(sent)
        except StopIteration:
            return
        sent, error = None, None
        try:
            if isinstance(step, _ModelCall):
                chunks = _Chunks(step.raw)
                async for chunk in step.astream():
                    for shown in chunks.shown(chunk):
                        yield shown
                sent = chunks.reply()
            else:
                sent = await step.arun()
        except GeneratorExit:  # the consumer stopped: the body ends its turn first
            await _astop(steps)
            raise
        except BaseException as exc:
            error = exc


def _stop(steps: Generator[Op, Any, Any]) -> None:
    """Throw :class:`_Stopped` into the body and run what it does about it."""
    drive(_stopping(steps))


async def _astop(steps: Generator[Op, Any, Any]) -> None:
    await adrive(_stopping(steps))


def _stopping(steps: Generator[Op, Any, Any]) -> Generator[Op, Any, None]:
    try:
        step = steps.throw(_Stopped())
        while True:
            try:
                result = yield step
            except BaseException as exc:
                step = steps.throw(exc)
            else:
                step = steps.send(result)
    except (StopIteration, _Stopped):
        return


class ShortTermMemoryChatModel(RunnableSerializable[Any, BaseMessage]):
    """The chat model of a chain, with the memory tool of the current turn (see the
    module docstring). Built by :func:`with_short_term_memory`."""

    model: Runnable[Any, Any]
    memory: ShortTermMemory | None = None
    scope: Any = None  # ScopeSource
    max_steps: int = 8
    cache_hints: bool = True

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # -- Runnable: four shells around one body ----------------------------------------------

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> BaseMessage:
        return drive(self._call_steps(input, config or {}, kwargs))

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> BaseMessage:
        return await adrive(self._call_steps(input, config or {}, kwargs))

    def stream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[BaseMessage]:
        return _stream(self._call_steps(input, config or {}, kwargs))

    def astream(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[BaseMessage]:
        return _astream(self._call_steps(input, config or {}, kwargs))

    # -- the body, written once ---------------------------------------------------------

    def _call_steps(
        self, input: Any, config: RunnableConfig, kwargs: Mapping[str, Any]
    ) -> Generator[Op, Any, BaseMessage]:
        """One chain call: the model calls and memory calls of this turn's step, then
        the exchange kept for the history. Returns the reply as the user sees it."""
        plan = yield from self._plan(input, config)
        if plan is None:  # no memory here: the model, unchanged
            unchanged: BaseMessage = yield _ModelCall.of(
                self.model, input, config, kwargs, raw=True
            )
            return unchanged
        try:
            reply, exchange = yield from self._model_steps(plan, config, kwargs)
            answer = reply if isinstance(reply, AIMessage) else None
            yield from self._finish(plan, exchange, answer)
        except GeneratorExit:  # closed unfinished: nothing can run any more
            raise
        except BaseException:
            # The model (or memory) failed, or the stream's consumer stopped: end the
            # turn, as the loops do, so the next input begins its own (counted, its own
            # user message for the guards).
            yield op(plan.history.abandon_turn, plan.history.aabandon_turn, plan.state)
            raise
        # What the model returned when it is not a message of its own (the streaming
        # drivers ignore this return: the chunks were the output).
        return _visible(answer) if answer is not None else cast(BaseMessage, reply)

    def _model_steps(
        self, plan: _Plan, config: RunnableConfig, kwargs: Mapping[str, Any]
    ) -> Generator[Op, Any, tuple[Any, list[BaseMessage]]]:
        """Model calls until a reply that is the answer (or ``max_steps``), as the
        loops' steps run: the last reply and the memory exchange (each reply with
        memory calls, as stored, and the calls' results)."""
        exchange: list[BaseMessage] = []
        turn = plan.state.turn

        def transcript() -> list[BaseMessage]:
            return [*plan.messages, *exchange]

        def send(request: tuple[Runnable[Any, Any], list[BaseMessage]]) -> Op:
            return _ModelCall.of(*request, config, kwargs)

        def after(reply: Any) -> Generator[Op, Any, bool]:
            if isinstance(reply, AIMessage) and not reply.tool_calls:
                # A memory write written as text is the turn's to run, not the answer:
                # then once more, without the tool (the turn withdrew it).
                return (yield from turn.text_call(text_of(reply))) is not None
            if not isinstance(reply, AIMessage) or not _has_our_call(reply):
                return False  # the answer (calls of the caller's own tools are theirs to run)
            stored = without_invalid_memory_calls(reply)
            exchange.append(stored)
            for call in memory_calls(stored):
                result, _ = yield from memory_call_steps(
                    turn, call, truncated=cut_short(reply), config=config
                )
                exchange.append(result)
            for call in _recall_calls(stored):
                text = yield from turn.recall_call(call.get("args") or {})
                exchange.append(
                    ToolMessage(text, tool_call_id=str(call.get("id")), name=RECALL_TOOL)
                )
            names = [str(c.get("name")) for c in reply.tool_calls]
            # The turn's one end-of-turn rule; the caller's own tools are the caller's to
            # run (the chain returns the reply to it), so a reply calling them ends here.
            return not answered_then_remembered(text_of(reply), names) and all(
                name in _OURS for name in names
            )

        reply, _, _ = yield from model_steps(
            turn,
            transcript,
            build=lambda: self._request(plan, transcript()),
            send=send,
            after=after,
            max_steps=self.max_steps,
        )
        return reply, exchange

    def _request(
        self, plan: _Plan, transcript: list[BaseMessage]
    ) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
        """The model (with this step's tool and hints) and the messages it is sent, as
        the turn prepares this request (``ShortTermMemoryHistory.model_request``)."""
        turn = plan.state.turn
        prepared = plan.history.model_request(
            transcript,
            turn=plan.state,
            wire=wire_for(plan.provider),
            ask=Ask(
                other_tools=own_tools(self.model),
                settings=plan.settings,
                cache_hints=self.cache_hints,
                recall=True,  # the steps answer the retrieval tool (_model_steps)
            ),
        )
        # Our tools as prepared, bound beside the model's own: the memory tool
        # (described: with the prepared tool_choice, "none"; else the model's own
        # tool_choice stays), and the retrieval tool from the turn's first clear on.
        tool = turn_tool(turn, prepared.tool)
        ours = [t for t in (tool, _RECALL if prepared.recall_spec else None) if t is not None]
        choice = prepared.tool_choice if prepared.tool == "describe" else None
        model = with_tools(self.model, ours, choice)
        kwargs = bindings(model)[0]
        added, messages = hinted(
            prepared, prepared.messages, tools=kwargs.get("tools") or (), settings=kwargs
        )
        return (model.bind(**added) if added else model), messages

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
        elif not history.raw:  # it placed the memory in its view: placed twice
            raise ConfigurationError(PLACED_TWICE)
        provider = provider_of(base_model(self.model))
        if provider == "openai":  # ChatOpenAI(base_url=...) may serve an open model
            base_url = getattr(base_model(self.model), "openai_api_base", None)
            note_endpoint(type(self).__name__, base_url, history.options.memory_role)
        user_text = current_user_text(messages)
        settings = request_settings(self.model, bindings(self.model)[0])
        # The retention the model asks for prices what the history's views show.
        state: HistoryTurn = yield op(
            history.model_turn,
            history.amodel_turn,
            user_text,
            provider=provider,
            retention=cache_retention(settings),
            model=model_name(base_model(self.model)),
        )
        if current is not None:
            view = yield op(lambda: history.messages, history.aget_messages)
            messages = [*view, *current]
        return _Plan(history, state, messages, current, provider, settings)

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
        history = ShortTermMemoryHistory(self.memory, scope, history=record, raw=True)
        return history, messages[split:]

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


def _same(message: BaseMessage, answer: AIMessage) -> bool:
    return message is answer or (
        isinstance(message, AIMessage) and message.id is not None and message.id == answer.id
    )


@named_options
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

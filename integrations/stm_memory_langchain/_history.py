"""``ShortTermMemoryHistory``: a chat message history for ``RunnableWithMessageHistory``.

An LCEL chain with history (``RunnableWithMessageHistory(prompt | model,
get_session_history)``) reads ``history.messages`` before the chain runs and calls
``history.add_messages(input + output)`` after it. Here the two bracket one memory
turn:

- ``messages`` begins the turn (lazily, once). With ``raw=True`` (a chain whose model
  :func:`~stm_memory_langchain.with_short_term_memory` wraps) it returns the record as it
  is, and the wrapper places the memory in each model request, on the whole input: one
  placement point. Without the wrapper it returns what the model should be sent: the
  memory block and the turns the memory does not cover (the same history cut as the
  provider loops, :func:`stm_memory.prompt.cut.cut_history`, without earlier
  memory-tool calls). The view is kept for the turn, so reading it twice
  (``RunnableWithMessageHistory`` does) gives the same list.
- ``add_messages`` stores the exchange in the full record, captures the recent
  dialogue and ends the turn (it counts towards the refresh cadence). An added
  ``AIMessage`` carrying an ``update_short_term_memory`` call is applied here (one
  update per turn, every guard, the same results; a tool run the callbacks of the run
  storing the exchange see) and its result is stored as a ``ToolMessage``, so the
  record stays valid for the provider.
- ``clear`` empties the record and forgets the channel (the "/refresh" command).

The turn itself is a :class:`~stm_memory.kit.MemoryTurn`: the first read is
``MemoryTurn.begin`` and ``assemble``; the view is ``view`` (for a chain without the
wrapper), or, with ``raw=True``, the record as it is and each model request
``prepare`` on the whole input (the wrapper's, the history's one placement point); a
memory call is ``memory_call``;
``add_messages`` with the answer is ``finish`` (given the record's tail that capture
keeps); a run that failed is ``abandon``. A wrapper that calls the model itself drives
the open turn through public methods: :meth:`~ShortTermMemoryHistory.model_turn` (the
:class:`HistoryTurn` of its model input), :meth:`~ShortTermMemoryHistory.model_messages`,
:meth:`~ShortTermMemoryHistory.keep_exchange` and
:meth:`~ShortTermMemoryHistory.abandon_turn`.

The full record lives in a wrapped history of your choice (``history=``; default a
list in memory), as a checkpointer keeps a LangChain thread: only what the model is
sent is cut. :func:`~stm_memory_langchain.with_short_term_memory`
gives the chain's chat model the memory tool of the current turn, keeps the memory
call out of the chain's output, and ends the turn when the chain fails.

The nudge (the reminder to call the tool when the memory is due) is not part of
``messages``: the user's message reaches the history only in ``add_messages``, and
the tool is gone in a turn whose message asks to "remember" something (the
long-term-intent guard) or that already updated. The chain wrapper hands the turn the
user's message and then places the nudge in each model request
(:meth:`ShortTermMemoryHistory.model_messages`), so a model is only ever asked to call
a tool it has. One history serves one conversation at a time (one turn open at once),
like every chat history.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.tools import BaseTool

from stm_memory import ConfigurationError, Scope, ShortTermMemory, TurnContext
from stm_memory.kit import (
    MESSAGES_WIRE,
    Ask,
    MemoryRole,
    MemoryTurn,
    Op,
    PreparedRequest,
    TurnOption,
    TurnOptions,
    Wire,
    WriterLike,
    adrive,
    check_flag,
    check_memory_setup,
    current_user_text,
    drive,
    named_options,
    op,
    text_of,
    usage_of,
)

from ._dialogue import cut_short, memory_calls, without_invalid_memory_calls
from ._factory import HistoryFactoryBase
from ._record import MessageRecord
from ._tool import turn_tool
from ._tracing import memory_call_steps

__all__ = [
    "MAX_CACHED_HISTORIES",
    "HistoryTurn",
    "MessageRecord",
    "ShortTermMemoryHistory",
    "ShortTermMemoryHistoryFactory",
]

log = logging.getLogger("stm_memory")

#: Why a history that places the memory in its view is refused a model request.
PLACED_TWICE = (
    "this ShortTermMemoryHistory places the memory in its messages, and "
    "with_short_term_memory (or a loop of your own) places it in each model request: "
    "build the history with raw=True (ShortTermMemoryHistory(..., raw=True), or "
    "ShortTermMemoryHistory.factory(mem, ..., raw=True)) so it is placed once, on the "
    "model's whole input"
)

# The upcoming user message, while the view is placed: the chain appends the real one
# after the history, so depths count from it and the cut treats it as the current turn.
_STAND_IN = "stm-memory-upcoming-input"


class HistoryTurn:
    """The open turn of a :class:`ShortTermMemoryHistory`: its
    :class:`~stm_memory.kit.MemoryTurn` (``turn``) and what the history keeps for
    it (the view it returned, the record as the turn knows it, the memory exchange to
    store). :meth:`ShortTermMemoryHistory.model_turn` (or ``open_turn``) returns it to a
    wrapper that calls the model itself (:func:`~stm_memory_langchain.with_short_term_memory`),
    which hands it back to :meth:`~ShortTermMemoryHistory.model_messages` and
    :meth:`~ShortTermMemoryHistory.abandon_turn`."""

    __slots__ = (
        "_answer_in_exchange",
        "_exchange",
        "_known",
        "_seen",
        "_view",
        "model_called",
        "turn",
    )

    def __init__(self, turn: MemoryTurn) -> None:
        self.turn = turn
        #: Set once a wrapper called the model in this turn
        #: (:meth:`ShortTermMemoryHistory.model_turn`): another call on it is a new
        #: input after a run that never reached ``add_messages``.
        self.model_called = False
        self._view: list[BaseMessage] | None = None  # the view the history returned
        self._seen: list[BaseMessage] | None = None  # the record the view was built from
        self._known: list[BaseMessage] | None = None  # the record as this turn last knew it
        # The messages to store in place of the last AI message added (the memory exchange
        # the chain wrapper ran), and whether that AI message is among them.
        self._exchange: list[BaseMessage] | None = None
        self._answer_in_exchange = False


def _settled(message: BaseMessage) -> BaseMessage:
    """A streamed chunk as the message it adds up to (what a record should hold)."""
    if isinstance(message, AIMessageChunk):
        return message_chunk_to_message(message)
    return message


@named_options
class ShortTermMemoryHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` whose ``messages`` are what the model should be sent.

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory`.
        scope: the conversation this history serves.
        history: the full record (any ``BaseChatMessageHistory``: in memory, SQL,
            Redis …); default a new :class:`MessageRecord` (in memory).
        provider: the name the engine's provider exclusion goes by; the chain wrapper
            fills it in from the model when left ``None``. Placement writes for the
            chain's model's own provider once the wrapper has seen it (``"anthropic"``
            places memory in user turns, as that API takes system text only at the
            top), and for ``provider`` before that.
        trim_history: ``False`` sends the whole record (memory and nudge are still
            placed), for a caller that windows its history itself.
        memory_role: ``"system"``, ``"user"`` or ``"inline"``, as on the loops.
            ``None`` (default) is the system form: the history's view is read before
            the chain's model is known (a chain over a model at another host than
            OpenAI's says so, naming ``"inline"``).
        raw: ``messages`` returns the record as it is, and
            :func:`~stm_memory_langchain.with_short_term_memory` places the memory in
            each model request, on the whole input: the one placement point of a chain
            whose model it wraps (it refuses a history that places its own; the
            portable form, ``memory_role="inline"``, is always raw). ``False``
            (default): ``messages`` is the view, the memory placed in it, for a chain
            without the wrapper.

    The three options make up ``options`` (a :class:`~stm_memory.kit.TurnOptions`,
    what each turn begins with); the attributes of their names read and replace it.
    """

    provider = TurnOption[str | None]()
    trim_history = TurnOption[bool]()
    memory_role = TurnOption[MemoryRole | None]()

    def __init__(
        self,
        memory: ShortTermMemory,
        scope: Scope,
        *,
        history: BaseChatMessageHistory | None = None,
        provider: str | None = None,
        trim_history: bool = True,
        memory_role: MemoryRole | None = None,
        tool_calling: bool = True,
        context_window: int | None = None,
        keep_tool_results: Sequence[str] = (),
        writer: WriterLike | None = None,
        raw: bool = False,
    ) -> None:
        check_memory_setup(memory, scope=scope)
        check_flag("raw", raw)
        self.memory = memory
        self.scope = scope
        self._raw = raw
        self.record: BaseChatMessageHistory = history if history is not None else MessageRecord()
        self.options = TurnOptions.given(
            memory,
            provider=provider,
            trim_history=trim_history,
            memory_role=memory_role,
            tool_calling=tool_calling,
            context_window=context_window,
            keep_tool_results=keep_tool_results,
            writer=writer,
        )
        # The chain's model's own provider (its wire), once a wrapper said it: where
        # placement puts memory goes by what the request is, not by ``provider``, which
        # names the engine's provider exclusion (a proxy's name, say).
        self._wire: str | None = None
        # The cache retention the chain's model asks for (prompt_cache_retention), once
        # a wrapper said it: what a view's one decision of what to show is priced at.
        self._retention: timedelta | None = None
        self._open: HistoryTurn | None = None
        self._lock = threading.RLock()

    # -- BaseChatMessageHistory ----------------------------------------------------------

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """What the model should be sent this turn (begins the turn; see the module
        docstring)."""
        return drive(self._view_steps())

    async def aget_messages(self) -> list[BaseMessage]:
        return await adrive(self._view_steps())

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store ``messages`` in the record; with an AI message among them, apply its
        memory call, capture the dialogue and end the turn."""
        drive(self._add_steps(messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await adrive(self._add_steps(messages))

    def clear(self) -> None:
        """Empty the record and forget the channel's memory (the "/refresh")."""
        with self._lock:
            self._open = None
        self.record.clear()
        self.memory.clear_channel(self.scope.channel_id)

    async def aclear(self) -> None:
        with self._lock:
            self._open = None
        await self.record.aclear()
        await self.memory.aclear_channel(self.scope.channel_id)

    # -- the turn --------------------------------------------------------------------------

    @property
    def turn(self) -> TurnContext | None:
        """The engine's state of the open turn (begun by ``messages`` or
        ``memory_tool``), or None (no turn open, or memory is off for it)."""
        with self._lock:
            return self._open.turn.state if self._open is not None else None

    def open_turn(self) -> HistoryTurn:
        """The open turn, begun (and its memory read) if none is open."""
        return drive(self._open_steps())

    async def aopen_turn(self) -> HistoryTurn:
        return await adrive(self._open_steps())

    @property
    def raw(self) -> bool:
        """``messages`` is the record as it is; the chain wrapper places the memory in
        each model request (``raw=True``, or the portable form)."""
        return self._raw or self.options.form == "inline"

    @property
    def _style(self) -> str | None:
        """The provider placement writes for: the chain's model's, else ``provider``."""
        return self._wire or self.provider

    def model_turn(
        self,
        user_text: str | None,
        *,
        provider: str | None = None,
        retention: timedelta | None = None,
        model: str | None = None,
    ) -> HistoryTurn:
        """For a wrapper that calls the chain's model itself
        (:func:`~stm_memory_langchain.with_short_term_memory`): the turn this model input
        belongs to, handed its user's message (the intent guard). The open turn, unless
        a wrapper already called the model in it: then its run never reached
        ``add_messages`` (the chain failed after the model), so that turn is ended and
        a new one begins. ``provider`` (the chain's model's) is what placement writes
        for from then on, and fills in this history's ``provider`` (the exclusion's
        name) when it was left ``None``; ``retention`` (what the chain's model asks
        for, :func:`~stm_memory.kit.cache_retention`) prices what later views show, and
        ``model`` (its name) is the turn's model (its rates, its hosted window)."""
        return drive(self._model_turn_steps(user_text, provider, retention, model))

    async def amodel_turn(
        self,
        user_text: str | None,
        *,
        provider: str | None = None,
        retention: timedelta | None = None,
        model: str | None = None,
    ) -> HistoryTurn:
        return await adrive(self._model_turn_steps(user_text, provider, retention, model))

    def abandon_turn(self, turn: HistoryTurn) -> None:
        """End ``turn``, uncaptured, if it is still the open one: its run failed (or
        never reached ``add_messages``). It counted as a turn, as in the loops, whose
        turn ends when the model call raises; the next read begins a new one."""
        drive(self._abandon_steps(turn))

    async def aabandon_turn(self, turn: HistoryTurn) -> None:
        await adrive(self._abandon_steps(turn))

    def memory_tool(self) -> BaseTool | None:
        """The ``update_short_term_memory`` tool bound to the current turn (begun if
        none is open), or None while a guard hides it. Binding it to the model is what
        :func:`~stm_memory_langchain.with_short_term_memory` does; a loop of your own
        also calls :meth:`note_user_message` first and sends :meth:`model_messages`."""
        turn = self.open_turn().turn
        return turn_tool(turn, turn.status.offer)

    async def amemory_tool(self) -> BaseTool | None:
        turn = (await self.aopen_turn()).turn
        return turn_tool(turn, turn.status.offer)

    def note_user_message(self, text: str | None) -> None:
        """Hand the turn its user message before the model runs (the intent guard)."""
        with self._lock:
            state = self._open
        if state is not None:
            state.turn.note_user_message(text)

    def model_messages(
        self, messages: Sequence[BaseMessage], *, turn: HistoryTurn | None = None
    ) -> list[BaseMessage]:
        """``messages`` (the model's whole input: prompt, this history's ``messages``,
        the new user message) as the model should get them in this step of ``turn``
        (default the open one): with the nudge placed while it is due and the tool is
        offered (after the user's message is known, so never in a "remember this" turn,
        and no longer once the memory was updated); memory placed for a provider the
        view did not know of moved where that provider takes it. Unchanged without a
        turn. The messages of :meth:`model_request`."""
        return self.model_request(messages, turn=turn).messages

    def model_request(
        self,
        messages: Sequence[BaseMessage],
        *,
        turn: HistoryTurn | None = None,
        wire: Wire = MESSAGES_WIRE,
        ask: Ask | None = None,
    ) -> PreparedRequest:
        """This step's request, whole, as ``turn`` (default the open one) prepares it
        (``MemoryTurn.prepare``): :meth:`model_messages`'s messages, the memory tool
        and ``tool_choice``, the cache hints; ``wire`` and ``ask``: as for ``prepare``
        (the API, the caller's tools, ``tool_choice`` and settings; the provider is
        this history's). Without a turn, ``messages`` as they are and nothing else."""
        if not self.raw:
            raise ConfigurationError(PLACED_TWICE)
        if turn is None:
            with self._lock:
                turn = self._open
        if turn is None:
            return PreparedRequest(list(messages))
        # The turn builds this request on the whole input (the record as this history
        # returned it, and the new input), as every entry point does: the cut, the
        # memory, the briefings and the nudge after the user's words (the nudge only
        # once they are known and while the tool is offered), which then stay in the
        # prefix the next turn re-reads from the provider's cache.
        ask = ask or Ask()
        ask = replace(ask, provider=self._style, retention=ask.retention or self._retention)
        return turn.turn.prepare(messages, wire=wire, ask=ask)

    def keep_exchange(self, exchange: Sequence[BaseMessage], *, answer_included: bool) -> None:
        """For the chain wrapper: the memory exchange it ran this turn, stored in place
        of the last AI message the chain returns (``answer_included``: that answer is
        part of ``exchange``; else it follows it)."""
        with self._lock:
            if self._open is not None:
                self._open._exchange = list(exchange)
                self._open._answer_in_exchange = answer_included

    # -- bodies (sync and async share them: generators of Op) ---------------------------

    def _open_steps(self) -> Generator[Op, Any, HistoryTurn]:
        with self._lock:
            if self._open is not None:
                return self._open
        turn = yield from MemoryTurn.begin(self.memory, self.scope, options=self.options)
        yield from turn.assemble()
        opened = HistoryTurn(turn)
        with self._lock:
            if self._open is None:  # a concurrent reader may have opened it first
                self._open = opened
            return self._open

    def _model_turn_steps(
        self,
        user_text: str | None,
        provider: str | None,
        retention: timedelta | None = None,
        model: str | None = None,
    ) -> Generator[Op, Any, HistoryTurn]:
        self._retention = retention
        if provider is not None:
            self._wire = provider
            if self.provider is None:  # the exclusion's default: the model's provider
                # Read off the model, whatever name it reports (not a developer's typo).
                self.options = replace(self.options, provider=provider)
        state = yield from self._open_steps()
        if state.model_called:
            # This history's last run called the model and never reached add_messages:
            # that turn is over; this input is a new one.
            yield from self._abandon_steps(state)
            state = yield from self._open_steps()
        state.model_called = True
        state.turn.name_model(model)  # before its first request: nothing decided yet
        state.turn.note_user_message(user_text)
        return state

    def _abandon_steps(self, state: HistoryTurn) -> Generator[Op, Any, None]:
        with self._lock:
            if self._open is not state:
                return
            self._open = None
        yield from state.turn.abandon()

    def _view_steps(self) -> Generator[Op, Any, list[BaseMessage]]:
        record = list((yield op(lambda: self.record.messages, self.record.aget_messages)))
        state = yield from self._open_steps()
        with self._lock:
            state._known = record
            if self.raw:
                return list(record)  # the wrapper places it, in each model request
            if state._view is None or state._seen is None or len(state._seen) != len(record):
                state._view = self._place(record, state)
                state._seen = record
            return list(state._view)

    def _place(self, record: list[BaseMessage], state: HistoryTurn) -> list[BaseMessage]:
        # The nudge waits for the user's message (see the module docstring).
        placed = state.turn.view(
            record,
            HumanMessage("", id=_STAND_IN),
            provider=self._style,
            nudge=False,
            retention=self._retention,
        )
        if placed is None:
            return record
        view: list[BaseMessage] = []
        for message in placed.items:
            if getattr(message, "id", None) != _STAND_IN:
                view.append(message)
            elif text_of(message):  # memory merged into the upcoming user turn
                view.append(HumanMessage(message.content))
        return view

    def _add_steps(self, messages: Sequence[BaseMessage]) -> Generator[Op, Any, None]:
        added = [_settled(m) for m in messages]
        state = yield from self._open_steps()
        state.turn.note_user_message(current_user_text(added))
        ai_at = next((i for i in range(len(added) - 1, -1, -1) if _is_ai(added[i])), None)
        if ai_at is not None and state._exchange is not None:
            kept = [] if state._answer_in_exchange else [added[ai_at]]
            added[ai_at : ai_at + 1] = [*state._exchange, *kept]
        stored = yield from self._apply_calls(state.turn, added)
        record = self.record
        yield op(record.add_messages, record.aadd_messages, stored)
        with self._lock:
            if state._known is not None:
                state._known = [*state._known, *stored]
            if ai_at is not None and self._open is state:
                self._open = None
        if ai_at is None or not state.turn.status.active:
            return  # the user's message alone (the turn goes on), or memory is off
        if self.raw and not state.model_called:
            log.warning(
                "stm-memory: this history (raw=True, or memory_role='inline') leaves the "
                "memory to with_short_term_memory(chain), which places it when the model "
                "is called; this chain did not, so its model was sent the whole history, "
                "uncut, and no memory"
            )
        if state._known is not None:  # the record as this turn read it, plus what it added
            full = state._known
        else:
            full = list((yield op(lambda: record.messages, record.aget_messages)))
        yield from self._finish(state.turn, full, len(full) - len(stored))

    def _apply_calls(
        self, turn: MemoryTurn, added: list[BaseMessage]
    ) -> Generator[Op, Any, list[BaseMessage]]:
        """``added`` with a result after every memory call nobody answered yet."""
        answered = {m.tool_call_id for m in added if isinstance(m, ToolMessage)}
        out: list[BaseMessage] = []
        for message in added:
            if not isinstance(message, AIMessage):
                out.append(message)
                continue
            message = without_invalid_memory_calls(message)
            out.append(message)
            for call in memory_calls(message):
                if call.get("id") not in answered:
                    # Traced in the run storing the exchange (the config in context).
                    result, _ = yield from memory_call_steps(
                        turn, call, truncated=cut_short(message)
                    )
                    out.append(result)
        return out

    def _finish(
        self, turn: MemoryTurn, full: list[BaseMessage], start: int
    ) -> Generator[Op, Any, None]:
        """Capture and end: the turn reads the record's tail it captures (its one
        capture window), and puts the stored messages in front only when the record
        holds no dialogue before this turn."""
        usage = [u for u in map(usage_of, full[start:]) if u is not None]
        yield from turn.finish(full, start=start, usage=usage)

    # -- factory ---------------------------------------------------------------------------

    @classmethod
    def factory(
        cls,
        memory: ShortTermMemory,
        *,
        keys: Sequence[str] = ("session_id",),
        scope: Callable[..., Scope] | None = None,
        history: Callable[..., BaseChatMessageHistory] | None = None,
        raw: bool = False,
        **options: Any,
    ) -> ShortTermMemoryHistoryFactory:
        """A ``get_session_history`` for ``RunnableWithMessageHistory`` (see
        :class:`ShortTermMemoryHistoryFactory`)."""
        return ShortTermMemoryHistoryFactory(
            memory, keys=keys, scope=scope, history=history, raw=raw, **options
        )


def _is_ai(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage)


# -- the factory: one history per conversation --------------------------------------------
#
# Here, beside the history it builds, because ShortTermMemoryHistory.factory returns one:
# what it is built with and the scope it makes live in _factory.py, which imports
# nothing of this module's.

# Factories keep this many histories (one per conversation) before dropping the oldest.
MAX_CACHED_HISTORIES = 10_000


class ShortTermMemoryHistoryFactory(HistoryFactoryBase):
    """``get_session_history`` for ``RunnableWithMessageHistory``: one
    :class:`ShortTermMemoryHistory` per conversation, built from the keys the chain is
    configured with.

    ``RunnableWithMessageHistory`` calls it with ``config["configurable"]["session_id"]``
    by default, or with the keys of its ``history_factory_config`` by name (pass the
    same ``keys`` here, and ``history_factory_config=factory.config_specs``). The
    scope is built from those values and the scope fields given as keyword options
    (``user_id``, ``server_id``, ``persona_id``, names …): ``channel_id`` is the
    ``channel_id`` key, else ``thread_id``, else ``session_id``. Integer ids are
    turned into strings. Or pass ``scope=`` a callable taking the keys by name. Keys
    and fields that can never give a user and a channel are a ``ConfigurationError``
    here, where the factory is built.

    A ``server_id`` shares memory: every conversation of that server is briefed with
    the others, whoever's they are. For conversations of separate end users, leave it
    out and key by user (``keys=("user_id", "session_id")``).

    ``history=`` builds each conversation's full record from the same keys (default:
    in memory). Other options (``provider``, ``trim_history``, ``memory_role``,
    ``tool_calling``, ``context_window``, ``writer``) and ``raw`` (for a chain whose model
    :func:`~stm_memory_langchain.with_short_term_memory` wraps) go to every history. The factory
    keeps the histories it built (the most recent ``MAX_CACHED_HISTORIES``), so an
    in-memory record lives as long as it does.
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        *,
        keys: Sequence[str] = ("session_id",),
        scope: Callable[..., Scope] | None = None,
        history: Callable[..., BaseChatMessageHistory] | None = None,
        raw: bool = False,
        **options: Any,
    ) -> None:
        check_memory_setup(memory)
        check_flag("raw", raw)
        self.raw = raw
        self.memory = memory  # before the options: a provider it excludes is known
        super().__init__(keys=keys, scope=scope, history=history, **options)
        self._built: OrderedDict[tuple[Any, ...], ShortTermMemoryHistory] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, *args: Any, **kwargs: Any) -> ShortTermMemoryHistory:
        values = self._values(args, kwargs)
        key = tuple(values[k] for k in self.keys)
        with self._lock:
            built = self._built.get(key)
            if built is not None:
                self._built.move_to_end(key)
                return built
        history = ShortTermMemoryHistory(
            self.memory,
            self._scope(values),
            history=self.history(**values) if self.history is not None else None,
            provider=self.options.provider,
            trim_history=self.options.trim_history,
            memory_role=self.options.memory_role,
            tool_calling=self.options.tool_calling,
            context_window=self.options.context_window,
            keep_tool_results=self.options.keep_tool_results,
            writer=self.options.writer,
            raw=self.raw,
        )
        with self._lock:
            built = self._built.setdefault(key, history)
            while len(self._built) > MAX_CACHED_HISTORIES:
                self._built.popitem(last=False)
            return built

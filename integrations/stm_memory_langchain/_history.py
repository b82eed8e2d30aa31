"""``ShortTermMemoryHistory``: a chat message history for ``RunnableWithMessageHistory``.

An LCEL chain with history (``RunnableWithMessageHistory(prompt | model,
get_session_history)``) reads ``history.messages`` before the chain runs and calls
``history.add_messages(input + output)`` after it. Here the two bracket one memory
turn:

- ``messages`` begins the turn (lazily, once) and returns what the model should be
  sent: the memory block and the turns the memory does not cover (the same history
  cut as the provider loops, :func:`stm_memory.prompt.cut.cut_history`, without earlier
  memory-tool calls). The view is kept for the turn, so reading it twice
  (``RunnableWithMessageHistory`` does) gives the same list.
- ``add_messages`` stores the exchange in the full record, captures the recent
  dialogue and ends the turn (it counts towards the refresh cadence). An added
  ``AIMessage`` carrying an ``update_short_term_memory`` call is applied here (one
  update per turn, every guard, the same results) and its result is stored as a
  ``ToolMessage``, so the record stays valid for the provider.
- ``clear`` empties the record and forgets the channel (the "/refresh" command).

The full record lives in a wrapped history of your choice (``history=``; default an
list in memory), as a checkpointer keeps a LangChain thread: only
what the model is sent is cut. :func:`~stm_memory_langchain.with_short_term_memory`
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
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from langchain_core.tools import BaseTool

from stm_memory import Scope, ShortTermMemory, TurnContext
from stm_memory.providers import (
    MemoryContext,
    MemoryRole,
    Op,
    adrive,
    attempt,
    check_memory_setup,
    check_provider,
    dialogue_for_capture,
    drive,
    failure,
    is_dialogue,
    is_summary_message,
    needs_previous,
    op,
    run_memory_call,
    text_of,
)

from ._dialogue import cut_short, memory_calls, memory_result, without_invalid_memory_calls
from ._record import MessageRecord

if TYPE_CHECKING:
    from ._factory import ShortTermMemoryHistoryFactory

__all__ = ["MessageRecord", "ShortTermMemoryHistory"]

log = logging.getLogger("stm_memory.langchain")

# The upcoming user message, while the view is placed: the chain appends the real one
# after the history, so depths count from it and the cut treats it as the current turn.
_STAND_IN = "stm-memory-upcoming-input"


@dataclass(eq=False)
class _Turn:
    """The open turn: the engine's turn, its memory context and the cached view."""

    turn: TurnContext | None  # None: memory is off for this turn (begin failed)
    context: MemoryContext
    view: list[BaseMessage] | None = None
    seen: list[BaseMessage] | None = None  # the record the view was built from
    known: list[BaseMessage] | None = None  # the record as this turn last knew it
    view_provider: str | None = None  # the provider the view's memory was placed for
    # The chain wrapper called the model in this turn: another call on it is a new
    # input after a run that never reached add_messages (it failed after the model).
    planned: bool = False
    # Set by the chain wrapper: the messages to store in place of the last AI message
    # added (the memory exchange it ran), and whether that AI message is among them.
    exchange: list[BaseMessage] | None = None
    answer_in_exchange: bool = False


def _is_ai(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage)


def _settled(message: BaseMessage) -> BaseMessage:
    """A streamed chunk as the message it adds up to (what a record should hold)."""
    if isinstance(message, AIMessageChunk):
        return message_chunk_to_message(message)
    return message


def _carries_only(message: BaseMessage, text: str) -> bool:
    """Whether ``message`` holds nothing but ``text`` (as a string or one text block)."""
    content = message.content
    if isinstance(content, str):
        return content == text
    return content == [{"type": "text", "text": text}]


class ShortTermMemoryHistory(BaseChatMessageHistory):
    """A ``BaseChatMessageHistory`` whose ``messages`` are what the model should be sent.

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory`.
        scope: the conversation this history serves.
        history: the full record (any ``BaseChatMessageHistory``: in memory, SQL,
            Redis …); default a new :class:`MessageRecord` (in memory).
        provider: the chat model's provider (``"anthropic"`` places memory in user
            turns, as that API takes system text only at the top). The chain wrapper
            fills it in from the model when left ``None``.
        trim_history: ``False`` sends the whole record (memory and nudge are still
            placed), for a caller that windows its history itself.
        memory_role: ``"system"`` (default) or ``"user"``, as on the loops.
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        scope: Scope,
        *,
        history: BaseChatMessageHistory | None = None,
        provider: str | None = None,
        trim_history: bool = True,
        memory_role: MemoryRole = "system",
    ) -> None:
        check_memory_setup(memory, scope=scope, memory_role=memory_role)
        self.memory = memory
        self.scope = scope
        self.record: BaseChatMessageHistory = history if history is not None else MessageRecord()
        self.provider = check_provider(provider)
        self.trim_history = bool(trim_history)
        self.memory_role: MemoryRole = memory_role
        self._open: _Turn | None = None
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
        """The open turn (begun by ``messages`` or ``memory_tool``), or None."""
        with self._lock:
            return self._open.turn if self._open is not None else None

    def memory_tool(self) -> BaseTool | None:
        """The ``update_short_term_memory`` tool bound to the current turn (begun if
        none is open), or None while a guard hides it. Binding it to the model is what
        :func:`~stm_memory_langchain.with_short_term_memory` does; a loop of your own
        also calls :meth:`note_user_message` first and sends :meth:`model_messages`."""
        turn = drive(self._turn_steps()).turn
        return self.memory.tool(turn) if turn is not None and turn.tool_offered else None

    async def amemory_tool(self) -> BaseTool | None:
        turn = (await adrive(self._turn_steps())).turn
        return self.memory.tool(turn) if turn is not None and turn.tool_offered else None

    def note_user_message(self, text: str | None) -> None:
        """Hand the turn its user message before the model runs (the intent guard)."""
        turn = self.turn
        if turn is not None:
            self.memory.note_user_message(turn, text)

    def model_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """``messages`` (the model's whole input: prompt, this history's ``messages``,
        the new user message) as the model should get them in this step of the turn:
        with the nudge placed while it is due and the tool is offered (after the user's
        message is known, so never in a "remember this" turn, and no longer once the
        memory was updated); memory placed for a provider the view did not know of
        moved where that provider takes it. Unchanged without an open turn."""
        with self._lock:
            state = self._open
        if state is None:
            return list(messages)
        return self._for_model(state, messages)

    def _for_model(self, state: _Turn, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        out = list(messages)
        turn = state.turn
        if turn is None:
            return out
        # The nudge only once the user's message is known and while the tool is offered.
        context = state.context.for_request(
            role=self.memory_role, trim=False, nudge=turn.tool_offered
        )
        # The view placed the briefings after a stand-in for the user's message (it did
        # not know it yet); the model gets them after the real one, where they leave the
        # user's words in the prefix the next turn re-reads from the provider's cache.
        briefing = context.briefing
        if briefing:
            out = [m for m in out if not _carries_only(m, briefing)]
        memory = context.memory
        misplaced = [
            i
            for i, m in enumerate(out)
            if isinstance(m, SystemMessage)
            and memory
            and m.content == memory
            and any(not isinstance(p, SystemMessage) for p in out[:i])
        ]
        if misplaced and state.view_provider != self.provider:
            # The view was placed before the chain's model was known; this provider
            # takes no system message below the top (Anthropic …): place it again.
            out = [m for i, m in enumerate(out) if i not in misplaced]
        else:
            context = context.without_memory()
        if context.is_empty:
            return out
        try:
            placed: list[BaseMessage] = context.apply(out, provider=self.provider, trim=False)
        except Exception:
            log.exception("stm-memory: placing the nudge failed; sending the input as is")
            return list(messages)
        return placed

    def keep_exchange(self, exchange: Sequence[BaseMessage], *, answer_included: bool) -> None:
        """For the chain wrapper: the memory exchange it ran this turn, stored in place
        of the last AI message the chain returns (``answer_included``: that answer is
        part of ``exchange``; else it follows it)."""
        with self._lock:
            if self._open is not None:
                self._open.exchange = list(exchange)
                self._open.answer_in_exchange = answer_included

    def _run_call(
        self, turn: TurnContext, call: Mapping[str, Any], *, truncated: bool
    ) -> Generator[Op, Any, ToolMessage]:
        result = yield from run_memory_call(
            self.memory, turn, call.get("args"), truncated=truncated
        )
        return memory_result(call, result)

    # -- bodies (sync and async share them: generators of Op) ---------------------------

    def _turn_steps(self) -> Generator[Op, Any, _Turn]:
        with self._lock:
            if self._open is not None:
                return self._open
        m = self.memory
        turn = yield from attempt(
            op(m.begin_turn, m.abegin_turn, self.scope, provider=self.provider),
            "beginning the turn",
        )
        context: Any = None
        if turn is not None:
            context = yield from attempt(
                op(m.build_context, m.abuild_context, turn), "assembling memory"
            )
        opened = _Turn(turn, context if isinstance(context, MemoryContext) else MemoryContext())
        with self._lock:
            if self._open is None:  # a concurrent reader may have opened it first
                self._open = opened
            return self._open

    def _abandon_steps(self, state: _Turn) -> Generator[Op, Any, None]:
        """End ``state``'s turn, uncaptured, if it is still open: its run failed (or
        never reached ``add_messages``). It counted as a turn, as in the loops, whose
        turn ends when the model call raises."""
        with self._lock:
            if self._open is not state:
                return
            self._open = None
        turn = state.turn
        if turn is not None:
            m = self.memory
            yield from attempt(op(m.end_turn, m.aend_turn, turn), "ending the turn")

    def _view_steps(self) -> Generator[Op, Any, list[BaseMessage]]:
        record = list((yield op(lambda: self.record.messages, self.record.aget_messages)))
        state = yield from self._turn_steps()
        with self._lock:
            if state.view is None or state.seen is None or len(state.seen) != len(record):
                state.view = self._place(record, state)
                state.seen = record
            state.known = record
            return list(state.view)

    def _place(self, record: list[BaseMessage], state: _Turn) -> list[BaseMessage]:
        # The nudge waits for the user's message (see the module docstring).
        context = state.context.for_request(
            role=self.memory_role, trim=self.trim_history, nudge=False
        )
        state.view_provider = self.provider
        if context.is_empty:
            return record
        try:
            placed = context.apply(
                [*record, HumanMessage("", id=_STAND_IN)], provider=self.provider
            )
        except Exception:
            log.exception("stm-memory: placing memory in the history failed; sending it whole")
            return record
        view: list[BaseMessage] = []
        for message in placed:
            if getattr(message, "id", None) != _STAND_IN:
                view.append(message)
            elif text_of(message):  # memory merged into the upcoming user turn
                view.append(HumanMessage(message.content))
        return view

    def _add_steps(self, messages: Sequence[BaseMessage]) -> Generator[Op, Any, None]:
        added = [_settled(m) for m in messages]
        user_text = next(
            (
                text_of(m)
                for m in reversed(added)
                if isinstance(m, HumanMessage) and not is_summary_message(m)
            ),
            None,
        )
        state = yield from self._turn_steps()
        turn = state.turn
        if turn is not None:
            self.memory.note_user_message(turn, user_text)
        ai_at = next((i for i in range(len(added) - 1, -1, -1) if _is_ai(added[i])), None)
        if ai_at is not None and state.exchange is not None:
            kept = [] if state.answer_in_exchange else [added[ai_at]]
            added[ai_at : ai_at + 1] = [*state.exchange, *kept]
        stored = yield from self._apply_calls(turn, added)
        record = self.record
        yield op(record.add_messages, record.aadd_messages, stored)
        with self._lock:
            if state.known is not None:
                state.known = [*state.known, *stored]
        if ai_at is None:
            return  # the user's message alone: the turn goes on
        with self._lock:
            if self._open is state:
                self._open = None
        if turn is None:
            return
        if state.known is not None:  # the record as this turn read it, plus what it added
            full = state.known
        else:
            full = list((yield op(lambda: record.messages, record.aget_messages)))
        yield from self._capture(full, len(full) - len(stored))
        m = self.memory
        yield from attempt(op(m.end_turn, m.aend_turn, turn), "ending the turn")

    def _apply_calls(
        self, turn: TurnContext | None, added: list[BaseMessage]
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
                if call.get("id") in answered:
                    continue
                if turn is None:
                    result = memory_result(call, _unavailable())
                else:
                    result = yield from self._run_call(turn, call, truncated=cut_short(message))
                out.append(result)
        return out

    def _capture(self, full: list[BaseMessage], start: int) -> Generator[Op, Any, None]:
        m, scope = self.memory, self.scope
        start = max(0, min(start, len(full)))
        tail_from = _dialogue_tail(full, start, m.limits.messages_kept)
        tail = full[tail_from:]
        start -= tail_from
        previous: Any = None
        if tail_from == 0 and needs_previous(tail, start):
            previous = yield from attempt(op(m.get, m.aget, scope), "reading memory")
        dialogue = dialogue_for_capture(tail, start, previous.messages if previous else ())
        yield from attempt(op(m.capture, m.acapture, scope, dialogue), "capturing dialogue")

    # -- factory ---------------------------------------------------------------------------

    @classmethod
    def factory(
        cls,
        memory: ShortTermMemory,
        *,
        keys: Sequence[str] = ("session_id",),
        scope: Callable[..., Scope] | None = None,
        history: Callable[..., BaseChatMessageHistory] | None = None,
        **options: Any,
    ) -> ShortTermMemoryHistoryFactory:
        """A ``get_session_history`` for ``RunnableWithMessageHistory`` (see
        :class:`ShortTermMemoryHistoryFactory`)."""
        from ._factory import ShortTermMemoryHistoryFactory  # it builds histories

        return ShortTermMemoryHistoryFactory(
            memory, keys=keys, scope=scope, history=history, **options
        )


def _unavailable() -> dict[str, Any]:
    return failure("Short-term memory is not available in this conversation.")


def _dialogue_tail(full: Sequence[BaseMessage], start: int, kept: int) -> int:
    """Where to start reading the record for capture: early enough to hold ``kept``
    dialogue messages before this turn (capture keeps only the last ones)."""
    seen = 0
    for i in range(start - 1, -1, -1):
        if is_dialogue(full[i]):
            seen += 1
            if seen >= kept:
                return i
    return 0

"""The strategies compared: each is fed the same conversation, one turn at a time, and
says what it sent, what came back and what the answer was.

- ``stm-loop``: ours through the provider loop (``OpenAIChatLoop``, or ``AnthropicLoop``
  for an Anthropic model), the caller feeding each channel's ``result.messages`` back.
- ``stm-middleware``: ours through ``create_agent`` + ``ShortTermMemoryMiddleware``,
  one checkpointer thread per channel.
- ``stm-writer``: the middleware with ``writer=`` the same chat model (called with a
  plain prompt at the cadence: its calls are the extra LLM calls), for a model that
  cannot write through the tool (``scripted:textcalls``); not run unless named.
- ``full-history``: the system prompt and the channel's whole dialogue every turn.
- ``full-server``: every channel's dialogue in one prompt (each message tagged with its
  channel), the ceiling for cross-channel recall at the highest cost.
- ``summarization``: ``create_agent`` + LangChain ``SummarizationMiddleware``, its
  summarizer being the same model (its calls are the extra LLM calls).
- ``window``: the system prompt and the last N turns of the channel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stm_memory.evaluation._conversation import ConversationSet, Utterance
from stm_memory.evaluation._models import ResolvedModel
from stm_memory.evaluation._recording import (
    LangChainRecorder,
    RecordedCall,
    RecordedRequest,
    RecordedTurn,
    output_tokens_of,
)
from stm_memory.kit import Usage
from stm_memory.model import Scope

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.model import MemoryEntry
    from stm_memory.testing.clock import FrozenClock

__all__ = ["DEFAULT_STRATEGIES", "STRATEGIES", "Strategy", "StrategyOptions", "open_strategy"]

#: key → label, in report order.
STRATEGIES: Mapping[str, str] = {
    "stm-loop": "stm-memory, provider loop",
    "stm-middleware": "stm-memory, create_agent middleware",
    "stm-writer": "stm-memory, middleware + writer= (same model)",
    "full-history": "full history (per channel)",
    "full-server": "full history (whole server)",
    "summarization": "LangChain SummarizationMiddleware",
    "window": "last N turns (per channel)",
}
#: Every strategy but ``stm-writer`` (an opt-in that makes model calls of its own).
DEFAULT_STRATEGIES: tuple[str, ...] = tuple(k for k in STRATEGIES if k != "stm-writer")


@dataclass(frozen=True, slots=True, kw_only=True)
class StrategyOptions:
    """Knobs of the strategies (keyword-only)."""

    window_turns: int = 6
    refresh_cadence: int | None = None  # None: the server default
    summarization_trigger_tokens: int = 1000
    summarization_keep_messages: int = 8
    # The prompt-cache retention our loop's requests ask for (OpenAI
    # ``prompt_cache_retention``: "24h"), as a careful user pricing with that profile
    # would; the runner sets it from the cache profile. None: the provider's default.
    cache_retention: str | None = None


class Unavailable(Exception):
    """This strategy cannot run with this model (the reason is the message)."""


class Strategy:
    """One strategy over one conversation: ``turn`` per utterance, then ``close``."""

    key: str

    def turn(self, utterance: Utterance, at: datetime) -> RecordedTurn:
        raise NotImplementedError

    def memory_entries(self) -> tuple[MemoryEntry, ...] | None:
        """Each channel's live memory entry now (a channel without one is left out);
        None for a strategy that keeps no memory. Read before :meth:`close`."""
        return None

    def close(self) -> None:
        """Release what the strategy opened (memory stores, clients)."""


def _scope(conversation: ConversationSet, u: Utterance) -> Scope:
    return Scope(
        channel_id=u.channel,
        user_id=u.user_id,
        server_id=conversation.server_id,
        channel_name=u.channel,
        server_name=conversation.server_name,
        user_name=u.user_name,
    )


def _open_memory(
    workdir: Path, clock: FrozenClock, conversation: ConversationSet, options: StrategyOptions
) -> ShortTermMemory:
    from stm_memory.engine import ShortTermMemory

    workdir.mkdir(parents=True, exist_ok=True)
    memory = ShortTermMemory.from_url(
        f"sqlite:///{workdir / 'stm.db'}", cache_dir=workdir / "cache", clock=clock
    )
    settings: dict[str, Any] = {"render_mode": "supersede"}
    if options.refresh_cadence is not None:
        settings["refresh_cadence"] = options.refresh_cadence
    memory.configure_server(conversation.server_id, **settings)
    return memory


def _live_entries(
    memory: ShortTermMemory, conversation: ConversationSet
) -> tuple[MemoryEntry, ...]:
    # A channel's live entry is its server key's, whoever the user (Scope.live_key).
    speaker = conversation.speakers[0]
    entries = []
    for channel in conversation.channels:
        scope = Scope(
            channel_id=channel,
            user_id=speaker.user_id,
            server_id=conversation.server_id,
            channel_name=channel,
            server_name=conversation.server_name,
            user_name=speaker.name,
        )
        entry = memory.get(scope)
        if entry is not None:
            entries.append(entry)
    return tuple(entries)


def _refreshes(memory: ShortTermMemory, scope: Scope) -> int:
    entry = memory.get(scope)
    return entry.last_refreshed_turn if entry is not None else 0


def _turn_from_calls(
    u: Utterance, at: datetime, calls: list[RecordedCall], answer: str, written: bool
) -> RecordedTurn:
    main = [c for c in calls if not c.side]
    side = [c for c in calls if c.side]
    reported = Usage()
    for call in calls:
        reported = reported + call.reported
    return RecordedTurn(
        index=u.index,
        channel=u.channel,
        at=at,
        requests=tuple(c.request for c in main),
        side_requests=tuple(c.request for c in side),
        output_tokens=sum(c.output_tokens for c in main),
        side_output_tokens=sum(c.output_tokens for c in side),
        reported=reported,
        answer=answer,
        memory_written=written,
    )


# -- ours, provider loop ---------------------------------------------------------------


class _LoopStrategy(Strategy):
    key = "stm-loop"

    def __init__(
        self,
        conversation: ConversationSet,
        model: ResolvedModel,
        workdir: Path,
        clock: FrozenClock,
        options: StrategyOptions,
    ) -> None:
        if model.loop_factory is None:
            raise Unavailable("needs an OpenAI or Anthropic model (a client for our loop)")
        self.conversation, self.clock = conversation, clock
        self.memory = _open_memory(workdir, clock, conversation, options)
        asked = (
            {"prompt_cache_retention": options.cache_retention}
            if options.cache_retention and model.provider != "anthropic"
            else {}
        )
        self.loop = model.loop(conversation, self.memory, **asked)
        self.api = "anthropic" if model.provider == "anthropic" else "openai_chat"
        self.transcripts: dict[str, list[Any]] = {c: [] for c in conversation.channels}

    def turn(self, u: Utterance, at: datetime) -> RecordedTurn:
        scope = _scope(self.conversation, u)
        message: dict[str, Any] = {"role": "user", "content": u.text}
        if self.api == "openai_chat":
            message["name"] = u.user_name  # Messages has no speaker names
        history = self.transcripts[u.channel]
        before = _refreshes(self.memory, scope)
        result = self.loop.run_turn(
            scope, [*history, message], system=self.conversation.system_prompt
        )
        added = result.messages[len(history) :]
        self.transcripts[u.channel] = list(result.messages)
        return RecordedTurn(
            index=u.index,
            channel=u.channel,
            at=at,
            requests=tuple(RecordedRequest(self.api, r) for r in result.requests),
            output_tokens=sum(_loop_output(m) for m in added),
            reported=result.usage,
            answer=result.text,
            memory_written=_refreshes(self.memory, scope) > before,
        )

    def memory_entries(self) -> tuple[MemoryEntry, ...]:
        return _live_entries(self.memory, self.conversation)

    def close(self) -> None:
        self.memory.close()


def _loop_output(message: Any) -> int:
    """Output tokens of one assistant message a loop added (Chat or Messages shape)."""
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return 0
    content = message.get("content")
    if isinstance(content, list):  # Anthropic blocks
        text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        args = [b.get("input") or {} for b in content if b.get("type") == "tool_use"]
        return output_tokens_of(text, args)
    calls = message.get("tool_calls") or []
    return output_tokens_of(str(content or ""), [c["function"]["arguments"] for c in calls])


# -- LangChain strategies --------------------------------------------------------------


class _ChatStrategy(Strategy):
    """A strategy that talks to a LangChain chat model, recorded by callbacks."""

    def __init__(self, conversation: ConversationSet, model: ResolvedModel) -> None:
        chat = model.chat(conversation)
        if chat is None:
            raise Unavailable("needs a LangChain chat model (langchain-openai / -anthropic)")
        self.chat = chat
        self.conversation = conversation
        self.recorder = LangChainRecorder(model.model_name)


class _AgentStrategy(_ChatStrategy):
    """``create_agent`` with a checkpointer thread per channel and one middleware."""

    def __init__(
        self,
        conversation: ConversationSet,
        model: ResolvedModel,
        *,
        key: str,
        middleware: Callable[[Any], Any],
        memory: ShortTermMemory | None = None,
        retention: str | None = None,
    ) -> None:
        super().__init__(conversation, model)
        if retention is not None and hasattr(self.chat, "model_kwargs"):
            # The retention the run is priced with, asked as the loop asks it (a careful
            # user's): the middleware prices what it shows, and when the tool leaves, by it.
            kwargs = {**self.chat.model_kwargs, "prompt_cache_retention": retention}
            self.chat = self.chat.model_copy(update={"model_kwargs": kwargs})
        from langchain.agents import create_agent
        from langgraph.checkpoint.memory import InMemorySaver

        self.key, self.memory = key, memory
        self.agent: Any = create_agent(
            model=self.chat,
            system_prompt=conversation.system_prompt,
            middleware=[middleware(self.chat)],
            checkpointer=InMemorySaver(),
        )

    def turn(self, u: Utterance, at: datetime) -> RecordedTurn:
        from langchain_core.messages import AIMessage, HumanMessage

        configurable = {
            "thread_id": u.channel,
            "user_id": u.user_id,
            "server_id": self.conversation.server_id,
        }
        scope = _scope(self.conversation, u)
        before = _refreshes(self.memory, scope) if self.memory else 0
        state = self.agent.invoke(
            {"messages": [HumanMessage(u.text, name=u.user_name)]},
            {"configurable": configurable, "callbacks": [self.recorder]},
        )
        replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
        answer = next((m.text for m in reversed(replies) if m.text), "")
        written = _refreshes(self.memory, scope) > before if self.memory else False
        return _turn_from_calls(u, at, self.recorder.take(), answer, written)

    def memory_entries(self) -> tuple[MemoryEntry, ...] | None:
        return _live_entries(self.memory, self.conversation) if self.memory else None

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()


def _middleware_strategy(
    conversation: ConversationSet,
    model: ResolvedModel,
    workdir: Path,
    clock: FrozenClock,
    options: StrategyOptions,
    *,
    writer: bool = False,
) -> Strategy:
    from stm_memory_langchain import ShortTermMemoryMiddleware

    if model.chat_factory is None:
        raise Unavailable("needs a LangChain chat model")
    memory = _open_memory(workdir, clock, conversation, options)
    retention = options.cache_retention if model.provider != "anthropic" else None

    def middleware(chat: Any) -> Any:
        # writer=: the same model, asked with a plain prompt (its calls are side calls).
        return ShortTermMemoryMiddleware(memory, writer=chat if writer else None)

    return _AgentStrategy(
        conversation,
        model,
        key="stm-writer" if writer else "stm-middleware",
        middleware=middleware,
        memory=memory,
        retention=retention,
    )


def _summarization_strategy(
    conversation: ConversationSet,
    model: ResolvedModel,
    workdir: Path,
    clock: FrozenClock,
    options: StrategyOptions,
) -> Strategy:
    from langchain.agents.middleware import SummarizationMiddleware

    def middleware(chat: Any) -> Any:
        # The same model summarizes, as a user of the middleware would configure it.
        return SummarizationMiddleware(
            model=chat,
            trigger=("tokens", options.summarization_trigger_tokens),
            keep=("messages", options.summarization_keep_messages),
        )

    return _AgentStrategy(conversation, model, key="summarization", middleware=middleware)


class _HistoryStrategy(_ChatStrategy):
    """The chat model called directly with a history the caller keeps."""

    def __init__(
        self,
        conversation: ConversationSet,
        model: ResolvedModel,
        *,
        key: str,
        window: int | None,
        server_wide: bool,
    ) -> None:
        super().__init__(conversation, model)
        self.key, self.window, self.server_wide = key, window, server_wide
        self.histories: dict[str, list[Any]] = {}

    def turn(self, u: Utterance, at: datetime) -> RecordedTurn:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        history = self.histories.setdefault("*" if self.server_wide else u.channel, [])
        text = f"[#{u.channel}] {u.text}" if self.server_wide else u.text
        message = HumanMessage(text, name=u.user_name)
        shown = history[-2 * self.window :] if self.window else history
        prompt = [SystemMessage(self.conversation.system_prompt), *shown, message]
        reply = self.chat.invoke(prompt, {"callbacks": [self.recorder]})
        answer = reply.text if isinstance(reply, AIMessage) else str(reply.content)
        history += [message, AIMessage(answer)]
        return _turn_from_calls(u, at, self.recorder.take(), answer, False)


def open_strategy(
    key: str,
    conversation: ConversationSet,
    model: ResolvedModel,
    *,
    workdir: Path,
    clock: FrozenClock,
    options: StrategyOptions,
) -> Strategy:
    """A strategy ready for the first turn; raises :class:`Unavailable` when the model
    cannot serve it."""
    if key == "stm-loop":
        return _LoopStrategy(conversation, model, workdir, clock, options)
    if key in ("stm-middleware", "stm-writer"):
        return _middleware_strategy(
            conversation, model, workdir, clock, options, writer=key == "stm-writer"
        )
    if key == "summarization":
        return _summarization_strategy(conversation, model, workdir, clock, options)
    if key == "full-history":
        return _HistoryStrategy(conversation, model, key=key, window=None, server_wide=False)
    if key == "full-server":
        return _HistoryStrategy(conversation, model, key=key, window=None, server_wide=True)
    if key == "window":
        return _HistoryStrategy(
            conversation, model, key=key, window=options.window_turns, server_wide=False
        )
    raise ValueError(f"unknown strategy {key!r}; one of {sorted(STRATEGIES)}")

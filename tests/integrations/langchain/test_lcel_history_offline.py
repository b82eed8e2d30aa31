"""``ShortTermMemoryHistory`` and ``with_short_term_memory`` with the offline chat model
(no provider, no cassette): the record, the memory call in ``add_messages``, the
factory's keys, ``clear``, a chain with an output parser, the wrapper running the
turn itself without ``RunnableWithMessageHistory``, failed runs, the nudge placed
after the user's message is known, and the errors of a wrong set-up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors
from langchain_anthropic import ChatAnthropic
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory import TOOL_NAME, ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.testing.chat_model import OfflineChatModel
from stm_memory.testing.clock import FrozenClock
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory
from stm_memory_langchain._record import MessageRecord
from tests.integrations.conftest import at_counted_cadence


@pytest.fixture
def stm_memory(stm_memory: ShortTermMemory) -> ShortTermMemory:
    """The testing kit's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return at_counted_cadence(stm_memory)


pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")


def text(i: int) -> str:
    return f"Turn {i}: the heroine meets character {i}."


def memory_call(summary: str, call_id: str = "call_m") -> AIMessage:
    return AIMessage(
        "Noted.", tool_calls=[{"name": TOOL_NAME, "args": {"summary": summary}, "id": call_id}]
    )


def results(record: list[BaseMessage]) -> list[dict[str, Any]]:
    return [json.loads(str(m.content)) for m in record if isinstance(m, ToolMessage)]


def test_add_messages_applies_a_memory_call_and_the_next_view_drops_it(
    stm_memory: ShortTermMemory, stm_clock: FrozenClock
) -> None:
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    assert history.messages == []
    history.add_messages([HumanMessage("The heist is on Friday."), memory_call("Heist: Friday.")])

    assert results(history.record.messages) == [{"status": "completed"}]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."
    assert entry.turns_since_refresh == 0  # the turn that refreshed ends at 0
    stm_clock.advance(hours=1)  # the prompt cache lapsed: the next view shows the memory
    view = history.messages
    assert earlier_memory_calls([*view, HumanMessage("next")]) == 0
    assert validity_errors("langchain", view) == []
    assert any(CONTENT_HEADER in m.text and "Heist: Friday." in m.text for m in view)
    assert history.messages == view  # read twice in one turn: the same list


def nudged(prompt: list[BaseMessage]) -> bool:
    """The prompt asks the model to call the memory tool (the nudge)."""
    return any(f"call {TOOL_NAME}" in m.text for m in prompt if not isinstance(m, AIMessage))


def history_chain(model: Any, get_history: Any) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "sys"), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    return RunnableWithMessageHistory(
        with_short_term_memory(prompt | model),
        get_history,
        input_messages_key="input",
        history_messages_key="history",
    )


def test_a_plain_chain_without_the_tool_is_never_nudged(stm_memory: ShortTermMemory) -> None:
    model = OfflineChatModel()
    chain = RunnableWithMessageHistory(model, lambda session_id: history)
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    for i in range(5):
        chain.invoke(text(i), {"configurable": {"session_id": "c1"}})
    # The nudge is due (the cadence of 5 is reached), but this model has no tool to call.
    assert stm_memory.build_context(stm_memory.begin_turn(SCOPE)).nudge is not None
    assert not any(nudged(prompt) for prompt in model.prompts)
    assert all(names == [] for names in model.tools_seen)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 5
    assert [m.content for m in entry.messages][-2:] == [text(4), "Understood: " + text(4)]
    # A history that places the memory in its view is refused by the wrapper, which
    # places it too; a raw one over the same record: the tool is bound, the nudge sent.
    with pytest.raises(ConfigurationError, match="raw=True"):
        history_chain(model, lambda session_id: history).invoke(
            {"input": text(5)}, {"configurable": {"session_id": "c1"}}
        )
    raw = ShortTermMemoryHistory(stm_memory, SCOPE, history=history.record, raw=True)
    wrapped = history_chain(model, lambda session_id: raw)
    wrapped.invoke({"input": text(5)}, {"configurable": {"session_id": "c1"}})
    assert nudged(model.prompts[-1]) and model.tools_seen[-1] == [TOOL_NAME]


def test_a_raw_history_under_a_chain_without_the_wrapper_says_its_model_got_no_memory(
    stm_memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    stm_memory.update(stm_memory.begin_turn(SCOPE), {"summary": "The heist is on Friday."})
    history = ShortTermMemoryHistory(stm_memory, SCOPE, raw=True)
    model = OfflineChatModel()
    chain = RunnableWithMessageHistory(model, lambda session_id: history)
    caplog.set_level("WARNING", logger="stm_memory")
    chain.invoke("When is the heist?", {"configurable": {"session_id": "c1"}})
    assert CONTENT_HEADER not in str(model.prompts[-1])  # the record, as it is
    assert any("with_short_term_memory" in r.getMessage() for r in caplog.records)


def test_a_history_built_for_each_call_is_nudged_and_writes_the_memory(
    stm_memory: ShortTermMemory,
) -> None:
    # The usual get_session_history: a new history object per call over a kept record.
    records: dict[str, MessageRecord] = {}

    def get_history(session_id: str) -> ShortTermMemoryHistory:
        record = records.setdefault(session_id, MessageRecord())
        return ShortTermMemoryHistory(stm_memory, SCOPE, history=record, raw=True)

    model = OfflineChatModel()
    chain = history_chain(model, get_history)
    for i in range(12):
        chain.invoke({"input": text(i)}, {"configurable": {"session_id": "c1"}})
    assert sum(map(nudged, model.prompts)) == 2  # turns 5 and 11 (cadence 5)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.last_refreshed_turn == 2 and entry.summary
    assert entry.turns_since_refresh == 0


def test_the_nudge_waits_for_the_users_message(stm_memory: ShortTermMemory) -> None:
    stm_memory.configure_server("g1", refresh_cadence=1)
    model = OfflineChatModel()
    factory = ShortTermMemoryHistory.factory(stm_memory, user_id="u1", server_id="g1", raw=True)
    chain = history_chain(model, factory)
    config: Any = {"configurable": {"session_id": "c1"}}
    chain.invoke({"input": "Hello."}, config)
    chain.invoke({"input": "Please remember that I hate the sea."}, config)
    # Due (cadence 1), but the tool is gone in a "remember this" turn: so is the nudge.
    assert model.tools_seen[-1] == [] and not nudged(model.prompts[-1])
    chain.invoke({"input": "What next?"}, config)
    assert model.tools_seen[-1] == [TOOL_NAME] and nudged(model.prompts[-1])
    # The nudge is in the request only, never in the record or the history's view.
    assert not nudged(factory("c1").record.messages) and not nudged(factory("c1").messages)


class Flaky(OfflineChatModel):
    """Raises on its next ``fail`` calls, then answers as the offline model."""

    fail: int = 0

    def _check(self) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("provider down")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._check()
        return super()._generate(messages, stop, run_manager, **kwargs)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self._check()
        yield from super()._stream(messages, stop, run_manager, **kwargs)


async def call(chain: Any, value: Any, config: Any, mode: str) -> Any:
    if mode == "invoke":
        return chain.invoke(value, config)
    if mode == "ainvoke":
        return await chain.ainvoke(value, config)
    if mode == "stream":
        return list(chain.stream(value, config))
    return [c async for c in chain.astream(value, config)]


MODES = ["invoke", "ainvoke", "stream", "astream"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failed_model_call_ends_its_turn(mode: str, stm_memory: ShortTermMemory) -> None:
    model = Flaky()
    factory = ShortTermMemoryHistory.factory(stm_memory, user_id="u1", server_id="g1", raw=True)
    chain = history_chain(model, factory)
    config: Any = {"configurable": {"session_id": "c1"}}
    await call(chain, {"input": "Hello."}, config, mode)
    model.fail = 1
    with pytest.raises(RuntimeError, match="provider down"):
        await call(chain, {"input": "Hello again."}, config, mode)
    assert factory("c1").turn is None  # ended, as the loops end a failed turn
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2
    # The retry is a turn of its own, with its own user message for the guards.
    await call(chain, {"input": "Please remember that I hate the sea."}, config, mode)
    assert model.tools_seen[-1] == []
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 3
    assert [m.content for m in factory("c1").record.messages if isinstance(m, HumanMessage)] == [
        "Hello.",
        "Please remember that I hate the sea.",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failed_call_without_a_history_is_still_a_turn(
    mode: str, stm_memory: ShortTermMemory
) -> None:
    model = Flaky(fail=1)
    chain = with_short_term_memory(model, stm_memory, scope=SCOPE)
    with pytest.raises(RuntimeError):
        await call(chain, [HumanMessage("Hello.")], {}, mode)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 1


def test_a_chain_that_fails_after_the_model_ends_the_turn_at_the_next_input(
    stm_memory: ShortTermMemory,
) -> None:
    failures = [1]

    def parser(message: BaseMessage) -> str:
        if failures:
            failures.pop()
            raise ValueError("cannot parse")
        return message.text

    model = OfflineChatModel()
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    factory = ShortTermMemoryHistory.factory(stm_memory, user_id="u1", server_id="g1", raw=True)
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | model) | RunnableLambda(parser),
        factory,
        input_messages_key="q",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "c1"}}
    with pytest.raises(ValueError):
        chain.invoke({"q": "Hello."}, config)
    assert factory("c1").turn is not None  # the model answered; add_messages never came
    answer = chain.invoke({"q": "Please remember that I hate the sea."}, config)
    assert answer == "Understood: Please remember that I hate the sea."
    assert model.tools_seen == [[TOOL_NAME], []]  # the new input's own guard
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2
    assert factory("c1").turn is None


def test_a_memory_call_alone_at_the_last_step_is_still_run(
    stm_memory: ShortTermMemory,
) -> None:
    class MemoryOnly(OfflineChatModel):
        def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            self.prompts.append(list(messages))
            call = {"name": TOOL_NAME, "args": {"summary": "Heist: Friday."}, "id": "m1"}
            return ChatResult(
                generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))]
            )

    model = MemoryOnly()
    chain = with_short_term_memory(model, stm_memory, scope=SCOPE, max_steps=1)
    reply = chain.invoke([HumanMessage("The heist is on Friday.")])
    assert isinstance(reply, AIMessage) and reply.tool_calls == [] and reply.text == ""
    assert len(model.prompts) == 1
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."


def test_memory_placed_before_the_model_was_known_moves_for_anthropic(
    stm_memory: ShortTermMemory,
) -> None:
    """A history built per call is read before the chain's model is known; the wrapper
    places the memory for the model's provider: Anthropic takes it in user turns."""
    payloads: list[dict[str, Any]] = []

    class Recording(ChatAnthropic):
        def _generate(self, messages: list[BaseMessage], *a: Any, **k: Any) -> ChatResult:
            payloads.append(self._get_request_payload(messages, **k))
            return ChatResult(generations=[ChatGeneration(message=AIMessage("Noted."))])

    turn = stm_memory.begin_turn(SCOPE, user_message="x")
    stm_memory.update(turn, {"summary": "The heist is on Friday."})
    stm_memory.end_turn(turn)
    record = MessageRecord([HumanMessage("The heist is on Friday."), AIMessage("Friday it is.")])
    model = Recording(model="claude-haiku-4-5", api_key="test")  # type: ignore[call-arg]
    history = ShortTermMemoryHistory(stm_memory, SCOPE, history=record, raw=True)
    chain = history_chain(model, lambda session_id: history)
    chain.invoke({"input": "And the car?"}, {"configurable": {"session_id": "c1"}})
    sent = payloads[0]
    assert "Friday" in json.dumps(sent["messages"])  # the memory, in a user turn
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]


def test_a_wrong_set_up_is_refused_at_once(stm_memory: ShortTermMemory) -> None:
    model = OfflineChatModel()
    with pytest.raises(ConfigurationError, match="scope must be a Scope"):
        with_short_term_memory(model, stm_memory, scope="c1")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="memory="):
        with_short_term_memory(model, scope=SCOPE)
    with pytest.raises(ConfigurationError, match="cache_hints"):
        with_short_term_memory(model, stm_memory, cache_hints="yes")  # type: ignore[arg-type]
    # What the factory is built with is configuration.
    with pytest.raises(ConfigurationError, match="memory must be a ShortTermMemory"):
        ShortTermMemoryHistory.factory("not-a-memory", user_id="u1")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown option"):
        ShortTermMemoryHistory.factory(stm_memory, user="u1")
    with pytest.raises(ConfigurationError, match="memory_role"):
        ShortTermMemoryHistory.factory(stm_memory, user_id="u1", memory_role="admin")
    with pytest.raises(ConfigurationError, match="provider"):
        ShortTermMemoryHistory.factory(stm_memory, user_id="u1", provider="")
    with pytest.raises(ConfigurationError, match="provider"):
        ShortTermMemoryHistory(stm_memory, SCOPE, provider=3)  # type: ignore[arg-type]
    # Called without a history and without a scope: an error naming the fix, not a
    # warning and a silent call without memory.
    chain = with_short_term_memory(model, stm_memory)
    with pytest.raises(ValidationError, match="with_short_term_memory: no user_id") as info:
        chain.invoke([HumanMessage("hi")])
    assert "middleware" not in str(info.value)
    assert model.prompts == []
    # A resolver that declines is a deliberate "no memory here".
    declined = with_short_term_memory(model, stm_memory, scope=lambda runtime, config: None)
    assert declined.invoke([HumanMessage("hi")]).text == "Understood: hi"


def test_the_factory_builds_the_scope_from_the_configured_keys(
    stm_memory: ShortTermMemory,
) -> None:
    factory = ShortTermMemoryHistory.factory(
        stm_memory, keys=("user_id", "channel_id"), server_id="g1", raw=True
    )
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | OfflineChatModel() | StrOutputParser()),
        factory,
        input_messages_key="question",
        history_messages_key="history",
        history_factory_config=factory.config_specs,
    )
    config: Any = {"configurable": {"user_id": "u7", "channel_id": 42}}
    answer = chain.invoke({"question": "Where is the map?"}, config)

    assert answer == "Understood: Where is the map?"
    assert factory("u7", 42) is factory(user_id="u7", channel_id=42)
    entry = stm_memory.get(Scope(channel_id="42", user_id="u7", server_id="g1"))
    assert entry is not None and [m.content for m in entry.messages] == [
        "Where is the map?",
        answer,
    ]
    with pytest.raises(ConfigurationError, match="keys"):
        ShortTermMemoryHistory.factory(stm_memory, keys=())


def test_a_factory_that_can_never_make_a_scope_fails_where_it_is_built(
    stm_memory: ShortTermMemory,
) -> None:
    # conversation_id names no channel (only channel_id, thread_id or session_id do).
    with pytest.raises(ConfigurationError, match="nothing gives it a channel") as info:
        ShortTermMemoryHistory.factory(stm_memory, keys=("user_id", "conversation_id"))
    assert "keys=" in str(info.value) and "scope=" in str(info.value)
    assert "middleware" not in str(info.value)
    with pytest.raises(ConfigurationError, match="nothing gives it a user_id "):
        ShortTermMemoryHistory.factory(stm_memory)  # session_id gives the channel, not the user
    with pytest.raises(ConfigurationError, match="a user_id or a channel"):
        ShortTermMemoryHistory.factory(stm_memory, keys=("conversation_id",), server_id="g1")
    # The same keys work once something names the channel, or scope= builds the Scope.
    ShortTermMemoryHistory.factory(stm_memory, keys=("user_id", "thread_id"))
    ShortTermMemoryHistory.factory(
        stm_memory, keys=("conversation_id",), user_id="u1", channel_id="c1"
    )
    built = ShortTermMemoryHistory.factory(
        stm_memory,
        keys=("user_id", "conversation_id"),
        scope=lambda user_id, conversation_id: Scope(channel_id=conversation_id, user_id=user_id),
    )
    assert built("u1", "c9").scope == Scope(channel_id="c9", user_id="u1")


def test_a_factory_call_without_a_scope_names_the_factorys_options(
    stm_memory: ShortTermMemory,
) -> None:
    factory = ShortTermMemoryHistory.factory(stm_memory, keys=("user_id", "channel_id"))
    with pytest.raises(ValidationError, match=r"ShortTermMemoryHistory\.factory") as info:
        factory(user_id="u1", channel_id=None)  # a configurable left unset
    message = str(info.value)
    assert "channel_id=None" in message and "keys=" in message and "scope=" in message
    assert "middleware" not in message


def test_clear_empties_the_record_and_forgets_the_channel(stm_memory: ShortTermMemory) -> None:
    history = ShortTermMemoryHistory(stm_memory, SCOPE)
    _ = history.messages
    history.add_messages([HumanMessage("The heist is on Friday."), memory_call("Friday.")])
    assert stm_memory.get(SCOPE) is not None
    history.clear()
    assert history.record.messages == [] and stm_memory.get(SCOPE) is None
    assert history.messages == []


async def test_the_wrapper_runs_the_turn_itself_without_a_history(
    stm_memory: ShortTermMemory,
) -> None:
    model = OfflineChatModel()
    chain = with_short_term_memory(model, stm_memory, scope=SCOPE)
    transcript: list[BaseMessage] = []
    for i in range(14):
        sent = [*transcript, HumanMessage(text(i))]
        if i % 2:
            reply = await chain.ainvoke(sent)
        else:
            reply = chain.invoke(sent)
        assert isinstance(reply, AIMessage) and reply.tool_calls == []
        transcript = [*sent, reply]
    prompts = model.prompts
    assert all(turn_count(p) <= 7 and earlier_memory_calls(p) == 0 for p in prompts)
    assert model.model.tool_calls_made == 2
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary and entry.last_refreshed_turn == 2
    assert any(entry.summary in m.text for m in prompts[-1])


def test_with_short_term_memory_needs_a_chat_model() -> None:
    with pytest.raises(ConfigurationError, match="chat model"):
        with_short_term_memory(StrOutputParser())


def test_the_factory_gives_every_history_the_open_model_options(
    stm_memory: ShortTermMemory,
) -> None:
    # A small open model on a chain: no tool, and a writer that writes for it.
    stm_memory.configure_server("g1", refresh_cadence=2)
    model = OfflineChatModel()
    asked: list[str] = []

    def writer(request: Any) -> str:
        asked.append(request.prompt)
        return "Ann hates the sea."

    factory = ShortTermMemoryHistory.factory(
        stm_memory, user_id="u1", server_id="g1", tool_calling=False, writer=writer, raw=True
    )
    assert factory("c1").options.tool_calling is False
    chain = history_chain(model, factory)
    config: Any = {"configurable": {"session_id": "c1"}}
    for text in ("Hello.", "I hate the sea.", "What next?"):
        chain.invoke({"input": text}, config)
    assert all(tools == [] for tools in model.tools_seen)
    assert len(asked) == 1 and "I hate the sea." in asked[0]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Ann hates the sea."

"""The turn's model in the LCEL history (SPEC §6, "the bill decides"; §8, the history
cut): a turn's one decision of what it shows is made knowing the chat model it is for,
in every entry point. The model's name chooses the rates the decision and the turn's
bill are priced at (``stm_memory.model.rates.profile_for``) and, for a hosted model, the
context window that bounds the history budget
(``stm_memory.endpoints.window.hosted_window``).

``create_agent``'s middleware names the model to the turn before its first request. The
LCEL chain (``with_short_term_memory`` over a ``ShortTermMemoryHistory``, under
``RunnableWithMessageHistory`` or called with its whole history) must decide the same way
for the same model: the same profile on every turn's bill, the same earlier turns cut.
Stated by parity with the middleware, on the same conversation and the same offline
model (named as a hosted one), not by numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.agents import AgentThread
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory import Scope, ShortTermMemory, TurnContext
from stm_memory.endpoints.window import history_budget, hosted_window
from stm_memory.model.rates import model_profile
from stm_memory.prompt.cut import earlier_turns, turn_tokens
from stm_memory.testing.chat_model import OfflineChatModel
from stm_memory.testing.contract.integration import hermetic_memory
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SYSTEM = "You are Quill, who plans the crew's trips."
# AgentThread's conversation: thread "c1" of user "u1" on server "g1".
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
#: A hosted model whose rates are not the default ones (openai-gpt-4o, not openai-gpt-5).
PRICED_MODEL = "gpt-4o"
#: A hosted model with a small context window (8,192 tokens: a history budget of 6,144).
SMALL_WINDOW_MODEL = "gpt-4"


def offline_named(name: str) -> OfflineChatModel:
    """The offline chat model, naming itself as a hosted chat model does
    (``ChatOpenAI(model=...).model_name``)."""

    class Hosted(OfflineChatModel):
        model_name: str = name

    return Hosted()


def short(i: int) -> str:
    return f"Leg {i}: from Kyoto to Nara by the morning train."


def long(i: int) -> str:
    """About 1,500 tokens: four of them fill a gpt-4's history budget."""
    return f"Leg {i}: " + " ".join(f"stop{i}_{j}" for j in range(600))


# -- the entry points: one conversation each, on the chat model given -----------------


def through_middleware(memory: ShortTermMemory, model: OfflineChatModel, texts: list[str]) -> None:
    thread = AgentThread(model, memory, thread_id=SCOPE.channel_id, system_prompt=SYSTEM)
    for text in texts:
        thread.say(text)


def through_history(memory: ShortTermMemory, model: OfflineChatModel, texts: list[str]) -> None:
    history = ShortTermMemoryHistory(memory, SCOPE, raw=True)
    prompt = ChatPromptTemplate.from_messages(
        [("system", SYSTEM), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | model),
        lambda _session: history,
        input_messages_key="input",
        history_messages_key="history",
    )
    for text in texts:
        chain.invoke({"input": text}, {"configurable": {"session_id": SCOPE.channel_id}})


def through_wrapper_alone(
    memory: ShortTermMemory, model: OfflineChatModel, texts: list[str]
) -> None:
    """The chain called with its whole history, no ``RunnableWithMessageHistory``: the
    wrapper runs the turn itself (a one-call ``ShortTermMemoryHistory``)."""
    chain = with_short_term_memory(model, memory, scope=SCOPE)
    conversation: list[BaseMessage] = [SystemMessage(SYSTEM)]
    for text in texts:
        asked = HumanMessage(text)
        reply = chain.invoke([*conversation, asked])
        assert isinstance(reply, AIMessage)
        conversation += [asked, reply]


Run = Callable[[ShortTermMemory, OfflineChatModel, list[str]], None]
LCEL: list[Any] = [
    pytest.param(through_history, id="RunnableWithMessageHistory"),
    pytest.param(through_wrapper_alone, id="wrapper-alone"),
]


@pytest.fixture
def memories(tmp_path: Path) -> Iterator[Callable[[str], ShortTermMemory]]:
    """Memories of their own (database, cache) per entry point: one conversation each."""
    opened: list[ShortTermMemory] = []

    def open_memory(name: str) -> ShortTermMemory:
        opened.append(hermetic_memory(tmp_path / name))
        return opened[-1]

    yield open_memory
    for memory in opened:
        memory.close()


def opened_turns(memory: ShortTermMemory, monkeypatch: pytest.MonkeyPatch) -> list[TurnContext]:
    """The engine's state of every turn ``memory`` begins (unchanged; each turn's
    ``bill`` is set when it ends)."""
    opened: list[TurnContext] = []
    begin = memory.begin_turn

    def recording(*args: Any, **kwargs: Any) -> TurnContext:
        state = begin(*args, **kwargs)
        opened.append(state)
        return state

    monkeypatch.setattr(memory, "begin_turn", recording)
    return opened


def billed_profiles(
    run: Run, memory: ShortTermMemory, monkeypatch: pytest.MonkeyPatch, texts: list[str]
) -> list[str | None]:
    turns = opened_turns(memory, monkeypatch)
    run(memory, offline_named(PRICED_MODEL), texts)
    assert len(turns) == len(texts)
    return [t.bill.profile if t.bill is not None else None for t in turns]


def users_sent(prompts: list[list[BaseMessage]]) -> list[list[str]]:
    """What the user said, as each request carried it (the turns the cut kept)."""
    return [[str(m.content) for m in p if isinstance(m, HumanMessage)] for p in prompts]


# -- the rates: the turn's decision and bill are priced at the model's ----------------


@pytest.mark.parametrize("run", LCEL)
def test_every_turn_of_the_lcel_history_is_billed_at_its_models_rates(
    run: Run, memories: Callable[[str], ShortTermMemory], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [short(i) for i in range(4)]
    expected = billed_profiles(through_middleware, memories("middleware"), monkeypatch, texts)
    known = model_profile(PRICED_MODEL)
    assert known is not None
    assert expected == [known.name] * len(texts)  # the rule, as the middleware keeps it

    billed = billed_profiles(run, memories("lcel"), monkeypatch, texts)

    assert billed == expected, (
        f"the LCEL turns were priced without their model {PRICED_MODEL!r}: "
        f"{billed} where the middleware's were {expected}"
    )


# -- the window: a hosted model's context bounds the history budget -------------------


@pytest.mark.parametrize("run", LCEL)
def test_the_lcel_history_is_cut_to_a_hosted_models_window(
    run: Run, memories: Callable[[str], ShortTermMemory]
) -> None:
    texts = [long(i) for i in range(6)]
    agent = offline_named(SMALL_WINDOW_MODEL)
    through_middleware(memories("middleware"), agent, texts)
    expected = users_sent(agent.prompts)
    # The setting holds: the middleware dropped the oldest turns once they outgrew the
    # window's budget (what the memory's own history_token_budget never would).
    assert expected[-1] != texts, "the conversation never outgrew the window"

    chain = offline_named(SMALL_WINDOW_MODEL)
    run(memories("lcel"), chain, texts)

    window = hosted_window(SMALL_WINDOW_MODEL)
    assert window is not None
    _, earlier, _ = earlier_turns(chain.prompts[-1])
    sent = sum(turn_tokens(t) for t in earlier)
    assert sent <= history_budget(window), (
        f"the LCEL chain sent {sent} tokens of earlier dialogue to {SMALL_WINDOW_MODEL!r}, "
        f"past its window's history budget of {history_budget(window)}"
    )
    assert users_sent(chain.prompts) == expected

"""What a server shares, as the docs say it (``docs/concepts/scopes.md``): the LCEL
and Agents SDK examples, run for two end users the way the docs recommend (no
``server_id``), never show one user's words to the other; the same examples with the
users' conversations grouped in one server do brief across them (the feature works where
it is wanted). Offline, through the real frameworks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory import Scope, ShortTermMemory
from stm_memory.testing import OfflineChatModel
from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

# RunnableWithMessageHistory is deprecated by LangChain; the docs' example still uses it.
pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

# Each user's own words, said in their own conversation first.
SECRET = {"u1": "My locker code is 4417.", "u2": "My allergy is to penicillin."}
LATER = {"u1": "What should I pack?", "u2": "Which clinic is open?"}


def seen(prompt: Any) -> str:
    return json.dumps(prompt, default=str)


def u1_wrote_its_memory(mem: ShortTermMemory, **scope_fields: Any) -> None:
    """u1's conversation has its memory written (by its model, or another agent of
    the app): a conversation whose memory was never written is sent no briefing on its
    own (stm_memory.prompt.quiet), so it is briefed at its next swap, which a write
    brings."""
    scope = Scope(channel_id="chat-u1", user_id="u1", **scope_fields)
    turn = mem.begin_turn(scope, provider="openai")
    assert mem.update(turn, {"summary": "u1 keeps gear in a locker."})["status"] == "completed"
    mem.end_turn(turn)


def lcel_prompts(mem: ShortTermMemory, **scope_fields: Any) -> dict[str, list[str]]:
    """The docs' LCEL example, for users u1 and u2 (one conversation each): what the
    model was sent in each user's turns."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a co-writer."), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    model = OfflineChatModel()
    histories = ShortTermMemoryHistory.factory(
        mem, keys=("user_id", "session_id"), raw=True, **scope_fields
    )
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | model),
        histories,
        input_messages_key="input",
        history_messages_key="history",
        history_factory_config=histories.config_specs,
    )
    sent: dict[str, list[str]] = {"u1": [], "u2": []}
    for said in (SECRET, LATER):
        if said is LATER:
            u1_wrote_its_memory(mem, **scope_fields)
        for user, text in said.items():
            config: Any = {"configurable": {"user_id": user, "session_id": f"chat-{user}"}}
            chain.invoke({"input": text}, config)
            sent[user].append(seen([m.content for m in model.prompts[-1]]))
    return sent


async def agents_prompts(mem: ShortTermMemory, **scope_fields: Any) -> dict[str, list[str]]:
    """The docs' Agents SDK example, for users u1 and u2: each model input."""
    from agents import Agent, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message

    from stm_memory_openai_agents import ShortTermMemorySession

    sent: dict[str, list[str]] = {"u1": [], "u2": []}
    sessions = {
        user: ShortTermMemorySession(
            mem, Scope(channel_id=f"chat-{user}", user_id=user, **scope_fields)
        )
        for user in sent
    }
    for said in (SECRET, LATER):
        if said is LATER:
            u1_wrote_its_memory(mem, **scope_fields)
        for user, text in said.items():
            model = ScriptedModel([[assistant_message("Noted.")]])
            agent = sessions[user].agent(Agent(name="Mira", instructions="Co-writer.", model=model))
            config = RunConfig(tracing_disabled=True)
            await Runner.run(agent, text, session=sessions[user], run_config=config)
            sent[user].append(seen(model.calls[-1].input))
    for session in sessions.values():
        session.close()
    return sent


@pytest.fixture(params=["lcel", "agents"])
def run_example(request: pytest.FixtureRequest) -> Any:
    if request.param == "lcel":

        async def lcel(mem: ShortTermMemory, **fields: Any) -> dict[str, list[str]]:
            return lcel_prompts(mem, **fields)

        return lcel
    return agents_prompts


async def test_end_users_without_a_server_never_see_each_others_words(
    stm_memory: ShortTermMemory, run_example: Any
) -> None:
    sent = await run_example(stm_memory)
    for user, other in (("u1", "u2"), ("u2", "u1")):
        # The example ran: each user's own words reach their own later turn.
        assert SECRET[user] in sent[user][1]
        for prompt in sent[user]:
            assert SECRET[other] not in prompt and LATER[other] not in prompt


async def test_a_server_briefs_its_channels_with_each_other(
    stm_memory: ShortTermMemory, run_example: Any
) -> None:
    sent = await run_example(stm_memory, server_id="g1")
    # u2's later turn is briefed with u1's channel, which spoke first (the briefing its
    # first turn was shown); u1's later turn with u2's (its memory written since: the
    # swap that shows it brings the briefings anew).
    assert SECRET["u1"] in sent["u2"][1]
    assert SECRET["u2"] in sent["u1"][1]


def test_the_docs_examples_are_the_ones_run_here() -> None:
    from tests.product.test_doc_blocks import page, read, section

    lcel = read(page("docs/entry-points/lcel.md"))
    agents = read(page("docs/entry-points/agents-sdk.md"))
    # The scopes the two examples above run, as the pages write them (no server_id).
    assert 'ShortTermMemoryHistory.factory(mem, keys=("user_id", "session_id"), raw=True)' in lcel
    assert 'scope = Scope(channel_id="c1", user_id="u1")\n' in agents
    assert "# What a server shares" in section(
        page("docs/concepts/scopes.md"), "What a server shares"
    )

"""``provider`` names the engine's provider exclusion; where memory is placed goes by
the chat model's own provider (what the request is). Naming a proxy for the exclusion
changes nothing the model is sent — before, ``provider`` decided placement too, and an
OpenAI model's nudge and briefings were joined to the user's message instead of going
as messages of their own, as every other OpenAI entry point sends them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from stm_memory.testing import OfflineChatModel
from stm_memory.testing.contract.integration import hermetic_memory
from stm_memory_langchain import (
    ShortTermMemoryHistory,
    ShortTermMemoryMiddleware,
    with_short_term_memory,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)
TEXTS = ["The dragon sleeps.", "It wakes at dawn.", "Bring rope.", "And a lantern."]


def offline_as(ls_provider: str) -> OfflineChatModel:
    """The offline model, naming itself as ChatOpenAI / ChatAnthropic do."""

    class Named(OfflineChatModel):
        def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
            return {**super()._get_ls_params(stop=stop, **kwargs), "ls_provider": ls_provider}

    return Named()


def shown(prompts: list[list[BaseMessage]]) -> list[list[tuple[str, str]]]:
    return [[(m.type, str(m.content)) for m in prompt] for prompt in prompts]


def middleware_prompts(tmp: Path, ls_provider: str, provider: str | None) -> list[Any]:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    mem = hermetic_memory(tmp)
    mem.configure_server("g1", refresh_cadence=1)  # a nudge from the second turn
    model = offline_as(ls_provider)
    agent = create_agent(
        model,
        tools=[],
        system_prompt="You are Quill.",
        middleware=[ShortTermMemoryMiddleware(mem, provider=provider)],
        checkpointer=InMemorySaver(),
    )
    for channel in ("lore", "c1"):  # c1 is briefed with #lore
        config: Any = {"configurable": {"thread_id": channel, "user_id": "u1", "server_id": "g1"}}
        for text in TEXTS:
            agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    mem.close()
    return shown(model.prompts)


def history_prompts(tmp: Path, ls_provider: str, provider: str | None) -> list[Any]:
    mem = hermetic_memory(tmp)
    mem.configure_server("g1", refresh_cadence=1)
    model = offline_as(ls_provider)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are Quill."), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    histories = ShortTermMemoryHistory.factory(
        mem, user_id="u1", server_id="g1", provider=provider, raw=True
    )
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | model),
        histories,
        input_messages_key="input",
        history_messages_key="history",
    )
    for channel in ("lore", "c1"):
        for text in TEXTS:
            chain.invoke({"input": text}, {"configurable": {"session_id": channel}})
    mem.close()
    return shown(model.prompts)


@pytest.mark.parametrize("run", [middleware_prompts, history_prompts])
@pytest.mark.parametrize("ls_provider", ["openai", "anthropic"])
def test_naming_a_provider_for_the_exclusion_changes_no_request(
    tmp_path: Path, run: Any, ls_provider: str
) -> None:
    plain = run(tmp_path / "plain", ls_provider, None)
    named = run(tmp_path / "named", ls_provider, "together")  # excluded by nobody
    assert any("update_short_term_memory" in str(p) for p in plain)  # nudged
    assert any("Other channels:" in str(p) for p in plain)  # briefed
    assert named == plain

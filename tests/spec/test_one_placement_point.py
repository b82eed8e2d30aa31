"""One placement point per entry point (the Agents SDK session): once ``agent()`` has
wrapped an agent, the memory is placed at the model call only, on the whole input, and
the run's first read returns the record as it is; a session used with plain agents keeps
its placed view. A plain agent run on a session that places at the model call is told."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from stm_memory import Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory.testing import OfflineModel, offline_openai_client
from stm_memory.testing.offline import OfflineReply
from stm_memory_openai_agents import ShortTermMemorySession

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
MEMORY = "The crew meets at the old mill on Friday."


@dataclass
class Seen(OfflineModel):
    """What each request carried: the texts of its dialogue."""

    dialogues: list[list[str]] = field(default_factory=list)

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        self.dialogues.append([text for _, text in dialogue])
        return super().respond(dialogue, tools=tools)


def _session(mem: ShortTermMemory) -> ShortTermMemorySession:
    mem.update(mem.begin_turn(SCOPE), {"summary": MEMORY})
    return ShortTermMemorySession(mem, SCOPE)


def _run(session: ShortTermMemorySession, agent: Any, texts: Sequence[str]) -> list[Any]:
    """The runs, and what each run's first read of the session returned."""
    from agents import RunConfig, Runner

    reads: list[Any] = []
    read = session.get_items

    async def recorded(limit: int | None = None, wrapper: Any = None) -> Any:
        # The signature the SDK looks for to hand the session its run's wrapper.
        items = await read(limit, wrapper)
        if wrapper is not None:
            reads.append(items)
        return items

    session.get_items = recorded  # type: ignore[method-assign]

    async def go() -> None:
        for text in texts:
            config = RunConfig(tracing_disabled=True)
            await Runner.run(agent, text, session=session, run_config=config)

    asyncio.run(go())
    return reads


def _memory_copies(dialogue: Sequence[str]) -> int:
    return sum(text.count(CONTENT_HEADER) for text in dialogue)


def test_agent_places_at_the_model_call_and_reads_the_record_as_it_is(
    mem: ShortTermMemory,
) -> None:
    from agents import Agent, OpenAIResponsesModel

    model = Seen()
    session = _session(mem)
    client = offline_openai_client(model, is_async=True)
    agent = session.agent(Agent(name="G", model=OpenAIResponsesModel("m", client)))
    reads = _run(session, agent, ["Where do we meet?", "And when?"])
    # The first read of each run is the record: no memory, no nudge, nothing placed.
    assert all(CONTENT_HEADER not in str(items) for items in reads)
    assert reads[1] and all("content" in item or "type" in item for item in reads[1])
    # Every model call carries the memory once, placed on the whole input.
    assert model.dialogues and all(_memory_copies(d) == 1 for d in model.dialogues)
    assert all(MEMORY in " ".join(d) for d in model.dialogues)
    session.close()


def test_a_session_of_plain_agents_keeps_its_placed_view(mem: ShortTermMemory) -> None:
    from agents import Agent, OpenAIResponsesModel

    model = Seen()
    session = _session(mem)
    client = offline_openai_client(model, is_async=True)
    plain = Agent(name="G", model=OpenAIResponsesModel("m", client))
    reads = _run(session, plain, ["Where do we meet?"])
    assert CONTENT_HEADER in str(reads[0])  # the view: the memory placed in it
    assert [_memory_copies(d) for d in model.dialogues] == [1]
    session.close()


def test_a_plain_agent_on_a_session_that_places_at_the_model_call_is_told(
    mem: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    from agents import Agent, OpenAIResponsesModel

    model = Seen()
    session = _session(mem)
    client = offline_openai_client(model, is_async=True)
    session.agent(Agent(name="G", model=OpenAIResponsesModel("m", client)))
    plain = Agent(name="P", model=OpenAIResponsesModel("m", client))
    caplog.set_level(logging.WARNING, logger="stm_memory")
    _run(session, plain, ["Where do we meet?"])
    assert [_memory_copies(d) for d in model.dialogues] == [0]  # nothing placed for it
    assert any("session.agent(agent)" in r.getMessage() for r in caplog.records)
    session.close()

"""``writer=``: memory for a model that cannot write it (SPEC §8, amended 2026-12-06).

Opt-in, and the one place stm-memory makes a model call of its own: the writer is asked,
with one plain user message and no tools, at the cadence the nudge would have gone; its
answer is this turn's memory write, through the same guards and the lossy-writer check.
The turn model is offered no tool and sent no nudge, and the channel's memory counts as
written."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from helpers.factory import MemFactory
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import TOOL_NAME, ConfigurationError, Scope, ShortTermMemory, Writing
from stm_memory.kit.writer import WriteRequest
from stm_memory.model import Category
from stm_memory.testing import OfflineChatModel, OfflineModel, offline_openai_client
from stm_memory.testing.offline import OfflineReply
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import AsyncOpenAIChatLoop, OpenAIChatLoop

SCOPE = Scope(channel_id="garden", user_id="u1", server_id="g1")
SAID = ("Tomatoes go in on May 3.", "The shed code is 4821.", "Beans follow on May 20.", "Ok.")


@dataclass
class Recorder:
    """A writer function: what it was asked, and a memory of every line it was shown."""

    answer: Callable[[WriteRequest], str] | None = None
    asked: list[WriteRequest] = field(default_factory=list)

    def __call__(self, request: WriteRequest) -> str:
        self.asked.append(request)
        if self.answer is not None:
            return self.answer(request)
        said = [line for line in request.prompt.splitlines() if line.startswith("Ann:")]
        return "; ".join(line.split(": ", 1)[1].strip('"') for line in said)


@dataclass
class Offered(OfflineModel):
    """Records whether each request offered a tool and carried the nudge."""

    tools: list[bool] = field(default_factory=list)
    nudged: list[bool] = field(default_factory=list)

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        self.tools.append(bool(tools))
        self.nudged.append(any(TOOL_NAME in text for _, text in dialogue))
        return super().respond(dialogue, tools=tools)


def _turns(loop: OpenAIChatLoop, texts: Sequence[str] = SAID) -> list[Any]:
    history: list[Any] = []
    results = []
    for text in texts:
        result = loop.run_turn(SCOPE, [*history, {"role": "user", "content": text, "name": "Ann"}])
        history = list(result.messages)
        results.append(result)
    return results


def test_the_writer_writes_at_the_cadence_and_the_model_is_offered_no_tool(
    make_mem: MemFactory,
) -> None:
    mem, model, writer = make_mem(), Offered(), Recorder()
    mem.configure_server("g1", refresh_cadence=2)
    loop = OpenAIChatLoop(offline_openai_client(model), mem, model="qwen", writer=writer)
    results = _turns(loop)
    assert not any(model.tools) and not any(model.nudged)  # no tool, no nudge, ever
    # Asked once, when the cadence's nudge would have gone (two turns captured), with
    # what the channel said since its memory was written; nothing at the other turns.
    [request] = writer.asked
    assert "Tomatoes go in on May 3." in request.prompt and "4821" in request.prompt
    assert request.messages() == [{"role": "user", "content": request.prompt}]
    assert [r.stm_updated for r in results] == [False, False, True, False]
    assert all(r.steps == 1 for r in results)  # the turn model: one call a turn
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.summary == "Tomatoes go in on May 3.; The shed code is 4821."
    assert mem.writing_status(SCOPE) is Writing.WRITING
    assert results[-1].writing is Writing.WRITING


def test_tool_calling_false_with_a_writer_keeps_memory_written(make_mem: MemFactory) -> None:
    mem, model, writer = make_mem(), Offered(), Recorder()
    mem.configure_server("g1", refresh_cadence=2)
    loop = OpenAIChatLoop(
        offline_openai_client(model), mem, model="smol", tool_calling=False, writer=writer
    )
    _turns(loop)
    assert len(writer.asked) == 1 and not any(model.tools)
    entry = mem.get(SCOPE)
    assert entry is not None and "4821" in (entry.summary or "")
    assert mem.writing_status(SCOPE) is Writing.WRITING


def test_what_the_writer_leaves_out_is_kept_beside_it(make_mem: MemFactory) -> None:
    # The lossy-writer check holds for the writer as for any write.
    mem, writer = make_mem(), Recorder(answer=lambda _: "Tomatoes go in on May 3.")
    mem.configure_server("g1", refresh_cadence=2)
    loop = OpenAIChatLoop(offline_openai_client(Offered()), mem, model="qwen", writer=writer)
    _turns(loop)
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3."
    assert any("4821" in m.content for m in entry.kept)


@pytest.mark.parametrize(
    ("answer", "logged"),
    [
        (lambda _: "", "answered no memory"),
        (lambda _: "x" * 5000, None),  # cut to max_summary_length, as a call's is
    ],
)
def test_the_writers_answer_goes_through_the_guards(
    make_mem: MemFactory,
    caplog: pytest.LogCaptureFixture,
    answer: Callable[[WriteRequest], str],
    logged: str | None,
) -> None:
    mem = make_mem()
    mem.configure_server("g1", refresh_cadence=2)
    loop = OpenAIChatLoop(
        offline_openai_client(Offered()), mem, model="qwen", writer=Recorder(answer=answer)
    )
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        results = _turns(loop)
    assert all(r.text.startswith("Understood") for r in results)  # the user's turns go on
    entry = mem.get(SCOPE)
    assert entry is not None
    if logged:
        assert not entry.summary and any(logged in r.getMessage() for r in caplog.records)
    else:
        assert entry.summary == "x" * mem.limits.max_summary_length


def test_a_failing_writer_never_fails_the_turn(
    make_mem: MemFactory, caplog: pytest.LogCaptureFixture
) -> None:
    def down(_: WriteRequest) -> str:
        raise ConnectionError("writer server down")

    mem = make_mem()
    mem.configure_server("g1", refresh_cadence=2)
    loop = OpenAIChatLoop(offline_openai_client(Offered()), mem, model="qwen", writer=down)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        results = _turns(loop)
    assert all(r.text.startswith("Understood") for r in results)
    assert any("writer server down" in r.getMessage() for r in caplog.records)


def test_a_guard_that_hides_the_memory_stops_the_writer(make_mem: MemFactory) -> None:
    mem, writer = make_mem(), Recorder()
    mem.configure_server("g1", refresh_cadence=2)
    mem.configure_user("u1", full_privacy=True)
    _turns(OpenAIChatLoop(offline_openai_client(Offered()), mem, model="qwen", writer=writer))
    assert writer.asked == []


def test_category_values_come_back_as_json(make_mem: MemFactory) -> None:
    mem = make_mem()
    mem.configure_server("g1", refresh_cadence=2)
    mem.set_categories("g1", [Category("Plan", "what is planted when"), Category("Codes")])

    def answer(request: WriteRequest) -> str:
        assert request.categories == ("plan", "codes")
        values = {"plan": "Tomatoes May 3", "codes": "shed 4821", "other": "ignored"}
        return f"```json\n{json.dumps(values)}\n```"

    loop = OpenAIChatLoop(
        offline_openai_client(Offered()), mem, model="qwen", writer=Recorder(answer=answer)
    )
    _turns(loop)
    entry = mem.get(SCOPE)
    assert entry is not None and dict(entry.categories) == {
        "plan": "Tomatoes May 3",
        "codes": "shed 4821",
    }


def test_the_middleware_takes_a_langchain_chat_model_as_the_writer(
    make_mem: MemFactory,
) -> None:
    # The same small model, asked with a plain prompt: its answer is the memory.
    mem = make_mem()
    mem.configure_server("g1", refresh_cadence=2)
    turn_model = Offered()
    writer_model = OfflineModel(answers=("Tomatoes go in on May 3; shed code 4821.",))
    agent = create_agent(
        OfflineChatModel(model=turn_model),
        middleware=[ShortTermMemoryMiddleware(mem, writer=OfflineChatModel(model=writer_model))],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "garden", "user_id": "u1", "server_id": "g1"}}
    for text in SAID:
        agent.invoke({"messages": [HumanMessage(text, name="Ann")]}, config)
    assert writer_model.calls == 1 and not any(turn_model.tools)
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3; shed code 4821."


def test_an_async_loop_runs_the_writer(make_mem: MemFactory) -> None:
    mem, writer = make_mem(), Recorder()
    mem.configure_server("g1", refresh_cadence=2)
    loop = AsyncOpenAIChatLoop(
        offline_openai_client(Offered(), is_async=True), mem, model="qwen", writer=writer
    )

    async def run() -> None:
        history: list[Any] = []
        for text in SAID:
            message = {"role": "user", "content": text, "name": "Ann"}
            result = await loop.run_turn(SCOPE, [*history, message])
            history = list(result.messages)

    asyncio.run(run())
    entry = mem.get(SCOPE)
    assert len(writer.asked) == 1 and entry is not None and "4821" in (entry.summary or "")


def test_a_writer_of_the_wrong_kind_is_refused_when_built(mem: ShortTermMemory) -> None:
    with pytest.raises(ConfigurationError, match="writer must be"):
        OpenAIChatLoop(offline_openai_client(Offered()), mem, model="qwen", writer=42)  # type: ignore[arg-type]


def test_the_agents_session_runs_the_writer(make_mem: MemFactory) -> None:
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner

    from stm_memory_openai_agents import ShortTermMemorySession

    mem, model = make_mem(), Offered()
    writer = Recorder(answer=lambda r: "Tomatoes go in on May 3; the shed code is 4821.")
    mem.configure_server("g1", refresh_cadence=2)
    session = ShortTermMemorySession(mem, SCOPE, writer=writer)
    client = offline_openai_client(model, is_async=True)
    agent = session.agent(Agent(name="G", model=OpenAIResponsesModel("qwen", client)))

    async def run() -> None:
        for text in SAID:
            await Runner.run(
                agent, text, session=session, run_config=RunConfig(tracing_disabled=True)
            )

    asyncio.run(run())
    [request] = writer.asked
    assert "The shed code is 4821." in request.prompt and not any(model.tools)
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3; the shed code is 4821."
    session.close()

"""A tool call written as text is still a call, and never the answer (SPEC §8, amended
2026-12-06, from a real Qwen2.5-1.5B on llama.cpp): a small open model behind a server
that parses no tool calls writes our tool's call in its message content. It is applied
as the memory write through the same guards, the user still gets an answer (one more
model call, without the tool, counted in the turn's steps), and that model is offered
no tool from then on."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from helpers.factory import MemFactory
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import TOOL_NAME, Scope, ShortTermMemory, Writing
from stm_memory.testing import (
    OfflineChatModel,
    OfflineModel,
    offline_anthropic_client,
    offline_openai_client,
)
from stm_memory.testing.offline import OfflineReply
from stm_memory.tool.textcall import text_call
from stm_memory_anthropic import AnthropicLoop
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop

SCOPE = Scope(channel_id="garden", user_id="u1", server_id="g1")
CALL = {"name": TOOL_NAME, "arguments": {"summary": "Tomatoes go in on May 3."}}

# -- reading a call out of text ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"```json\n{json.dumps(CALL)}\n```", CALL["arguments"]),  # Qwen's, as measured
        (json.dumps(CALL), CALL["arguments"]),  # bare
        (f"<tool_call>\n{json.dumps(CALL)}\n</tool_call>", CALL["arguments"]),  # Hermes
        (f"Sure! {json.dumps(CALL)} Anything else?", CALL["arguments"]),  # inside prose
        (  # arguments as a JSON string, as the APIs carry them
            json.dumps({"name": TOOL_NAME, "arguments": json.dumps({"summary": "x"})}),
            {"summary": "x"},
        ),
        (json.dumps({"name": TOOL_NAME, "parameters": {"summary": "y"}}), {"summary": "y"}),
        (json.dumps({"type": "function", "function": CALL}), CALL["arguments"]),
        # Not ours, not a call, not JSON: an answer.
        (json.dumps({"name": "get_weather", "arguments": {"city": "Oslo"}}), None),
        (f'The tool is called {TOOL_NAME}; its JSON is {{"summary": "..."}}.', None),
        (f'{{"name": "{TOOL_NAME}", "arguments": {{"summary": "cut', None),
        ("Tomatoes go in on May 3.", None),
    ],
)
def test_a_call_is_read_out_of_text(text: str, expected: Mapping[str, Any] | None) -> None:
    assert text_call(text) == expected


# -- every entry point ----------------------------------------------------------------------


@dataclass
class TextCaller(OfflineModel):
    """Offered any tool, writes the memory call as JSON text and nothing else (the
    measured model); offered none, answers."""

    offered: list[bool] | None = None

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        if self.offered is None:
            self.offered = []
        self.offered.append(bool(tools))
        if tools:
            self.calls += 1
            return OfflineReply(f"```json\n{json.dumps(CALL)}\n```")
        return super().respond(dialogue, tools=tools)


def run_loop(
    build: Callable[[TextCaller], Any], mem: ShortTermMemory, model: TextCaller
) -> list[Any]:
    loop = build(model)
    history: list[Any] = []
    results = []
    for text in ("When do tomatoes go in?", "And the beans?", "Thanks!"):
        message: dict[str, Any] = {"role": "user", "content": text}
        if isinstance(loop, OpenAIResponsesLoop):
            message["type"] = "message"
        result = loop.run_turn(SCOPE, [*history, message])
        history = list(result.messages)
        results.append(result)
    return results


LOOPS: dict[str, Callable[[ShortTermMemory], Callable[[TextCaller], Any]]] = {
    "chat": lambda m: lambda model: OpenAIChatLoop(offline_openai_client(model), m, model="qwen"),
    "responses": lambda m: (
        lambda model: OpenAIResponsesLoop(offline_openai_client(model), m, model="qwen")
    ),
    "anthropic": lambda m: (
        lambda model: AnthropicLoop(offline_anthropic_client(model), m, model="qwen")
    ),
}


@pytest.mark.parametrize("name", LOOPS)
def test_a_loop_writes_the_memory_and_answers(
    make_mem: MemFactory, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    mem, model = make_mem(), TextCaller()
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        first, *later = run_loop(LOOPS[name](mem), mem, model)
    # The write went through the guards and is stored; the user got an answer.
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3."
    assert first.stm_updated and first.steps == 2  # the one extra call, counted
    assert first.text.startswith("Understood") and TOOL_NAME not in first.text
    assert TOOL_NAME not in json.dumps(first.messages, default=str)
    # From then on no tool and no nudge: every answer an answer, one call a turn.
    assert model.offered == [True, False, False, False]
    for result in later:
        assert result.steps == 1 and result.text.startswith("Understood")
        assert TOOL_NAME not in json.dumps(result.requests, default=str)
    warned = [
        r.getMessage() for r in caplog.records if "wrote its tool call as text" in r.getMessage()
    ]
    assert (
        len(warned) == 1 and "tool_calling=False" in warned[0] and "--tool-call-parser" in warned[0]
    )


def test_the_middleware_writes_the_memory_and_answers(make_mem: MemFactory) -> None:
    mem, model = make_mem(), TextCaller()
    agent = create_agent(
        OfflineChatModel(model=model),
        middleware=[ShortTermMemoryMiddleware(mem)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "garden", "user_id": "u1", "server_id": "g1"}}
    for text in ("When do tomatoes go in?", "And the beans?"):
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        last = state["messages"][-1]
        assert str(last.content).startswith("Understood") and not last.tool_calls
        assert all(TOOL_NAME not in str(m.content) for m in state["messages"])
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3."
    assert model.offered == [True, False, False]


def test_a_text_call_goes_through_the_guards(make_mem: MemFactory) -> None:
    # Memory off for the server: no tool is offered, so nothing the model writes is
    # run as ours, and its JSON stays its answer (as any text of a toolless model).
    mem, model = make_mem(), TextCaller()
    mem.configure_server("g1", short_term_memory_enabled=False)
    (first, *_) = run_loop(LOOPS["chat"](mem), mem, model)
    assert not first.stm_updated and first.steps == 1
    entry = mem.get(SCOPE)
    assert entry is None or not entry.summary


def test_a_model_that_calls_tools_is_unaffected(make_mem: MemFactory) -> None:
    mem = make_mem()
    model = OfflineModel()
    loop = OpenAIChatLoop(offline_openai_client(model), mem, model="gpt-4.1-mini")
    mem.configure_server("g1", refresh_cadence=1)
    history: list[Any] = []
    for text in ("one", "two", "three"):
        result = loop.run_turn(SCOPE, [*history, {"role": "user", "content": text}])
        history = list(result.messages)
    assert model.tool_calls_made >= 1 and not mem.writes_tools_as_text("gpt-4.1-mini")


def test_the_lcel_wrapper_writes_the_memory_and_answers(make_mem: MemFactory) -> None:
    from stm_memory_langchain import with_short_term_memory

    mem, model = make_mem(), TextCaller()
    chain = with_short_term_memory(OfflineChatModel(model=model), mem, scope=SCOPE)
    history: list[Any] = []
    for text in ("When do tomatoes go in?", "And the beans?"):
        history.append(HumanMessage(text))
        reply = chain.invoke(history)
        assert str(reply.content).startswith("Understood") and TOOL_NAME not in str(reply.content)
        history.append(reply)
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3."
    assert model.offered == [True, False, False]


def test_every_process_knows_a_text_caller(make_mem: MemFactory) -> None:
    # Learnt once, in the database: a process started later offers that model no tool
    # from its first turn (no JSON answer, no extra call), until the developer says the
    # server was fixed.
    first, model = make_mem(), TextCaller()
    run_loop(LOOPS["chat"](first), first, model)
    first.close()
    later, again = make_mem(), TextCaller()
    assert later.writes_tools_as_text("qwen")
    results = run_loop(LOOPS["chat"](later), later, again)
    assert again.offered == [False, False, False]
    assert all(r.steps == 1 and r.text.startswith("Understood") for r in results)
    assert later.forget_model("qwen") and not later.writes_tools_as_text("qwen")
    offered = TextCaller()
    OpenAIChatLoop(offline_openai_client(offered), later, model="qwen").run_turn(
        SCOPE, [{"role": "user", "content": "Hello again"}]
    )
    assert offered.offered is not None and offered.offered[0]  # the tool, again


@pytest.mark.parametrize("why", ["tool_calling=False", "text caller"])
def test_nobody_writing_is_off_not_not_writing(make_mem: MemFactory, why: str) -> None:
    # With no way for anyone to write the memory, the channel's status is "off" (what
    # the turn says too), never "not_writing" after the nudge tries.
    mem = make_mem()
    mem.configure_server("g1", refresh_cadence=2)
    if why == "text caller":
        model: OfflineModel = TextCaller()
        loop = OpenAIChatLoop(offline_openai_client(model), mem, model="qwen")
    else:
        model = OfflineModel()
        loop = OpenAIChatLoop(offline_openai_client(model), mem, model="qwen", tool_calling=False)
    history: list[Any] = []
    for i in range(10):
        result = loop.run_turn(SCOPE, [*history, {"role": "user", "content": f"note {i}"}])
        history = list(result.messages)
        if i:
            assert result.writing is Writing.OFF, i
    assert mem.writing_status(SCOPE) is Writing.OFF
    # A write (a model that can, a writer=) turns it back on.
    turn = mem.begin_turn(SCOPE)
    assert mem.update(turn, {"summary": "Notes 0 to 9."})["status"] == "completed"
    mem.end_turn(turn)
    assert mem.writing_status(SCOPE) is Writing.WRITING


def test_the_agents_session_writes_the_memory_and_answers(make_mem: MemFactory) -> None:
    # Runner.run with session.agent(): the real openai client and the SDK's Responses
    # model, over the offline transport.
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner

    from stm_memory_openai_agents import ShortTermMemorySession

    mem, model = make_mem(), TextCaller()
    session = ShortTermMemorySession(mem, SCOPE)
    client = offline_openai_client(model, is_async=True)
    agent = session.agent(Agent(name="G", model=OpenAIResponsesModel("qwen", client)))

    async def run() -> list[Any]:
        results = []
        for text in ("When do tomatoes go in?", "And the beans?"):
            results.append(
                await Runner.run(
                    agent, text, session=session, run_config=RunConfig(tracing_disabled=True)
                )
            )
        return results

    first, second = asyncio.run(run())
    for result in (first, second):
        assert str(result.final_output).startswith("Understood")
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary == "Tomatoes go in on May 3."
    assert model.offered == [True, False, False]  # the retry, then no tool from then on
    assert first.context_wrapper.usage.requests == 2  # both calls billed
    record = asyncio.run(session.session.get_items())
    assert TOOL_NAME not in json.dumps(record, default=str)
    session.close()

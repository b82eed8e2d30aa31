"""ShortTermMemoryMiddleware inside ``langchain.agents.create_agent`` (offline).

The chat model is a scripted fake that binds tools, streams with tool calls intact and
records every prompt and tool list it was given (see the LangChain research notes §5).
Each test runs the same turns through ``invoke``, ``ainvoke``, ``stream`` (messages
mode) and ``astream`` where the behaviour could differ between them.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from stm_memory import Category, ConfigurationError, Scope, ShortTermMemory, ValidationError
from stm_memory.testing.chat_model import stream_chunk
from stm_memory.testing.clock import FrozenClock
from stm_memory_langchain import ShortTermMemoryMiddleware

TOOL = "update_short_term_memory"
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
CONTEXT = {"user_id": "u1", "server_id": "g1"}
MODES = ["invoke", "ainvoke", "stream", "astream"]


# -- the fake model ---------------------------------------------------------------------


class ToolFakeChatModel(GenericFakeChatModel):
    """Scripted replies; records tools, tool specs and prompts per call. ``"RAISE"`` in
    the script makes that call fail."""

    seen_tools: list[list[str]] = Field(default_factory=list)
    seen_specs: list[list[dict[str, Any]]] = Field(default_factory=list)
    seen_messages: list[list[BaseMessage]] = Field(default_factory=list)
    seen_choices: list[Any] = Field(default_factory=list)

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        specs = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=specs, tool_choice=tool_choice, **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        specs = kw.get("tools", [])
        self.seen_tools.append([t["function"]["name"] for t in specs])
        self.seen_specs.append(specs)
        self.seen_choices.append(kw.get("tool_choice"))
        self.seen_messages.append(list(messages))
        result = super()._generate(messages, stop=stop, run_manager=run_manager, **kw)
        if result.generations[0].message.content == "RAISE":
            raise RuntimeError("model exploded")
        return result

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        msg = self._generate(messages, stop=stop, run_manager=run_manager, **kw)
        message = msg.generations[0].message
        assert isinstance(message, AIMessage)
        yield stream_chunk(message, run_manager)


def calls(*items: tuple[str, dict[str, Any]], content: str = "", **meta: Any) -> AIMessage:
    """An assistant message calling tools, ids ``<name>-<position>``."""
    return AIMessage(
        content=content,
        tool_calls=[
            {"name": name, "args": args, "id": f"{name}-{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(items)
        ],
        response_metadata=meta,
    )


def fake(*script: Any) -> ToolFakeChatModel:
    return ToolFakeChatModel(messages=iter(script))


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


# -- fixtures and drivers -----------------------------------------------------------------


@pytest.fixture
def mem(tmp_path: Path, stm_clock: FrozenClock) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(
        f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache", clock=stm_clock
    )
    memory.configure_server("g1", refresh_cadence=2)
    yield memory
    memory.close()


def agent_for(
    mem: ShortTermMemory, model: ToolFakeChatModel, *, checkpointer: bool = True, **kw: Any
) -> Any:
    middleware = ShortTermMemoryMiddleware(mem, **kw)
    return create_agent(
        model,
        tools=[add],
        system_prompt="You are helpful.",
        middleware=[middleware],
        checkpointer=InMemorySaver() if checkpointer else None,
    )


@dataclass
class Ran:
    messages: list[BaseMessage]
    streamed: list[tuple[Any, dict[str, Any]]]


def run(
    agent: Any,
    mode: str,
    text: str,
    *,
    thread: str = "c1",
    context: Any = CONTEXT,
    configurable: dict[str, Any] | None = None,
) -> Ran:
    """One agent turn through ``mode``; returns the thread's messages afterwards."""
    config = {"configurable": {"thread_id": thread, **(configurable or {})}}
    inputs = {"messages": [("user", text)]}
    streamed: list[tuple[Any, dict[str, Any]]] = []
    if mode == "invoke":
        out = agent.invoke(inputs, config, context=context)
    elif mode == "ainvoke":
        out = asyncio.run(agent.ainvoke(inputs, config, context=context))
    elif mode == "stream":
        streamed = list(agent.stream(inputs, config, context=context, stream_mode="messages"))
        out = agent.get_state(config).values
    else:

        async def collect() -> None:
            async for item in agent.astream(
                inputs, config, context=context, stream_mode="messages"
            ):
                streamed.append(item)

        asyncio.run(collect())
        out = agent.get_state(config).values
    return Ran(list(out["messages"]), streamed)


def texts(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def tool_results(messages: list[BaseMessage], name: str = TOOL) -> list[Any]:
    return [
        json.loads(str(m.content))
        for m in messages
        if isinstance(m, ToolMessage) and m.name == name
    ]


def has_nudge(prompt: list[BaseMessage]) -> bool:
    return any(m.type == "system" and f"call {TOOL}" in str(m.content) for m in prompt)


# -- the main multi-turn flow ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_nudge_update_recall_over_turns(
    mem: ShortTermMemory, mode: str, stm_clock: FrozenClock
) -> None:
    model = fake(
        "hello",  # turn 1
        "fine",  # turn 2
        calls((TOOL, {"summary": "Ann plans a heist."}), ("add", {"a": 2, "b": 3})),  # turn 3
        calls((TOOL, {"summary": "A second try."})),  # turn 3: still offered, fails
        "ok, done",  # turn 3 answer
        "welcome back",  # turn 4
    )
    agent = agent_for(mem, model)

    run(agent, mode, "hi")
    assert mem.get(SCOPE).turns_since_refresh == 1  # type: ignore[union-attr]
    run(agent, mode, "how are you")
    assert mem.get(SCOPE).turns_since_refresh == 2  # type: ignore[union-attr]
    assert not any(has_nudge(p) for p in model.seen_messages)

    ran = run(agent, mode, "what is 2+3?")
    # The cadence (2) is reached: the nudge is decided at the turn's start and stays in
    # every step of it, right after the current user message; the tool list is fixed
    # for the turn (the memory tool stays offered after the update, and a second call
    # fails when it runs); each step's prompt extends the one before.
    steps = model.seen_messages[2:5]
    for prompt in steps:
        assert has_nudge(prompt)
        (asked,) = [
            i for i, m in enumerate(prompt) if m.type == "human" and m.content == "what is 2+3?"
        ]
        assert has_nudge([prompt[asked + 1]])
    for before, after in itertools.pairwise(steps):
        assert texts(after[: len(before)]) == texts(before)
    assert model.seen_tools[2] == model.seen_tools[3] == model.seen_tools[4] == [TOOL, "add"]
    first, second = tool_results(ran.messages)
    assert first == {"status": "completed"}
    assert second["status"] == "tool_execution_failed"
    assert "already updated" in second["reason"]
    assert tool_results(ran.messages, "add") == [5]
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.summary == "Ann plans a heist."
    assert entry.turns_since_refresh == 0  # the update turn ends at 0
    assert entry.last_refreshed_turn == 1

    # An hour later the prompt cache has lapsed: the memory shows (a swap), in place of
    # the turns it covers. (Right after the write, a conversation this short holds
    # the form it showed: stm_memory.prompt.swap.)
    stm_clock.advance(hours=1)
    ran = run(agent, mode, "I'm back")
    prompt = model.seen_messages[5]
    assert any(m.type == "system" and "Ann plans a heist." in str(m.content) for m in prompt)
    assert prompt[0].content == "You are helpful."
    assert model.seen_tools[5] == [TOOL, "add"]
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.turns_since_refresh == 1
    assert [(m.role, m.content) for m in entry.messages][-2:] == [
        ("user", "I'm back"),
        ("assistant", "welcome back"),
    ]
    # Nothing of the middleware leaks into the thread's messages.
    assert not any(m.type == "system" for m in ran.messages)
    if mode in ("stream", "astream"):
        nodes = {meta["langgraph_node"] for _, meta in ran.streamed}
        assert "model" in nodes
        assert "welcome back" in [str(c.content) for c, _ in ran.streamed]


@pytest.mark.parametrize("mode", MODES)
def test_per_turn_schema_in_category_mode(mem: ShortTermMemory, mode: str) -> None:
    mem.set_categories("g1", [Category("Plot", "What happened"), Category("Mood", "Tone")])
    model = fake(
        calls((TOOL, {"plot": "They met."})), "noted", calls((TOOL, {"mood": "calm"})), "ok"
    )
    agent = agent_for(mem, model)
    run(agent, mode, "hi")
    spec = next(s for s in model.seen_specs[0] if s["function"]["name"] == TOOL)
    params = spec["function"]["parameters"]
    assert set(params["properties"]) == {"plot", "mood"}
    assert params["required"] == ["plot", "mood"]
    run(agent, mode, "and then?")
    entry = mem.get(SCOPE)
    assert entry is not None
    assert dict(entry.categories) == {"plot": "They met.", "mood": "calm"}  # merged


def test_bound_schema_keeps_required_fields(mem: ShortTermMemory) -> None:
    model = fake("ok")
    run(agent_for(mem, model), "invoke", "hi")
    spec = next(s for s in model.seen_specs[0] if s["function"]["name"] == TOOL)
    params = spec["function"]["parameters"]
    assert params["required"] == ["summary"]
    assert params["additionalProperties"] is False


# -- guards ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_full_privacy_hides_tool_and_refuses_calls(mem: ShortTermMemory, mode: str) -> None:
    mem.configure_user("u1", full_privacy=True)
    model = fake(calls((TOOL, {"summary": "secret"})), "ok")
    agent = agent_for(mem, model)
    ran = run(agent, mode, "hi")
    assert model.seen_tools[0] == ["add"]
    [result] = tool_results(ran.messages)
    assert result["status"] == "tool_execution_failed"
    assert "privacy" in result["reason"]
    assert mem.get(SCOPE) is None  # nothing captured, nothing counted


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_long_term_intent_hides_tool_for_that_turn(mem: ShortTermMemory, mode: str) -> None:
    model = fake("sure", "hello again")
    agent = agent_for(mem, model)
    run(agent, mode, "Please remember that my birthday is in May")
    run(agent, mode, "hi")
    assert model.seen_tools == [["add"], [TOOL, "add"]]


class _AskForMemoryTool(AgentMiddleware[Any, Any, Any]):
    """Outer middleware that forces the memory tool by name."""

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        return handler(request.override(tool_choice=TOOL))


def test_tool_choice_naming_a_hidden_memory_tool_is_dropped(mem: ShortTermMemory) -> None:
    mem.configure_user("u1", full_privacy=True)
    model = fake("ok")
    stack: list[AgentMiddleware[Any, Any, Any]] = [
        _AskForMemoryTool(),
        ShortTermMemoryMiddleware(mem),
    ]
    agent = create_agent(model, tools=[add], middleware=stack, checkpointer=InMemorySaver())
    run(agent, "invoke", "hi")
    assert model.seen_tools == [["add"]]
    assert model.seen_choices == [None]


# -- the epilogue and truncated calls ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_answer_then_memory_call_ends_the_run(mem: ShortTermMemory, mode: str) -> None:
    model = fake(calls((TOOL, {"summary": "Short."}), content="Here is my answer."), "unused")
    agent = agent_for(mem, model)
    ran = run(agent, mode, "hi")
    assert len(model.seen_messages) == 1  # no second model call
    # The run's last message is the answer (what an app shows), after the memory call
    # and its result, which keep their place and the reply's id.
    *_, call, result, answer = ran.messages
    assert isinstance(answer, AIMessage) and answer.content == "Here is my answer."
    assert not answer.tool_calls and answer.id != call.id
    assert isinstance(result, ToolMessage) and result.tool_call_id == call.tool_calls[0]["id"]
    assert isinstance(call, AIMessage) and call.content == ""
    assert mem.get(SCOPE).summary == "Short."  # type: ignore[union-attr]
    assert [(m.role, m.content) for m in mem.get(SCOPE).messages] == [  # type: ignore[union-attr]
        ("user", "hi"),
        ("assistant", "Here is my answer."),
    ]


def test_epilogue_can_be_disabled(mem: ShortTermMemory) -> None:
    model = fake(calls((TOOL, {"summary": "Short."}), content="Answer."), "and more")
    agent = agent_for(mem, model, end_after_epilogue=False)
    ran = run(agent, "invoke", "hi")
    assert len(model.seen_messages) == 2
    assert ran.messages[-1].content == "and more"


def test_answer_with_another_tool_continues(mem: ShortTermMemory) -> None:
    model = fake(calls((TOOL, {"summary": "S"}), ("add", {"a": 1, "b": 1}), content="Hm."), "2")
    agent = agent_for(mem, model)
    ran = run(agent, "invoke", "1+1?")
    assert ran.messages[-1].content == "2"


@pytest.mark.parametrize("mode", MODES)
def test_truncated_memory_call_is_not_executed(mem: ShortTermMemory, mode: str) -> None:
    model = fake(calls((TOOL, {"summary": "cut"}), finish_reason="length"), "ok")
    agent = agent_for(mem, model)
    ran = run(agent, mode, "hi")
    [result] = tool_results(ran.messages)
    assert result["status"] == "tool_execution_failed"
    assert "cut off" in result["reason"]
    assert mem.get(SCOPE).summary is None  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_two_updates_in_one_message_only_one_lands(mem: ShortTermMemory, mode: str) -> None:
    model = fake(calls((TOOL, {"summary": "A"}), (TOOL, {"summary": "B"})), "ok")
    agent = agent_for(mem, model)
    ran = run(agent, mode, "hi")
    statuses = sorted(r["status"] for r in tool_results(ran.messages))
    assert statuses == ["completed", "tool_execution_failed"]
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.summary in ("A", "B")


def test_bad_arguments_come_back_as_a_failed_result(mem: ShortTermMemory) -> None:
    model = fake(calls((TOOL, {"summary": "  ", "extra": 1})), calls((TOOL, {"summary": 3})), "ok")
    agent = agent_for(mem, model)
    ran = run(agent, "invoke", "hi")
    results = tool_results(ran.messages)
    assert [r["status"] for r in results] == ["tool_execution_failed"] * 2
    assert mem.get(SCOPE).summary is None  # type: ignore[union-attr]


# -- scopes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "astream"])
def test_scope_from_configurable_thread_id(mem: ShortTermMemory, mode: str) -> None:
    model = fake("one", "two")
    agent = agent_for(mem, model)
    run(agent, mode, "hi", thread="t9", context=None, configurable={"user_id": "u9"})
    run(agent, mode, "again", thread="t9", context=None, configurable={"user_id": "u9"})
    entry = mem.get(Scope(channel_id="t9", user_id="u9"))  # a DM: no server id
    assert entry is not None
    assert entry.turns_since_refresh == 2
    assert [m.content for m in entry.messages] == ["hi", "one", "again", "two"]


def test_configurable_channel_id_wins_over_thread_id(mem: ShortTermMemory) -> None:
    agent = agent_for(mem, fake("ok"))
    conf = {"user_id": "u1", "server_id": "g1", "channel_id": "c1"}
    run(agent, "invoke", "hi", thread="some-thread", context=None, configurable=conf)
    assert mem.get(SCOPE).turns_since_refresh == 1  # type: ignore[union-attr]


@dataclass
class Ctx:
    channel_id: str
    user_id: int
    server_id: str | None = None


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_scope_from_runtime_context_schema(mem: ShortTermMemory, mode: str) -> None:
    model = fake("a", "b")
    agent = create_agent(
        model, tools=[add], middleware=[ShortTermMemoryMiddleware(mem)], context_schema=Ctx
    )
    run(agent, mode, "hi", context=Ctx("c1", 42, "g1"), thread="ignored")
    run(agent, mode, "yo", context=Ctx("c2", 42, "g1"), thread="ignored")
    for channel in ("c1", "c2"):
        entry = mem.get(Scope(channel_id=channel, user_id="42", server_id="g1"))
        assert entry is not None
        assert entry.turns_since_refresh == 1


def test_scope_callable_and_fixed_scope(mem: ShortTermMemory) -> None:
    seen: list[Any] = []

    def resolver(runtime: Any, config: Any) -> Scope:
        seen.append(config["configurable"]["thread_id"])
        return Scope(channel_id=f"room-{config['configurable']['thread_id']}", user_id="u1")

    run(agent_for(mem, fake("ok"), scope=resolver), "invoke", "hi", thread="7")
    assert seen == ["7"]
    assert mem.get(Scope(channel_id="room-7", user_id="u1")) is not None
    run(agent_for(mem, fake("ok"), scope=SCOPE), "invoke", "hi", context=None)
    assert mem.get(SCOPE) is not None


def test_missing_user_runs_without_memory_and_warns_when_not_strict(
    mem: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    model = fake(calls((TOOL, {"summary": "x"})), "ok")
    agent = agent_for(mem, model, strict=False)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        ran = run(agent, "invoke", "hi", context=None)
    assert "no user_id" in caplog.text
    assert model.seen_tools[0] == ["add"]
    [result] = tool_results(ran.messages)
    assert result["status"] == "tool_execution_failed"
    assert ran.messages[-1].content == "ok"


def test_missing_user_raises_naming_the_fix_by_default(mem: ShortTermMemory) -> None:
    # One rule with with_short_term_memory: a scope that cannot be formed is the
    # developer's mistake, raised before the model is called.
    model = fake("ok")
    with pytest.raises(ValidationError, match=r"user_id.*runtime context"):
        run(agent_for(mem, model), "invoke", "hi", context=None)
    assert model.seen_tools == []
    with pytest.raises(ValidationError, match="user_id"):
        run(agent_for(mem, fake("ok"), strict=True), "invoke", "hi", context=None)


def test_resolver_returning_none_means_no_memory(mem: ShortTermMemory) -> None:
    model = fake("ok")
    run(agent_for(mem, model, scope=lambda runtime, config: None), "invoke", "hi")
    assert model.seen_tools == [["add"]]
    assert mem.get(SCOPE) is None


# -- robustness ------------------------------------------------------------------------------


def test_crashed_run_is_counted_by_the_next_run(mem: ShortTermMemory) -> None:
    model = fake("RAISE", "fine")
    middleware = ShortTermMemoryMiddleware(mem)
    agent = create_agent(model, tools=[add], middleware=[middleware], checkpointer=InMemorySaver())
    with pytest.raises(RuntimeError, match="model exploded"):
        run(agent, "invoke", "hi")
    run(agent, "invoke", "hi again")
    assert mem.get(SCOPE).turns_since_refresh == 2  # type: ignore[union-attr]
    assert middleware._runs == {}


def test_memory_failures_do_not_fail_the_run(
    mem: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store down")

    monkeypatch.setattr(mem, "begin_turn", broken)
    model = fake(calls((TOOL, {"summary": "x"})), "still answering")
    ran = run(agent_for(mem, model), "invoke", "hi")
    assert ran.messages[-1].content == "still answering"
    assert tool_results(ran.messages)[0]["status"] == "tool_execution_failed"


def test_threads_running_at_once_keep_their_own_turns(mem: ShortTermMemory) -> None:
    lock = threading.Lock()

    class Echo(ToolFakeChatModel):
        def _generate(
            self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> Any:
            with lock:
                return super()._generate(messages, stop=stop, run_manager=run_manager, **kw)

    model = Echo(messages=iter(["ok"] * 40))
    middleware = ShortTermMemoryMiddleware(mem)
    agent = create_agent(model, tools=[add], middleware=[middleware], checkpointer=InMemorySaver())

    def conversation(channel: int) -> None:  # one LangGraph thread is sequential
        for i in range(5):
            run(agent, "invoke", f"msg {i}", thread=f"c{channel}")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(conversation, range(4)))
    for channel in range(4):
        entry = mem.get(Scope(channel_id=f"c{channel}", user_id="u1", server_id="g1"))
        assert entry is not None
        assert entry.turns_since_refresh == 5
    assert middleware._runs == {}


def test_private_state_stays_out_of_the_output(mem: ShortTermMemory) -> None:
    agent = agent_for(mem, fake("ok"))
    out = agent.invoke(
        {"messages": [("user", "hi")]}, {"configurable": {"thread_id": "c1"}}, context=CONTEXT
    )
    assert set(out) == {"messages"}


def test_rejects_something_that_is_not_a_memory() -> None:
    with pytest.raises(ConfigurationError, match="memory must be a ShortTermMemory"):
        ShortTermMemoryMiddleware(object())  # type: ignore[arg-type]


@tool
def broken_tool(x: int) -> int:
    """Always fails."""
    raise KeyError("boom")


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_crashing_caller_tool_still_counts_the_turn(mem: ShortTermMemory, mode: str) -> None:
    model = fake(calls(("broken_tool", {"x": 1})), "fine")
    middleware = ShortTermMemoryMiddleware(mem)
    agent = create_agent(
        model, tools=[broken_tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    with pytest.raises(KeyError):
        run(agent, mode, "hi")
    assert mem.get(SCOPE).turns_since_refresh == 1  # type: ignore[union-attr]
    run(agent, mode, "again")
    assert mem.get(SCOPE).turns_since_refresh == 2  # type: ignore[union-attr]
    assert middleware._runs == {}


@pytest.mark.parametrize("same_process", [True, False])
def test_interrupted_run_resumes_with_its_turn(mem: ShortTermMemory, same_process: bool) -> None:
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.types import Command

    model = fake(
        calls((TOOL, {"summary": "Adding things."})),
        calls(("add", {"a": 1, "b": 2})),  # needs approval: the run pauses here
        calls((TOOL, {"summary": "again"})),  # after resuming: must still fail
        "3",
    )
    saver = InMemorySaver()

    def build() -> tuple[Any, ShortTermMemoryMiddleware]:
        middleware = ShortTermMemoryMiddleware(mem)
        hitl = HumanInTheLoopMiddleware(interrupt_on={"add": True})
        stack: list[AgentMiddleware[Any, Any, Any]] = [middleware, hitl]
        return create_agent(model, tools=[add], middleware=stack, checkpointer=saver), middleware

    agent, first = build()
    config = {"configurable": {"thread_id": "c1"}}
    agent.invoke({"messages": [("user", "1+2?")]}, config, context=CONTEXT)
    assert agent.get_state(config).interrupts
    if not same_process:  # a new worker: its middleware never saw this run
        agent, _ = build()
    out = agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), config, context=CONTEXT
    )
    assert out["messages"][-1].content == "3"
    assert [r["status"] for r in tool_results(out["messages"])] == [
        "completed",
        "tool_execution_failed",
    ]
    # The rebuilt turn keeps the turn's tool list (the memory tool stays offered) and
    # knows it was updated: the second call failed above.
    assert model.seen_tools[2] == model.seen_tools[0] == [TOOL, "add"]
    entry = mem.get(SCOPE)
    assert entry is not None
    assert entry.summary == "Adding things."
    assert entry.turns_since_refresh == 0
    if same_process:
        assert first._runs == {}


def test_without_a_checkpointer_earlier_speakers_keep_their_words(mem: ShortTermMemory) -> None:
    # No checkpointer: each run sees only its own turn, so the middleware puts the
    # channel's stored messages in front before capturing. Those must keep who said
    # them: attributed to the user of the later run, Ann's words would outlive her
    # erasure.
    agent = agent_for(mem, fake(AIMessage("Noted."), AIMessage("Sure.")), checkpointer=False)
    run(agent, "invoke", "My flat is at 12 Elm Street.", context={"user_id": "ann", **GUILD})
    run(agent, "invoke", "What's the plan for Friday?", context={"user_id": "bob", **GUILD})
    stored = mem.get(Scope(channel_id="c1", user_id="bob", server_id="g1"))
    assert stored is not None
    said = {m.content: m.user_id for m in stored.messages if m.role == "user"}
    assert said == {"My flat is at 12 Elm Street.": "ann", "What's the plan for Friday?": "bob"}

    mem.clear_user("ann")
    after = mem.get(Scope(channel_id="c1", user_id="bob", server_id="g1"))
    assert after is not None
    assert all("Elm Street" not in m.content for m in after.messages)
    assert any(m.content == "What's the plan for Friday?" for m in after.messages)


GUILD = {"server_id": "g1"}

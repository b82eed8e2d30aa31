"""``ShortTermMemorySession`` against the Agents SDK's own session expectations and test
doubles: the ``Session`` protocol, the behaviour the SDK's tests ask of
``SQLiteSession`` (tests/memory/test_session.py upstream, ported here: the SDK wheel
ships no tests, but ships ``agents.testing.ScriptedModel``), and the memory turn
around ``Runner`` — the epilogue, one update per turn, the intent guard and the nudge,
reads during a run, a failed run, two runs at once. No provider, no network."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    SQLiteSession,
    TResponseInputItem,
    function_tool,
)
from agents.memory import Session
from agents.testing import ScriptedModel, assistant_message, function_call

from stm_memory import TOOL_NAME, Category, Scope, ShortTermMemory
from stm_memory.kit import CAPTURE_WINDOW, RECALL_TOOL
from stm_memory_openai_agents import SessionBusyError, ShortTermMemorySession
from stm_memory_openai_agents._agent import Epilogue, MemoryHooks, MemoryModel

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
RUN_CONFIG = RunConfig(tracing_disabled=True)


def session_of(memory: ShortTermMemory, scope: Scope = SCOPE, **kw: Any) -> ShortTermMemorySession:
    return ShortTermMemorySession(memory, scope, **kw)


async def run_agent(method: str, agent: Agent[Any], text: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("run_config", RUN_CONFIG)
    if method == "run":
        return await Runner.run(agent, text, **kwargs)
    if method == "run_sync":

        def in_thread() -> Any:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                return Runner.run_sync(agent, text, **kwargs)
            finally:
                loop.close()

        return await asyncio.to_thread(in_thread)
    result = Runner.run_streamed(agent, text, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


def tool_names(call: Any) -> list[str]:
    return [t.name for t in call.tools]


# -- the SDK's session expectations -----------------------------------------------------


def test_it_implements_the_session_protocol(stm_memory: ShortTermMemory) -> None:
    session = session_of(stm_memory)
    assert isinstance(session, Session)
    assert session.session_id == SCOPE.live_key
    assert session_of(stm_memory, session_id="s-1").session_id == "s-1"


async def test_add_get_and_clear(stm_memory: ShortTermMemory) -> None:
    session = session_of(stm_memory)
    items: list[TResponseInputItem] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
    ]
    await session.add_items(items)
    retrieved = await session.get_items()
    assert [(i.get("role"), i.get("content")) for i in retrieved] == [
        ("user", "Hello"),
        ("assistant", "Hi there!"),
    ]
    await session.clear_session()
    assert await session.get_items() == []
    session.close()


async def test_pop_item(stm_memory: ShortTermMemory, tmp_path: Path) -> None:
    session = session_of(stm_memory, db_path=tmp_path / "pop.db")
    assert await session.pop_item() is None
    await session.add_items(
        [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there!"},
            {"role": "user", "content": "How are you?"},
        ]
    )
    assert len(await session.get_items()) == 3
    popped = await session.pop_item()
    assert popped is not None and popped.get("content") == "How are you?"
    assert [i.get("content") for i in await session.get_items()] == ["Hello", "Hi there!"]
    assert (await session.pop_item() or {}).get("content") == "Hi there!"
    assert (await session.pop_item() or {}).get("content") == "Hello"
    assert await session.pop_item() is None
    assert await session.get_items() == []
    session.close()


async def test_get_items_with_limit(stm_memory: ShortTermMemory) -> None:
    session = session_of(stm_memory)
    items: list[TResponseInputItem] = []
    for n in (1, 2, 3):
        items += [
            {"role": "user", "content": f"Message {n}"},
            {"role": "assistant", "content": f"Response {n}"},
        ]
    await session.add_items(items)
    contents = [i.get("content") for i in await session.get_items()]
    assert contents[0] == "Message 1" and contents[-1] == "Response 3" and len(contents) == 6
    assert [i.get("content") for i in await session.get_items(limit=2)] == [
        "Message 3",
        "Response 3",
    ]
    assert len(await session.get_items(limit=4)) == 4
    assert len(await session.get_items(limit=10)) == 6
    assert await session.get_items(limit=0) == []


async def test_sessions_of_two_conversations_stay_apart(stm_memory: ShortTermMemory) -> None:
    # (Two channels of one server would each be shown the other's memory, by design.)
    one = session_of(stm_memory)
    two = session_of(stm_memory, Scope(channel_id="c2", user_id="u2", server_id="g2"))
    await one.add_items([{"role": "user", "content": "Session 1 message"}])
    await two.add_items(
        [
            {"role": "user", "content": "Session 2 message 1"},
            {"role": "user", "content": "Session 2 message 2"},
        ]
    )
    assert (await two.pop_item() or {}).get("content") == "Session 2 message 2"
    assert [i.get("content") for i in await one.get_items()] == ["Session 1 message"]
    assert [i.get("content") for i in await two.get_items()] == ["Session 2 message 1"]


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_runner_sees_the_conversation(method: str, stm_memory: ShortTermMemory) -> None:
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
    session = session_of(stm_memory)
    agent = Agent(name="test", model=model)
    first = await run_agent(method, agent, "Where is the Golden Gate Bridge?", session=session)
    assert first.final_output == "San Francisco"
    second = await run_agent(method, agent, "What state is it in?", session=session)
    assert second.final_output == "California"
    assert model.last_call is not None and len(model.last_call.input) == 3
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2
    assert [m.content for m in entry.messages] == [
        "Where is the Golden Gate Bridge?",
        "San Francisco",
        "What state is it in?",
        "California",
    ]


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
async def test_list_input_is_appended_to_the_history(
    method: str, stm_memory: ShortTermMemory
) -> None:
    session = session_of(stm_memory)
    initial: list[TResponseInputItem] = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(initial)
    model = ScriptedModel([[assistant_message("This should run")]])
    list_input = [{"role": "user", "content": "Test message"}]
    await run_agent(method, Agent(name="test", model=model), list_input, session=session)
    assert model.last_call is not None and model.last_call.input == initial + list_input


# -- the memory turn around Runner ------------------------------------------------------


def memory_call(summary: str, call_id: str = "call_m") -> Any:
    return function_call(TOOL_NAME, {"summary": summary}, call_id=call_id)


async def outputs(session: ShortTermMemorySession) -> list[dict[str, Any]]:
    return [
        json.loads(str(i["output"]))
        for i in await session.session.get_items()
        if i.get("type") == "function_call_output"
    ]


@pytest.mark.parametrize("method", ["run", "run_streamed"])
async def test_an_answer_with_the_memory_call_ends_the_run(
    method: str, stm_memory: ShortTermMemory
) -> None:
    model = ScriptedModel([[assistant_message("Friday it is."), memory_call("Heist: Friday.")]])
    session = session_of(stm_memory)
    agent = session.agent(Agent(name="test", model=model))
    result = await run_agent(method, agent, "The heist is on Friday.", session=session)

    assert result.final_output == "Friday it is."
    assert len(model.calls) == 1  # no second model call for the memory call
    assert tool_names(model.calls[0]) == [TOOL_NAME]
    assert await outputs(session) == [{"status": "completed"}]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."
    assert entry.turns_since_refresh == 0 and entry.last_refreshed_turn == 1
    # The run's last step ended the turn (not a later read) and captured the exchange.
    assert session.turn is None
    assert [(m.role, m.content) for m in entry.messages] == [
        ("user", "The heist is on Friday."),
        ("assistant", "Friday it is."),
    ]
    # The next run is sent the memory, not the memory call.
    model.enqueue([assistant_message("Noted.")])
    await run_agent(method, agent, "And the getaway car?", session=session)
    sent = model.calls[-1].input
    assert not any(i.get("type") in ("function_call", "function_call_output") for i in sent)
    assert any(i.get("role") == "system" and "Heist: Friday." in i["content"] for i in sent)


async def test_a_memory_call_alone_gets_one_more_model_call(
    stm_memory: ShortTermMemory,
) -> None:
    model = ScriptedModel([[memory_call("Heist: Friday.")], [assistant_message("Done.")]])
    session = session_of(stm_memory)
    agent = session.agent(Agent(name="test", model=model))
    result = await run_agent("run", agent, "The heist is on Friday.", session=session)

    assert result.final_output == "Done."
    # The tool list is fixed for the turn: the call after the update still offers the
    # memory tool (a second call would fail: test_a_second_update_in_one_turn_fails).
    assert [tool_names(c) for c in model.calls] == [[TOOL_NAME], [TOOL_NAME]]
    first, second = model.calls
    assert second.input[: len(first.input)] == first.input  # the second extends the first
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == "Heist: Friday."


async def test_a_second_update_in_one_turn_fails(stm_memory: ShortTermMemory) -> None:
    model = ScriptedModel(
        [
            [memory_call("First.", "call_1"), memory_call("Second.", "call_2")],
            [assistant_message("ok")],
        ]
    )
    session = session_of(stm_memory)
    agent = Agent(name="test", model=model, tools=[session.memory_tool()])
    await run_agent("run", agent, "Summarise, please.", session=session)

    # The SDK runs the two calls concurrently: exactly one of them writes.
    results = await outputs(session)
    statuses = [r["status"] for r in results]
    assert sorted(statuses) == ["completed", "tool_execution_failed"]
    failed = results[statuses.index("tool_execution_failed")]
    assert "already updated this turn" in failed["reason"]
    by_call = {
        i["call_id"]: json.loads(str(i["output"]))["status"]
        for i in await session.session.get_items()
        if i.get("type") == "function_call_output"
    }
    written = "First." if by_call["call_1"] == "completed" else "Second."
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary == written


def nudged(call: Any) -> bool:
    """The model's input asks it to call the memory tool (the nudge)."""
    return any(
        f"call {TOOL_NAME}" in str(i.get("content"))
        for i in call.input
        if i.get("role") != "assistant"
    )


@pytest.mark.parametrize("method", ["run", "run_streamed"])
async def test_remember_this_hides_the_tool_and_the_nudge(
    method: str, stm_memory: ShortTermMemory
) -> None:
    stm_memory.configure_server("g1", refresh_cadence=1)
    model = ScriptedModel(
        [[assistant_message("Hi.")], [assistant_message("I'll keep that in mind.")]]
    )
    session = session_of(stm_memory)
    agent = session.agent(Agent(name="test", model=model))
    await run_agent(method, agent, "Hello.", session=session)
    await run_agent(method, agent, "Please remember that I hate the sea.", session=session)
    # The nudge is due (cadence 1), but not in a turn whose message asks to remember.
    assert tool_names(model.calls[1]) == [] and not nudged(model.calls[1])
    model.enqueue([assistant_message("Sure.")])
    await run_agent(method, agent, "What next?", session=session)
    assert tool_names(model.calls[2]) == [TOOL_NAME] and nudged(model.calls[2])


async def test_a_plain_agent_following_the_nudge_gets_a_failed_result(
    stm_memory: ShortTermMemory,
) -> None:
    # A plain agent has no hooks to take the nudge out once the user's message asks to
    # remember: the tool stays, and the engine refuses the call (no SDK crash).
    stm_memory.configure_server("g1", refresh_cadence=1)
    model = ScriptedModel(
        [
            [assistant_message("Hi.")],
            [assistant_message("Noted."), memory_call("The sea.")],
            [assistant_message("Noted.")],
        ]
    )
    session = session_of(stm_memory)
    agent = Agent(name="test", model=model, tools=[session.memory_tool()])
    await run_agent("run", agent, "Hello.", session=session)
    result = await run_agent("run", agent, "Please remember that I hate the sea.", session=session)
    assert result.final_output == "Noted."
    assert nudged(model.calls[1])
    [failed] = await outputs(session)
    assert failed["status"] == "tool_execution_failed" and "remember" in failed["reason"]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary is None


@pytest.mark.parametrize("method", ["run", "run_streamed"])
async def test_a_call_to_a_hidden_tool_gets_the_guards_failed_result(
    method: str, stm_memory: ShortTermMemory
) -> None:
    # An excluded provider hides the tool; a model that calls it anyway gets the guard's
    # failed result and the run goes on (no ModelBehaviorError), every step sent the
    # same tool list (without it).
    model = ScriptedModel([[memory_call("Forced.")], [assistant_message("Sorry.")]])
    session = session_of(stm_memory, provider="novelai")
    agent = session.agent(Agent(name="test", model=model))
    result = await run_agent(method, agent, "Hello.", session=session)
    assert result.final_output == "Sorry."
    assert [tool_names(c) for c in model.calls] == [[], []]
    [failed] = await outputs(session)
    assert failed["status"] == "tool_execution_failed" and failed["tool_name"] == TOOL_NAME
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.summary is None


async def test_the_agents_tool_list_always_routes_the_memory_tool(
    stm_memory: ShortTermMemory,
) -> None:
    # is_enabled of agent()'s agent is True in every step and learns nothing (no side
    # effect): the turn learns its user message in the hooks, before the model call.
    session = session_of(stm_memory)
    agent = session.agent(Agent(name="test", model=ScriptedModel([])))
    plain = Agent(name="plain", model=ScriptedModel([]), tools=[session.memory_tool()])
    wrapper: RunContextWrapper[Any] = RunContextWrapper(context=None)
    await session.get_items(wrapper=wrapper)  # the run's first read: the turn begins
    wrapper.turn_input = [{"role": "user", "content": "Please remember that I hate the sea."}]
    assert session._tool_enabled(wrapper, agent) is True
    assert session.turn is not None and session.turn.user_message is None
    # A plain agent's tool list is what its model is sent: it learns the message there.
    assert session._tool_enabled(wrapper, plain) is False
    assert session.turn.user_message == "Please remember that I hate the sea."
    assert session._tool_enabled(wrapper, agent) is True


async def test_agent_wraps_a_model_once_and_keeps_a_model_name(
    stm_memory: ShortTermMemory,
) -> None:
    session, other = session_of(stm_memory), session_of(stm_memory)
    model = ScriptedModel([])
    once = session.agent(Agent(name="test", model=model))
    assert isinstance(once.model, MemoryModel) and once.model.inner is model
    twice = session.agent(other.agent(once))  # rebound, unnested
    assert isinstance(twice.model, MemoryModel) and twice.model.inner is model
    assert twice.model.observer.session is session
    # A name is resolved by the run's provider, after agent(): it stays a name, and the
    # tool list is what the model is sent (hidden while a guard hides it).
    named = session.agent(Agent(name="test", model="gpt-4.1-mini"))
    assert named.model == "gpt-4.1-mini"
    assert session._tool_enabled(None, named) is False  # no turn open


async def test_the_messages_api_gets_the_hidden_tool_described_beside_tool_traffic(
    stm_memory: ShortTermMemory,
) -> None:
    # provider="anthropic" (the Messages API behind an OpenAI-compatible client) refuses
    # tool_use/tool_result blocks without tools: once the forced call is in the input,
    # the hidden tool is described and uncallable, as the Anthropic loop sends it.
    model = ScriptedModel([[memory_call("Forced.")], [assistant_message("Noted.")]])
    session = session_of(stm_memory, provider="anthropic")
    agent = session.agent(Agent(name="test", model=model))
    await run_agent("run", agent, "Please remember that I hate the sea.", session=session)
    first, second = model.calls
    assert tool_names(first) == [] and tool_names(second) == [TOOL_NAME]
    assert second.model_settings.tool_choice == "none"
    [failed] = await outputs(session)
    assert failed["status"] == "tool_execution_failed" and "remember" in failed["reason"]


async def test_a_run_config_model_that_bypasses_agent_is_said(
    stm_memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel([[assistant_message("Hi.")], [assistant_message("Again.")]])
    session = session_of(stm_memory, provider="novelai")
    agent = session.agent(Agent(name="test", model=ScriptedModel([])))
    config = RunConfig(model=model, tracing_disabled=True)
    with caplog.at_level("WARNING", logger="stm_memory.openai_agents"):
        await run_agent("run", agent, "Hello.", session=session, run_config=config)
        await run_agent("run", agent, "Hello again.", session=session, run_config=config)
    # The wrapper never saw the call: the memory tool went (and the retrieval tool,
    # listed for the wrapper to send when it clears), until the bypass was seen.
    assert tool_names(model.calls[0]) == [TOOL_NAME, RECALL_TOOL]
    assert tool_names(model.calls[1]) == [TOOL_NAME]
    said = [r for r in caplog.records if "RunConfig(model=...)" in r.getMessage()]
    assert len(said) == 1  # once per session


async def test_the_agents_own_tools_and_behaviour_stay(stm_memory: ShortTermMemory) -> None:
    @function_tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    model = ScriptedModel([[function_call("lookup", {"q": "map"}, call_id="c_1")]])
    session = session_of(stm_memory)
    agent = session.agent(
        Agent(name="test", model=model, tools=[lookup], tool_use_behavior="stop_on_first_tool")
    )
    result = await run_agent("run", agent, "Where is the map?", session=session)
    assert result.final_output == "found map"
    assert sorted(tool_names(model.calls[0])) == sorted(["lookup", TOOL_NAME])
    assert stm_memory.get(SCOPE) is not None  # the turn ended with the run's last step


async def test_a_failed_run_is_still_a_turn(stm_memory: ShortTermMemory) -> None:
    model = ScriptedModel([RuntimeError("provider down"), [assistant_message("Back.")]])
    session = session_of(stm_memory)
    agent = session.agent(Agent(name="test", model=model))
    with pytest.raises(RuntimeError):
        await run_agent("run", agent, "Hello?", session=session)
    assert session.turn is not None  # nothing tells a session that a run failed …
    await run_agent("run", agent, "Hello again?", session=session)
    entry = stm_memory.get(SCOPE)  # … the next run ends that turn first
    assert entry is not None and entry.turns_since_refresh == 2
    assert [m.content for m in entry.messages] == ["Hello?", "Hello again?", "Back."]


class _UnreadableTail(SQLiteSession):
    """A record whose long reads fail: the session's read-back for capture (the
    SDK's own reads during a run ask for the whole record or a short tail)."""

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        if limit is not None and limit >= CAPTURE_WINDOW:
            raise OSError("record unreadable")
        return await super().get_items(limit)


async def test_a_record_that_cannot_be_read_back_never_fails_the_run(
    stm_memory: ShortTermMemory,
) -> None:
    session = session_of(stm_memory, session=_UnreadableTail("s1"))
    agent = session.agent(Agent(name="test", model=ScriptedModel([[assistant_message("Hi.")]])))
    result = await run_agent("run", agent, "Hello?", session=session)
    assert result.final_output == "Hi."
    entry = stm_memory.get(SCOPE)
    # Nothing captured (nothing could be read back), but the turn happened: counted.
    assert entry is not None and entry.turns_since_refresh == 1 and entry.messages == ()
    assert session.turn is None


async def test_reads_during_a_run_are_the_records_and_keep_the_turn(
    stm_memory: ShortTermMemory,
) -> None:
    turns: list[Any] = []
    tails: list[list[Any]] = []

    @function_tool
    async def peek() -> str:
        """Look at the conversation."""
        turns.append(session.turn)
        tails.append(await session.get_items(limit=1))  # your own code: no wrapper
        return "peeked"

    class Tail(RunHooks[Any]):
        async def on_llm_start(self, context: Any, agent: Any, *args: Any) -> None:
            # The SDK's own tail checks read with the run's context wrapper.
            assert isinstance(context, RunContextWrapper)
            tails.append(await session.get_items(limit=1, wrapper=context))

    session = session_of(stm_memory)
    turn = stm_memory.begin_turn(SCOPE, user_message="x")
    stm_memory.update(turn, {"summary": "The heist is on Friday."})
    stm_memory.end_turn(turn)
    await session.add_items(
        [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"}]
    )
    model = ScriptedModel([[function_call("peek", {}, call_id="p1")], [assistant_message("Seen.")]])
    agent = session.agent(Agent(name="test", model=model, tools=[peek]))
    await run_agent("run", agent, "What do you see?", session=session, hooks=Tail())

    assert len(await session.get_items(limit=1)) == 1  # the record's last item
    assert all(len(tail) == 1 for tail in tails) and len(tails) == 3
    assert not any("Friday" in str(tail) for tail in tails)  # never the memory view
    assert turns[0] is not None  # the run's turn was open while the tool ran
    assert session.turn is None
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2  # add_items + the run
    assert [m.content for m in entry.messages] == ["Hello", "Hi!", "What do you see?", "Seen."]


async def test_a_second_run_at_once_is_refused(stm_memory: ShortTermMemory) -> None:
    class Slow(ScriptedModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.05)
            return await super().get_response(*args, **kwargs)

    session = session_of(stm_memory)
    model = Slow([[assistant_message("one")], [assistant_message("two")]])
    agent = session.agent(Agent(name="test", model=model))
    first, second = await asyncio.gather(
        run_agent("run", agent, "First.", session=session),
        run_agent("run", agent, "Second.", session=session),
        return_exceptions=True,
    )
    assert first.final_output == "one"
    assert isinstance(second, SessionBusyError)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 1
    assert [m.content for m in entry.messages] == ["First.", "one"]
    # Once it is over, the session takes the next run.
    await run_agent("run", agent, "Third.", session=session)
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh == 2


async def test_memory_tool_does_no_io_and_agent_does_not_nest(
    stm_memory: ShortTermMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = session_of(stm_memory)
    with monkeypatch.context() as patch:
        patch.setattr(stm_memory, "begin_turn", lambda *a, **k: pytest.fail("blocking I/O"))
        tool = session.memory_tool()
    assert tool.params_json_schema["required"] == ["summary"]
    model = ScriptedModel([[assistant_message("Friday it is."), memory_call("Friday.")]])
    once = session.agent(Agent(name="test", model=model))
    twice = session.agent(once)
    assert isinstance(twice.tool_use_behavior, Epilogue) and isinstance(twice.hooks, MemoryHooks)
    assert not isinstance(twice.tool_use_behavior.inner, Epilogue)
    assert twice.hooks.inner is None
    # Ours once each: the memory tool, and the retrieval tool (listed only from a long
    # turn's first clear on).
    assert [t.name for t in twice.tools] == [TOOL_NAME, RECALL_TOOL]
    result = await run_agent("run", twice, "The heist is on Friday.", session=session)
    assert result.final_output == "Friday it is." and len(model.calls) == 1


async def test_the_tool_is_hidden_outside_a_run(stm_memory: ShortTermMemory) -> None:
    session = session_of(stm_memory)
    tool = session.memory_tool()
    assert tool is session.memory_tool()
    assert tool.name == TOOL_NAME and tool.params_json_schema["required"] == ["summary"]
    assert session._tool_enabled(None, None) is False
    result = await tool.on_invoke_tool(None, '{"summary": "x"}')  # type: ignore[arg-type]
    assert json.loads(result)["status"] == "tool_execution_failed"


async def test_the_tool_follows_the_schema_of_the_turn(stm_memory: ShortTermMemory) -> None:
    session = session_of(stm_memory)
    tool = session.memory_tool()
    assert tool.params_json_schema["required"] == ["summary"]
    stm_memory.set_categories("g1", [Category("Plot", "What happened"), Category("Mood", "Tone")])
    model = ScriptedModel(
        [
            [
                assistant_message("Noted."),
                function_call(TOOL_NAME, {"plot": "A heist.", "mood": "Tense."}, call_id="c"),
            ]
        ]
    )
    agent = session.agent(Agent(name="test", model=model))
    await run_agent("run", agent, "The heist is on.", session=session)
    assert tool.params_json_schema["required"] == ["plot", "mood"]
    entry = stm_memory.get(SCOPE)
    assert entry is not None and entry.categories == {"plot": "A heist.", "mood": "Tense."}

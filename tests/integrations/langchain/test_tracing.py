"""Memory calls stay visible to LangChain's tracing (callbacks, LangSmith) in every
LangChain entry point: a handler passed in ``config={"callbacks": [...]}`` sees
``update_short_term_memory`` run as any tool runs, ``on_tool_start`` with its name and
arguments, ``on_tool_end`` with its result. A guarded second call's failed result is the
tool's answer to the model (a JSON result, not an exception), so it reaches
``on_tool_end`` too, never ``on_tool_error``.

Entry points: the middleware in ``create_agent`` (the call runs through the ToolNode, so
inner middleware see it as well), ``RunnableWithMessageHistory`` over
``ShortTermMemoryHistory`` with ``with_short_term_memory``, the chain wrapper alone
(no history: it runs the turn itself), and the history alone (it applies a memory call it
finds in an added AI message). Each in invoke, ainvoke, stream and astream."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.testing.chat_model import stream_chunk
from stm_memory_langchain import (
    ShortTermMemoryHistory,
    ShortTermMemoryMiddleware,
    with_short_term_memory,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)

SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
MODES = ["invoke", "ainvoke", "stream", "astream"]
FIRST = {"summary": "The heist is on Friday."}
SECOND = {"summary": "Overwritten."}


class Scripted(GenericFakeChatModel):
    """Scripted replies that bind tools and stream with their tool calls intact."""

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        result = self._generate(messages, stop=stop, run_manager=run_manager, **kw)
        message = result.generations[0].message
        assert isinstance(message, AIMessage)
        yield stream_chunk(message, run_manager)


def two_memory_calls() -> AIMessage:
    """An answer with two memory calls: one lands, the other is refused."""
    return AIMessage(
        "Noted: the heist is on Friday.",
        tool_calls=[
            {"name": TOOL_NAME, "args": FIRST, "id": "m1", "type": "tool_call"},
            {"name": TOOL_NAME, "args": SECOND, "id": "m2", "type": "tool_call"},
        ],
    )


class Tools(BaseCallbackHandler):
    """The tool runs a handler saw: start, end or error, by run id."""

    def __init__(self) -> None:
        self.started: dict[UUID, dict[str, Any]] = {}
        self.ended: dict[UUID, Any] = {}
        self.failed: dict[UUID, BaseException] = {}
        self._lock = threading.Lock()

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            self.started[run_id] = {
                "name": serialized.get("name"),
                "description": serialized.get("description"),
                "input_str": input_str,
                "inputs": inputs,
                "parent": parent_run_id,
            }

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self.ended[run_id] = output

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self.failed[run_id] = error

    def memory_runs(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(arguments, result) of each memory tool run that ended, in no fixed order."""
        runs = []
        for run_id, start in self.started.items():
            if start["name"] != TOOL_NAME:
                continue
            output = self.ended[run_id]
            assert isinstance(output, ToolMessage), output
            assert output.name == TOOL_NAME
            runs.append((start["inputs"], json.loads(str(output.content))))
        return runs


def assert_traced(tools: Tools, *, parent: bool = True) -> str:
    """Two memory calls seen as tool runs with their arguments: one completed, the
    other refused (the middleware runs parallel calls at once, so either may land).
    Returns the summary that landed."""
    assert tools.failed == {}
    runs = tools.memory_runs()
    assert sorted(args["summary"] for args, _ in runs) == sorted(
        [FIRST["summary"], SECOND["summary"]]
    )
    (landed,) = [args["summary"] for args, result in runs if result == {"status": "completed"}]
    (refused,) = [result for _, result in runs if result != {"status": "completed"}]
    assert refused["status"] == "tool_execution_failed"
    assert refused["tool_name"] == TOOL_NAME
    assert "already updated" in refused["reason"]
    for start in tools.started.values():
        assert start["description"]  # the turn's tool description
        assert start["inputs"]["summary"] in start["input_str"]
        if parent:  # nested in the run that made the call, as LangSmith shows it
            assert start["parent"] is not None
    return landed


async def run(runnable: Any, value: Any, config: Any, mode: str) -> Any:
    if mode == "invoke":
        return runnable.invoke(value, config)
    if mode == "ainvoke":
        return await runnable.ainvoke(value, config)
    if mode == "stream":
        return list(runnable.stream(value, config))
    return [c async for c in runnable.astream(value, config)]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[ShortTermMemory]:
    memory = ShortTermMemory.from_url(f"sqlite:///{tmp_path}/stm.db", cache_dir=tmp_path / "cache")
    yield memory
    memory.close()


def stored_summary(mem: ShortTermMemory) -> str | None:
    entry = mem.get(SCOPE)
    return entry.summary if entry is not None else None


# -- the middleware -----------------------------------------------------------------------


class Seen(AgentMiddleware):
    """An inner middleware: the tool calls its wrap_tool_call saw."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.names.append(request.tool_call["name"])
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.names.append(request.tool_call["name"])
        return await handler(request)


@pytest.mark.parametrize("mode", MODES)
async def test_the_middlewares_memory_calls_are_traced(mem: ShortTermMemory, mode: str) -> None:
    inner = Seen()
    agent = create_agent(
        Scripted(messages=iter([two_memory_calls()])),
        tools=[],
        middleware=[ShortTermMemoryMiddleware(mem), inner],
        checkpointer=InMemorySaver(),
    )
    tools = Tools()
    config: Any = {
        "configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"},
        "callbacks": [tools],
    }
    await run(agent, {"messages": [("user", "The heist is on Friday.")]}, config, mode)

    assert stored_summary(mem) == assert_traced(tools)
    assert inner.names == [TOOL_NAME, TOOL_NAME]  # inner middleware see the calls too
    # The run ended after the epilogue; its messages are the call, both results, and
    # the answer last.
    messages = agent.get_state(config).values["messages"]
    assert [m.type for m in messages] == ["human", "ai", "tool", "tool", "ai"]


# -- the LCEL history with the chain wrapper -------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_lcel_historys_memory_calls_are_traced(mem: ShortTermMemory, mode: str) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "sys"), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    history = ShortTermMemoryHistory(mem, SCOPE, raw=True)
    chain = RunnableWithMessageHistory(
        with_short_term_memory(prompt | Scripted(messages=iter([two_memory_calls()]))),
        lambda session_id: history,
        input_messages_key="input",
        history_messages_key="history",
    )
    tools = Tools()
    config: Any = {"configurable": {"session_id": "c1"}, "callbacks": [tools]}
    await run(chain, {"input": "The heist is on Friday."}, config, mode)

    # In order here: the first call lands, the second is refused.
    assert stored_summary(mem) == assert_traced(tools) == FIRST["summary"]
    assert [m.type for m in history.record.messages] == ["human", "ai", "tool", "tool"]


# -- the chain wrapper alone ----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_chain_wrappers_memory_calls_are_traced(mem: ShortTermMemory, mode: str) -> None:
    chain = with_short_term_memory(Scripted(messages=iter([two_memory_calls()])), mem, scope=SCOPE)
    tools = Tools()
    await run(chain, [HumanMessage("The heist is on Friday.")], {"callbacks": [tools]}, mode)

    # Called directly, the wrapper's model calls and tool runs are the caller's roots.
    assert stored_summary(mem) == assert_traced(tools, parent=False) == FIRST["summary"]


# -- the history alone: a memory call in an added AI message ---------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_historys_own_memory_calls_are_traced(mem: ShortTermMemory, mode: str) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "sys"), MessagesPlaceholder("history"), ("human", "{input}")]
    )
    history = ShortTermMemoryHistory(mem, SCOPE, raw=True)
    chain = RunnableWithMessageHistory(
        prompt | Scripted(messages=iter([two_memory_calls()])),  # no wrapper
        lambda session_id: history,
        input_messages_key="input",
        history_messages_key="history",
    )
    tools = Tools()
    config: Any = {"configurable": {"session_id": "c1"}, "callbacks": [tools]}
    await run(chain, {"input": "The heist is on Friday."}, config, mode)

    # In order here: the first call lands, the second is refused.
    assert stored_summary(mem) == assert_traced(tools) == FIRST["summary"]
    assert [m.type for m in history.record.messages] == ["human", "ai", "tool", "tool"]

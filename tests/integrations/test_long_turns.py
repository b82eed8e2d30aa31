"""Long turns (issue "long turns"): a tool loop of twenty reads (more than one and a
half of the model's window) stays inside the window, never parts a call from its
result, and loses nothing it read. Through the real SDK clients, replayed from
cassettes recorded against the fake provider, which refuses (as llama.cpp, or
Anthropic's API, does) any request longer than its window:

- every request is at most three quarters of the window, valid for its API;
- the older results leave in batches (each batch rewrites the cached prefix once; in
  between, every request extends the one before);
- a result that left comes back byte for byte through the retrieval tool.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from helpers.dialogues import validity_errors
from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit import TurnResult
from stm_memory.prompt.clearing import RECALL_TOOL, turn_results
from stm_memory_anthropic import AnthropicLoop
from stm_memory_langchain import ShortTermMemoryMiddleware
from stm_memory_openai import OpenAIChatLoop, OpenAIResponsesLoop
from tests.fakeprovider import FakeProviderServer, Script
from tests.integrations.conftest import REPLAY_BASE_URL, record_mode

pytestmark = [pytest.mark.vcr]

MODEL = "qwen2.5-7b-instruct"
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1")
SYSTEM = "You are a research assistant. Read what you are asked to, then answer."
WINDOW = 8192
READS = 20
OPEN_TOOL = "open_report"


def report(k: int) -> str:
    """About 700 tokens; report k holds its code on line 11."""
    lines = [f"Report {k}, section {i}: the committee reviewed item {i * k}." for i in range(52)]
    lines.insert(11, f"CODE_{k} = {(k * 104729) % 1000000:06d}-R{k}")
    return "\n".join(lines)


def script(s: Script) -> None:
    for k in range(READS):
        s.reply_tool_call(OPEN_TOOL, {"name": f"report_{k}"}, id=f"call_{k}")
    s.reply_tool_call(RECALL_TOOL, {"call_id": "call_0"}, id="call_back")
    s.reply_text("The code in the first report is 000000-R0.")


@pytest.fixture(params=["chat", "responses", "anthropic"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(api: str, request: pytest.FixtureRequest) -> Iterator[FakeProviderServer | None]:
    """While recording, a server with an 8,192-token window (llama.cpp's listing and
    refusal for the OpenAI APIs, Anthropic's refusal for the Messages API); on replay
    nothing listens and the cassette answers."""
    if record_mode(request.config) == "none":
        yield None
        return
    like = None if api == "anthropic" else "llamacpp"
    with FakeProviderServer(models_like=like, context_window=WINDOW, model_id=MODEL) as srv:
        script(srv.script)
        yield srv


def run(api: str, server: FakeProviderServer | None, memory: ShortTermMemory) -> TurnResult:
    tools: list[dict[str, Any]]
    if api == "anthropic":
        base = server.base_url if server is not None else REPLAY_BASE_URL
        client: Any = anthropic.Anthropic(base_url=base, api_key="test", max_retries=0)
        # The Messages API lists no window: the loop is told it.
        loop: Any = AnthropicLoop(
            client, memory, model=MODEL, max_tokens=256, max_steps=60, context_window=WINDOW
        )
        tools = [
            {
                "name": OPEN_TOOL,
                "description": "Open a report by name.",
                "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}},
            }
        ]
    else:
        base = server.openai_base_url if server is not None else f"{REPLAY_BASE_URL}/v1"
        client = openai.OpenAI(base_url=base, api_key="test", max_retries=0)
        loop_class = OpenAIChatLoop if api == "chat" else OpenAIResponsesLoop
        loop = loop_class(client, memory, model=MODEL, max_steps=60)  # the window: listed
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        function = {
            "name": OPEN_TOOL,
            "description": "Open a report by name.",
            "parameters": schema,
        }
        tools = [
            {"type": "function", "function": function}
            if api == "chat"
            else {"type": "function", **function}
        ]

    def open_report(args: dict[str, Any]) -> str:
        return report(int(str(args["name"]).split("_")[1]))

    first = {"role": "user", "content": "Read all twenty reports, then tell me CODE_0."}
    return loop.run_turn(
        SCOPE, [first], system=SYSTEM, tools=tools, tool_handlers={OPEN_TOOL: open_report}
    )


def sent(api: str, request: dict[str, Any]) -> list[Any]:
    return list(request["input"] if api == "responses" else request["messages"])


def tokens(request: dict[str, Any]) -> int:
    """As the server counts them: its compact JSON's length / 4."""
    return -(-len(json.dumps(request, separators=(",", ":"), ensure_ascii=False)) // 4)


@pytest.mark.scripted("openai")
def test_a_long_turn_stays_in_the_window_and_loses_nothing(
    api: str, server: FakeProviderServer | None, open_memory: Callable[[], ShortTermMemory]
) -> None:
    result = run(api, server, open_memory())
    requests = result.requests
    assert len(requests) == READS + 2  # never refused, never retried
    fmt = {"chat": "openai", "responses": "responses", "anthropic": "anthropic"}[api]
    for request in requests:
        assert tokens(request) <= 0.75 * WINDOW
        assert validity_errors(fmt, sent(api, request)) == []
    # The reads total more than one and a half windows: older results left, in batches.
    assert sum(len(report(k)) for k in range(READS)) / 4 > 1.5 * WINDOW
    rewrites = sum(
        1
        for a, b in itertools.pairwise(requests)
        if sent(api, b)[: len(sent(api, a))] != sent(api, a)
    )
    assert 1 <= rewrites <= 12
    # The retrieval tool came with the first clear, and brought report 0 back whole.
    names = [
        [t.get("name") or t.get("function", {}).get("name") for t in r.get("tools") or []]
        for r in requests
    ]
    assert RECALL_TOOL not in names[0] and RECALL_TOOL in names[-1]
    (back,) = [r for r in turn_results(result.messages) if r.call_id == "call_back"]
    assert back.tool == RECALL_TOOL and back.text == report(0)  # byte for byte
    assert result.text == "The code in the first report is 000000-R0."


@pytest.fixture
def open_server(request: pytest.FixtureRequest) -> Iterator[FakeProviderServer | None]:
    """An OpenAI-compatible server with the window (llama.cpp's) while recording."""
    if record_mode(request.config) == "none":
        yield None
        return
    with FakeProviderServer(models_like="llamacpp", context_window=WINDOW, model_id=MODEL) as srv:
        script(srv.script)
        yield srv


@pytest.mark.scripted("openai")
@pytest.mark.parametrize("window", ["told", "listed"])
def test_a_long_agent_turn_stays_in_the_window_and_keeps_every_result_in_its_state(
    window: str,
    open_server: FakeProviderServer | None,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """create_agent with the middleware: every model call of the agent loop is bounded;
    the agent's state (a checkpointer's thread) keeps every result whole. The window is
    ``context_window=``, or the one the server lists (asked once, as the loops ask)."""
    sent: list[dict[str, Any]] = []
    hooks = {"request": [lambda request: sent.append(json.loads(request.read() or b"{}"))]}
    base = open_server.openai_base_url if open_server is not None else f"{REPLAY_BASE_URL}/v1"
    chat = ChatOpenAI(
        model=MODEL,
        base_url=base,
        api_key=SecretStr("test"),
        max_retries=0,
        http_client=openai.DefaultHttpxClient(event_hooks=hooks),
    )

    @tool
    def open_report(name: str) -> str:
        """Open a report by name."""
        return report(int(name.split("_")[1]))

    told = {"context_window": WINDOW} if window == "told" else {}
    middleware = ShortTermMemoryMiddleware(open_memory(), **told)
    agent = create_agent(chat, tools=[open_report], system_prompt=SYSTEM, middleware=[middleware])
    config: Any = {
        "configurable": {"thread_id": "c1", "user_id": "u1", "server_id": "g1"},
        "recursion_limit": 100,
    }
    ask = "Read all twenty reports, then tell me CODE_0."
    state = agent.invoke({"messages": [{"role": "user", "content": ask}]}, config)
    sent = [body for body in sent if "messages" in body]  # not the listing's requests
    assert len(sent) == READS + 2
    for request in sent:
        assert tokens(request) <= 0.75 * WINDOW
        assert validity_errors("openai", request["messages"]) == []
    assert any("result cleared from this request" in json.dumps(r) for r in sent)
    # The state keeps every result whole: only requests are cut.
    results = {r.call_id: r.text for r in turn_results(state["messages"])}
    assert all(results[f"call_{k}"] == report(k) for k in range(READS))
    assert results["call_back"] == report(0)
    assert state["messages"][-1].content == "The code in the first report is 000000-R0."


@pytest.mark.scripted("openai")
async def test_a_long_agents_sdk_turn_stays_in_the_window(
    open_server: FakeProviderServer | None,
    open_memory: Callable[[], ShortTermMemory],
    tmp_path: Path,
) -> None:
    """The Agents SDK session's agent(): each model call of the run is bounded, and the
    retrieval tool, listed from the first clear on, brings report 0 back."""
    from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, function_tool

    from stm_memory_openai_agents import ShortTermMemorySession

    sent: list[dict[str, Any]] = []

    async def keep(request: Any) -> None:
        sent.append(json.loads(request.content or b"{}"))

    base = open_server.openai_base_url if open_server is not None else f"{REPLAY_BASE_URL}/v1"
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [keep]})
    async with openai.AsyncOpenAI(
        base_url=base, api_key="test", max_retries=0, http_client=http
    ) as client:

        @function_tool
        def open_report(name: str) -> str:
            """Open a report by name."""
            return report(int(name.split("_")[1]))

        session = ShortTermMemorySession(
            open_memory(), SCOPE, db_path=tmp_path / "items.db", context_window=WINDOW
        )
        agent = session.agent(
            Agent(
                name="Reader",
                instructions=SYSTEM,
                model=OpenAIResponsesModel(MODEL, client),
                tools=[open_report],
            )
        )
        result = await Runner.run(
            agent,
            "Read all twenty reports, then tell me CODE_0.",
            session=session,
            run_config=RunConfig(tracing_disabled=True),
            max_turns=READS + 5,
        )
    assert len(sent) == READS + 2
    for request in sent:
        assert tokens(request) <= 0.75 * WINDOW
        assert validity_errors("responses", request["input"]) == []
    names = [[t.get("name") for t in r.get("tools") or []] for r in sent]
    assert RECALL_TOOL not in names[0] and RECALL_TOOL in names[-1]
    items = await session.session.get_items()
    results = {r.call_id: r.text for r in turn_results(items)}
    assert results["call_back"] == report(0)  # byte for byte, kept whole in the session
    assert result.final_output == "The code in the first report is 000000-R0."

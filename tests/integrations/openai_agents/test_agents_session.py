"""The OpenAI Agents SDK with ``ShortTermMemorySession``: ``Runner.run`` and
``Runner.run_streamed`` with the real ``openai`` client (Responses API, the SDK's
default model class) against the local fake provider, whose model is the offline
model (it answers, and calls the memory tool when nudged); replayed from cassettes.

Replay runs no server, so the tests read what the SDK sent from the HTTP client's
request hook, and what was kept from the memory and the wrapped session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, SQLiteSession
from helpers.dialogues import earlier_memory_calls, turn_count, validity_errors

from stm_memory import TOOL_NAME, Scope, ShortTermMemory
from stm_memory.prompt.render import CONTENT_HEADER
from stm_memory_openai_agents import ShortTermMemorySession
from tests.fakeprovider import Script
from tests.fakeprovider.offline import offline_replies
from tests.integrations.conftest import ModelSource, at_counted_cadence


@pytest.fixture
def open_memory(open_memory: Callable[[], ShortTermMemory]) -> Callable[[], ShortTermMemory]:
    """The conftest's, at the cadence these tests count turns by (COUNTED_CADENCE)."""
    return lambda: at_counted_cadence(open_memory())


pytestmark = [pytest.mark.vcr]

MODEL = "gpt-4.1-mini"
INSTRUCTIONS = "You are a co-writer. Answer in one sentence."
SCOPE = Scope(channel_id="c1", user_id="u1", server_id="g1", channel_name="novel")
TURNS = 24
# Default cadence 5 + overlap 1 + the current turn.
MAX_TURNS_SENT = 7
RUN_CONFIG = RunConfig(tracing_disabled=True)


def user_text(i: int) -> str:
    return f"Turn {i}: the heroine meets character {i} at the harbour and they argue."


class Requests:
    """Every request body the client sent (an httpx request hook: replay too)."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, request: Any) -> None:
        self.bodies.append(json.loads(request.content or b"{}"))


@pytest.fixture
async def client_and_requests(
    openai_source: ModelSource,
) -> AsyncIterator[tuple[openai.AsyncOpenAI, Requests]]:
    requests = Requests()
    options = openai_source.openai_options(
        is_async=True, event_hooks={"request": [requests]}, openai_host=False
    )
    async with openai.AsyncOpenAI(**options) as client:
        yield client, requests


async def run(agent: Agent[Any], text: str, session: Any, streamed: bool) -> str:
    if not streamed:
        result = await Runner.run(agent, text, session=session, run_config=RUN_CONFIG)
        return str(result.final_output)
    streaming = Runner.run_streamed(agent, text, session=session, run_config=RUN_CONFIG)
    async for _ in streaming.stream_events():
        pass
    return str(streaming.final_output)


def memory_calls(items: list[Any]) -> int:
    return sum(1 for i in items if i.get("type") == "function_call" and i.get("name") == TOOL_NAME)


@pytest.mark.scripted("openai")
@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_runner_with_the_session_sends_bounded_input(
    streamed: bool,
    client_and_requests: tuple[openai.AsyncOpenAI, Requests],
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
    tmp_path: Path,
) -> None:
    offline_replies(openai_script, "responses", turns=TURNS + 2)
    client, requests = client_and_requests
    model = OpenAIResponsesModel(MODEL, client)
    db = tmp_path / "conversations.db"
    mem = open_memory()
    session = ShortTermMemorySession(mem, SCOPE, db_path=db)
    agent = session.agent(Agent(name="Mira", instructions=INSTRUCTIONS, model=model))

    updates = 0
    for i in range(TURNS):
        before = len(requests.bodies)
        kept = len(await session.session.get_items())
        answer = await run(agent, user_text(i), session, streamed)
        sent = requests.bodies[before:]
        # One request per turn: the memory call rides along in the answer.
        assert len(sent) == 1, i
        body = sent[0]
        items = body["input"]
        assert validity_errors("responses", items) == [], i
        assert earlier_memory_calls(items) == 0, i
        assert turn_count(items) <= MAX_TURNS_SENT, i
        assert [t["name"] for t in body["tools"]] == [TOOL_NAME], i
        assert answer.startswith("Understood: "), i
        new = (await session.session.get_items())[kept:]
        assert memory_calls(new) <= 1, i  # the memory tool runs at most once a turn
        updates += memory_calls(new)
    record = await session.session.get_items()
    # The wrapped session keeps every item, the memory calls included.
    users = [i["content"] for i in record if i.get("role") == "user"]
    assert users == [user_text(i) for i in range(TURNS)]
    assert updates == memory_calls(record) >= TURNS // 6
    outputs = [json.loads(i["output"]) for i in record if i.get("type") == "function_call_output"]
    assert outputs and all(o["status"] == "completed" for o in outputs)
    entry = mem.get(SCOPE)
    assert entry is not None and entry.summary and entry.last_refreshed_turn == len(outputs)
    last_items = requests.bodies[-1]["input"]
    assert len(last_items) < len(record) / 3

    # A restart: the memory and the wrapped session come back from their files.
    session.close()
    mem.close()
    mem = open_memory()
    session = ShortTermMemorySession(mem, SCOPE, session=SQLiteSession(SCOPE.live_key, db))
    agent = session.agent(Agent(name="Mira", instructions=INSTRUCTIONS, model=model))
    await run(agent, user_text(TURNS), session, streamed)
    items = requests.bodies[-1]["input"]
    blocks = [str(i.get("content")) for i in items if i.get("role") == "system"]
    assert any(CONTENT_HEADER in b and entry.summary in b for b in blocks)
    assert items[-1] == {"content": user_text(TURNS), "role": "user"}
    assert turn_count(items) <= MAX_TURNS_SENT

    # clear_session: the record is gone and the channel starts afresh.
    await session.clear_session()
    assert await session.session.get_items() == []
    assert mem.get(SCOPE) is None
    await run(agent, user_text(TURNS + 1), session, streamed)
    assert requests.bodies[-1]["input"] == [{"content": user_text(TURNS + 1), "role": "user"}]
    session.close()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_one_plain_turn(
    streamed: bool,
    client_and_requests: tuple[openai.AsyncOpenAI, Requests],
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """Holds whatever the model says, so ``make record-cassettes`` records it from the
    real API."""
    openai_script.reply_text("Hello!")
    client, requests = client_and_requests
    mem = open_memory()
    session = ShortTermMemorySession(mem, SCOPE)
    model = OpenAIResponsesModel(MODEL, client)
    agent = session.agent(Agent(name="Mira", instructions=INSTRUCTIONS, model=model))
    answer = await run(agent, "Say hello in one word.", session, streamed)
    assert answer.strip()
    assert TOOL_NAME in [t["name"] for t in requests.bodies[0]["tools"]]
    record = await session.session.get_items()
    assert record[0] == {"content": "Say hello in one word.", "role": "user"}
    entry = mem.get(SCOPE)
    assert entry is not None and entry.turns_since_refresh + entry.last_refreshed_turn == 1
    # The run's usage, as the SDK recorded each request, billed in the receipt.
    (day,) = entry.receipt.values()
    assert day.turns == 1 and day.calls == len(requests.bodies) and day.input_tokens > 0
    session.close()


@pytest.mark.scripted("openai")
@pytest.mark.parametrize("model", ["gpt-5.6-sol", "gpt-5"])
async def test_agent_marks_the_memory_for_gpt56_only(
    model: str,
    client_and_requests: tuple[openai.AsyncOpenAI, Requests],
    openai_script: Script,
    open_memory: Callable[[], ShortTermMemory],
) -> None:
    """session.agent() names its model to the turn: a gpt-5.6-family model gets an
    explicit cache breakpoint on the memory block, an older one none (it refuses them)."""
    from helpers.memory import refresh

    summary = "The heroine owes the harbour master ten coins."
    client, requests = client_and_requests
    mem = open_memory()
    refresh(mem, SCOPE, summary)
    session = ShortTermMemorySession(mem, SCOPE)
    agent = session.agent(
        Agent(name="Mira", instructions=INSTRUCTIONS, model=OpenAIResponsesModel(model, client))
    )
    openai_script.reply_text("Noted.")
    await run(agent, "What do we owe?", session, streamed=False)
    (body,) = requests.bodies
    memory = [i for i in body["input"] if summary in json.dumps(i)]
    assert memory, body["input"]
    marked = "prompt_cache_breakpoint" in json.dumps(body)
    assert marked is model.startswith("gpt-5.6")
    if marked:
        assert "prompt_cache_breakpoint" in json.dumps(memory[0])
    session.close()

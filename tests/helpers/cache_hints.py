"""The entry points of the prompt-cache hint tests (``integrations/cache_hints``): each
integration driven through its real SDK client or LangChain partner chat model, one
channel turn at a time, and what the tests read on the wire.

- :class:`Wire` collects every JSON request body an httpx client sent (the folder's
  ``wire`` fixture patches ``Client.send``), so replay and recording read the same.
- :data:`ENTRIES` names the eleven entry points; :func:`driver` builds one for a
  :class:`Setup` (hints on or off, the caller's own hints, langchain-anthropic's caching
  middleware beside ours); :func:`turn` runs one turn and returns its request bodies and
  the cached input tokens the provider reported.
- :func:`marks` / :func:`check_breakpoints`: an Anthropic request's breakpoints and
  what the Messages API asks of them.
"""

from __future__ import annotations

import inspect
import json
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anthropic
import openai
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, RunConfig, Runner
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import BaseTool, StructuredTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from stm_memory import Scope, ShortTermMemory
from stm_memory.kit import prompt_cache_key
from stm_memory_anthropic import AnthropicLoop, AsyncAnthropicLoop
from stm_memory_langchain import (
    ShortTermMemoryHistory,
    ShortTermMemoryMiddleware,
    with_short_term_memory,
)
from stm_memory_openai import (
    AsyncOpenAIChatLoop,
    AsyncOpenAIResponsesLoop,
    OpenAIChatLoop,
    OpenAIResponsesLoop,
)
from stm_memory_openai_agents import ShortTermMemorySession

if TYPE_CHECKING:
    from tests.integrations.conftest import AnthropicSource, ModelSource

__all__ = [
    "BY_ID",
    "ENTRIES",
    "HOUR",
    "LONG_SYSTEM",
    "MINE",
    "SUMMARIES",
    "SYSTEM",
    "Env",
    "Setup",
    "Turn",
    "Wire",
    "cache_profile",
    "check_breakpoints",
    "driver",
    "entries",
    "keys",
    "marks",
    "our_key",
    "scope",
    "three_turns",
    "turn",
]

OPENAI_MODEL = "gpt-4.1-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
SYSTEM = "You are Trip, a patient travel assistant for rail journeys in Japan."
#: About 1,600 tokens at four characters a token: above every 1024-token minimum, for
#: the tests that read cached input (``Setup(system=LONG_SYSTEM)``).
LONG_SYSTEM = (
    "You are Trip, a patient travel assistant for rail journeys in Japan. "
    "Answer in one or two sentences, name the train line, and never invent timetables. "
) * 40
MINE = "mine"
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}
#: Blocks the Messages API takes no breakpoint on.
UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
#: Memories of two channels of one server (each is the other's briefing).
SUMMARIES = {
    "c1": "Ann plans a rail trip from Kyoto to Nara in April and prefers quiet temples.",
    "c2": "Ann asked in general chat about buying a JR Pass before flying to Japan.",
}


def scope(channel: str) -> Scope:
    return Scope(channel_id=channel, user_id="u1", server_id="g1")


def our_key(channel: str) -> str:
    return prompt_cache_key(scope(channel))


# -- what reached the HTTP layer ------------------------------------------------------------


class Wire:
    """Every JSON request body an httpx client sent, in order."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def see(self, request: Any) -> None:
        self.bodies.append(json.loads(request.content or b"{}"))


def marks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """``(where, block, cache_control)`` of every breakpoint of a Messages request, in
    prefix order (tools, system, messages), the top-level automatic one last (it goes
    on the last block)."""
    out = [("tool", t, t["cache_control"]) for t in body.get("tools") or [] if "cache_control" in t]
    system = body.get("system")
    for block in system if isinstance(system, list) else []:
        if "cache_control" in block:
            out.append(("system", block, block["cache_control"]))
    for message in body["messages"]:
        content = message["content"]
        for block in content if isinstance(content, list) else []:
            if "cache_control" in block:
                out.append((message["role"], block, block["cache_control"]))
    if body.get("cache_control"):
        out.append(("automatic", {}, body["cache_control"]))
    return out


def check_breakpoints(body: dict[str, Any]) -> int:
    """Asserts what the Messages API asks of breakpoints; returns how many there are."""
    found = marks(body)
    assert len(found) <= 4, [where for where, _, _ in found]
    ttls = []
    for where, block, marker in found:
        assert marker.get("type") == "ephemeral", marker
        assert block.get("type") not in UNMARKABLE, block
        assert where in ("tool", "automatic") or block.get("type") != "text" or block["text"]
        ttls.append(marker.get("ttl", "5m"))
    # A 1-hour breakpoint never follows a 5-minute one.
    assert ttls == sorted(ttls, key=lambda ttl: ttl != "1h"), ttls
    return len(found)


def cache_profile(provider: str) -> str:
    """The fake provider's profile (its defaults)."""
    return "openai-gpt-5" if provider == "openai" else "anthropic-sonnet-5m"


# -- the entry points -----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    id: str
    provider: str  # "openai" | "anthropic": whose fake server answers
    api: str  # request_parts' name of the wire format


ENTRIES = [
    Entry("chat", "openai", "openai_chat"),
    Entry("chat-async", "openai", "openai_chat"),
    Entry("responses", "openai", "openai_responses"),
    Entry("responses-async", "openai", "openai_responses"),
    Entry("anthropic", "anthropic", "anthropic"),
    Entry("anthropic-async", "anthropic", "anthropic"),
    Entry("middleware-openai", "openai", "openai_chat"),
    Entry("middleware-anthropic", "anthropic", "anthropic"),
    Entry("lcel-openai", "openai", "openai_chat"),
    Entry("lcel-anthropic", "anthropic", "anthropic"),
    Entry("agents", "openai", "openai_responses"),
]
BY_ID = {entry.id: entry for entry in ENTRIES}


def entries(*ids: str) -> list[Any]:
    chosen = [BY_ID[i] for i in ids] if ids else ENTRIES
    return [pytest.param(e, id=e.id, marks=pytest.mark.scripted(e.provider)) for e in chosen]


def lookup(city: str) -> str:
    """Look up a city."""
    return f"{city}: fine"


def anthropic_tools(marker: dict[str, str]) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return [
        {"name": f"lookup_{i}", "description": "Look up a city.", "input_schema": schema}
        | {"cache_control": marker}
        for i in range(3)
    ]


def langchain_tools(marker: dict[str, str]) -> list[BaseTool]:
    return [
        StructuredTool.from_function(lookup, name=f"lookup_{i}", extras={"cache_control": marker})
        for i in range(3)
    ]


def system_blocks(text: str, marker: dict[str, str]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text, "cache_control": marker}]


@dataclass
class Setup:
    """How a test configures an entry point. ``caller``: the caller's own hints —
    ``"own"`` (key ``"mine"``; a system block and three tools with breakpoints),
    ``"1h"`` (Anthropic: the caller's breakpoints or automatic caching with a 1-hour
    TTL). ``caching``: where langchain-anthropic's ``AnthropicPromptCachingMiddleware``
    goes beside ours (``"after"``/``"before"`` in the middleware list)."""

    hints: bool = True
    system: str = SYSTEM  # the caller's system prompt
    caller: str | None = None
    options: dict[str, Any] = field(default_factory=dict)  # loop request options
    caching: str | None = None


@dataclass
class Env:
    """This test's model sources, memory, wire and clients (closed after the test)."""

    openai: ModelSource
    anthropic: AnthropicSource
    memory: ShortTermMemory
    wire: Wire
    stack: AsyncExitStack

    def script(self, provider: str) -> Any:
        return (self.openai if provider == "openai" else self.anthropic).script


class Driver:
    """One entry point; ``say`` runs one turn of a channel and returns the cached input
    tokens the provider reported for it."""

    def __init__(self, env: Env, entry: Entry, setup: Setup) -> None:
        raise NotImplementedError

    async def say(self, channel: str, text: str) -> int:
        raise NotImplementedError


class LoopDriver(Driver):
    def __init__(self, env: Env, entry: Entry, setup: Setup) -> None:
        is_async = entry.id.endswith("-async")
        self.api = entry.api
        self.histories: dict[str, list[Any]] = {}
        self.kwargs: dict[str, Any] = {"system": setup.system}
        if entry.provider == "anthropic":
            sdk = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
            client: Any = sdk(**env.anthropic.client_options())
            loop_cls: Any = AsyncAnthropicLoop if is_async else AnthropicLoop
            model, extra = ANTHROPIC_MODEL, {"max_tokens": 256}
            if setup.caller:
                marker = HOUR if setup.caller == "1h" else EPHEMERAL
                self.kwargs["system"] = system_blocks(setup.system, marker)
            if setup.caller == "own":
                tools = anthropic_tools(EPHEMERAL)
                self.kwargs["tools"] = tools
                self.kwargs["tool_handlers"] = {t["name"]: lambda args: "fine" for t in tools}
        else:
            client = (openai.AsyncOpenAI if is_async else openai.OpenAI)(
                **env.openai.openai_options(is_async=is_async)
            )
            chat = entry.api == "openai_chat"
            if is_async:
                loop_cls = AsyncOpenAIChatLoop if chat else AsyncOpenAIResponsesLoop
            else:
                loop_cls = OpenAIChatLoop if chat else OpenAIResponsesLoop
            own = {"prompt_cache_key": MINE} if setup.caller == "own" else {}
            model, extra = OPENAI_MODEL, own
        env.stack.push_async_callback(_close, client)
        self.loop = loop_cls(
            client, env.memory, model=model, cache_hints=setup.hints, **extra, **setup.options
        )

    async def say(self, channel: str, text: str) -> int:
        message: dict[str, Any] = {"role": "user", "content": text}
        if self.api == "openai_responses":
            message["type"] = "message"
        messages = [*self.histories.get(channel, []), message]
        result = self.loop.run_turn(scope(channel), messages, **self.kwargs)
        if inspect.isawaitable(result):
            result = await result
        self.histories[channel] = list(result.messages)
        return int(result.usage.cached_input_tokens)


async def _close(client: Any) -> None:
    closed = client.close()
    if inspect.isawaitable(closed):
        await closed


def chat_model(env: Env, provider: str, *, own_key: bool = False) -> Any:
    """``ChatOpenAI`` (``own_key``: the caller's ``prompt_cache_key`` in its
    ``model_kwargs``) or ``ChatAnthropic`` on this test's model source."""
    if provider == "openai":
        own = {"model_kwargs": {"prompt_cache_key": MINE}} if own_key else {}
        return ChatOpenAI(model=OPENAI_MODEL, **env.openai.chat_openai_options(), **own)
    return ChatAnthropic(model=ANTHROPIC_MODEL, max_tokens=256, **env.anthropic.client_options())


def cache_read(message: Any) -> int:
    usage = getattr(message, "usage_metadata", None) or {}
    return int((usage.get("input_token_details") or {}).get("cache_read", 0))


class MiddlewareDriver(Driver):
    """``create_agent`` with ``ShortTermMemoryMiddleware`` and a checkpointer; a
    channel is a thread."""

    def __init__(self, env: Env, entry: Entry, setup: Setup) -> None:
        model = chat_model(env, entry.provider, own_key=setup.caller == "own")
        system: Any = setup.system
        tools: list[BaseTool] = []
        if entry.provider == "anthropic" and setup.caller == "own":
            system = SystemMessage(system_blocks(setup.system, EPHEMERAL))
            tools = langchain_tools(EPHEMERAL)
        middleware: list[Any] = [ShortTermMemoryMiddleware(env.memory, cache_hints=setup.hints)]
        if setup.caller == "1h" or setup.caching:
            caching = AnthropicPromptCachingMiddleware(ttl="1h" if setup.caller == "1h" else "5m")
            # A 1-hour caching middleware goes around ours (as the prompt-caching page says): ours
            # can only follow the TTL of breakpoints set before it runs.
            outer = setup.caching == "before" or setup.caller == "1h"
            middleware.insert(0 if outer else 1, caching)
        self.agent = create_agent(
            model,
            tools=tools,
            system_prompt=system,
            middleware=middleware,
            checkpointer=InMemorySaver(),
        )

    async def say(self, channel: str, text: str) -> int:
        config: Any = {"configurable": {"thread_id": channel, "user_id": "u1", "server_id": "g1"}}
        out = self.agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        last = out["messages"][-1]
        assert isinstance(last, AIMessage) and last.text
        return cache_read(last)


class LcelDriver(Driver):
    """``RunnableWithMessageHistory(with_short_term_memory(prompt | model))`` over
    ``ShortTermMemoryHistory``; a channel is a session id."""

    def __init__(self, env: Env, entry: Entry, setup: Setup) -> None:
        model = chat_model(env, entry.provider)
        system: Any = SystemMessage(setup.system)
        if entry.provider == "openai" and setup.caller == "own":
            model = model.bind(prompt_cache_key=MINE)  # the caller's key, bound
        elif setup.caller == "own":
            system = SystemMessage(system_blocks(setup.system, EPHEMERAL))
            model = model.bind_tools(langchain_tools(EPHEMERAL))
        elif setup.caller == "1h":  # automatic caching, a 1-hour TTL
            model = model.bind(cache_control=HOUR)
        prompt = ChatPromptTemplate.from_messages(
            [system, MessagesPlaceholder("history"), ("human", "{input}")]
        )
        self.chain = RunnableWithMessageHistory(
            with_short_term_memory(prompt | model, cache_hints=setup.hints),
            ShortTermMemoryHistory.factory(env.memory, user_id="u1", server_id="g1", raw=True),
            input_messages_key="input",
            history_messages_key="history",
        )

    async def say(self, channel: str, text: str) -> int:
        config: Any = {"configurable": {"session_id": channel}}
        out = await self.chain.ainvoke({"input": text}, config)
        assert isinstance(out, AIMessage) and out.text
        return cache_read(out)


class AgentsDriver(Driver):
    """``Runner.run`` with a ``ShortTermMemorySession`` per channel (Responses API)."""

    def __init__(self, env: Env, entry: Entry, setup: Setup) -> None:
        client = openai.AsyncOpenAI(**env.openai.openai_options(is_async=True, openai_host=False))
        env.stack.push_async_callback(_close, client)
        own = {"prompt_cache_key": MINE} if setup.caller == "own" else None
        settings = ModelSettings(extra_args=own)
        self.agent = Agent(
            name="Trip",
            instructions=setup.system,
            model=OpenAIResponsesModel(OPENAI_MODEL, client),
            model_settings=settings,
        )
        self.env, self.hints = env, setup.hints
        self.sessions: dict[str, tuple[ShortTermMemorySession, Agent[Any]]] = {}

    async def say(self, channel: str, text: str) -> int:
        if channel not in self.sessions:
            session = ShortTermMemorySession(
                self.env.memory, scope(channel), cache_hints=self.hints
            )
            self.env.stack.callback(session.close)
            self.sessions[channel] = (session, session.agent(self.agent))
        session, agent = self.sessions[channel]
        config = RunConfig(tracing_disabled=True)
        result = await Runner.run(agent, text, session=session, run_config=config)
        assert str(result.final_output)
        return int(result.context_wrapper.usage.input_tokens_details.cached_tokens)


DRIVERS: dict[str, type[Driver]] = {
    "middleware": MiddlewareDriver,
    "lcel": LcelDriver,
    "agents": AgentsDriver,
}


def driver(env: Env, entry: Entry, setup: Setup | None = None) -> Driver:
    """The driver of ``entry`` (a loop unless its id names another kind)."""
    cls = DRIVERS.get(entry.id.split("-")[0], LoopDriver)
    return cls(env, entry, setup or Setup())


@dataclass
class Turn:
    bodies: list[dict[str, Any]]  # what reached the HTTP layer in this turn
    cached: int  # cached input tokens the provider reported


async def turn(env: Env, entry: Entry, drive: Driver, channel: str, text: str) -> Turn:
    env.script(entry.provider).reply_text(f"Noted: {text}")
    before = len(env.wire.bodies)
    cached = await drive.say(channel, text)
    bodies = env.wire.bodies[before:]
    assert len(bodies) == 1, bodies  # a plain answer: one request
    return Turn(bodies, cached)


async def three_turns(env: Env, entry: Entry, setup: Setup) -> tuple[Turn, Turn, Turn]:
    """Channel c1, channel c2, channel c1 again."""
    drive = driver(env, entry, setup)
    first = await turn(env, entry, drive, "c1", "Which line goes from Kyoto to Nara?")
    other = await turn(env, entry, drive, "c2", "Should I buy a JR Pass?")
    second = await turn(env, entry, drive, "c1", "And from Nara back to Osaka?")
    return first, other, second


def keys(*turns: Turn) -> set[Any]:
    return {body.get("prompt_cache_key") for t in turns for body in t.bodies}

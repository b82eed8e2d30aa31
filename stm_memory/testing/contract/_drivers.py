"""The drivers of the entry points stm-memory ships, for
:class:`~stm_memory.testing.contract.IntegrationContract`.

Each runs one user turn the way an application does, on the real SDK clients served
in-process by the suite's :class:`ScriptedModel` (``offline_openai_client``,
``offline_anthropic_client``) or on ``OfflineChatModel`` for LangChain:

- the provider loops (``OpenAIChatLoop``, ``OpenAIResponsesLoop``, ``AnthropicLoop`` and
  their ``Async`` twins) are fed ``result.messages`` back each turn, the user's
  messages carrying ``user_id``;
- ``ShortTermMemoryMiddleware`` runs in ``create_agent`` with an ``InMemorySaver``
  thread per channel, the scope in ``configurable`` and ``user_id`` in each message's
  ``additional_kwargs`` (``invoke`` / ``ainvoke``);
- ``with_short_term_memory`` runs under ``RunnableWithMessageHistory`` with a
  ``ShortTermMemoryHistory.factory`` keyed by channel, user and server over one record
  per channel (``invoke`` / ``ainvoke``);
- ``ShortTermMemorySession`` runs ``Runner.run`` with ``session.agent(agent)``: one
  session per speaker (its scope names the user) over one SDK session per channel;
- ``ShortTermMemoryBuffer`` (one per speaker) is the memory of a classic ``LLMChain``.
  A chain cannot call tools: it only receives the memory text and captures, so it takes
  part in ``trim`` (its prompt holds the memory and no raw turns), ``forgery`` and
  ``erasure`` only;
- the core API by hand: ``begin_turn`` → ``build_context(turn).apply(messages)`` → the
  model with ``mem.tool(turn)`` → ``update`` → ``capture`` → ``end_turn``.

The SDKs are imported when a driver is built, so importing this module needs no extra.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Awaitable, Callable, Generator, Hashable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from stm_memory.engine import ShortTermMemory
from stm_memory.kit import Op, adrive, drive, op, text_of
from stm_memory.model import Scope
from stm_memory.model.messages import message_text
from stm_memory.prompt.placement import MemoryRole
from stm_memory.testing.contract.integration import (
    READS,
    STEPS,
    CallerTool,
    IntegrationDriver,
    ScriptedModel,
    TurnOutcome,
)
from stm_memory.tool.turn import TOOL_NAME

__all__ = [
    "AgentsSessionDriver",
    "BufferDriver",
    "ChainHistoryDriver",
    "CoreDriver",
    "DriverFactory",
    "LoopDriver",
    "MiddlewareDriver",
    "memory_results",
    "shipped_drivers",
]

SYSTEM = "You are the game master of a tabletop campaign played on a chat server."
#: The offline model bills its prompt cache as the gpt-5 family does (0.1x reads), as
#: this name says to the swap rule (stm_memory/model/rates.py).
OPENAI_MODEL = "gpt-5-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"

#: What an entry point is built with: ``(provider, trim_history, context_window)``.
Options = tuple[str | None, bool, int | None]
#: ``(memory, offline_model, *, memory_role="system") -> driver``.
DriverFactory = Callable[..., IntegrationDriver]
T = TypeVar("T")


# -- the results of memory calls, in any transcript format --------------------------------


def _memory_call_ids(item: Any) -> list[str]:
    """Ids of the memory calls an item makes (LangChain, Chat, Responses, Anthropic)."""
    if isinstance(item, AIMessage):
        return [str(c["id"]) for c in item.tool_calls if c["name"] == TOOL_NAME]
    if not isinstance(item, Mapping):
        return []
    if item.get("type") == "function_call":
        return [str(item["call_id"])] if item.get("name") == TOOL_NAME else []
    calls = [c for c in item.get("tool_calls") or () if c["function"]["name"] == TOOL_NAME]
    content = item.get("content")
    blocks = content if isinstance(content, list) else []
    uses = [b for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    return [str(c["id"]) for c in calls] + [str(b["id"]) for b in uses if b["name"] == TOOL_NAME]


def _tool_results(item: Any) -> list[tuple[str, Any]]:
    """``(call id, content)`` of the tool results an item carries."""
    if isinstance(item, ToolMessage):
        return [(item.tool_call_id, item.content)]
    if not isinstance(item, Mapping):
        return []
    if item.get("type") == "function_call_output":
        return [(str(item["call_id"]), item.get("output"))]
    if item.get("role") == "tool":
        return [(str(item["tool_call_id"]), item.get("content"))]
    content = item.get("content")
    blocks = content if isinstance(content, list) else []
    return [
        (str(b["tool_use_id"]), b.get("content"))
        for b in blocks
        if isinstance(b, Mapping) and b.get("type") == "tool_result"
    ]


def memory_results(items: Sequence[Any]) -> list[Mapping[str, Any]]:
    """The results of the ``update_short_term_memory`` calls among ``items`` (LangChain
    messages, Chat messages, Responses items or Anthropic messages), parsed, in order."""
    ids: set[str] = set()
    out: list[Mapping[str, Any]] = []
    for item in items:
        ids.update(_memory_call_ids(item))
        for call_id, content in _tool_results(item):
            if call_id in ids:
                out.append(json.loads(message_text(content)))
    return out


def _answer(messages: Sequence[BaseMessage]) -> str:
    said = [text_of(m) for m in messages if isinstance(m, AIMessage)]
    return next((text for text in reversed(said) if text), "")


def _chat_model(model: ScriptedModel) -> Any:
    # Imported when a driver is built, as every LangChain module here: the chat model
    # base and the prompts pull in langsmith and its HTTP stack.
    from stm_memory.testing.chat_model import OfflineChatModel

    return OfflineChatModel(model=model)


def _user_message(scope: Scope, text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={"user_id": scope.user_id})


def _tool_function(tool: CallerTool) -> Callable[..., str]:
    def run(**arguments: Any) -> str:
        return tool.run(arguments)

    return run


async def _invoke_tool(tool: CallerTool, ctx: Any, arguments: str) -> str:
    return tool.run(json.loads(arguments or "{}"))


# -- the drivers ------------------------------------------------------------------------------


class _Driver:
    """A driver whose turn is one body of :class:`~stm_memory.kit.Op` steps,
    run blocking or awaited (``is_async``); entry points are built once per options."""

    supports: frozenset[str] = STEPS

    def __init__(
        self,
        memory: ShortTermMemory,
        model: ScriptedModel,
        *,
        name: str,
        is_async: bool,
        memory_role: MemoryRole = "system",
    ) -> None:
        self.memory, self.model = memory, model
        self.name, self.is_async = name, is_async
        #: The ``memory_role`` every entry point of this driver is built with.
        self.memory_role: MemoryRole = memory_role
        self._built: dict[Hashable, Any] = {}

    def run_turn(
        self,
        scope: Scope,
        text: str,
        *,
        provider: str | None = None,
        trim_history: bool = True,
        tools: Sequence[CallerTool] = (),
        context_window: int | None = None,
    ) -> TurnOutcome | Awaitable[TurnOutcome]:
        steps = self._turn(scope, text, (provider, trim_history, context_window), tools)
        return adrive(steps) if self.is_async else drive(steps)

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        raise NotImplementedError

    def _once(self, key: Hashable, build: Callable[[], T]) -> T:
        if key not in self._built:
            self._built[key] = build()
        return self._built[key]  # type: ignore[no-any-return]

    def close(self) -> object:
        return None


def _call(fn: Callable[[], Any], label: str) -> Op:
    # The sync entry point returns the value, its async twin an awaitable: one Op.
    return Op(fn, fn, label)


class LoopDriver(_Driver):
    """A provider loop, fed ``result.messages`` back each turn (``api``: ``chat``,
    ``responses`` or ``anthropic``)."""

    def __init__(
        self,
        memory: ShortTermMemory,
        model: ScriptedModel,
        *,
        api: str,
        is_async: bool,
        memory_role: MemoryRole = "system",
    ) -> None:
        from stm_memory.testing.clients import offline_anthropic_client, offline_openai_client

        self.api = api
        if api == "anthropic":
            import stm_memory_anthropic as anthropic_loops

            self.client = offline_anthropic_client(model, is_async=is_async)
            pair: tuple[Any, Any] = (
                anthropic_loops.AnthropicLoop,
                anthropic_loops.AsyncAnthropicLoop,
            )
            self.settings: dict[str, Any] = {"model": ANTHROPIC_MODEL, "max_tokens": 512}
        else:
            import stm_memory_openai as openai_loops

            self.client = offline_openai_client(model, is_async=is_async)
            if api == "chat":
                pair = (openai_loops.OpenAIChatLoop, openai_loops.AsyncOpenAIChatLoop)
            else:
                pair = (openai_loops.OpenAIResponsesLoop, openai_loops.AsyncOpenAIResponsesLoop)
            self.settings = {"model": OPENAI_MODEL}
        self.loop_class = pair[is_async]
        name = self.loop_class.__name__
        super().__init__(memory, model, name=name, is_async=is_async, memory_role=memory_role)
        self.histories: dict[str, list[Any]] = {}

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        provider, trim, window = options
        sized = {"context_window": window, "max_steps": 64} if window else {}
        loop = self._once(
            options,
            lambda: self.loop_class(
                self.client,
                self.memory,
                provider=provider,
                trim_history=trim,
                memory_role=self.memory_role,
                **sized,
                **self.settings,
            ),
        )
        message: dict[str, Any] = {"role": "user", "content": text, "user_id": scope.user_id}
        if self.api == "responses":
            message["type"] = "message"
        given = [*self.histories.get(scope.channel_id, []), message]
        schemas = [self._schema(t) for t in tools]
        handlers = {t.name: t.run for t in tools}
        result = yield _call(
            lambda: loop.run_turn(
                scope, given, system=SYSTEM, tools=schemas, tool_handlers=handlers
            ),
            "run_turn",
        )
        self.histories[scope.channel_id] = list(result.messages)
        return TurnOutcome(result.text, tuple(memory_results(result.messages[len(given) :])))

    def _schema(self, tool: CallerTool) -> dict[str, Any]:
        """``tool`` as this driver's API lists a function."""
        params = dict(tool.parameters)
        if self.api == "anthropic":
            return {"name": tool.name, "description": tool.description, "input_schema": params}
        function = {"name": tool.name, "description": tool.description, "parameters": params}
        return (
            {"type": "function", "function": function}
            if self.api == "chat"
            else {
                "type": "function",
                **function,
            }
        )

    def close(self) -> object:
        return self.client.close()  # a coroutine for the async clients


class MiddlewareDriver(_Driver):
    """``create_agent`` with ``ShortTermMemoryMiddleware``: a checkpointer thread per
    channel, the speaker's scope in ``configurable``."""

    def __init__(
        self,
        memory: ShortTermMemory,
        model: ScriptedModel,
        *,
        is_async: bool,
        memory_role: MemoryRole = "system",
    ) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        name = "ShortTermMemoryMiddleware." + ("ainvoke" if is_async else "invoke")
        super().__init__(memory, model, name=name, is_async=is_async, memory_role=memory_role)
        self.saver = InMemorySaver()  # every agent below shares the threads
        self.seen: dict[str, int] = {}

    def _agent(self, options: Options, tools: Sequence[CallerTool]) -> Any:
        from langchain.agents import create_agent
        from langchain_core.tools import StructuredTool

        from stm_memory_langchain import ShortTermMemoryMiddleware

        provider, trim, window = options
        middleware = ShortTermMemoryMiddleware(
            self.memory,
            provider=provider,
            trim_history=trim,
            memory_role=self.memory_role,
            context_window=window,
        )
        lc_tools = [
            StructuredTool.from_function(
                func=_tool_function(tool),
                name=tool.name,
                description=tool.description,
                args_schema=dict(tool.parameters),
            )
            for tool in tools
        ]
        return create_agent(
            _chat_model(self.model),
            tools=lc_tools,
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=self.saver,
        )

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        key = (options, tuple(t.name for t in tools))
        agent = self._once(key, lambda: self._agent(options, tools))
        ids = {"user_id": scope.user_id, "server_id": scope.server_id}
        config: dict[str, Any] = {"configurable": {"thread_id": scope.channel_id, **ids}}
        if tools:
            config["recursion_limit"] = 8 * READS
        given = {"messages": [_user_message(scope, text)]}
        out = yield Op(
            lambda: agent.invoke(given, config), lambda: agent.ainvoke(given, config), "invoke"
        )
        thread: list[BaseMessage] = out["messages"]
        new = thread[self.seen.get(scope.channel_id, 0) :]
        self.seen[scope.channel_id] = len(thread)
        return TurnOutcome(_answer(new), tuple(memory_results(new)))


class ChainHistoryDriver(_Driver):
    """``RunnableWithMessageHistory(with_short_term_memory(prompt | model))`` over a
    ``ShortTermMemoryHistory.factory`` keyed by channel, user and server; each
    channel's record is one chat history, whoever speaks."""

    KEYS = ("channel_id", "user_id", "server_id")
    # The chain hands the caller's tool calls back to it: the caller's own tool loop
    # (tests/integrations/langchain/test_chain_long_turn.py), not this history's turn.
    supports = STEPS - {"long_turn"}

    def __init__(
        self,
        memory: ShortTermMemory,
        model: ScriptedModel,
        *,
        is_async: bool,
        memory_role: MemoryRole = "system",
    ) -> None:
        name = "with_short_term_memory." + ("ainvoke" if is_async else "invoke")
        super().__init__(memory, model, name=name, is_async=is_async, memory_role=memory_role)
        self.records: dict[str, Any] = {}

    def _record(self, channel_id: str, **_: Any) -> Any:
        from langchain_core.chat_history import InMemoryChatMessageHistory

        if channel_id not in self.records:
            with warnings.catch_warnings():  # deprecated in langchain-core 1.6.4; still served
                warnings.simplefilter("ignore", DeprecationWarning)
                self.records[channel_id] = InMemoryChatMessageHistory()
        return self.records[channel_id]

    def _chain(self, options: Options) -> Any:
        from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
        from langchain_core.runnables.history import RunnableWithMessageHistory

        from stm_memory_langchain import ShortTermMemoryHistory, with_short_term_memory

        provider, trim, _window = options
        factory = ShortTermMemoryHistory.factory(
            self.memory,
            keys=self.KEYS,
            history=self._record,
            provider=provider,
            trim_history=trim,
            memory_role=self.memory_role,
            raw=True,  # the wrapper places the memory
        )
        prompt = ChatPromptTemplate.from_messages(
            [("system", SYSTEM), MessagesPlaceholder("history"), MessagesPlaceholder("input")]
        )
        with warnings.catch_warnings():  # deprecated in langchain-core 1.3.3; still served
            warnings.simplefilter("ignore", DeprecationWarning)
            return RunnableWithMessageHistory(
                with_short_term_memory(prompt | _chat_model(self.model)),
                factory,
                input_messages_key="input",
                history_messages_key="history",
                history_factory_config=factory.config_specs,
            )

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        chain = self._once(options, lambda: self._chain(options))
        record = self._record(scope.channel_id)
        before = len(record.messages)
        config = {"configurable": {k: getattr(scope, k) for k in self.KEYS}}
        given = {"input": [_user_message(scope, text)]}
        out = yield Op(
            lambda: chain.invoke(given, config), lambda: chain.ainvoke(given, config), "invoke"
        )
        return TurnOutcome(text_of(out), tuple(memory_results(record.messages[before:])))


class AgentsSessionDriver(_Driver):
    """``Runner.run`` with ``ShortTermMemorySession.agent(agent)`` (async only): one
    session per speaker over one SDK session per channel."""

    def __init__(
        self, memory: ShortTermMemory, model: ScriptedModel, *, memory_role: MemoryRole = "system"
    ) -> None:
        from agents import Agent, OpenAIResponsesModel

        from stm_memory.testing.clients import offline_openai_client

        name = "ShortTermMemorySession"
        super().__init__(memory, model, name=name, is_async=True, memory_role=memory_role)
        self.client = offline_openai_client(model, is_async=True)
        responses = OpenAIResponsesModel(OPENAI_MODEL, self.client)
        self.base = Agent(name="Host", instructions=SYSTEM, model=responses)
        self.records: dict[str, Any] = {}

    def _record(self, channel_id: str) -> Any:
        from agents import SQLiteSession

        return self.records.setdefault(channel_id, SQLiteSession(channel_id))

    def _session(
        self, scope: Scope, options: Options, tools: Sequence[CallerTool]
    ) -> tuple[Any, Any]:
        from agents import FunctionTool

        from stm_memory_openai_agents import ShortTermMemorySession

        provider, trim, window = options
        chosen: dict[str, Any] = {"provider": provider} if provider is not None else {}
        record = self._record(scope.channel_id)
        session = ShortTermMemorySession(
            self.memory,
            scope,
            session=record,
            trim_history=trim,
            memory_role=self.memory_role,
            context_window=window,
            **chosen,
        )
        sdk_tools = [
            FunctionTool(
                name=tool.name,
                description=tool.description,
                params_json_schema=dict(tool.parameters),
                on_invoke_tool=partial(_invoke_tool, tool),
                strict_json_schema=False,
            )
            for tool in tools
        ]
        base = self.base.clone(tools=sdk_tools) if sdk_tools else self.base
        return session, session.agent(base)

    def run_turn(
        self,
        scope: Scope,
        text: str,
        *,
        provider: str | None = None,
        trim_history: bool = True,
        tools: Sequence[CallerTool] = (),
        context_window: int | None = None,
    ) -> Awaitable[TurnOutcome]:
        return self._run(scope, text, (provider, trim_history, context_window), tools)

    async def _run(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> TurnOutcome:
        from agents import RunConfig, Runner

        key = (scope, options, tuple(t.name for t in tools))
        session, agent = self._once(key, lambda: self._session(scope, options, tools))
        record = self._record(scope.channel_id)
        before = len(await record.get_items())
        config = RunConfig(tracing_disabled=True)
        turns = 2 * READS if tools else 10  # the SDK's default, 10
        result = await Runner.run(agent, text, session=session, run_config=config, max_turns=turns)
        new = (await record.get_items())[before:]
        return TurnOutcome(str(result.final_output), tuple(memory_results(new)))

    async def _close(self) -> None:
        for record in self.records.values():
            record.close()
        await self.client.close()

    def close(self) -> object:
        return self._close()


class BufferDriver(_Driver):
    """``ShortTermMemoryBuffer`` (one per speaker) as the memory of a classic
    ``LLMChain``: it receives the memory text and captures, nothing more."""

    # It places nothing: the chain's prompt takes the memory text.
    supports = frozenset({"trim", "forgery", "erasure"})

    def __init__(self, memory: ShortTermMemory, model: ScriptedModel, *, is_async: bool) -> None:
        name = "ShortTermMemoryBuffer." + ("ainvoke" if is_async else "invoke")
        super().__init__(memory, model, name=name, is_async=is_async)

    def _chain(self, scope: Scope, provider: str | None) -> Any:
        from langchain_classic.chains import LLMChain
        from langchain_core.prompts import ChatPromptTemplate

        from stm_memory_langchain import ShortTermMemoryBuffer

        buffer = ShortTermMemoryBuffer(memory=self.memory, scope=scope, provider=provider)
        prompt = ChatPromptTemplate.from_messages(
            [("system", SYSTEM), ("system", "{stm_memory}"), ("human", "{input}")]
        )
        with warnings.catch_warnings():  # LLMChain is deprecated, classic chains still run
            warnings.simplefilter("ignore", DeprecationWarning)
            return LLMChain(llm=_chat_model(self.model), prompt=prompt, memory=buffer)

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        provider = options[0]
        chain = self._once((scope, provider), lambda: self._chain(scope, provider))
        given = {"input": text}
        out = yield Op(lambda: chain.invoke(given), lambda: chain.ainvoke(given), "invoke")
        return TurnOutcome(str(out["text"]))


class CoreDriver(_Driver):
    """The core API by hand, as docs/entry-points/core-api.md shows: the channel's history as
    dicts with ``user_id``, captured whole after each turn."""

    # The developer places the memory (``context.apply``) and sees its errors raised;
    # no turn decides what to show: a written memory shows at once (the engine's API).
    # The core API runs no tool loop (MemoryTurn, the kit's, is the one): no long turn.
    supports = STEPS - {"fallback", "hold", "long_turn"}

    def __init__(self, memory: ShortTermMemory, model: ScriptedModel, *, is_async: bool) -> None:
        name = "ShortTermMemory" + (" (async twins)" if is_async else "")
        super().__init__(memory, model, name=name, is_async=is_async)
        self.histories: dict[str, list[dict[str, Any]]] = {}

    def _turn(
        self, scope: Scope, text: str, options: Options, tools: Sequence[CallerTool]
    ) -> Generator[Op, Any, TurnOutcome]:
        from langchain_core.utils.function_calling import convert_to_openai_tool

        provider, trim, _window = options
        mem = self.memory
        turn = yield op(
            mem.begin_turn, mem.abegin_turn, scope, provider=provider, user_message=text
        )
        context = yield op(mem.build_context, mem.abuild_context, turn)
        history = self.histories.setdefault(scope.channel_id, [])
        history.append({"role": "user", "content": text, "user_id": scope.user_id})
        sent = context.apply([{"role": "system", "content": SYSTEM}, *history], trim=trim)
        tool = mem.tool(turn)
        offered = (
            {TOOL_NAME: convert_to_openai_tool(tool)["function"]["parameters"]} if tool else {}
        )
        dialogue = [(str(m["role"]), message_text(m["content"])) for m in sent]
        reply = self.model.respond(dialogue, tools=offered)
        results: list[Mapping[str, Any]] = []
        for name, arguments in reply.tool_calls:
            if name == TOOL_NAME:
                results.append((yield op(mem.update, mem.aupdate, turn, arguments)))
        history.append({"role": "assistant", "content": reply.text})
        yield op(mem.capture, mem.acapture, scope, history)
        yield op(mem.end_turn, mem.aend_turn, turn)
        return TurnOutcome(reply.text, tuple(results))


def shipped_drivers() -> dict[str, DriverFactory]:
    """Every entry point stm-memory ships, sync and async: test id → factory
    ``(memory, offline_model) -> driver``."""
    drivers: dict[str, DriverFactory] = {}
    for api in ("chat", "responses", "anthropic"):
        for is_async in (False, True):
            drivers[f"{api}-loop{'-async' if is_async else ''}"] = partial(
                LoopDriver, api=api, is_async=is_async
            )
    for kind, cls in (
        ("middleware", MiddlewareDriver),
        ("lcel-history", ChainHistoryDriver),
        ("buffer", BufferDriver),
        ("core", CoreDriver),
    ):
        drivers[kind] = partial(cls, is_async=False)
        drivers[f"{kind}-async"] = partial(cls, is_async=True)
    drivers["agents-session"] = AgentsSessionDriver
    return drivers

"""``ShortTermMemoryMiddleware``: short-term memory for ``langchain.agents.create_agent``.

One agent run (``invoke``/``stream`` and their async twins) is one memory turn:

- ``before_agent`` resolves the run's scope, begins the turn (the user message for the
  long-term-intent guard is the last ``HumanMessage``) and remembers where this turn's
  messages start, both in private graph state;
- ``wrap_model_call`` sends the request the turn prepares (``MemoryTurn.prepare``:
  the cut, the memory, the briefings, the nudge; the tool offer and ``tool_choice``;
  the cache hints), mapped onto the ``ModelRequest``: the registered placeholder
  ``update_short_term_memory`` swapped for the tool with this turn's schema (described,
  uncallable, where the Messages API needs it) or removed while a guard hides it, the
  hints as model settings or a message block's ``cache_control`` (``_hints``);
- ``wrap_tool_call`` runs ``update_short_term_memory`` calls as the turn's
  ``memory_call`` (one successful update per turn, enforced by the engine), through the
  ToolNode's ``handler`` as a tool of its own (``_tracing.MemoryCallTool``), so inner
  middleware and the run's callbacks (LangSmith) see it as any tool; it always
  answers with a JSON ``ToolMessage``: nothing about memory can crash the run; the
  update that completed marks the run's private state, so a run resumed in another
  process knows its turn was updated;
- ``before_model`` ends the run when the model's last message answered the user *and*
  called only the memory tool (the memory call was the epilogue of an answer the
  user already has);
- ``after_agent`` captures the recent dialogue and ends the turn.

Each hook is a translation onto :class:`~stm_memory.kit.MemoryTurn`, which owns
the turn's lifecycle: ``before_agent`` is ``MemoryTurn.begin``; the first
``wrap_model_call`` ``assemble``, every one ``prepare`` and ``tool``; a memory call is
``memory_call`` (the engine checks every guard again); a failing model or tool is
``abandon``; ``after_agent`` is ``finish``.

Per-run state. The turn (a live object with a lock) cannot
be checkpointed, so it lives in this middleware in a dict keyed by a random run id;
only that id (the id of the turn's first message, and whether the turn was updated)
go into graph state, as private
attributes that never appear in the agent's input or output. Concurrent runs, threads
sharing one agent, ``InMemorySaver`` threads over many invocations and streaming all
key their own entry. When the model or a caller's tool raises, the turn is
ended (counted) before the error propagates, and the next run on that thread drops
the entry the crashed run left behind. A run resumed in a new process (after an
interrupt) rebuilds its turn lazily.

Sync and async hooks share one body: each hook is a generator of
:class:`stm_memory.kit.Op` run by ``drive`` (blocking) or ``adrive`` (awaiting).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from stm_memory.kit import missing_extra

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
        hook_config,
    )
    from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langgraph.config import get_config
    from langgraph.errors import GraphBubbleUp
    from langgraph.types import Command
    from pydantic import BaseModel, ConfigDict
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise missing_extra(
        "ShortTermMemoryMiddleware", "LangChain 1.x and LangGraph", "langchain"
    ) from exc

from stm_memory import TOOL_NAME, ShortTermMemory, ValidationError
from stm_memory.kit import (
    RECALL_TOOL,
    Ask,
    MemoryRole,
    MemoryTurn,
    Op,
    OptionsView,
    PreparedRequest,
    TurnOptions,
    Wire,
    WriterLike,
    adiscover_window,
    adrive,
    answer_last,
    cache_retention,
    call_fitted,
    check_memory_setup,
    current_user_index,
    discover_window,
    drive,
    failure,
    is_openai_host,
    model_name,
    named_options,
    text_of,
    tool_name,
    tool_result_text,
    usage_of,
    wire_for,
)

from ._dialogue import (
    ai_messages,
    cut_short,
    memory_result,
    provider_of,
    remembered_after_answering,
    start_index,
)
from ._hints import hinted, request_settings
from ._scope import ScopeSource, resolve_scope
from ._tool import recall_tool, turn_tool
from ._tracing import MemoryCallTool

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime

__all__ = ["ShortTermMemoryMiddleware", "ShortTermMemoryState"]

log = logging.getLogger("stm_memory.langchain")

STATE_TURN_ID = "stm_turn_id"
STATE_TURN_START = "stm_turn_start"
STATE_TURN_UPDATED = "stm_turn_updated"
# Runs whose after_agent never came (crashes, abandoned interrupts) are dropped
# oldest-first beyond this many; a dropped run that resumes rebuilds its turn.
MAX_OPEN_RUNS = 10_000

ModelResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]


class ShortTermMemoryState(AgentState[Any]):
    """Agent state plus the middleware's private per-run keys (never in input/output)."""

    stm_turn_id: NotRequired[Annotated[str | None, PrivateStateAttr]]
    stm_turn_start: NotRequired[Annotated[str | None, PrivateStateAttr]]
    #: This run's turn updated the memory (one update per turn, across a resume).
    stm_turn_updated: NotRequired[Annotated[bool | None, PrivateStateAttr]]


@dataclass(eq=False)
class _Run:
    """One agent run: its memory turn (off when the run has no scope or its beginning
    failed) and the ids of memory calls the provider cut at the output-token limit."""

    turn: MemoryTurn
    truncated: set[str] = field(default_factory=set)


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


def _unbound(**_: Any) -> str:
    # Never reached inside an agent (wrap_tool_call swaps in the turn's tool); called
    # directly, the placeholder explains itself instead of raising.
    return tool_result_text(failure("update_short_term_memory is not bound to a turn here."))


def _placeholder_tool() -> BaseTool:
    return StructuredTool.from_function(
        func=_unbound,
        name=TOOL_NAME,
        description="Short-term memory (replaced per turn by ShortTermMemoryMiddleware).",
        args_schema=_AnyArguments,
    )


def _in_place_of(placeholder: Any, tool: BaseTool) -> BaseTool:
    """The turn's tool, keeping what another middleware attached to the placeholder
    (``AnthropicPromptCachingMiddleware``'s ``cache_control`` on the last tool)."""
    extras = getattr(placeholder, "extras", None)
    if not extras or extras == tool.extras:
        return tool
    return tool.model_copy(update={"extras": {**(tool.extras or {}), **extras}})


def _current_config() -> Mapping[str, Any]:
    try:
        return get_config()
    except RuntimeError:  # outside a runnable context
        return {}


def _prepared(
    turn: MemoryTurn,
    request: ModelRequest[Any],
    whole: list[Any],
    wire: Wire,
    ask: Ask,
    settings: Mapping[str, Any],
) -> ModelRequest[Any]:
    """``request`` as the turn prepares it: the model input ``whole`` (the caller's
    system prompt first in the portable form, taken back out) with the memory placed,
    the tools, ``tool_choice`` and the cache hints, sent unedited."""
    prepared = turn.prepare(whole, wire=wire, ask=ask)
    system = request.system_message
    if ask.system is None and system is not None:  # joined as the first message
        system, *messages = prepared.messages
    else:
        system, messages = prepared.system, prepared.messages
    tools = _tools(turn, prepared, request.tools)
    added, messages = hinted(prepared, messages, system=system, tools=tools, settings=settings)
    return request.override(
        messages=messages,
        system_message=system,
        tools=tools,
        tool_choice=prepared.tool_choice,
        model_settings={**settings, **added} if added else request.model_settings,
    )


def _call(handler: Callable[[Any], Any], request: Any) -> Op:
    # The same handler is sync under invoke and returns an awaitable under ainvoke.
    return Op(lambda: handler(request), lambda: handler(request), "handler")


@named_options
class ShortTermMemoryMiddleware(OptionsView, AgentMiddleware[ShortTermMemoryState, Any, Any]):
    """Short-term memory for ``create_agent`` (see the module docstring).

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory` to read and write.
        scope: a fixed :class:`~stm_memory.Scope`, or a callable ``(runtime, config)``
            returning one (``None``: no memory for that run). By default the scope is
            read from the runtime context, then ``config["configurable"]``
            (``channel_id``, else ``thread_id``; ``user_id``; ``server_id``;
            ``persona_id``).
        provider: the provider name for the engine's provider exclusion (``novelai``
            …; default: none is excluded). Placement writes for the chat model's own
            LangSmith provider (``anthropic`` gets user-turn injections), whatever
            this names; ``provider`` stands in only for a model that names none.
        strict: when no scope can be formed (no user id, no channel/thread id), raise
            :class:`~stm_memory.ValidationError` naming the fix (the default: the one
            rule of every entry point, since a run that silently forgets is a bug to
            surface, not to log). ``False`` logs a warning and runs that invocation
            without memory. To run without memory on purpose, give ``scope=`` a
            callable that returns ``None`` for that run.
        end_after_epilogue: end the run once the model answered and called only the
            memory tool in the same message, instead of calling the model again. The
            last message of such a run is the memory ``ToolMessage``.
        trim_history: send the model only what the memory does not cover: the memory
            block, the turns since it was last written (plus a small overlap) and the
            current turn, without earlier memory-tool calls (:mod:`stm_memory.prompt.cut`).
            Only the model request is cut; the checkpointed thread keeps every
            message. ``False`` sends the whole thread.
        memory_role: ``"system"`` (system messages, or user turns where the provider
            takes system messages only at the top), ``"user"`` (user turns everywhere)
            or ``"inline"`` (the portable form). ``None`` (default): the portable form
            for a ``ChatOpenAI`` talking to a host other than OpenAI's or Azure's (an
            open model behind an OpenAI-compatible server), else ``"system"``.
        cache_hints: send the provider's prompt-cache hints (default): ``ChatOpenAI``
            gets a ``prompt_cache_key`` per server (per user in a DM) as a model
            setting, ``ChatAnthropic`` a ``cache_control`` breakpoint at the end of the
            dialogue since the cut
            (room is kept for ``AnthropicPromptCachingMiddleware``). Your own key or
            breakpoints win. ``False`` sends none.
    """

    state_schema = ShortTermMemoryState

    def __init__(
        self,
        memory: ShortTermMemory,
        *,
        scope: ScopeSource = None,
        provider: str | None = None,
        strict: bool = True,
        end_after_epilogue: bool = True,
        trim_history: bool = True,
        memory_role: MemoryRole | None = None,
        cache_hints: bool = True,
        tool_calling: bool = True,
        context_window: int | None = None,
        keep_tool_results: Sequence[str] = (),
        writer: WriterLike | None = None,
    ) -> None:
        check_memory_setup(memory)
        self.memory = memory
        self.scope = scope
        #: What every run's turn begins with; ``provider``, ``trim_history``,
        #: ``memory_role`` and ``cache_hints`` read (and replace) it.
        self.options = TurnOptions.given(
            memory,
            provider=provider,
            trim_history=trim_history,
            memory_role=memory_role,
            cache_hints=cache_hints,
            tool_calling=tool_calling,
            context_window=context_window,
            keep_tool_results=keep_tool_results,
            writer=writer,
        )
        self.strict = strict
        self.end_after_epilogue = end_after_epilogue
        # The retrieval tool is registered with the agent; it is sent only in the
        # requests the turn gives it to (PreparedRequest.recall_spec). Ahead of the
        # memory tool: a request without it keeps its tools as they were, the memory
        # tool last (where a caching middleware puts its breakpoint).
        self.tools = [recall_tool(), _placeholder_tool()]
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        #: Context windows the servers listed: (base URL, model name) -> tokens or None.
        self._windows: dict[tuple[str, str], int | None] = {}
        self._lock = threading.Lock()

    # -- hooks: thin sync/async shells ---------------------------------------------------

    def before_agent(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return drive(self._begin(state, runtime))

    async def abefore_agent(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await adrive(self._begin(state, runtime))

    @hook_config(can_jump_to=["end"])
    def before_model(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._epilogue_jump(state)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._epilogue_jump(state)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResult:
        return drive(self._model_call(request, handler))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResult:
        return await adrive(self._model_call(request, handler))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        return drive(self._tool_call(request, handler))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        return await adrive(self._tool_call(request, handler))

    def after_agent(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return drive(self._finish(state, runtime))

    async def aafter_agent(
        self, state: ShortTermMemoryState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return await adrive(self._finish(state, runtime))

    # -- the bodies, written once ---------------------------------------------------------

    def _begin(self, state: Mapping[str, Any], runtime: Any) -> Generator[Op, Any, dict[str, Any]]:
        # An id left in the checkpoint is a run that never reached after_agent: it
        # crashed (its turn was ended in _guarded) or it is still running concurrently
        # on this thread (it rebuilds its entry if it needs it again).
        self._pop(state.get(STATE_TURN_ID))
        messages: Sequence[Any] = state.get("messages") or []
        start = current_user_index(messages)
        run_id = uuid.uuid4().hex
        yield from self._open(run_id, messages, start, runtime, _current_config())
        start_id = getattr(messages[start], "id", None) if start is not None else None
        return {STATE_TURN_ID: run_id, STATE_TURN_START: start_id, STATE_TURN_UPDATED: False}

    def _epilogue_jump(self, state: Mapping[str, Any]) -> dict[str, Any] | None:
        if not self.end_after_epilogue or not state.get(STATE_TURN_ID):
            return None
        messages: Sequence[Any] = state.get("messages") or []
        start = start_index(messages, state.get(STATE_TURN_START))
        if not remembered_after_answering(messages, start):
            return None
        # The run ends with the answer, not our JSON (what an app shows is the last
        # message): the reply keeps its memory calls in place (same id), and its text
        # follows their results as a message of its own.
        reply = max(
            i for i in range(start, len(messages)) if getattr(messages[i], "type", "") == "ai"
        )
        results = list(messages[reply + 1 :])
        calls, *rest = answer_last([messages[reply]], results)
        said = [m.model_copy(update={"id": str(uuid.uuid4())}) for m in rest[len(results) :]]
        return {"messages": [calls, *said], "jump_to": "end"}

    def _model_call(
        self, request: ModelRequest[Any], handler: Callable[[Any], Any]
    ) -> Generator[Op, Any, ModelResult]:
        run = yield from self._run_for(request.state, request.runtime, _current_config())
        turn = run.turn
        yield from turn.assemble()  # once per turn; an off turn places nothing
        # prepare() derives this request's context: the nudge only while the tool is offered.
        named = provider_of(request.model)  # asked once: LangChain builds its params each time
        options = turn.name_model(model_name(request.model))
        # Placement writes for the model's own provider (what the request is); the
        # ``provider`` option names the engine's exclusion, and stands in only for a
        # model that names none.
        provider = named or options.provider
        if provider == "openai":  # ChatOpenAI(base_url=...) may serve an open model
            # With no form named, the host settles it (the portable form for any host
            # but OpenAI's); the same for every request of the turn. Its window, from the
            # server's own listing (once per server and model), sizes the budget and a
            # long turn's blocks.
            host = getattr(request.model, "openai_api_base", None)
            window = yield from self._window(request.model, host)
            options = turn.name_model(None, host=host, window=window)
        system = request.system_message
        settings = request.model_settings or {}
        # The caller's settings (its own cache hints; the cache retention they ask for,
        # which prices the turn's swap), the tools and tool_choice it sends: the turn
        # decides this request from them.
        given = request_settings(request.model, settings)
        others = [t for t in request.tools if tool_name(t) not in (TOOL_NAME, RECALL_TOOL)]
        ask = Ask(
            provider=provider,
            retention=cache_retention(given, system.content if system is not None else None),
            other_tools=bool(others),
            tool_choice=request.tool_choice,
            settings=given,
            recall=True,  # wrap_tool_call answers the retrieval tool
        )
        if options.form == "inline" and system is not None:
            # The portable form joins the memory to the caller's system prompt, which
            # create_agent keeps outside the messages: placed as their first, taken back.
            whole = [system, *request.messages]
        else:
            whole = list(request.messages)
            # Kept apart, as the turn sends it (with a cache breakpoint, where the
            # model takes them).
            ask = replace(ask, system=system)

        def fitted() -> Generator[Op, Any, Any]:
            # Longer than the model's context: cut to fit and call once more (the turn
            # decides the cut); any other error, or a second, surfaces as raised.
            _, response = yield from call_fitted(
                turn,
                whole,
                lambda: _prepared(turn, request, whole, wire_for(named), ask, settings),
                lambda changed: _call(handler, changed),
            )
            return response

        try:
            response = yield from fitted()
            reply = next(iter(ai_messages(response)), None)
            written = None
            if reply is not None and not reply.tool_calls:
                written = yield from turn.text_call(text_of(reply))
            if written is not None:
                # The reply was the memory write as text, not an answer: asked once
                # more, without the tool (the turn withdrew it), for the answer.
                response = yield from fitted()
        except GraphBubbleUp:
            raise
        except Exception:
            # The run is about to crash before after_agent: count the turn now.
            yield from run.turn.abandon()
            raise
        for message in ai_messages(response):
            if cut_short(message):
                run.truncated.update(
                    c["id"] for c in message.tool_calls if c["name"] == TOOL_NAME and c["id"]
                )
        return response  # type: ignore[no-any-return]

    def _window(self, model: Any, host: object) -> Generator[Op, Any, int | None]:
        """The context window an OpenAI-compatible server lists for ``model`` (none for
        OpenAI's host, or when ``context_window=`` names it), asked once per server and
        model name, as the OpenAI loops ask theirs."""
        if self.options.context_window is not None or host is None or is_openai_host(host):
            return None
        name = model_name(model) or ""
        key = (str(host), name)
        if key not in self._windows:
            sync, not_sync = (
                getattr(model, "root_client", None),
                getattr(model, "root_async_client", None),
            )
            found = yield Op(
                lambda: discover_window(sync, name),
                lambda: adiscover_window(not_sync, name),
                "models",
            )
            self._windows[key] = found if isinstance(found, int) and found > 0 else None
        return self._windows[key]

    def _tool_call(
        self, request: ToolCallRequest, handler: Callable[[Any], Any]
    ) -> Generator[Op, Any, ToolMessage | Command[Any]]:
        call = request.tool_call
        if call.get("name") == RECALL_TOOL:
            config = getattr(request.runtime, "config", None) or _current_config()
            run = yield from self._run_for(request.state, request.runtime, config)
            text = yield from run.turn.recall_call(call.get("args") or {})
            return ToolMessage(content=text, tool_call_id=call.get("id") or "", name=RECALL_TOOL)
        if call.get("name") != TOOL_NAME:
            peeked = self._peek(request.state)
            return (yield from self._guarded(peeked, _call(handler, request)))  # type: ignore[no-any-return]
        try:
            config = getattr(request.runtime, "config", None) or _current_config()
            run = yield from self._run_for(request.state, request.runtime, config)
            # Off, cut at the output-token limit or hidden by a guard, the turn answers
            # with its failure; otherwise the engine's update, every guard checked again.
            # The call runs through the ToolNode's handler as a tool of its own (the
            # turn's memory_call inside), so inner middleware and the run's callbacks
            # (LangSmith) see it as they see every tool.
            truncated = call.get("id") in run.truncated
            tool = MemoryCallTool.for_call(run.turn, call, truncated=truncated)
            response: ToolMessage | Command[Any] = yield _call(handler, request.override(tool=tool))
            if tool.result is not None and tool.result.get("status") == "completed":
                # The run's state keeps that this turn updated (one update per turn,
                # also for a run resumed in another process).
                return _marked_updated(response)
            return response
        except GraphBubbleUp:  # interrupts and parent commands are control flow
            raise
        except Exception as exc:
            log.exception("stm-memory: update_short_term_memory failed")
            return memory_result(call, failure(f"Internal error: {type(exc).__name__}: {exc}"))

    def _finish(
        self, state: Mapping[str, Any], runtime: Any
    ) -> Generator[Op, Any, dict[str, Any] | None]:
        if not state.get(STATE_TURN_ID):
            return None
        run = yield from self._run_for(state, runtime, _current_config())
        self._pop(state.get(STATE_TURN_ID))
        messages: Sequence[Any] = state.get("messages") or []
        start = start_index(messages, state.get(STATE_TURN_START))
        usage = [u for u in map(usage_of, messages[start:]) if u is not None]
        yield from run.turn.finish(messages, start=start, usage=usage)
        return {STATE_TURN_ID: None, STATE_TURN_START: None, STATE_TURN_UPDATED: None}

    # -- helpers ---------------------------------------------------------------------------

    def _guarded(self, run: _Run | None, step: Op) -> Generator[Op, Any, Any]:
        """Run the model or a caller's tool; if it raises, the run is about to crash
        before after_agent, so count the turn now (as the provider loops do), then
        re-raise. Ending is idempotent: should an outer retry middleware recover, the
        turn goes on and after_agent still captures the dialogue."""
        try:
            return (yield step)
        except GraphBubbleUp:
            raise
        except Exception:
            if run is not None:
                yield from run.turn.abandon()
            raise

    def _open(
        self,
        run_id: str,
        messages: Sequence[Any],
        start: int | None,
        runtime: Any,
        config: Mapping[str, Any],
        *,
        updated: bool = False,
    ) -> Generator[Op, Any, _Run]:
        try:
            scope = resolve_scope(self.scope, runtime, config)
        except ValidationError as exc:
            if self.strict:
                raise
            log.warning("stm-memory: short-term memory is off for this run: %s", exc)
            scope = None
        user_message = text_of(messages[start]) if start is not None else None
        # Resumed elsewhere after this turn's update (the run's state says so): keep it
        # to one update.
        turn = yield from MemoryTurn.begin(
            self.memory, scope, options=self.options, user_message=user_message, updated=updated
        )
        return self._store(run_id, _Run(turn))

    def _run_for(
        self, state: Any, runtime: Any, config: Mapping[str, Any]
    ) -> Generator[Op, Any, _Run]:
        """This run's entry; rebuilt from graph state if this process does not have it."""
        values: Mapping[str, Any] = state if isinstance(state, Mapping) else {}
        run_id = values.get(STATE_TURN_ID)
        if isinstance(run_id, str) and run_id:
            with self._lock:
                run = self._runs.get(run_id)
            if run is not None:
                return run
        else:
            run_id = uuid.uuid4().hex
            log.warning("stm-memory: no turn id in the agent state; was before_agent skipped?")
        messages: Sequence[Any] = values.get("messages") or []
        start = start_index(messages, values.get(STATE_TURN_START)) if messages else None
        updated = bool(values.get(STATE_TURN_UPDATED))
        return (yield from self._open(run_id, messages, start, runtime, config, updated=updated))

    def _store(self, run_id: str, run: _Run) -> _Run:
        with self._lock:
            existing = self._runs.get(run_id)
            if existing is not None:  # a parallel tool call rebuilt it first
                return existing
            self._runs[run_id] = run
            while len(self._runs) > MAX_OPEN_RUNS:
                dropped, _ = self._runs.popitem(last=False)
                log.warning("stm-memory: dropping unfinished run %s (too many open runs)", dropped)
            return run

    def _peek(self, state: Any) -> _Run | None:
        run_id = state.get(STATE_TURN_ID) if isinstance(state, Mapping) else None
        with self._lock:
            return self._runs.get(run_id) if isinstance(run_id, str) else None

    def _pop(self, run_id: Any) -> _Run | None:
        if not isinstance(run_id, str):
            return None
        with self._lock:
            return self._runs.pop(run_id, None)


def _marked_updated(response: ToolMessage | Command[Any]) -> ToolMessage | Command[Any]:
    """The handler's answer to a memory call that completed, with the run's state
    marked updated (``STATE_TURN_UPDATED``) through a ``Command``."""
    if isinstance(response, ToolMessage):
        return Command(update={"messages": [response], STATE_TURN_UPDATED: True})
    if isinstance(response, Command) and isinstance(response.update, Mapping):
        # An inner middleware answered with a Command of its own: keep it, marked.
        return replace(response, update={**response.update, STATE_TURN_UPDATED: True})
    return response


def _tools(turn: MemoryTurn, prepared: PreparedRequest, tools: Sequence[Any]) -> list[Any]:
    """The request's tools with the registered placeholder swapped for the turn's tool
    as the turn prepared it: offered, or described (defined, the prepared
    ``tool_choice`` "none" keeping it uncallable), or dropped."""
    tool = turn_tool(turn, prepared.tool)
    out: list[Any] = []
    for offered in tools:
        name = tool_name(offered)
        if name == RECALL_TOOL:
            if prepared.recall_spec is not None:  # from the turn's first clear on
                out.append(offered)
        elif name != TOOL_NAME:
            out.append(offered)
        elif tool is not None:
            out.append(_in_place_of(offered, tool))
    return out

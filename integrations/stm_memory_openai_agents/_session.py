"""``ShortTermMemorySession``: short-term memory for the OpenAI Agents SDK.

``Runner.run(agent, input, session=session)`` (and ``run_sync`` / ``run_streamed``)
reads the session once before the first model call and appends to it as the run goes
(the new input first, then each step's items). Here that brackets one
:class:`~stm_memory.kit.MemoryTurn`, which owns every step of the turn; the
session only translates the SDK's hooks onto it:

- the run's first ``get_items`` (the SDK passes the run's context wrapper) begins the
  turn. Once ``agent()`` has wrapped an agent, it returns the record as it is: the
  hooks of ``agent()``'s agents place the memory at each model call, on the whole
  input, the session's one placement point. A session used with plain agents only
  returns what the model should be sent: the memory block, the items the memory does
  not cover (the history cut of the provider loops, without earlier memory-tool calls)
  and the nudge when it is due — placed as if the new input were already there, since
  the SDK appends it right after. Every other read (the SDK's tail checks during the
  run, your own code's ``get_items``) returns the wrapped session's items, and never
  touches the turn;
- the turn learns its user message from the run's input (the SDK's ``turn_input``,
  past the view) before the model is sent its first tool list: in ``agent()``'s
  hooks, ahead of placing; for a plain agent, which has no hooks, in the tool's
  ``is_enabled`` (the first thing ``run_streamed`` calls with the input) — the
  long-term-intent guard: no tool in a "remember this" turn;
- ``add_items`` records the items in the wrapped session; the step that ends the run
  (an assistant message last) finishes the turn with the record's recent items
  (capture with speakers, count, end);
- ``memory_tool()`` is ``update_short_term_memory`` as an Agents SDK
  ``FunctionTool`` bound to the session's current turn: the turn's schema, one update
  per turn;
- ``agent(agent)`` is a copy of the agent with that tool, and with the run ending
  right after the memory call when the model already answered in the same response
  (the user has the answer: no second model call for it), so a run costs no extra
  model call. Its
  hooks build each model request on the whole input as every entry point does
  (``MemoryTurn.prepare``: the cut, the memory, the briefings and the nudge after the
  user's message, the nudge only while the tool is offered). Its model (the agent's
  ``Model``, wrapped: ``_agent.MemoryModel``) is sent the tools the turn offers, with
  the ``tool_choice`` it decides (``MemoryTurn.request_tools``, the same in every step of the turn),
  while the memory tool stays in every step's tool list, so a call the model makes
  to a tool a guard hides is answered with the guard's failed result, as in every
  entry point. An agent whose model is a name (resolved by the run's provider, after
  ``agent()``) cannot be wrapped: its tool list is what the model is sent, hidden
  while a guard hides it (``is_enabled``), and such a call is the SDK's "tool not
  found". A plain agent with ``tools=[memory_tool()]`` is the same, except that it
  keeps the tool in a turn whose input carried the nudge, so a call the nudge asked
  for gets the engine's failed result;
- ``pop_item`` pops from the wrapped session; ``clear_session`` clears it and
  forgets the channel (the "/refresh").

The full record stays in the wrapped session (default the SDK's ``SQLiteSession``,
in memory, or in a file with ``db_path=``), as a checkpointer keeps a LangChain
thread: only what the model is sent is cut. A run that fails before its last step
leaves its turn open; the next run ends it (counted, captured) before beginning its
own. One session serves one conversation, one run at a time: a run that starts while
another run's task is still going raises :class:`SessionBusyError`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from stm_memory.kit import missing_extra

try:
    from agents import Agent, FunctionTool, Model, ModelSettings, RunContextWrapper, SQLiteSession
    from agents.items import TResponseInputItem
    from agents.memory import Session, SessionSettings
    from agents.memory.session_settings import coerce_session_settings, resolve_session_limit
except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
    raise missing_extra(
        "stm_memory_openai_agents", "the OpenAI Agents SDK", "openai-agents"
    ) from exc

from stm_memory import TOOL_NAME, Scope, ShortTermMemory, StmError, TurnContext
from stm_memory.kit import (
    MESSAGES_WIRE,
    RECALL_SPEC,
    RECALL_TOOL,
    Ask,
    MemoryRole,
    MemoryTurn,
    OptionsView,
    PlacedView,
    TurnOptions,
    TurnPhase,
    Usage,
    WriterLike,
    adrive,
    answered_then_remembered,
    cache_retention,
    check_memory_setup,
    current_user_text,
    failure,
    model_name,
    named_options,
    request_hints,
    tool_result_text,
)
from stm_memory.wire.responses import RESPONSES_WIRE

from ._agent import Epilogue, MemoryHooks, MemoryModel

__all__ = ["SessionBusyError", "ShortTermMemorySession"]

log = logging.getLogger("stm_memory.openai_agents")


class SessionBusyError(StmError, RuntimeError):
    """A run started on a :class:`ShortTermMemorySession` while another run on it is
    still going (in another task): one session serves one run at a time."""


def _settings_over(
    record: Session, ours: SessionSettings | Mapping[str, Any] | None
) -> SessionSettings:
    """The settings in force: ``ours`` (a dict converted as the SDK's sessions convert
    it, an unknown key a ``TypeError``) over the wrapped session's own, non-``None``
    values winning, as the Runner overlays a ``RunConfig``'s on a session's."""
    if ours is not None and not isinstance(ours, SessionSettings):
        # The SDK's sessions take a dict (and say which type they want otherwise).
        ours = coerce_session_settings(dict(ours) if isinstance(ours, Mapping) else ours)
    base = getattr(record, "session_settings", None)
    if not isinstance(base, SessionSettings):
        base = SessionSettings()
    if ours is not None and base.limit is not None and ours.limit != base.limit:
        log.info(
            "stm-memory: session_settings limit=%s given to ShortTermMemorySession wins "
            "over the wrapped session's limit=%s",
            ours.limit,
            base.limit,
        )
    return base.resolve(ours)


#: Our tools in an agent's list: the memory tool and the retrieval tool.
_OURS = frozenset({TOOL_NAME, RECALL_TOOL})


@dataclass(eq=False)
class _OpenRun:
    """The open turn of a session: its :class:`~stm_memory.kit.MemoryTurn` (off
    until it has begun, and when beginning failed) and the run it belongs to."""

    turn: MemoryTurn
    run: Any  # the RunContextWrapper of the run (None: items added outside a run)
    task: asyncio.Task[Any] | None  # the task that started the run
    view_len: int = 0  # items of the view the run's first read returned
    added: int = 0  # items recorded in this turn
    finishing: bool = False  # the next add_items is the run's last (the epilogue)
    answered: str = ""  # visible text of the model's last response (agent() hooks)
    placed: bool = False  # agent()'s hooks placed the memory at a model call (inline)
    # What the run's first read returned, placed (None: nothing placed, a session
    # that places at the model call, or a resumed run, whose input was placed when it
    # began).
    view: PlacedView | None = None
    sent: bool = True  # agent()'s model sent this turn's last model call (see _answered)
    # The last model call's input before the turn placed its memory (_before_model):
    # what a retry after a text-form memory call is placed on again.
    unplaced: list[Any] | None = None
    # The turn's last request carries the retrieval tool (a long turn cleared results).
    recall: bool = False


def _usage(run: Any) -> list[Usage]:
    """Each model call's usage, as the run's context recorded it (the SDK's
    ``request_usage_entries``; none outside a run)."""
    usage = getattr(run, "usage", None)
    out: list[Usage] = []
    for entry in getattr(usage, "request_usage_entries", None) or ():
        details = getattr(entry, "input_tokens_details", None)
        out.append(
            Usage(
                input_tokens=int(getattr(entry, "input_tokens", 0) or 0),
                output_tokens=int(getattr(entry, "output_tokens", 0) or 0),
                cached_input_tokens=int(getattr(details, "cached_tokens", 0) or 0),
                cache_write_tokens=int(getattr(details, "cache_write_tokens", 0) or 0),
            )
        )
    return out


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)


def _is_answer(item: Any) -> bool:
    """An assistant message: the item a run's last step ends with."""
    kind = item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)
    return _role(item) == "assistant" and kind in (None, "message")


def _accepts_wrapper(method: Callable[..., Any]) -> bool:
    try:
        return "wrapper" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


async def _call(method: Callable[..., Awaitable[Any]], *args: Any, wrapper: Any) -> Any:
    """Call a wrapped session's method, passing ``wrapper`` only if it takes one."""
    if wrapper is not None and _accepts_wrapper(method):
        return await method(*args, wrapper=wrapper)
    return await method(*args)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop
        return None


def _running_elsewhere(task: asyncio.Task[Any] | None) -> bool:
    """``task`` (a run's) is still going, and it is not the caller's: a run that failed
    in the caller's task, or whose task is over, is not running."""
    return task is not None and task is not _current_task() and not task.done()


@named_options
class ShortTermMemorySession(OptionsView):
    """An Agents SDK ``Session`` whose items, at the start of a run, are what the model
    should be sent (see the module docstring).

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory`.
        scope: the conversation this session serves. With a ``server_id`` its requests
            are briefed with every other channel of that server, other users' included;
            a session per end user takes a scope without one.
        session: the wrapped session that keeps the full record (any SDK session);
            default ``SQLiteSession(session_id, db_path)``.
        session_id: default the wrapped session's id, else the scope's live key.
        db_path: the default ``SQLiteSession``'s database (``":memory:"``).
        provider: provider name for the engine's provider exclusion (default ``None``,
            as on every entry point: the API's own, OpenAI's, which none excludes).
        trim_history: ``False`` sends the whole record (memory and nudge still
            placed), for a caller that windows its history itself.
        memory_role: ``"system"``, ``"user"`` or ``"inline"``, as on the loops.
            ``None`` (default) is the system form: the session's view is read before
            the agent's model is known.
        cache_hints: :meth:`agent` sets this server's ``prompt_cache_key`` in the
            agent's model settings (default; the agent's own key wins). ``False`` does not.
        session_settings: the SDK's ``SessionSettings``, or a dict of its fields
            (converted as the SDK's sessions convert it; an unknown key is a
            ``TypeError``). ``limit`` applies to the record read before the cut, and to
            ``get_items()`` called without one. They overlay the wrapped session's own
            settings, as a ``RunConfig``'s overlay a session's: a value given here wins,
            one left ``None`` keeps the wrapped session's. ``session_settings`` is then
            the settings in force (never ``None``).
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        scope: Scope,
        *,
        session: Session | None = None,
        session_id: str | None = None,
        db_path: str | Path = ":memory:",
        provider: str | None = None,
        trim_history: bool = True,
        memory_role: MemoryRole | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        cache_hints: bool = True,
        tool_calling: bool = True,
        context_window: int | None = None,
        keep_tool_results: Sequence[str] = (),
        writer: WriterLike | None = None,
    ) -> None:
        check_memory_setup(memory, scope=scope)
        #: The memory turns' options, checked here (one place for every entry point).
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
        self.memory = memory
        self.scope = scope
        if session_id is None:
            session_id = session.session_id if session is not None else scope.live_key
        self.session_id: str = session_id
        self.session: Session = (
            session if session is not None else SQLiteSession(session_id, db_path)
        )
        #: The settings in force: ours over the wrapped session's (see Args).
        self.session_settings: SessionSettings = _settings_over(self.session, session_settings)
        self._open: _OpenRun | None = None
        self._tool: FunctionTool | None = None
        self._recalls: bool | None = None  # agent() set: see agent()
        self._lock = threading.Lock()
        self._observer = _Observer(self)
        self._bypass_noted = False  # the warning of _answered went out
        # The cache retention the agent's model settings ask for (agent(); None: the
        # provider's default): it prices the turn's decision of what to show, which
        # the session's view makes before the model is called.
        self._retention: timedelta | None = None
        self._model_name: str | None = None  # the model of agent()'s agent
        # agent() wrapped an agent: its hooks place the memory at each model call, on
        # the whole input, the session's one placement point from then on; the run's
        # first read returns the record as it is.
        self._places_at_model = False

    # -- the Session protocol ---------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """At the start of a run: the model's view of the conversation (memory,
        uncovered items, nudge). Any other read: the wrapped session's items."""
        # The settings in force apply to every read through this session, passed on
        # explicitly so that the wrapped session's own default never stands in for them.
        limit = resolve_session_limit(limit, self.session_settings)
        if wrapper is None or self._in_run(wrapper):
            return list(await _call(self.session.get_items, limit, wrapper=wrapper))
        state = await self._start(wrapper)
        items = await _call(self.session.get_items, limit, wrapper=wrapper)
        view = self._view(list(items), state)
        state.view_len = len(view)
        return view

    async def add_items(
        self, items: list[TResponseInputItem], wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Record ``items``; the run's last step captures the dialogue and ends the turn."""
        await _call(self.session.add_items, items, wrapper=wrapper)
        state = self._current()
        if wrapper is not None and not self._in_run(wrapper):
            state = await self._start(wrapper)  # a run whose first read we did not see
        elif wrapper is None:
            if state is not None and state.run is not None:
                return  # recorded beside a run: the run's turn is not this caller's
            if state is None:  # items added outside a run: still a turn
                state = await self._start(None)
        assert state is not None
        if state.run is None:  # a run's turn learns its user message from the run's input
            state.turn.note_user_message(current_user_text(items))
        state.added += len(items)
        if state.finishing or (items and _is_answer(items[-1])):
            await self._end(state)

    async def pop_item(
        self, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove and return the most recent item of the record."""
        item: TResponseInputItem | None = await _call(self.session.pop_item, wrapper=wrapper)
        return item

    async def clear_session(self, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Clear the record and forget the channel's memory (the "/refresh")."""
        with self._lock:
            self._open = None
        await _call(self.session.clear_session, wrapper=wrapper)
        await self.memory.aclear_channel(self.scope.channel_id)

    def close(self) -> None:
        """Close the wrapped session when it can be closed (``SQLiteSession``)."""
        close = getattr(self.session, "close", None)
        if callable(close):
            close()

    # -- the memory tool -------------------------------------------------------------------

    @property
    def turn(self) -> TurnContext | None:
        """The engine's state of the open turn, or None."""
        state = self._current()
        return state.turn.state if state is not None else None

    def memory_tool(self) -> FunctionTool:
        """``update_short_term_memory`` as a ``FunctionTool`` bound to this session's
        current turn (the same object every time; its schema follows the turn, set
        when each run begins — no I/O here)."""
        with self._lock:
            if self._tool is not None:
                return self._tool
        state = self._current()
        # Before the first run: the defaults' schema (summary mode); each run sets its own.
        if state is not None and state.turn.status.active:
            turn = state.turn
        else:
            turn = MemoryTurn(self.memory, self.scope, options=self.options)  # off: the defaults
        spec = turn.tool_spec()
        tool = FunctionTool(
            name=TOOL_NAME,
            description=spec.description,
            params_json_schema=spec.schema(),
            on_invoke_tool=self._invoke_tool,
            strict_json_schema=True,
            is_enabled=self._tool_enabled,
        )
        with self._lock:
            if self._tool is None:
                self._tool = tool
            return self._tool

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        """A copy of ``agent`` with the memory tool, ending the run right after the
        memory call when the model already answered in the same response, its model
        sent the tools the turn offers (an agent that came from ``agent()`` before is
        unwrapped first)."""
        behavior = agent.tool_use_behavior
        if isinstance(behavior, Epilogue):
            behavior = behavior.inner
        hooks = agent.hooks
        if isinstance(hooks, MemoryHooks):
            hooks = hooks.inner
        model = agent.model
        if isinstance(model, MemoryModel):
            model = model.inner
        # The model agent() wraps names the rates and the cache hints of its turns (a
        # RunConfig model replacing it is said once, in _answered).
        self._model_name = model_name(model)
        self._places_at_model = True
        if isinstance(model, Model):
            # The memory tool stays routable in every step; the wrapper leaves it out
            # of what the model is sent while the turn does not offer it.
            model = MemoryModel(self._observer, model)
        # A long turn clears its older results only where the retrieval tool can be
        # sent and routed: every agent this session wrapped has a model of its own.
        self._recalls = self._recalls is not False and isinstance(model, MemoryModel)
        tools = [t for t in agent.tools if getattr(t, "name", None) not in _OURS]
        ours = [self.memory_tool(), self._recall_tool()] if isinstance(model, MemoryModel) else []
        return agent.clone(
            tools=[*tools, *(ours or [self.memory_tool()])],
            tool_use_behavior=Epilogue(self._observer, behavior, agent.output_type),
            hooks=MemoryHooks(self._observer, hooks),
            model=model,
            model_settings=self._model_settings(agent.model_settings),
        )

    def _recall_tool(self) -> FunctionTool:
        """The retrieval tool of agent()'s agents over a ``Model``: in every step's
        list, so the Runner can run a call of it; sent from the request the turn gives
        it to (its first clear on: agent()'s model leaves it out before,
        ``_request_tools``, as the step's list is built before the request is
        prepared), answered by the turn. Once a ``RunConfig(model=...)`` is seen to
        bypass that model, it is listed no more."""
        return FunctionTool(
            name=RECALL_TOOL,
            description=RECALL_SPEC.description,
            params_json_schema=RECALL_SPEC.schema(),
            on_invoke_tool=self._invoke_recall,
            strict_json_schema=False,
            is_enabled=self._recall_listed,
        )

    def _recall_listed(self, ctx: Any, agent: Any) -> bool:
        return not self._bypass_noted

    async def _invoke_recall(self, ctx: Any, arguments: str) -> str:
        state = self._current()
        if state is None:
            return tool_result_text(failure(f"{RECALL_TOOL} is not bound to a turn here."))
        return await adrive(state.turn.recall_call(arguments))

    def _model_settings(self, settings: ModelSettings) -> ModelSettings:
        """The agent's model settings with the cache hints this scope's turns send (the
        turn's: this server's ``prompt_cache_key``, unless hints are off or the agent
        has a key of its own), set once for every run of the agent; the retention they
        ask for is noted for the turns' views."""
        asked = {"prompt_cache_retention": settings.prompt_cache_retention}
        self._retention = cache_retention({**asked, **(settings.extra_args or {})})
        hints = request_hints(
            self.scope,
            settings.extra_args or {},
            wire=RESPONSES_WIRE,
            send=self.options.cache_hints,
        )
        if not hints:
            return settings
        return settings.resolve(ModelSettings(extra_args=hints))

    async def _invoke_tool(self, ctx: Any, arguments: str) -> str:
        state = self._current()
        if state is None:
            return tool_result_text(failure(f"{TOOL_NAME} is not bound to a turn here."))
        return tool_result_text(await adrive(state.turn.memory_call(arguments)))

    def _tool_enabled(self, ctx: Any, agent: Any) -> bool:
        """The tool's ``is_enabled``: whether a step's tool list has the memory tool,
        which is both what the model is sent and what a call can be routed to."""
        if self._routes(agent):
            # agent()'s agent: in every step's list, so a call always reaches the turn;
            # what the model is sent is the turn's offer (_request_tools). No side effect.
            return True
        state = self._current()
        if state is None or not state.turn.status.active:
            return False
        # Here the list is what the model is sent, and run_streamed builds it before any
        # other hook sees the run's input: the turn learns its user message now.
        self._learn_input(state, getattr(ctx, "turn_input", None))
        # The turn decides (TurnStatus.tool_listed). What only the session knows: a
        # plain agent was sent this turn's nudge (placed in the view, before the user's
        # message was known; a session that places at the model call has no view).
        nudged = state.view is not None and state.view.nudge is not None
        return state.turn.status.tool_listed(nudged=nudged)

    def _routes(self, agent: Any) -> bool:
        """``agent`` came from :meth:`agent` over a ``Model``: its tool list always has
        the memory tool, and its model sends it as the turn offers it."""
        model = getattr(agent, "model", None)
        return isinstance(model, MemoryModel) and model.observer.session is self

    def _request_tools(
        self, tools: list[Any], handoffs: Sequence[Any], items: Any, settings: ModelSettings
    ) -> tuple[list[Any], ModelSettings]:
        """agent()'s model, at each model call: the step's tools (the memory tool among
        them, routable) and ``tool_choice`` as the turn decides them for this request
        (``MemoryTurn.request_tools``, the one policy of every entry point): the tool
        sent while no guard of the turn hides it, the same in every step; else left
        out, or for the Messages API behind an OpenAI-compatible client
        (``provider="anthropic"``), which refuses tool traffic without tools, described
        and uncallable (``tool_choice="none"``)."""
        others = [t for t in tools if getattr(t, "name", None) not in _OURS]
        if len(others) == len(tools):
            return tools, settings
        state = self._current()
        if state is None:
            return others, settings  # no turn to offer it (a call gets a failed result)
        recall = [t for t in tools if getattr(t, "name", None) == RECALL_TOOL and state.recall]
        memory = [t for t in tools if getattr(t, "name", None) == TOOL_NAME]
        state.sent = True
        decided = state.turn.request_tools(
            items if isinstance(items, list) else [],
            wire=RESPONSES_WIRE,
            other_tools=bool(others or handoffs),
            tool_choice=settings.tool_choice,
        )
        if decided.tool_choice != settings.tool_choice:
            settings = dataclasses.replace(settings, tool_choice=decided.tool_choice)
        return [*others, *(memory if decided.tool else []), *recall], settings

    # -- the turn --------------------------------------------------------------------------

    def _current(self) -> _OpenRun | None:
        with self._lock:
            return self._open

    def _in_run(self, wrapper: Any) -> bool:
        state = self._current()
        return state is not None and state.run is not None and state.run is wrapper

    async def _start(self, run: Any) -> _OpenRun:
        """Open the turn of ``run`` (None: items added outside a run), ending the turn of
        a run that never finished first."""
        off = MemoryTurn(self.memory, self.scope, options=self.options)
        with self._lock:
            old = self._open
            if old is not None and old.run is not None and _running_elsewhere(old.task):
                raise SessionBusyError(
                    "another run on this session is still going: one ShortTermMemorySession "
                    "serves one run at a time (await it, or give each conversation its own "
                    "session)"
                )
            state = _OpenRun(off, run, _current_task() if run is not None else None)
            self._open = state
        if old is not None and old.added:
            await self._end(old)  # a run that never finished: its turn still happened
        state.turn = await adrive(
            MemoryTurn.begin(self.memory, self.scope, options=self.options, model=self._model_name)
        )
        await adrive(state.turn.assemble())
        with self._lock:
            tool = self._tool
        if tool is not None and state.turn.status.active:  # this turn's snapshot
            spec = state.turn.tool_spec()
            tool.description = spec.description
            tool.params_json_schema = spec.schema()
        return state

    def _view(self, items: list[Any], state: _OpenRun) -> list[Any]:
        if self._places_at_model:
            return items  # agent()'s hooks place it, on the whole input (_before_model)
        stand_in: dict[str, Any] = {"role": "user", "content": ""}
        placed = state.turn.view(
            items,
            stand_in,
            wire=RESPONSES_WIRE,
            nudge=self._tool is not None,  # no tool to call: no nudge
            retention=self._retention,
        )
        if placed is None:
            return items
        state.view = placed
        return [item for item in placed.items if item is not stand_in]

    def _learn_input(self, state: _OpenRun, run_input: Any) -> None:
        """Hand the turn the user message of the run's new input (``run_input``: the
        run's input as the SDK keeps it, ``turn_input``: the view first). The first
        one given wins, so a later step learns nothing new."""
        if not isinstance(run_input, Sequence) or isinstance(run_input, str):
            return
        new = list(run_input)[state.view_len :]
        briefing = state.turn.status.context.briefing
        # The briefings may stand after the user's message by now (see _before_model).
        said = [i for i in new if not (isinstance(i, Mapping) and i.get("content") == briefing)]
        state.turn.note_user_message(current_user_text(said))

    def _before_model(self, items: Any, run_input: Any) -> None:
        """agent()'s hooks, before each model call: the input as it will be sent, and
        the run's input."""
        state = self._current()
        if state is None or not state.turn.status.active or not isinstance(items, list):
            return
        state.sent = False  # until agent()'s model sends it (_request_tools)
        # Ahead of the nudge's placing and of the model's tool list (_request_tools).
        self._learn_input(state, run_input)
        state.unplaced = list(items)
        # The turn builds this request on the whole input, as every entry point does
        # (the record the run's first read returned, and the new input): the cut, the
        # memory, the briefings and the nudge after the user's message, the nudge only
        # while the tool is offered; in the portable form, joined to the first user
        # message and the user message of each turn (the instructions are the SDK's).
        items[:] = self._placed(state, items)
        state.placed = True

    async def _end(self, state: _OpenRun) -> None:
        """Finish ``state``'s turn (once): capture the record's recent dialogue, count."""
        with self._lock:
            if self._open is state:
                self._open = None
        turn = state.turn
        status = turn.status
        if not status.active or status.phase is TurnPhase.FINISHED:
            return
        at_model = self.options.form == "inline" or self._places_at_model
        if at_model and state.run is not None and not state.placed:
            log.warning(
                "stm-memory: this session places the memory at each model call, through "
                "session.agent(agent) (memory_role='inline', or agent() used on it); this "
                "run's agent was not, so its model was sent the whole session, uncut, and "
                "no memory"
            )
        try:
            items, start = await self._dialogue(turn, state.added)
        except Exception:
            # The wrapped session could not be read back: nothing to capture, but the
            # turn happened (counted), and memory must not fail the user's run.
            log.exception("stm-memory: reading the session failed; the dialogue is not captured")
            await adrive(turn.abandon())
            return
        await adrive(turn.finish(items, start=start, usage=_usage(state.run)))

    async def _dialogue(self, turn: MemoryTurn, added: int) -> tuple[list[Any], int]:
        """The record's tail for capture, read as the turn's capture window says, and
        where this turn's ``added`` items start in it."""
        items = list(await self.session.get_items(turn.capture_window(added)))
        if turn.capture_window(added, items) is None:  # too little dialogue: all of it
            items = list(await self.session.get_items())
        return items, max(0, len(items) - added)

    def _answered(self, text: str, agent: Any) -> None:
        """agent()'s hooks, after each model call: the visible text of the response."""
        state = self._current()
        if state is None:
            return
        state.answered = text
        hidden = not state.turn.status.tool_offered
        if hidden and not state.sent and self._routes(agent) and not self._bypass_noted:
            # The tool was in the step's list for the wrapper to hold back: it went out.
            self._bypass_noted = True  # said once per session
            log.warning(
                "stm-memory: a RunConfig(model=...) replaced the model of "
                "session.agent()'s agent, so the memory tool went to the model in a turn "
                "whose guards hide it (a call still gets the guard's failed result); give "
                "the agent its model before session.agent(agent) instead"
            )

    async def _text_call(self, text: str, sent: Any) -> list[Any] | None:
        """agent()'s model and hooks, after a response with no tool calls to ``sent``: a
        memory call written as text runs as the turn's write (``MemoryTurn.text_call``,
        which also stops offering the tool); the input to ask once more with (this
        step's, placed again: without the nudge now), or None when ``text`` was an
        answer (or nothing was sent to ask again with: a streamed reply)."""
        state = self._current()
        if state is None or not state.turn.status.active:
            return None
        if await adrive(state.turn.text_call(text)) is None or not isinstance(sent, list):
            return None
        if state.unplaced is None:  # this step placed nothing: it goes as it was
            return list(sent)
        return self._placed(state, state.unplaced)

    def _placed(self, state: _OpenRun, items: list[Any]) -> list[Any]:
        """One model call's input, as the turn prepares it (the one placement point of
        agent()'s agents)."""
        inline = self.options.form == "inline"
        ask = Ask(
            provider="openai",
            nudge=self._tool is not None,
            retention=self._retention,
            recall=bool(self._recalls),  # the retrieval tool of agent()'s model
        )
        wire = MESSAGES_WIRE if inline else RESPONSES_WIRE
        prepared = state.turn.prepare(items, wire=wire, ask=ask)
        state.recall = prepared.recall_spec is not None
        return prepared.messages

    def _finish_after_memory(self, call_names: Sequence[str]) -> str | None:
        """The answer to end the run with, when the last response answered and called
        only the memory tool (the one epilogue rule; None: the model runs again)."""
        state = self._current()
        if state is None or not answered_then_remembered(state.answered, call_names):
            return None
        state.finishing = True
        return state.answered

    def _finishing(self) -> None:
        state = self._current()
        if state is not None:
            state.finishing = True


@dataclass(frozen=True)
class _Observer:
    """The session as agent()'s hooks see it (:class:`RunObserver`): the hooks call
    these, never the session's private methods."""

    session: ShortTermMemorySession

    def before_model(self, items: Any, run_input: Any) -> None:
        self.session._before_model(items, run_input)

    def request_tools(
        self, tools: list[Any], handoffs: Sequence[Any], items: Any, settings: ModelSettings
    ) -> tuple[list[Any], ModelSettings]:
        return self.session._request_tools(tools, handoffs, items, settings)

    def answered(self, text: str, agent: Any) -> None:
        self.session._answered(text, agent)

    def finish_after_memory(self, call_names: Sequence[str]) -> str | None:
        return self.session._finish_after_memory(call_names)

    def finishing(self) -> None:
        self.session._finishing()

    async def text_call(self, text: str, sent: Any) -> list[Any] | None:
        return await self.session._text_call(text, sent)

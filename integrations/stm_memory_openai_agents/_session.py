"""``ShortTermMemorySession``: short-term memory for the OpenAI Agents SDK.

``Runner.run(agent, input, session=session)`` (and ``run_sync`` / ``run_streamed``)
reads the session once before the first model call and appends to it as the run goes
(the new input first, then each step's items). Here that brackets one memory turn:

- ``get_items`` begins the turn (a fresh one each time, until something is recorded
  in it) and returns what the model should be sent: the memory block, the items the
  memory does not cover (the history cut of the provider loops, without earlier
  memory-tool calls) and the nudge when it is due — placed as if the new input were
  already there, since the SDK appends it right after;
- ``add_items`` records the items in the wrapped session; the new input hands the
  turn its user message (the long-term-intent guard) before the model runs; the
  step that ends the run (an assistant message last) captures the dialogue and ends
  the turn;
- ``memory_tool()`` is ``update_short_term_memory`` as an Agents SDK
  ``FunctionTool`` bound to the session's current turn: the turn's schema, hidden
  while a guard hides it (``is_enabled``), one update per turn;
- ``agent(agent)`` is a copy of the agent with that tool, and with the run ending
  right after the memory call when the model already answered in the same response
  (SPEC §8: no second model call for it), so a run costs no extra model call;
- ``pop_item`` pops from the wrapped session; ``clear_session`` clears it and
  forgets the channel (the "/refresh").

The full record stays in the wrapped session (default the SDK's ``SQLiteSession``,
in memory, or in a file with ``db_path=``), as a checkpointer keeps a LangChain
thread: only what the model is sent is cut. A run that fails before its last step
leaves its turn open; the next run ends it (counted, captured) before beginning its
own. One session serves one conversation, one run at a time.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents import Agent, AgentHooks, FunctionTool, RunContextWrapper, SQLiteSession
from agents.agent import ToolsToFinalOutputResult
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import Session, SessionSettings
from agents.tool import FunctionToolResult, Tool

from stm_memory import TOOL_NAME, Scope, ShortTermMemory, TurnContext, ValidationError
from stm_memory.capture import message_text
from stm_memory.loop import check_memory_role
from stm_memory.placement import MemoryContext, MemoryRole
from stm_memory.schema import tool_description, tool_parameters
from stm_memory.toolcalls import check_tool_call
from stm_memory.turn import failure
from stm_memory_openai._responses import place_memory

__all__ = ["ShortTermMemorySession"]

log = logging.getLogger("stm_memory.openai_agents")

#: Items read back for capture at the end of a turn (more only when they hold too
#: little dialogue).
CAPTURE_WINDOW = 80
_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
    "additionalProperties": False,
}


@dataclass(eq=False)
class _Turn:
    """The open turn of a session (``turn`` None: memory is off for it)."""

    turn: TurnContext | None
    context: MemoryContext
    run: Any  # the RunContextWrapper of the run that began it (None: a direct call)
    added: int = 0  # items recorded in this turn
    finishing: bool = False  # the next add_items is the run's last (the epilogue)
    answered: str = ""  # visible text of the model's last response (agent() hooks)


def _content(result: Mapping[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)


def _text(item: Any) -> str:
    content = item.get("content") if isinstance(item, Mapping) else getattr(item, "content", None)
    try:
        return message_text(content)
    except ValidationError:
        return ""


def _is_answer(item: Any) -> bool:
    """An assistant message: the item a run's last step ends with."""
    kind = item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)
    return _role(item) == "assistant" and kind in (None, "message")


def _is_dialogue(item: Any) -> bool:
    return _role(item) in ("user", "assistant") and bool(_text(item).strip())


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


def _response_text(response: ModelResponse) -> str:
    parts: list[str] = []
    for item in response.output:
        if getattr(item, "type", None) != "message":
            continue
        for part in getattr(item, "content", None) or []:
            if getattr(part, "type", None) == "output_text":
                parts.append(str(getattr(part, "text", "") or ""))
    return "".join(parts)


class ShortTermMemorySession:
    """An Agents SDK ``Session`` whose items are what the model should be sent (see the
    module docstring).

    Args:
        memory: the :class:`~stm_memory.ShortTermMemory`.
        scope: the conversation this session serves.
        session: the wrapped session that keeps the full record (any SDK session);
            default ``SQLiteSession(session_id, db_path)``.
        session_id: default the wrapped session's id, else the scope's live key.
        db_path: the default ``SQLiteSession``'s database (``":memory:"``).
        provider: provider name for the engine's provider exclusion (``"openai"``).
        trim_history: ``False`` sends the whole record (memory and nudge still
            placed), for a caller that windows its history itself.
        memory_role: ``"system"`` (default) or ``"user"``, as on the loops.
        session_settings: the SDK's ``SessionSettings`` (``limit`` applies to the
            record read before the cut).
    """

    def __init__(
        self,
        memory: ShortTermMemory,
        scope: Scope,
        *,
        session: Session | None = None,
        session_id: str | None = None,
        db_path: str | Path = ":memory:",
        provider: str | None = "openai",
        trim_history: bool = True,
        memory_role: MemoryRole = "system",
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(memory, ShortTermMemory):
            raise ValidationError(f"memory must be a ShortTermMemory, got {type(memory).__name__}")
        if not isinstance(scope, Scope):
            raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")
        check_memory_role(memory_role)
        self.memory = memory
        self.scope = scope
        if session_id is None:
            session_id = session.session_id if session is not None else scope.live_key
        self.session_id: str = session_id
        self.session: Session = (
            session if session is not None else SQLiteSession(session_id, db_path)
        )
        self.session_settings: SessionSettings | None = session_settings
        self.provider = provider
        self.trim_history = bool(trim_history)
        self.memory_role: MemoryRole = memory_role
        self._open: _Turn | None = None
        self._tool: FunctionTool | None = None
        self._lock = threading.Lock()

    # -- the Session protocol ---------------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The model's view of the conversation: memory, uncovered items, nudge."""
        state = self._current()
        if state is not None and state.added and (wrapper is None or wrapper is not state.run):
            await self._end(state)  # a run that never finished: its turn still happened
            state = None
        if state is None or not state.added:
            state = await self._begin(wrapper)
        items = await _call(self.session.get_items, limit, wrapper=wrapper)
        return self._view(list(items), state)

    async def add_items(
        self, items: list[TResponseInputItem], wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Record ``items``; the run's last step captures the dialogue and ends the turn."""
        await _call(self.session.add_items, items, wrapper=wrapper)
        state = self._current()
        if state is None:  # items added without a read first: still a turn
            state = await self._begin(wrapper)
        if state.turn is not None:
            user = next((_text(i) for i in reversed(items) if _role(i) == "user"), None)
            self.memory.note_user_message(state.turn, user)
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
        """The open turn, or None."""
        state = self._current()
        return state.turn if state is not None else None

    def memory_tool(self) -> FunctionTool:
        """``update_short_term_memory`` as a ``FunctionTool`` bound to this session's
        current turn (the same object every time; its schema follows the turn)."""
        with self._lock:
            if self._tool is not None:
                return self._tool
        turn = self.turn
        if turn is None:
            try:
                turn = self.memory.begin_turn(self.scope, provider=self.provider)
            except Exception:
                log.exception("stm-memory: reading the server's categories failed")
        limit = self.memory.limits.max_summary_length
        tool = FunctionTool(
            name=TOOL_NAME,
            description=tool_description(turn, limit=limit) if turn else TOOL_NAME,
            params_json_schema=tool_parameters(turn) if turn else dict(_SUMMARY_SCHEMA),
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
        memory call when the model already answered in the same response."""
        tools = [t for t in agent.tools if getattr(t, "name", None) != TOOL_NAME]
        return agent.clone(
            tools=[*tools, self.memory_tool()],
            tool_use_behavior=_Epilogue(self, agent.tool_use_behavior, agent.output_type),
            hooks=_Hooks(self, agent.hooks),
        )

    async def _invoke_tool(self, ctx: Any, arguments: str) -> str:
        state = self._current()
        if state is None or state.turn is None:
            return _content(failure("update_short_term_memory is not bound to a turn here."))
        check = check_tool_call(arguments)
        if not check.ok or check.args is None:
            return _content(check.result or failure("The call was not executed."))
        args = {k: v for k, v in check.args.items() if v is not None}
        try:
            result = await self.memory.aupdate(state.turn, args)
        except Exception as exc:  # the engine returns failures; this is a bug
            log.exception("stm-memory: update_short_term_memory failed")
            result = failure(f"Internal error: {type(exc).__name__}: {exc}")
        return _content(result)

    def _tool_enabled(self, ctx: Any, agent: Any) -> bool:
        turn = self.turn
        return turn is not None and turn.tool_offered

    # -- the turn --------------------------------------------------------------------------

    def _current(self) -> _Turn | None:
        with self._lock:
            return self._open

    async def _begin(self, run: Any) -> _Turn:
        m = self.memory
        turn: TurnContext | None = None
        context: MemoryContext = MemoryContext()
        try:
            turn = await m.abegin_turn(self.scope, provider=self.provider)
            context = await m.abuild_context(turn)
        except Exception:
            log.exception("stm-memory: beginning the turn failed; no memory this time")
        state = _Turn(turn, context, run)
        with self._lock:
            self._open = state
            tool = self._tool
        if tool is not None and turn is not None:  # the schema of this turn's snapshot
            tool.params_json_schema = tool_parameters(turn)
            tool.description = tool_description(turn, limit=m.limits.max_summary_length)
        return state

    def _view(self, items: list[Any], state: _Turn) -> list[Any]:
        context = replace(state.context, role=self.memory_role)
        turn = state.turn
        if turn is None or not turn.tool_offered or self._tool is None:
            context = replace(context, nudge=None)  # no tool to call: no nudge
        if not self.trim_history:
            context = replace(context, history=None)
        if context.is_empty:
            return items
        stand_in: dict[str, Any] = {"role": "user", "content": ""}
        try:
            placed = place_memory(context, [*items, stand_in])
        except Exception:
            log.exception("stm-memory: placing memory failed; sending the whole session")
            return items
        return [item for item in placed if item is not stand_in]

    async def _end(self, state: _Turn) -> None:
        with self._lock:
            if self._open is state:
                self._open = None
        turn = state.turn
        if turn is None:
            return
        m = self.memory
        try:
            dialogue = await self._dialogue(state.added)
            await m.acapture(self.scope, dialogue)
        except Exception:
            log.exception("stm-memory: capturing the dialogue failed")
        try:
            await m.aend_turn(turn)
        except Exception:
            log.exception("stm-memory: ending the turn failed")

    async def _dialogue(self, added: int) -> list[Any]:
        """The recent dialogue for capture: the record's tail (capture keeps the last
        turns), after the stored messages when nothing precedes this turn."""
        kept = self.memory.limits.messages_kept
        window = max(CAPTURE_WINDOW, added + 4 * kept)
        items = list(await self.session.get_items(window))
        before = items[: max(0, len(items) - added)]
        if len(items) >= window and sum(map(_is_dialogue, before)) < kept:
            items = list(await self.session.get_items())
            before = items[: max(0, len(items) - added)]
        if len(items) < window and not any(map(_is_dialogue, before)):
            entry = await self.memory.aget(self.scope)
            previous = [
                {"role": s.role, "content": s.content, "name": s.name, "user_id": s.user_id}
                for s in (entry.messages if entry else ())
            ]
            return [*previous, *items[len(before) :]]
        return items

    def _answered(self, response: ModelResponse) -> None:
        state = self._current()
        if state is not None:
            state.answered = _response_text(response)

    def _finish_after_memory(self) -> str | None:
        """The answer to end the run with, when the last response answered and called
        only the memory tool (None: the model runs again)."""
        state = self._current()
        if state is None or not state.answered.strip():
            return None
        state.finishing = True
        return state.answered

    def _finishing(self) -> None:
        state = self._current()
        if state is not None:
            state.finishing = True


class _Epilogue:
    """``tool_use_behavior`` of :meth:`ShortTermMemorySession.agent`: a step whose only
    tool calls were the memory tool, after a response that already answered, is the
    run's last (its answer the final output); everything else goes to the agent's
    own behaviour, without the memory results (never a final output themselves)."""

    def __init__(self, session: ShortTermMemorySession, inner: Any, output_type: Any) -> None:
        self.session = session
        self.inner = inner
        self.text_output = output_type is None or output_type is str

    async def __call__(
        self, context: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        theirs = [r for r in results if r.tool.name != TOOL_NAME]
        if results and not theirs and self.text_output:
            answer = self.session._finish_after_memory()
            if answer is not None:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=answer)
        outcome = await _delegate(self.inner, context, theirs)
        if outcome.is_final_output:  # the step being saved next is the run's last
            self.session._finishing()
        return outcome


async def _delegate(
    behavior: Any, context: RunContextWrapper[Any], results: Sequence[FunctionToolResult]
) -> ToolsToFinalOutputResult:
    """The SDK's ``tool_use_behavior`` semantics for the agent's own setting."""
    if not results or behavior == "run_llm_again":
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    if behavior == "stop_on_first_tool":
        return ToolsToFinalOutputResult(is_final_output=True, final_output=results[0].output)
    if isinstance(behavior, Mapping):
        names = behavior.get("stop_at_tool_names", [])
        for result in results:
            if result.tool.name in names or result.tool.qualified_name in names:
                return ToolsToFinalOutputResult(is_final_output=True, final_output=result.output)
        return ToolsToFinalOutputResult(is_final_output=False, final_output=None)
    if callable(behavior):
        outcome = behavior(context, list(results))
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if isinstance(outcome, ToolsToFinalOutputResult):
            return outcome
    return ToolsToFinalOutputResult(is_final_output=False, final_output=None)


class _Hooks(AgentHooks[Any]):
    """The agent's own hooks, plus noting the text of each model response (for the
    epilogue)."""

    def __init__(self, session: ShortTermMemorySession, inner: Any) -> None:
        self.session = session
        self.inner = inner

    async def _forward(self, name: str, *args: Any) -> None:
        if self.inner is not None:
            await getattr(self.inner, name)(*args)

    async def on_start(self, context: Any, agent: Any) -> None:
        await self._forward("on_start", context, agent)

    async def on_end(self, context: Any, agent: Any, output: Any) -> None:
        await self._forward("on_end", context, agent, output)

    async def on_handoff(self, context: Any, agent: Any, source: Any) -> None:
        await self._forward("on_handoff", context, agent, source)

    async def on_tool_start(self, context: Any, agent: Any, tool: Tool) -> None:
        await self._forward("on_tool_start", context, agent, tool)

    async def on_tool_end(self, context: Any, agent: Any, tool: Tool, result: Any) -> None:
        await self._forward("on_tool_end", context, agent, tool, result)

    async def on_llm_start(
        self, context: Any, agent: Any, system_prompt: Any, input_items: Any
    ) -> None:
        await self._forward("on_llm_start", context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        self.session._answered(response)
        await self._forward("on_llm_end", context, agent, response)

"""Memory calls run as LangChain runs a tool, so tracing sees them.

A memory call is the turn's (:meth:`~stm_memory.kit.MemoryTurn.memory_call`: vetted,
every guard checked again, one update per turn). Run bare, it is invisible to
LangChain's callbacks (LangSmith, a ``BaseCallbackHandler`` in
``config["callbacks"]``) and to inner agent middleware. :class:`MemoryCallTool` is a
``BaseTool`` around one such call: LangChain's own tool machinery runs it, firing
``on_tool_start`` (the tool's name and description, the arguments) and ``on_tool_end``
(the ``ToolMessage`` answering the call; a guard's failed result too, as it is the
tool's answer to the model, not an error) or ``on_tool_error`` (the call raised), in
the run tree of the config it is invoked with.

- The middleware hands it to the ToolNode's ``handler`` (``request.override(tool=...)``),
  so the framework runs it as it runs every tool: inner middleware, the run's callbacks.
- The chain wrapper and the history invoke it themselves (:func:`memory_call_steps`),
  with the run's config (the wrapper's, or the one in context while
  ``RunnableWithMessageHistory`` stores the exchange).

The tool the model is offered stays the turn's (:func:`._tool.turn_tool`);
this one only runs a call, and takes that tool's name, description and schema.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, ClassVar

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig, ensure_config
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field

from stm_memory import TOOL_NAME
from stm_memory.kit import MemoryTurn, Op, adrive, drive, failure

from ._dialogue import memory_result
from ._tool import turn_tool

__all__ = ["MemoryCallTool", "memory_call_steps"]

_OFF = "Short-term memory (off for this conversation)."
# A JSON-schema args_schema passes the arguments through as the model sent them (the
# turn's memory call reads and vets them itself).
_ANY_OBJECT: dict[str, Any] = {"type": "object"}


class MemoryCallTool(BaseTool):
    """``update_short_term_memory`` for one call of a turn (see the module docstring):
    it runs ``turn.memory_call`` with the arguments it is invoked with and answers with
    the ``ToolMessage`` for the call; the result dict is kept in ``result``."""

    name: str = TOOL_NAME
    description: str = _OFF
    args_schema: Any = Field(default_factory=lambda: dict(_ANY_OBJECT))
    turn: Any = Field(exclude=True)  # MemoryTurn
    call_id: str = ""
    truncated: bool = False
    #: The memory call's result, once it ran.
    result: dict[str, Any] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # LangChain finds a tool's injected arguments by reading ``_run``'s signature, once
    # per tool object (a cached property); one is built per call here, and it has none.
    # (Should LangChain rename it, this is merely unused.)
    _injected_args_keys: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def for_call(
        cls, turn: MemoryTurn, call: Mapping[str, Any], *, truncated: bool = False
    ) -> MemoryCallTool:
        """The tool running ``call`` (a LangChain tool call) in ``turn``."""
        offered = turn_tool(turn, "describe")  # built once per turn: its text and schema
        described: dict[str, Any] = {}
        if offered is not None:
            described = {"description": offered.description, "args_schema": offered.args_schema}
        return cls(turn=turn, call_id=str(call.get("id") or ""), truncated=truncated, **described)

    # ``self`` is positional-only so a model argument named "self" lands in kwargs.
    def _run(self, /, *args: Any, **kwargs: Any) -> ToolMessage:
        return self._answer(drive(self._steps(args, kwargs)))

    async def _arun(self, /, *args: Any, **kwargs: Any) -> ToolMessage:
        return self._answer(await adrive(self._steps(args, kwargs)))

    def _steps(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Generator[Op, Any, dict[str, Any]]:
        if args:  # not an argument object: the turn's tool answers the same
            return failure("Call the tool with named arguments (a JSON object).")
        turn: MemoryTurn = self.turn
        return (yield from turn.memory_call(kwargs, truncated=self.truncated))

    def _answer(self, result: dict[str, Any]) -> ToolMessage:
        self.result = result
        return memory_result({"id": self.call_id}, result)


def memory_call_steps(
    turn: MemoryTurn,
    call: Mapping[str, Any],
    *,
    truncated: bool = False,
    config: RunnableConfig | None = None,
) -> Generator[Op, Any, tuple[ToolMessage, dict[str, Any]]]:
    """Run ``call`` (a LangChain tool call) as the turn's memory call, traced in the run
    of ``config`` (default: the config in context): the ``ToolMessage`` answering it
    and the result."""
    tool = MemoryCallTool.for_call(turn, call, truncated=truncated)
    arguments = call.get("args")
    tool_call = {
        "name": TOOL_NAME,
        "args": dict(arguments) if isinstance(arguments, Mapping) else {},
        "id": call.get("id"),
        "type": "tool_call",
    }
    # The caller's run name and id belong to the caller's own run, not to this one.
    run_config = ensure_config(config)
    run_config.pop("run_name", None)
    run_config.pop("run_id", None)
    message = yield Op(
        lambda: tool.invoke(tool_call, run_config),
        lambda: tool.ainvoke(tool_call, run_config),
        f"tool:{TOOL_NAME}",
    )
    if not isinstance(message, ToolMessage) or tool.result is None:  # pragma: no cover
        raise TypeError(f"{TOOL_NAME} answered {type(message).__name__}, not a ToolMessage")
    return message, tool.result

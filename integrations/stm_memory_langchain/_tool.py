"""The LangChain tool of a memory turn, built here: the kit's turn knows no framework.

``update_short_term_memory`` as a ``BaseTool`` bound to one :class:`MemoryTurn` (its
description and JSON schema from the turn's snapshot: ``tool_description``,
``tool_parameters``), what the middleware, the chain wrapper and the history offer the
model. Run directly (a caller that binds it to an agent of its own), it runs the turn's
one memory call (``MemoryTurn.memory_call``: vetted, every guard checked again, one update
per turn); the shipped entry points run the calls themselves, traced (``_tracing``). One
object per turn, kept with it (``MemoryTurn.kept``): the parallel tool calls of a step
share it, and it goes with the turn.

``args_schema`` is the turn's JSON schema itself, not a pydantic model: LangChain then
passes the model's arguments through untouched, so validation is the turn's and a wrong
type, a missing field or an unknown key reaches the model as a clear failed result; no
category slug can clash with a pydantic attribute, and ``bind_tools`` sends the exact
strict schema.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import ConfigDict, Field

from stm_memory import TOOL_NAME
from stm_memory.kit import MemoryTurn, adrive, crashed, drive, failure, tool_result_text

__all__ = ["KEY", "TurnMemoryTool", "turn_tool"]

_NAMED = "Call the tool with named arguments (a JSON object)."


def _unreadable(_exc: Exception) -> str:
    return tool_result_text(
        failure("The tool arguments could not be read; send a JSON object of strings.")
    )


def _answer(result: dict[str, Any]) -> str:
    text = tool_result_text(result)
    if crashed(result):
        # Still a failed result for the model; LangChain marks its message an error.
        raise ToolException(text)
    return text


class TurnMemoryTool(BaseTool):
    """``update_short_term_memory`` for the turn it was built for (see the module
    docstring); the scope comes from the turn, never from the arguments."""

    name: str = TOOL_NAME
    description: str = ""
    turn: Any = Field(exclude=True)
    handle_tool_error: Any = True
    handle_validation_error: Any = _unreadable

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _parse_input(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> str | dict[str, Any]:
        # A bare string is not an argument object: _run answers it as a failed result
        # instead of LangChain raising for a JSON-schema tool.
        if isinstance(tool_input, str):
            return tool_input
        return super()._parse_input(tool_input, tool_call_id)

    # ``self`` is positional-only so a model argument (or category) named "self" lands
    # in kwargs instead of colliding with the bound instance.
    def _run(self, /, *args: Any, **kwargs: Any) -> str:
        if args:
            return tool_result_text(failure(_NAMED))
        turn: MemoryTurn = self.turn
        return _answer(drive(turn.memory_call(kwargs)))

    async def _arun(self, /, *args: Any, **kwargs: Any) -> str:
        if args:
            return tool_result_text(failure(_NAMED))
        turn: MemoryTurn = self.turn
        return _answer(await adrive(turn.memory_call(kwargs)))


#: The key the tool is kept under in ``MemoryTurn.kept``.
KEY = "langchain.tool"
_LOCK = threading.Lock()


def turn_tool(turn: MemoryTurn, *, hidden: bool = False) -> TurnMemoryTool | None:
    """The LangChain tool bound to ``turn``, or None while a guard hides it (or memory is
    off). ``hidden=True`` returns it under a guard too, for a call the model makes anyway
    (the turn answers it with the guard's failure) or a request that must describe the
    tool without offering it (``PreparedRequest.tool == "describe"``)."""
    if not (turn.active and (hidden or turn.tool_offered)):
        return None
    with _LOCK:
        tool = turn.kept.get(KEY)
        if not isinstance(tool, TurnMemoryTool):
            schema = {"title": TOOL_NAME, **turn.tool_parameters()}
            tool = TurnMemoryTool(
                description=turn.tool_description(), args_schema=schema, turn=turn
            )
            turn.kept[KEY] = tool
        return tool

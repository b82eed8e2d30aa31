"""The LangChain tool of a memory turn: the one object the middleware, the chain wrapper
and the history offer the model for a turn. It is the engine's tool
(:class:`~stm_memory.tool.memory_tool.ShortTermMemoryTool`) bound to the turn: its
description and schema the turn's; run directly, the turn's one memory call (the shipped
entry points run the calls themselves, traced: ``_tracing``). Kept with the turn
(``MemoryTurn.kept``): the parallel tool calls of a step share it, and it goes with the
turn; the kit's turn imports no framework.
"""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

from stm_memory import TOOL_NAME, ShortTermMemoryTool
from stm_memory.kit import (
    RECALL_SPEC,
    RECALL_TOOL,
    MemoryTurn,
    Op,
    ToolOffer,
    failure,
    tool_result_text,
)

__all__ = ["KEY", "TurnMemoryTool", "recall_tool", "turn_tool"]

#: The key the tool is kept under in ``MemoryTurn.kept``.
KEY = "langchain.tool"
_LOCK = threading.Lock()


class TurnMemoryTool(ShortTermMemoryTool):
    """The engine's tool bound to a turn (``turn``, a :class:`MemoryTurn`): run
    directly, it runs ``MemoryTurn.memory_call`` (vetted, every guard checked again, one
    update per turn)."""

    def _steps(self, arguments: dict[str, Any]) -> Generator[Op, Any, dict[str, Any]]:
        turn: MemoryTurn = self.turn
        return turn.memory_call(arguments)


def turn_tool(turn: MemoryTurn, offer: ToolOffer) -> BaseTool | None:
    """The LangChain tool bound to ``turn`` as the turn decided ``offer`` (a request's
    ``PreparedRequest.tool``, or ``TurnStatus.offer``): offered or described, else
    None; None when memory is off. ``"describe"`` is also the tool of a call the model
    makes anyway under a guard (the turn answers it with the guard's failure)."""
    if offer is None or not turn.status.active:
        return None
    with _LOCK:
        tool = turn.kept.get(KEY)
        if not isinstance(tool, BaseTool):
            spec = turn.tool_spec()
            schema = {"title": TOOL_NAME, **spec.schema()}
            tool = turn.kept[KEY] = TurnMemoryTool(
                description=spec.description,
                args_schema=schema,
                memory=None,  # the turn runs the call (_steps), with its engine
                turn=turn,
            )
        return tool


def _unbound_recall(**_: Any) -> str:
    # Never reached: the middleware and the chain answer the call from the turn.
    return tool_result_text(failure(f"{RECALL_TOOL} is not bound to a turn here."))


def recall_tool() -> BaseTool:
    """The retrieval tool as LangChain binds it (its name, description and schema; the
    entry point answers its calls from the turn, ``MemoryTurn.recall_call``)."""
    return StructuredTool.from_function(
        func=_unbound_recall,
        name=RECALL_TOOL,
        description=RECALL_SPEC.description,
        args_schema=dict(RECALL_SPEC.parameters),
    )

"""The LangChain tool bound to a :class:`~stm_memory.kit.MemoryTurn`. Imported only by
:func:`stm_memory.kit.langchain_tool`, when a LangChain entry point asks for it:
``langchain_core`` is heavy, and the turn itself imports no framework."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from stm_memory.kit.ops import Op
from stm_memory.tool.memory_tool import ShortTermMemoryTool
from stm_memory.tool.turn import TOOL_NAME

if TYPE_CHECKING:
    from stm_memory.kit.turn import MemoryTurn

__all__ = ["TurnMemoryTool", "build_turn_tool"]


class TurnMemoryTool(ShortTermMemoryTool):
    """The engine's tool (:class:`~stm_memory.tool.memory_tool.ShortTermMemoryTool`)
    bound to a turn (``turn``): run directly, it runs the turn's one memory call
    (``MemoryTurn.memory_call``: vetted, every guard checked again, one update per
    turn); ``memory`` is the turn's engine."""

    def _steps(self, arguments: dict[str, Any]) -> Generator[Op, Any, dict[str, Any]]:
        turn: MemoryTurn = self.turn
        return turn.memory_call(arguments)


def build_turn_tool(turn: MemoryTurn) -> TurnMemoryTool:
    """:class:`TurnMemoryTool` for ``turn``: its description and schema the turn's."""
    schema = {"title": TOOL_NAME, **turn.tool_parameters()}
    return TurnMemoryTool(
        description=turn.tool_description(), args_schema=schema, memory=turn.memory, turn=turn
    )

"""The LangChain tool of a turn, for the LangChain integration, imported only when asked
for: ``langchain_core`` is heavy, and the turn itself imports no framework."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from stm_memory.kit.turn import MemoryTurn

__all__ = ["langchain_tool"]


def langchain_tool(turn: MemoryTurn) -> BaseTool:
    """``update_short_term_memory`` as a LangChain ``BaseTool`` bound to ``turn`` (its
    description and schema the turn's; run directly, the turn's one memory call). A new
    object each call: the integration keeps one per turn (``MemoryTurn.kept``)."""
    from stm_memory.kit._langchain_tool import build_turn_tool

    return build_turn_tool(turn)

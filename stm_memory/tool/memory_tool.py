"""The LangChain ``BaseTool`` for ``update_short_term_memory``, bound to one turn."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import ConfigDict, Field

from stm_memory._ops import Op, adrive, drive

# MemoryWriter is declared beside run_memory_call, which takes it: this module builds on
# call.py, never the other way round. Re-exported here, where it was first declared.
from stm_memory.tool.call import MemoryWriter, crashed, run_memory_call
from stm_memory.tool.schema import tool_description, tool_parameters
from stm_memory.tool.turn import TOOL_NAME, TurnContext, failure
from stm_memory.tool.vetting import tool_result_text

__all__ = ["MemoryWriter", "ShortTermMemoryTool", "build_tool"]


def _unreadable(_exc: Exception) -> str:
    return tool_result_text(
        failure("The tool arguments could not be read; send a JSON object of strings.")
    )


class ShortTermMemoryTool(BaseTool):
    """Runs ``ShortTermMemory.update`` for the turn it was built for.

    ``args_schema`` is the turn's JSON schema itself, not a pydantic model: LangChain
    then passes the model's arguments through untouched, so validation is ours
    (:func:`~stm_memory.tool.arguments.parse_update_arguments`) and a wrong type, a
    missing field or an unknown key reaches the model as a clear failed result. It also
    means no category slug can clash with a pydantic attribute (``json``,
    ``model_config``, …) and ``bind_tools`` sends the exact strict schema (all fields
    required, no extras).

    The scope comes from the turn, never from the arguments, so no call can write
    another channel's memory. It runs the one memory call every entry point runs
    (:func:`~stm_memory.tool.call.run_memory_call`): nothing raises into the agent
    loop, a crash is a logged failed result.
    """

    name: str = TOOL_NAME
    description: str = ""
    memory: Any = Field(exclude=True)
    turn: Any = Field(exclude=True)
    handle_tool_error: Any = True
    handle_validation_error: Any = _unreadable

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def _parse_input(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> str | dict[str, Any]:
        # A bare string is not an argument object; let _run answer it as a failed
        # result instead of LangChain raising for JSON-schema tools.
        if isinstance(tool_input, str):
            return tool_input
        return super()._parse_input(tool_input, tool_call_id)

    # ``self`` is positional-only so a model argument (or category) named "self"
    # lands in kwargs instead of colliding with the bound instance.
    def _run(self, /, *args: Any, **kwargs: Any) -> str:
        if args:
            return tool_result_text(failure("Call the tool with named arguments (a JSON object)."))
        return _answer(drive(self._steps(kwargs)))

    async def _arun(self, /, *args: Any, **kwargs: Any) -> str:
        if args:
            return tool_result_text(failure("Call the tool with named arguments (a JSON object)."))
        return _answer(await adrive(self._steps(kwargs)))

    def _steps(self, arguments: dict[str, Any]) -> Generator[Op, Any, dict[str, Any]]:
        """The memory call this tool runs: the engine's, on the turn's state (a turn's
        tool runs the turn's: stm_memory_langchain._tool)."""
        return run_memory_call(self.memory, self.turn, arguments)


def _answer(result: dict[str, Any]) -> str:
    text = tool_result_text(result)
    if crashed(result):
        # Still a failed result for the model; LangChain marks its message an error.
        raise ToolException(text)
    return text


def build_tool(memory: MemoryWriter, turn: TurnContext) -> ShortTermMemoryTool:
    limit = memory.limits.max_summary_length
    schema = {"title": TOOL_NAME, **tool_parameters(turn)}
    return ShortTermMemoryTool(
        description=tool_description(turn, limit=limit),
        args_schema=schema,
        memory=memory,
        turn=turn,
    )

"""The LangChain ``BaseTool`` for ``update_short_term_memory``, bound to one turn."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.tools import BaseTool, ToolException
from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, create_model

from .schema import tool_description, tool_parameters
from .turn import TOOL_NAME, TurnContext, failure

if TYPE_CHECKING:
    from .engine import ShortTermMemory

__all__ = ["ShortTermMemoryTool", "build_tool"]

log = logging.getLogger("stm_memory")


def _args_model(turn: TurnContext, limit: int) -> type[BaseModel]:
    """A pydantic model whose JSON schema is the turn's schema but which accepts anything.

    Validation is ours (``arguments.parse_update_arguments``) so that a wrong type, a
    missing field or an unknown key reaches the model as a clear failed tool result
    instead of a pydantic traceback; hence ``Any`` fields and ``extra="allow"``.
    """
    params = tool_parameters(turn, limit=limit)
    fields: dict[str, Any] = {
        name: (Annotated[Any, WithJsonSchema(prop)], Field(default=None))
        for name, prop in params["properties"].items()
    }
    required = list(params["required"])

    def finish(schema: dict[str, Any]) -> None:
        schema["required"] = required
        schema["additionalProperties"] = False

    config = ConfigDict(extra="allow", json_schema_extra=finish)
    model: type[BaseModel] = create_model("UpdateShortTermMemoryArgs", __config__=config, **fields)
    return model


def _as_content(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


class ShortTermMemoryTool(BaseTool):
    """Runs ``ShortTermMemory.update`` for the turn it was built for.

    The scope comes from the turn, never from the arguments, so no call can write
    another channel's memory. Every outcome is a JSON tool result; nothing raises into
    the agent loop.
    """

    name: str = TOOL_NAME
    description: str = ""
    memory: Any = Field(exclude=True)
    turn: Any = Field(exclude=True)
    handle_tool_error: Any = True
    handle_validation_error: Any = True

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @staticmethod
    def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
        kwargs.pop("run_manager", None)
        if args:
            return None
        # Fields default to None so pydantic never rejects a call before we can explain
        # it; None therefore means "not given" (a blank category keeps its value).
        return {k: v for k, v in kwargs.items() if v is not None}

    def _run(self, *args: Any, **kwargs: Any) -> str:
        arguments = self._arguments(args, kwargs)
        if arguments is None:
            return _as_content(failure("Call the tool with named arguments (a JSON object)."))
        try:
            result = self.memory.update(self.turn, arguments)
        except Exception as exc:  # a bug must not kill the agent loop
            log.exception("stm-memory: tool execution crashed")
            raise ToolException(_as_content(failure(f"Internal error: {exc}"))) from exc
        return _as_content(result)

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        arguments = self._arguments(args, kwargs)
        if arguments is None:
            return _as_content(failure("Call the tool with named arguments (a JSON object)."))
        try:
            result = await self.memory.aupdate(self.turn, arguments)
        except Exception as exc:
            log.exception("stm-memory: tool execution crashed")
            raise ToolException(_as_content(failure(f"Internal error: {exc}"))) from exc
        return _as_content(result)


def build_tool(memory: ShortTermMemory, turn: TurnContext) -> ShortTermMemoryTool:
    limit = memory.limits.max_summary_length
    return ShortTermMemoryTool(
        description=tool_description(turn, limit=limit),
        args_schema=_args_model(turn, limit),
        memory=memory,
        turn=turn,
    )

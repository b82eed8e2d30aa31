"""Deciding whether a provider's tool call may run at all, and the text of a tool result.

A call whose arguments the provider cut short (the reply hit the output-token limit)
or that is not a JSON object is never executed: half a summary would overwrite a whole
one. Its failure goes back to the model as the tool's result instead."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stm_memory.tool.turn import failure

__all__ = ["ToolCallCheck", "check_tool_call", "is_truncated", "tool_result_text"]

# Provider markers of a response cut at the output-token limit.
_TRUNCATED_FINISH = frozenset({"length", "max_tokens", "max_output_tokens"})


def is_truncated(
    *,
    finish_reason: str | None = None,
    stop_reason: str | None = None,
    incomplete_reason: str | None = None,
) -> bool:
    """OpenAI ``finish_reason == "length"``, Anthropic ``stop_reason == "max_tokens"``,
    Responses ``incomplete_details.reason == "max_output_tokens"``."""
    return any(r in _TRUNCATED_FINISH for r in (finish_reason, stop_reason, incomplete_reason))


@dataclass(frozen=True, slots=True)
class ToolCallCheck:
    """``args`` when the call may run; else ``result``, the failed tool result to send back."""

    args: dict[str, Any] | None
    result: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        return self.args is not None


def check_tool_call(
    raw_arguments: str | Mapping[str, Any] | None, *, truncated: bool = False
) -> ToolCallCheck:
    """Parse a tool call's arguments (a JSON string, or an already-parsed object)."""
    if truncated:
        return ToolCallCheck(
            None,
            failure(
                "Your tool call was cut off by the output-token limit, so it was not executed. "
                "Call the tool again with shorter arguments."
            ),
        )
    if raw_arguments is None or raw_arguments == "":
        parsed: Any = {}
    elif isinstance(raw_arguments, Mapping):
        parsed = dict(raw_arguments)
    else:
        try:
            parsed = json.loads(raw_arguments)
        except (TypeError, ValueError, RecursionError) as exc:
            return ToolCallCheck(
                None,
                failure(
                    f"The tool arguments were not valid JSON ({exc}); the call was not executed."
                ),
            )
    if not isinstance(parsed, dict):
        return ToolCallCheck(
            None, failure("The tool arguments must be a JSON object; the call was not executed.")
        )
    return ToolCallCheck(parsed, None)


def tool_result_text(value: Any) -> str:
    """A tool's result as the text a tool message carries: a string as it is, anything
    else as JSON (sorted keys, non-ASCII kept). Every loop, history and session writes
    tool results through this one function, so the same result is the same bytes in
    every request (prompt caches and recorded cassettes compare them)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)

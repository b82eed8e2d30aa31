"""Deciding whether a provider's tool call may run at all (SPEC §3: never execute a call
whose arguments the provider cut short or that is not valid JSON)."""

from __future__ import annotations

import json
import logging
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stm_memory.tool.turn import failure

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.providers.loop import Op
    from stm_memory.tool.turn import TurnContext

__all__ = [
    "ToolCallCheck",
    "check_tool_call",
    "is_truncated",
    "run_memory_call",
    "tool_result_text",
]

log = logging.getLogger("stm_memory")

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
    else as JSON (sorted keys, non-ASCII kept)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def run_memory_call(
    memory: ShortTermMemory,
    turn: TurnContext,
    arguments: str | Mapping[str, Any] | None,
    *,
    truncated: bool = False,
) -> Generator[Op, Any, dict[str, Any]]:
    """Execute one ``update_short_term_memory`` call for ``turn``, as a step generator
    (run it with :func:`stm_memory.providers.loop.drive` or ``adrive``).

    A call the provider cut short, or whose arguments are not a JSON object, is never
    executed: its failure is the result. Otherwise the engine's update runs, every
    guard checked again (one update per turn). ``null`` values mean "no value" (models
    and LangChain send them for optional fields): that category is left alone. An
    unexpected exception is logged and becomes a failed result: a memory call never
    fails the user's turn."""
    from stm_memory.providers.loop import Op

    check = check_tool_call(arguments, truncated=truncated)
    if not check.ok or check.args is None:
        return dict(check.result or failure("The call was not executed."))
    args = {k: v for k, v in check.args.items() if v is not None}
    try:
        result: dict[str, Any] = yield Op(
            lambda: memory.update(turn, args), lambda: memory.aupdate(turn, args), "update"
        )
    except Exception as exc:  # the engine returns failures; this is a bug
        log.exception("stm-memory: update_short_term_memory failed")
        return failure(f"Internal error: {type(exc).__name__}: {exc}")
    return result

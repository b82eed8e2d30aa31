"""One ``update_short_term_memory`` call, vetted, executed, and never allowed to fail
the user's turn: the step behind :meth:`MemoryTurn.memory_call`, which every entry
point's memory calls go through."""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from typing import TYPE_CHECKING, Any

from stm_memory.providers.ops import Op, op
from stm_memory.tool.turn import failure
from stm_memory.tool.vetting import check_tool_call

if TYPE_CHECKING:
    from stm_memory.engine import ShortTermMemory
    from stm_memory.tool.turn import TurnContext

__all__ = ["run_memory_call"]

log = logging.getLogger("stm_memory")


def run_memory_call(
    memory: ShortTermMemory,
    turn: TurnContext,
    arguments: str | Mapping[str, Any] | None,
    *,
    truncated: bool = False,
) -> Generator[Op, Any, dict[str, Any]]:
    """Execute one ``update_short_term_memory`` call for ``turn``, as a step generator
    (run it with :func:`~stm_memory.providers.drive` or ``adrive``).

    A call the provider cut short, or whose arguments are not a JSON object, is never
    executed: its failure is the result. Otherwise the engine's update runs, every
    guard checked again (one update per turn); the arguments go to it as the model sent
    them (``null`` is "no value": :func:`~stm_memory.tool.arguments.parse_update_arguments`
    says what that means, for every path alike). An unexpected exception is logged and
    becomes a failed result."""
    check = check_tool_call(arguments, truncated=truncated)
    if not check.ok or check.args is None:
        return dict(check.result or failure("The call was not executed."))
    try:
        result: dict[str, Any] = yield op(memory.update, memory.aupdate, turn, check.args)
    except Exception as exc:  # the engine returns failures; this is a bug
        log.exception("stm-memory: update_short_term_memory failed")
        return failure(f"Internal error: {type(exc).__name__}: {exc}")
    return result

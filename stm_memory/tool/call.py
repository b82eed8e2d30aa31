"""One ``update_short_term_memory`` call, vetted, executed, and never allowed to fail
the user's turn: the one path every memory call takes (``MemoryTurn.memory_call``, which
the loops, the middleware, the chain, the LCEL history and the Agents SDK session run —
the LangChain entry points as a traced tool run — and the LangChain tool
``ShortTermMemory.tool`` hands out, for a caller's own agent)."""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping
from typing import Any, Protocol

from stm_memory._ops import Op, op
from stm_memory.config import Limits
from stm_memory.tool.turn import TurnContext, failure
from stm_memory.tool.vetting import check_tool_call

__all__ = ["MemoryWriter", "crashed", "run_memory_call"]

_INTERNAL = "Internal error: "

log = logging.getLogger("stm_memory")


class MemoryWriter(Protocol):
    """What a memory call runs: ``ShortTermMemory``'s update and its limits.

    Declared here, beside :func:`run_memory_call`, and not with the LangChain tool that
    also takes one: the tool builds on this module, so this module imports nothing of
    the tool's."""

    @property
    def limits(self) -> Limits: ...

    def update(self, turn: TurnContext, args: object) -> dict[str, Any]: ...

    async def aupdate(self, turn: TurnContext, args: object) -> dict[str, Any]: ...


def run_memory_call(
    memory: MemoryWriter,
    turn: TurnContext,
    arguments: str | Mapping[str, Any] | None,
    *,
    truncated: bool = False,
) -> Generator[Op, Any, dict[str, Any]]:
    """Execute one ``update_short_term_memory`` call for ``turn``, as a step generator
    (run it with :func:`~stm_memory.kit.drive` or ``adrive``).

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
        return failure(f"{_INTERNAL}{type(exc).__name__}: {exc}")
    return result


def crashed(result: Mapping[str, Any]) -> bool:
    """``result`` is the failure :func:`run_memory_call` answers a crash with (a bug,
    not the model's mistake: the LangChain tool marks its message an error)."""
    reason = result.get("reason")
    return isinstance(reason, str) and reason.startswith(_INTERNAL)

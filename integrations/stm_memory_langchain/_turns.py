"""Small turn helpers the chain history shares with its chain wrapper (pure but for
the engine calls they wrap)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Any

from stm_memory import ShortTermMemory, TurnContext
from stm_memory.loop import Op
from stm_memory.toolcalls import check_tool_call

__all__ = ["attempt", "content_of", "op", "run_memory_call"]

log = logging.getLogger("stm_memory.langchain")


def op(fn: Callable[..., Any], afn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Op:
    """An :class:`Op` calling ``fn`` (blocking drivers) or ``afn`` (async drivers)."""
    return Op(lambda: fn(*args, **kw), lambda: afn(*args, **kw), getattr(fn, "__name__", ""))


def attempt(step: Op, what: str) -> Generator[Op, Any, Any]:
    """Run ``step``; on failure log and return None: memory never fails the user's turn."""
    try:
        return (yield step)
    except Exception:
        log.exception("stm-memory: %s failed; the turn continues without it", what)
        return None


def content_of(result: Mapping[str, Any]) -> str:
    """A tool result as the JSON text a ``ToolMessage`` carries."""
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


def run_memory_call(
    memory: ShortTermMemory,
    turn: TurnContext,
    arguments: str | Mapping[str, Any] | None,
    *,
    truncated: bool = False,
) -> Generator[Op, Any, dict[str, Any]]:
    """Execute one ``update_short_term_memory`` call for ``turn``: a call the provider
    cut short, or whose arguments are not a JSON object, is never executed (its
    failure is the result); otherwise the engine's update, with every guard checked
    again (one update per turn)."""
    check = check_tool_call(arguments, truncated=truncated)
    if not check.ok or check.args is None:
        return dict(check.result or {})
    # LangChain and the models send null for "no value": leave that category alone.
    args = {k: v for k, v in check.args.items() if v is not None}
    result: dict[str, Any] = yield op(memory.update, memory.aupdate, turn, args)
    return result

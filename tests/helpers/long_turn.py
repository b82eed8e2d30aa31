"""A long turn's transcript in Chat messages, and a turn to read it with (the spec
tests of long turns)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from helpers.memory import SERVER
from stm_memory import ShortTermMemory, TurnOptions
from stm_memory._ops import drive
from stm_memory.kit import MemoryTurn
from stm_memory.model import Scope

WINDOW = 8_192


def doc(k: int, lines: int = 60) -> str:
    return "\n".join(
        f"Report {k}, line {i}: the committee deferred item {i}." for i in range(lines)
    )


def transcript(
    reads: int,
    ask: str = "Read every report.",
    *,
    system: str | None = None,
    document: Callable[[int], str] = doc,
) -> list[dict[str, Any]]:
    """A turn asking ``ask`` that reads ``document(k)`` for k < ``reads``, one call each
    (ids ``call_k``, tool ``open``), after a ``system`` message when given."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    out.append({"role": "user", "content": ask})
    for k in range(reads):
        call = {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": "open", "arguments": "{}"},
        }
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        out.append({"role": "tool", "tool_call_id": f"call_{k}", "content": document(k)})
    return out


def begin(mem: ShortTermMemory, scope: Scope = SERVER) -> MemoryTurn:
    turn = drive(MemoryTurn.begin(mem, scope, options=TurnOptions(context_window=WINDOW)))
    drive(turn.assemble())
    return turn

"""Small verbs for engine tests: scopes, one-call turns, and direct row reads."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from stm_memory import MemoryEntry, Scope, ShortTermMemory

__all__ = [
    "COMPLETED",
    "DM",
    "SERVER",
    "dialogue",
    "refresh",
    "row",
    "rows",
    "scope_dict",
    "turn",
]

SERVER = Scope(channel_id="c1", user_id="u1", server_id="g1")
DM = Scope(channel_id="dm1", user_id="u1")
#: What a successful tool call returns.
COMPLETED = {"status": "completed"}


def scope_dict(scope: Scope) -> dict[str, Any]:
    """A Scope as JSON-able keyword arguments (for a child process)."""
    return {k: v for k, v in asdict(scope).items() if v is not None}


def turn(mem: ShortTermMemory, scope: Scope, update: dict[str, Any] | None = None) -> Any:
    """One responding turn: begin, optionally call the tool, end. Returns the tool result."""
    ctx = mem.begin_turn(scope, provider="openai", user_message="hello")
    result = mem.update(ctx, update) if update is not None else None
    mem.end_turn(ctx)
    return result


def refresh(mem: ShortTermMemory, scope: Scope, summary: str) -> Any:
    result = turn(mem, scope, {"summary": summary})
    assert result["status"] == "completed", result
    return result


def dialogue(n: int, start: int = 1, speaker: str = "u1") -> list[dict[str, str]]:
    """``n`` alternating user/assistant messages numbered from ``start``, the user's
    naming ``speaker`` (in a server, earlier turns that name nobody are not captured)."""
    return [
        {"role": "user", "content": f"message {i}", "user_id": speaker}
        if i % 2
        else {"role": "assistant", "content": f"message {i}"}
        for i in range(start, start + n)
    ]


def rows(mem: ShortTermMemory, *keys: str) -> dict[str, MemoryEntry]:
    """SQL rows by key, read straight from the store (no cache)."""
    return mem._store.load_many(list(keys))


def row(mem: ShortTermMemory, key: str | None) -> MemoryEntry | None:
    assert key is not None
    return rows(mem, key).get(key)

"""No regret (SPEC §6): with a model that never writes its memory, every entry point
sends what a full-history caller sends — every earlier turn of the channel — until the
history's token budget, not a small turn count (the 30-turn cap this replaced dropped
turns nothing covered, and a toolless model's same-channel recall with them)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from stm_memory import TOOL_NAME
from stm_memory.engine import ShortTermMemory
from stm_memory.testing.contract import ScriptedModel, shipped_drivers
from stm_memory.testing.contract.integration import hermetic_memory, speaker
from stm_memory.testing.offline import OfflineReply

SERVER = "guild"
TURNS = 45  # well past the former 30-turn cap


class ToollessModel(ScriptedModel):
    """Answers every turn and never calls ``update_short_term_memory``, nudged or not
    (what many small and open models do with an optional tool)."""

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        reply = super().respond(dialogue, tools=tools)
        others = tuple(call for call in reply.tool_calls if call[0] != TOOL_NAME)
        return OfflineReply(reply.text or self.default_answer, others)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[ShortTermMemory]:
    mem = hermetic_memory(tmp_path)
    mem.configure_server(SERVER, refresh_cadence=3)  # nudged from the third turn on
    yield mem
    mem.close()


async def _awaited(value: Any) -> Any:
    return await value


# The buffer and the core API place no dialogue of their own (the caller builds it).
DRIVERS = [d for d in shipped_drivers() if not d.startswith(("buffer", "core"))]


@pytest.mark.parametrize("driver_id", DRIVERS)
def test_a_toolless_models_requests_keep_every_uncovered_turn(
    driver_id: str, memory: ShortTermMemory
) -> None:
    model = ToollessModel()
    driver = shipped_drivers()[driver_id](memory, model)
    lines = [f"Fact number {i}: the key is under stone {i}." for i in range(TURNS)]
    with asyncio.Runner() as runner:
        try:
            for line in lines:
                result = driver.run_turn(speaker("alice", "lobby"), line)
                if inspect.isawaitable(result):
                    runner.run(_awaited(result))
        finally:
            closed = driver.close()
            if inspect.isawaitable(closed):
                runner.run(_awaited(closed))
    assert memory.get(speaker("alice", "lobby")).summary in (None, "")  # type: ignore[union-attr]
    last = model.requests[-1].text
    missing = [i for i, line in enumerate(lines) if line not in last]
    assert missing == [], f"{driver_id}: the last request lost turns {missing[:5]}…"

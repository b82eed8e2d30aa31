"""No regret (SPEC §6): with a model that never writes its memory, every entry point
sends what a full-history caller sends — every earlier turn of the channel — until the
history's token budget, not a small turn count (the 30-turn cap this replaced dropped
turns nothing covered, and a toolless model's same-channel recall with them)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from stm_memory import TOOL_NAME, Limits, Writing
from stm_memory.engine import ShortTermMemory
from stm_memory.testing import FrozenClock
from stm_memory.testing.contract import ScriptedModel, shipped_drivers
from stm_memory.testing.contract.integration import hermetic_memory, speaker
from stm_memory.testing.offline import OfflineReply

SERVER = "guild"
TURNS = 45  # well past the former 30-turn cap


class ToollessModel(ScriptedModel):
    """Answers every turn and never calls ``update_short_term_memory``, nudged or not
    (what many small and open models do with an optional tool) — until ``writes`` is
    set: then it writes when nudged, as the offline model does."""

    writes: bool = False

    def respond(
        self,
        dialogue: Sequence[tuple[str, str]],
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> OfflineReply:
        reply = super().respond(dialogue, tools=tools)
        if self.writes:
            return reply
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


def run_lobby(
    driver: Any,
    lines: Sequence[str],
    *,
    model: ScriptedModel | None = None,
    after: Callable[[int, int], None] | None = None,
) -> None:
    """Alice says each of ``lines`` in #lobby, a turn each, through ``driver`` (sync or
    async); ``after(i, first)`` runs after turn ``i`` (``first``: the index of its first
    request in ``model.requests``)."""
    with asyncio.Runner() as runner:
        try:
            for i, line in enumerate(lines):
                before = len(model.requests) if model is not None else 0
                result = driver.run_turn(speaker("alice", "lobby"), line)
                if inspect.isawaitable(result):
                    runner.run(_awaited(result))
                if after is not None:
                    after(i, before)
        finally:
            closed = driver.close()
            if inspect.isawaitable(closed):
                runner.run(_awaited(closed))


# The buffer and the core API place no dialogue of their own (the caller builds it).
DRIVERS = [d for d in shipped_drivers() if not d.startswith(("buffer", "core"))]


@pytest.mark.parametrize("driver_id", DRIVERS)
def test_a_toolless_models_requests_keep_every_uncovered_turn(
    driver_id: str, memory: ShortTermMemory
) -> None:
    model = ToollessModel()
    lines = [f"Fact number {i}: the key is under stone {i}." for i in range(TURNS)]
    run_lobby(shipped_drivers()[driver_id](memory, model), lines)
    assert memory.get(speaker("alice", "lobby")).summary in (None, "")  # type: ignore[union-attr]
    last = model.requests[-1].text
    missing = [i for i, line in enumerate(lines) if line not in last]
    assert missing == [], f"{driver_id}: the last request lost turns {missing[:5]}…"


def _market_moves_on(memory: ShortTermMemory, said: str) -> None:
    """One turn in #market (another channel of the server), captured, no memory written."""
    scope = speaker("bob", "market")
    turn = memory.begin_turn(scope, provider="openai", user_message=said)
    said_and_answered = [{"role": "user", "content": said}, {"role": "assistant", "content": "Ok."}]
    memory.capture(scope, said_and_answered)
    memory.end_turn(turn)


#: The lobby's turns in the test below, and the turns past the cadence (3) whose
#: request carries the nudge: the cadence and the two after it (the tries that judge
#: the model), then a retry 16 turns past the cadence.
QUIET_TURNS = 24
NUDGED_AT = (3, 4, 5, 19)


@pytest.mark.parametrize("driver_id", DRIVERS)
def test_a_toolless_channel_is_sent_no_briefing_on_its_own_and_nudged_less(
    driver_id: str, memory: ShortTermMemory
) -> None:
    # A quiet channel (stm_memory.prompt.quiet): its model never wrote, so a briefing
    # sent between swaps would stay in its prompt for good, billed at every request; and
    # a nudge it ignores goes out on rare retries once it is judged, not every turn.
    model = ToollessModel()
    _market_moves_on(memory, "Market opens at nine.")
    firsts: list[str] = []

    def after(i: int, before: int) -> None:
        firsts.append(model.requests[before].text)  # the turn's first request
        _market_moves_on(memory, f"Market news {i}.")

    lines = [f"Lobby line {i}." for i in range(QUIET_TURNS)]
    run_lobby(shipped_drivers()[driver_id](memory, model), lines, model=model, after=after)
    # The market as the lobby's first turn saw it stays; its later turns are never sent.
    assert all("Market opens at nine." in text for text in firsts), driver_id
    leaked = [i for i, text in enumerate(firsts) if "Market news" in text]
    assert leaked == [], f"{driver_id}: briefings sent on their own at turns {leaked}"
    nudged = tuple(i for i, text in enumerate(firsts) if f"call {TOOL_NAME}" in text)
    assert nudged == NUDGED_AT, driver_id


JUDGED_AT = 6  # the first request judged: cadence 3 + the three tries ignored
WITHDRAWN_AT = 8  # the first lapse after the judgement
RETRIED_AT = 16  # the first lapse once the turns since the withdrawal doubled


@pytest.mark.parametrize("driver_id", DRIVERS)
def test_a_model_judged_not_to_write_stops_paying_for_the_tool_and_the_nudge(
    driver_id: str, tmp_path: Path
) -> None:
    # SPEC §6 "no regret", and saying it: after three ignored nudges the channel is
    # judged not writing; its requests carry no nudge, and from the next request whose
    # cached prefix is lost anyway (a lapse) no tool either; a retry where it is free
    # again finds a model that writes now, and the status says so.
    clock = FrozenClock()
    limits = {f.name: getattr(Limits(), f.name) for f in fields(Limits)}
    memory = ShortTermMemory.from_url(
        f"sqlite:///{tmp_path / 'stm.db'}",
        cache_dir=tmp_path / "stm-cache",
        clock=clock,
        **{**limits, "settings_ttl": 0.0},
    )
    memory.configure_server(SERVER, refresh_cadence=3)
    model = ToollessModel()
    lobby = speaker("alice", "lobby")
    seen: list[tuple[bool, bool, Writing]] = []  # first request: tool, nudge; status after

    def after(i: int, before: int) -> None:
        first = model.requests[before]
        seen.append(
            (
                first.offers_memory_tool,
                f"call {TOOL_NAME}" in first.text,
                memory.writing_status(lobby),
            )
        )
        lapse = i + 1 in (WITHDRAWN_AT, RETRIED_AT)
        clock.advance(hours=2) if lapse else clock.advance(minutes=1)
        if i + 1 == RETRIED_AT:
            model.writes = True

    try:
        lines = [f"Lobby line {i}." for i in range(RETRIED_AT + 1)]
        run_lobby(shipped_drivers()[driver_id](memory, model), lines, model=model, after=after)
        tools = [i for i, (tool, _, _) in enumerate(seen) if not tool]
        assert tools == list(range(WITHDRAWN_AT, RETRIED_AT)), driver_id
        nudged = [i for i, (_, nudge, _) in enumerate(seen) if nudge]
        assert nudged == [3, 4, 5, RETRIED_AT], driver_id
        # The engine's word after each turn: the third nudge (turn 5) ignored judges it.
        statuses = [status for _, _, status in seen]
        assert statuses[JUDGED_AT - 2] is Writing.WAITING
        judged = statuses[JUDGED_AT - 1 : RETRIED_AT]
        assert judged == [Writing.NOT_WRITING] * (RETRIED_AT - JUDGED_AT + 1)
        assert statuses[RETRIED_AT] is Writing.WRITING, driver_id  # noticed at once
        assert memory.get(lobby).summary  # type: ignore[union-attr]
    finally:
        memory.close()

"""The tool offer for a model that does not write its memory (SPEC §6, §8): the judgement
whether a channel's memory is being written, the nudge's schedule and what a request does
with the tool (stm_memory.prompt.quiet, as tables); the status and the warning the engine
and the turn give; and, on every shipped entry point, no regret: a toolless model's
requests keep every uncovered turn and stop paying for the tool and the nudge.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from helpers.memory import SERVER

from stm_memory import (
    TOOL_NAME,
    ConfigurationError,
    Limits,
    MemoryTurn,
    Scope,
    ShortTermMemory,
    TurnOptions,
)
from stm_memory.kit import drive
from stm_memory.kit import turn as turn_module
from stm_memory.prompt.quiet import (
    NUDGE_TRIES,
    RETRY_FROM,
    ToolStep,
    Writing,
    is_quiet,
    nudge_due,
    tool_step,
    writing,
)
from stm_memory.testing import FrozenClock
from stm_memory.testing.contract import ScriptedModel, shipped_drivers
from stm_memory.testing.contract.integration import hermetic_memory, speaker
from stm_memory.testing.offline import OfflineReply
from stm_memory.wire.openai_chat import CHAT_WIRE

# ------------------------------------------------------------------------------------
# A channel whose model does not write its memory (stm_memory.prompt.quiet): when the
# nudge goes past the cadence, when the channel is quiet, whether its memory is being
# written (the judgement) and what a request does with the tool, as tables.


@pytest.mark.parametrize(
    ("turns", "cadence", "due"),
    [
        (0, 5, False),
        (4, 5, False),  # before the cadence: only the early nudge, when a write pays
        (5, 5, True),  # the cadence, and the tries after it
        (6, 5, True),
        (7, 5, True),
        (8, 5, False),  # judged not writing: only the retries, 5 + 16, 5 + 32 …
        (9, 5, False),
        (13, 5, False),
        (20, 5, False),
        (21, 5, True),
        (22, 5, False),
        (37, 5, True),
        (69, 5, True),
        (70, 5, False),
        (1, 1, True),
        (2, 1, True),
        (4, 1, False),
        (5, 1, False),
        (17, 1, True),
    ],
)
def test_the_nudge_backs_off_once_ignored(turns: int, cadence: int, due: bool) -> None:
    assert nudge_due(turns, cadence) is due


def test_a_writing_model_is_nudged_every_turn_it_is_asked() -> None:
    # A model that writes when nudged never gets past the tries: it is asked at once.
    assert all(nudge_due(5 + k, 5) for k in range(NUDGE_TRIES))


@pytest.mark.parametrize(
    ("writes", "turns", "cadence", "quiet"),
    [
        (0, 0, 5, True),  # never written: no sign its model writes
        (0, 100, 5, True),
        (1, 0, 5, False),  # written: deliveries ride until its next swap
        (3, 7, 5, False),
        (3, 8, 5, True),  # NUDGE_TRIES nudges past the cadence ignored
        (3, 50, 5, True),
    ],
)
def test_a_channel_is_quiet_until_its_model_writes(
    writes: int, turns: int, cadence: int, quiet: bool
) -> None:
    assert is_quiet(writes, turns, cadence) is quiet


def test_a_judged_channel_is_nudged_a_few_times_in_a_long_conversation() -> None:
    # 200 turns past the cadence: the tries, then 16, 32, 64, 128 turns past it.
    sent = [t for t in range(5, 5 + 200) if nudge_due(t, 5)]
    assert len(sent) == NUDGE_TRIES + 4
    assert sent[NUDGE_TRIES] == 5 + RETRY_FROM


@pytest.mark.parametrize(
    ("offered", "writes", "turns", "cadence", "status"),
    [
        (False, 0, 0, 5, Writing.OFF),  # a guard hides the tool, or tool_calling=False
        (False, 3, 100, 5, Writing.OFF),
        (True, 0, 0, 5, Writing.WAITING),  # nothing to judge yet
        (True, 0, 7, 5, Writing.WAITING),  # nudged twice (turns 5 and 6), not three times
        (True, 0, 8, 5, Writing.NOT_WRITING),  # the three tries ignored
        (True, 0, 500, 5, Writing.NOT_WRITING),
        (True, 1, 0, 5, Writing.WRITING),  # a write restarts the counter: noticed at once
        (True, 4, 7, 5, Writing.WRITING),
        (True, 4, 8, 5, Writing.NOT_WRITING),  # wrote before, stopped since
        (True, 0, 3, 1, Writing.WAITING),
        (True, 0, 4, 1, Writing.NOT_WRITING),
    ],
)
def test_whether_the_memory_is_being_written(
    offered: bool, writes: int, turns: int, cadence: int, status: Writing
) -> None:
    got = writing(offered=offered, writes=writes, turns_since_refresh=turns, cadence=cadence)
    assert got is status


W, N, OFF = Writing.WRITING, Writing.NOT_WRITING, Writing.OFF


@pytest.mark.parametrize(
    ("status", "withdrawn_for", "withdrawn_at", "model", "turns", "fresh", "step"),
    [
        # Listed: it leaves only where the prefix is lost anyway, once judged.
        (W, None, 0, "m", 3, True, ToolStep.KEEP),
        (Writing.WAITING, None, 0, "m", 3, True, ToolStep.KEEP),
        (N, None, 0, "m", 9, False, ToolStep.KEEP),  # a warm cache: no re-bill for it
        (N, None, 0, "m", 9, True, ToolStep.WITHDRAW),
        (N, None, 0, None, 9, True, ToolStep.WITHDRAW),
        (OFF, None, 0, "m", 9, True, ToolStep.KEEP),
        # Withdrawn: it stays out (no tool, no nudge) …
        (N, "m", 9, "m", 12, False, ToolStep.HOLD),
        (N, "m", 9, "m", 12, True, ToolStep.HOLD),  # fresh, but not twice the turns yet
        (N, "m", 9, "m", 30, False, ToolStep.HOLD),  # twice, but the cache is warm
        (N, "", 9, "m", 12, False, ToolStep.HOLD),  # judged unnamed: any name is the same
        (N, "m", 9, None, 12, False, ToolStep.HOLD),
        (OFF, "m", 9, "other", 12, True, ToolStep.HOLD),  # a guard hides it anyway
        # … until a retry where it is free, another model, or counters that restarted.
        (N, "m", 9, "m", 18, True, ToolStep.REOFFER),
        (N, "m", 9, "other", 12, False, ToolStep.REOFFER),
        (W, "m", 9, "m", 0, False, ToolStep.REOFFER),
        (Writing.WAITING, "m", 9, "m", 2, False, ToolStep.REOFFER),
    ],
)
def test_what_a_request_does_with_the_tool(
    status: Writing,
    withdrawn_for: str | None,
    withdrawn_at: int,
    model: str | None,
    turns: int,
    fresh: bool,
    step: ToolStep,
) -> None:
    got = tool_step(
        status=status,
        withdrawn_for=withdrawn_for,
        withdrawn_at=withdrawn_at,
        model=model,
        turns_since_refresh=turns,
        fresh=fresh,
    )
    assert got is step


# ------------------------------------------------------------------------------------
# Whether a channel's memory is being written, said (issue: "say when memory is not
# being written"): the turn's and the engine's status, one warning per model name with
# the exact text, none for a model that writes, and ``tool_calling=False``.

CADENCE = 3


@pytest.fixture(autouse=True)
def fresh_warnings() -> Iterator[None]:
    # The warning is once per model name per process: each test starts with none said.
    turn_module._warned_models.clear()
    yield
    turn_module._warned_models.clear()


@pytest.fixture
def judged(mem: ShortTermMemory) -> ShortTermMemory:
    mem.configure_server(SERVER.server_id or "", refresh_cadence=CADENCE)
    return mem


def one_turn(
    mem: ShortTermMemory,
    n: int,
    *,
    scope: Scope = SERVER,
    model: str | None = "tiny-1",
    writes: bool = False,
    options: TurnOptions | None = None,
) -> tuple[MemoryTurn, Any]:
    """Turn ``n`` of a channel: its request, and a memory call when ``writes`` and
    nudged (a model that writes when asked)."""
    said = [{"role": "user", "content": f"line {n}"}]
    turn = drive(
        MemoryTurn.begin(mem, scope, model=model, user_message=f"line {n}", options=options)
    )
    drive(turn.assemble())
    prepared = turn.prepare(said, wire=CHAT_WIRE)
    nudged = any(f"call {TOOL_NAME}" in str(m.get("content")) for m in prepared.messages)
    if writes and nudged:
        drive(turn.memory_call({"summary": f"Talked up to line {n}."}))
    drive(turn.finish([*said, {"role": "assistant", "content": "Noted."}], start=0))
    return turn, prepared


WARNING = (
    "stm-memory: model 'tiny-1' has not written its short-term memory in 3 nudged turns "
    "(channel {key}): memory is not being written. Its requests now leave out the "
    "nudge, and the memory tool where that costs nothing; briefings, the history "
    "cut at the context budget and erasure still work. If the model can call tools, "
    "serve it with a chat template that supports them (llama.cpp: --jinja); if it "
    "cannot, pass tool_calling=False. See docs/open-models.md."
)


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    # The test model's name is in no table of rates: that warning is another rule's.
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "prompt-cache rates" not in r.getMessage()
    ]


def test_a_model_that_ignores_the_nudges_is_judged_once_and_warned_once(
    judged: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    statuses = []
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(12):
            turn, _ = one_turn(judged, n)
            statuses.append(turn.status.writing)
    # Nudged at turns 3, 4 and 5 (the cadence and two more); judged from turn 6.
    assert statuses[: CADENCE + 3] == [Writing.WAITING] * (CADENCE + 3)
    assert statuses[CADENCE + 3 :] == [Writing.NOT_WRITING] * (12 - CADENCE - 3)
    assert judged.writing_status(SERVER) is Writing.NOT_WRITING
    assert _said(caplog) == [WARNING.format(key=SERVER.live_key)]


def test_each_model_name_is_warned_about_once(
    judged: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    other = Scope(channel_id="c2", user_id="u2", server_id=SERVER.server_id)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(10):  # a DM's cadence is the default, 5: judged from turn 8
            one_turn(judged, n)
            one_turn(judged, n, scope=other)  # the same model in another channel
            one_turn(judged, n, scope=Scope(channel_id="c3", user_id="u3"), model="tiny-2")
    said = _said(caplog)
    assert len(said) == 2
    assert "model 'tiny-1'" in said[0] and "model 'tiny-2'" in said[1]


def test_a_model_that_writes_is_never_judged_nor_warned(
    judged: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        statuses = [one_turn(judged, n, writes=True)[0].status.writing for n in range(20)]
    assert Writing.NOT_WRITING not in statuses
    assert statuses[-1] is Writing.WRITING
    assert judged.writing_status(SERVER) is Writing.WRITING
    assert _said(caplog) == []


def test_a_model_that_cannot_call_tools_is_offered_no_tool_and_never_nudged(
    judged: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    options = TurnOptions(tool_calling=False)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(10):
            turn, prepared = one_turn(judged, n, options=options)
            assert prepared.tool is None and not turn.status.tool_offered
            assert not any(TOOL_NAME in str(m.get("content")) for m in prepared.messages)
            assert turn.status.writing is Writing.OFF
    assert _said(caplog) == []  # said by the caller: nothing to warn about
    entry = judged.get(SERVER)
    assert entry is not None and entry.turns_since_refresh == 10  # still counted


@pytest.mark.parametrize("value", [0, -5, True, 8192.0, "8192"])
def test_a_context_window_that_is_not_a_positive_int_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="context_window"):
        TurnOptions(context_window=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_tool_calling_is_a_flag(value: object) -> None:
    with pytest.raises(ConfigurationError, match="tool_calling"):
        TurnOptions(tool_calling=value)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------
# No regret (SPEC §6): with a model that never writes its memory, every entry point
# sends what a full-history caller sends — every earlier turn of the channel — until the
# history's token budget, not a small turn count (the 30-turn cap this replaced dropped
# turns nothing covered, and a toolless model's same-channel recall with them).

GUILD = "guild"
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
    mem.configure_server(GUILD, refresh_cadence=3)  # nudged from the third turn on
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
    memory.configure_server(GUILD, refresh_cadence=3)
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

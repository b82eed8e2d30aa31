"""Whether a channel's memory is being written, said (issue: "say when memory is not
being written"): the turn's and the engine's status, one warning per model name with
the exact text, none for a model that writes, and ``tool_calling=False``."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.memory import SERVER

from stm_memory import (
    TOOL_NAME,
    ConfigurationError,
    MemoryTurn,
    Scope,
    ShortTermMemory,
    TurnOptions,
    Writing,
)
from stm_memory.kit import drive
from stm_memory.kit import turn as turn_module

CADENCE = 3


@pytest.fixture(autouse=True)
def fresh_warnings() -> Iterator[None]:
    # The warning is once per model name per process: each test starts with none said.
    turn_module._warned_models.clear()
    yield
    turn_module._warned_models.clear()


@pytest.fixture
def memory(mem: ShortTermMemory) -> ShortTermMemory:
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
    prepared = turn.prepare(said, api="openai")
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
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_model_that_ignores_the_nudges_is_judged_once_and_warned_once(
    memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    statuses = []
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(12):
            turn, _ = one_turn(memory, n)
            statuses.append(turn.writing)
    # Nudged at turns 3, 4 and 5 (the cadence and two more); judged from turn 6.
    assert statuses[: CADENCE + 3] == [Writing.WAITING] * (CADENCE + 3)
    assert statuses[CADENCE + 3 :] == [Writing.NOT_WRITING] * (12 - CADENCE - 3)
    assert memory.writing_status(SERVER) is Writing.NOT_WRITING
    assert _said(caplog) == [WARNING.format(key=SERVER.live_key)]


def test_each_model_name_is_warned_about_once(
    memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    other = Scope(channel_id="c2", user_id="u2", server_id=SERVER.server_id)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(10):  # a DM's cadence is the default, 5: judged from turn 8
            one_turn(memory, n)
            one_turn(memory, n, scope=other)  # the same model in another channel
            one_turn(memory, n, scope=Scope(channel_id="c3", user_id="u3"), model="tiny-2")
    said = _said(caplog)
    assert len(said) == 2
    assert "model 'tiny-1'" in said[0] and "model 'tiny-2'" in said[1]


def test_a_model_that_writes_is_never_judged_nor_warned(
    memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        statuses = [one_turn(memory, n, writes=True)[0].writing for n in range(20)]
    assert Writing.NOT_WRITING not in statuses
    assert statuses[-1] is Writing.WRITING
    assert memory.writing_status(SERVER) is Writing.WRITING
    assert _said(caplog) == []


def test_a_model_that_cannot_call_tools_is_offered_no_tool_and_never_nudged(
    memory: ShortTermMemory, caplog: pytest.LogCaptureFixture
) -> None:
    options = TurnOptions(tool_calling=False)
    with caplog.at_level(logging.WARNING, logger="stm_memory"):
        for n in range(10):
            turn, prepared = one_turn(memory, n, options=options)
            assert prepared.tool is None and not turn.tool_offered
            assert not any(TOOL_NAME in str(m.get("content")) for m in prepared.messages)
            assert turn.writing is Writing.OFF
    assert _said(caplog) == []  # said by the caller: nothing to warn about
    entry = memory.get(SERVER)
    assert entry is not None and entry.turns_since_refresh == 10  # still counted


@pytest.mark.parametrize("value", [0, -5, True, 8192.0, "8192"])
def test_a_context_window_that_is_not_a_positive_int_is_refused(value: object) -> None:
    with pytest.raises(ConfigurationError, match="context_window"):
        TurnOptions(context_window=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_tool_calling_is_a_flag(value: object) -> None:
    with pytest.raises(ConfigurationError, match="tool_calling"):
        TurnOptions(tool_calling=value)  # type: ignore[arg-type]

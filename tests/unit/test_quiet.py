"""A channel whose model does not write its memory (stm_memory.prompt.quiet): when the
nudge goes past the cadence, when the channel is quiet, whether its memory is being
written (the judgement) and what a request does with the tool, as tables."""

from __future__ import annotations

import pytest

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

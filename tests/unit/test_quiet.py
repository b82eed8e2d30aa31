"""A channel whose model does not write its memory (stm_memory.prompt.quiet): when the
nudge goes past the cadence, and when the channel is quiet, as tables."""

from __future__ import annotations

import pytest

from stm_memory.prompt.quiet import NUDGE_TRIES, is_quiet, nudge_due


@pytest.mark.parametrize(
    ("turns", "cadence", "due"),
    [
        (0, 5, False),
        (4, 5, False),  # before the cadence: only the early nudge, when a write pays
        (5, 5, True),  # the cadence, and the tries after it
        (6, 5, True),
        (7, 5, True),
        (8, 5, False),  # then doubling gaps: 5 + 4, 5 + 8, 5 + 16 …
        (9, 5, True),
        (12, 5, False),
        (13, 5, True),
        (21, 5, True),
        (22, 5, False),
        (37, 5, True),
        (1, 1, True),
        (2, 1, True),
        (4, 1, False),
        (5, 1, True),
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

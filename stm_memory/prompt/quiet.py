"""A channel whose model does not write its memory: what it is still sent. Pure.

SPEC §6, "no regret": with a model that never writes its memory (many small and open
models ignore an optional tool), the bill and same-channel recall are never worse than
a full-history caller's. Such a channel never swaps (nothing newer is written), so
two things that a writing channel pays for once per rewrite would be paid for on
every later turn:

- **The nudge.** Past the cadence it went out every turn, after the user's message,
  where nothing caches it: about fifty uncached tokens a turn. It now goes
  :data:`NUDGE_TRIES` turns in a row when the cadence is reached (a model that writes
  answers the first), then on doubling gaps (the cadence + 4, + 8, + 16 … turns since
  the last write): a model that writes late is still asked, one that never writes is
  asked a few times in a conversation, not every turn.
- **Briefing deliveries.** A briefing sent on its own between swaps stays in the
  channel's prompt for good: read from the cache at every later request, re-billed in
  full when the copy set restarts. A writing channel's next swap comes within a few
  turns and folds them into one stable group; a *quiet* channel's never comes. Quiet:
  its model has never written its memory here (no sign that it will), or it left it
  unwritten :data:`NUDGE_TRIES` turns past the cadence (it ignores the nudges, or a
  guard stopped it). A quiet channel is sent nothing on its own — neither a change
  nor a new source: its briefings are the ones its last swap showed (its first turn,
  for a model that never writes), and a copy whose source may no longer be shown
  still leaves at once (erasure, a clear, a privacy change). Its first write ends it.

Measured (the bench's conversation, 200 turns, OpenAI, a model that never writes,
against the full history): 1.67× warm and 1.46× cold before; 1.04× / 1.03× now, the
writing model's bill unchanged or lower. Showing a quiet channel fresh briefings when
its cache lapsed (a swap that looks free) was tried and left out: ``stm-memory eval``
(200 turns, 5-minute cache) billed 1.19× the full history against 1.09× and recalled
no more across channels (a briefing of raw turns shows only its source's last few).
What quiet costs is news from other channels for a model that keeps none of its own
(cross-channel recall 71 % → 6 % in the eval, a full-history caller's is 0 %).
"""

from __future__ import annotations

__all__ = ["NUDGE_TRIES", "is_quiet", "nudge_due"]

#: Turns in a row the nudge goes once the cadence is reached, before it backs off.
NUDGE_TRIES = 3


def nudge_due(turns_since_refresh: int, cadence: int) -> bool:
    """The cadence's nudge goes this turn: the cadence is reached, and the turns past it
    are fewer than :data:`NUDGE_TRIES` or a power of two."""
    overdue = turns_since_refresh - cadence
    if overdue < 0:
        return False
    return overdue < NUDGE_TRIES or overdue & (overdue - 1) == 0


def is_quiet(writes: int, turns_since_refresh: int, cadence: int) -> bool:
    """The channel's model has not shown that it writes its memory: never written
    (``writes``, the entry's ``last_refreshed_turn``, is 0), or unwritten
    :data:`NUDGE_TRIES` turns past the cadence. Its briefings change only when its
    prompt changes anyway."""
    return writes <= 0 or turns_since_refresh >= cadence + NUDGE_TRIES

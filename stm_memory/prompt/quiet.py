"""A channel whose model does not write its memory: what it is still sent. Pure.

SPEC §6, "no regret": with a model that never writes its memory (many small and open
models ignore an optional tool), the bill and same-channel recall are never worse than
a full-history caller's. Such a channel never swaps (nothing newer is written), so
two things that a writing channel pays for once per rewrite would be paid for on
every later turn:

- **The nudge.** Past the cadence it went out every turn, after the user's message,
  where nothing caches it: about fifty uncached tokens a turn. It now goes
  :data:`NUDGE_TRIES` turns in a row when the cadence is reached (a model that writes
  answers the first), then only on retries (below): a model that writes late is
  still asked, one that never writes is asked a few times in a conversation, not
  every turn.
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

Whether the memory is being written at all (:class:`Writing`, :func:`writing`) is
judged from the same counters: a channel whose model left its memory unwritten
:data:`NUDGE_TRIES` turns past the cadence, each one nudged, is judged *not writing*.
From then on its requests stop paying for a memory nobody writes:

- the nudge goes only on a rare retry (:func:`nudge_due`: the cadence + 16, + 32,
  + 64 … turns since the last write) — a small model's answers are no longer derailed
  by reminders every few turns;
- the tool's description leaves the request where the cached prefix is lost anyway
  (:func:`tool_step`: the tools head the prompt, before the system prompt every
  channel of one cache key shares, so only when that whole head has gone cold — a
  swap of this channel's form or its own lapse is not enough: measured on the eval's
  three channels with a 5-minute cache, leaving at the channel's own lapse billed
  1.16× what keeping the tool did), and comes back where
  that is free again once the turns since the withdrawal have doubled, at once for
  another model (a new model's cache is another anyway), or when the counters say
  the channel was reset.

A write ends the judgement at once (the counters restart). The turn says the status
(``MemoryTurn.status.writing``, ``TurnResult.writing``), the engine per channel
(``ShortTermMemory.writing_status``), and the first judgement per model name logs one
warning (``stm_memory.kit.turn``).

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

import enum

__all__ = [
    "NUDGE_TRIES",
    "RETRY_FROM",
    "ToolStep",
    "Writing",
    "is_quiet",
    "nudge_due",
    "nudges_sent",
    "tool_step",
    "writing",
]

#: Turns in a row the nudge goes once the cadence is reached, before it backs off.
NUDGE_TRIES = 3
#: Turns past the cadence of the first retry once judged not writing; then doubling.
RETRY_FROM = 16


class Writing(enum.StrEnum):
    """Whether a channel's memory is being written (said on the turn and the engine)."""

    #: The memory tool is not offered to the model (a guard of the turn: memory off
    #: for the server, full privacy, an excluded provider; or ``tool_calling=False``).
    OFF = "off"
    #: Offered, not written yet, fewer than :data:`NUDGE_TRIES` nudges ignored.
    WAITING = "waiting"
    #: Its model writes it: written, and not past the cadence by the tries.
    WRITING = "writing"
    #: :data:`NUDGE_TRIES` nudges in a row ignored: judged not to write.
    NOT_WRITING = "not_writing"


def writing(*, offered: bool, writes: int, turns_since_refresh: int, cadence: int) -> Writing:
    """The channel's :class:`Writing` status from its counters (``writes``: the entry's
    ``last_refreshed_turn``, the writes so far)."""
    if not offered:
        return Writing.OFF
    if turns_since_refresh >= cadence + NUDGE_TRIES:
        return Writing.NOT_WRITING
    return Writing.WRITING if writes > 0 else Writing.WAITING


def nudge_due(turns_since_refresh: int, cadence: int) -> bool:
    """The cadence's nudge goes this turn: the cadence is reached, and the turns past it
    are fewer than :data:`NUDGE_TRIES` (the tries that judge the model) or a retry (a
    power of two from :data:`RETRY_FROM`)."""
    overdue = turns_since_refresh - cadence
    if overdue < 0:
        return False
    if overdue < NUDGE_TRIES:
        return True
    return overdue >= RETRY_FROM and overdue & (overdue - 1) == 0


def nudges_sent(turns_since_refresh: int, cadence: int) -> int:
    """The nudges the cadence sent since the last write (:func:`nudge_due` over the turns
    since it), all of them ignored: a write would have restarted the count."""
    overdue = turns_since_refresh - cadence
    if overdue <= 0:
        return 0
    tries = min(overdue, NUDGE_TRIES)
    retries = sum(
        1 for k in range(RETRY_FROM.bit_length() - 1, overdue.bit_length()) if 1 << k < overdue
    )
    return tries + retries


def is_quiet(writes: int, turns_since_refresh: int, cadence: int) -> bool:
    """The channel's model has not shown that it writes its memory: never written
    (``writes``, the entry's ``last_refreshed_turn``, is 0), or unwritten
    :data:`NUDGE_TRIES` turns past the cadence. Its briefings change only when its
    prompt changes anyway."""
    return writes <= 0 or turns_since_refresh >= cadence + NUDGE_TRIES


class ToolStep(enum.Enum):
    """What a request does with the memory tool of a channel (:func:`tool_step`)."""

    KEEP = "keep"  # listed, and stays listed
    WITHDRAW = "withdraw"  # listed until now; this request and the next leave it out
    HOLD = "hold"  # withdrawn, and stays withdrawn: no tool, no nudge
    REOFFER = "reoffer"  # withdrawn until now; listed again, with the nudge (a retry)


def tool_step(
    *,
    status: Writing,
    withdrawn_for: str | None,
    withdrawn_at: int,
    model: str | None,
    turns_since_refresh: int,
    fresh: bool,
) -> ToolStep:
    """The tool's step for one turn of a channel (see the module docstring): its
    ``status``; the form's withdrawal (``withdrawn_for``: the model judged, ``""`` when
    unnamed, None when the tool is listed; ``withdrawn_at``: the turns since the
    write then); the turn's ``model`` (None: unnamed); ``fresh``: this request's cached
    head is cold anyway (every channel sharing the tools and the system prompt idle
    past the cache's retention), so the tool list may change for free."""
    if withdrawn_for is None:
        if status is Writing.NOT_WRITING and fresh:
            return ToolStep.WITHDRAW
        return ToolStep.KEEP
    if status is Writing.OFF:
        return ToolStep.HOLD  # a guard hides it anyway; the form stays as it is
    if model and withdrawn_for and model != withdrawn_for:
        return ToolStep.REOFFER  # another model: judged afresh, its cache is another
    if status is not Writing.NOT_WRITING:
        return ToolStep.REOFFER  # the counters restarted (a reset, a new cadence)
    if fresh and turns_since_refresh >= 2 * max(1, withdrawn_at):
        return ToolStep.REOFFER  # the retry, where the prefix is lost anyway
    return ToolStep.HOLD

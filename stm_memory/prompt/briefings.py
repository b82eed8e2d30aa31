"""Which briefings a request carries, and where: billed once per change. Pure.

A briefing is another channel's memory, shown so the model knows what happened
there. Providers bill a repeated prefix at about a tenth of the input price, so the
rule is that a briefing, once sent, is sent again unchanged at the same place until
this channel's own memory is rewritten (which re-bills everything after it anyway):

- When the memory is rewritten (or a channel has no set yet), the briefings shown go
  into the *stable* group right after this channel's memory.
- A briefing of raw turns (its source has no distilled memory yet) enters with only the
  turns not already sent: the earlier ones stand where they were sent.
- Between rewrites, a briefing of a source not carried yet enters at once, right after
  the user message of the turn it first appears in, and stays there in later
  requests: ``BriefingCopy.turn`` records that turn as the channel's
  ``turns_since_refresh`` then, so a later request finds it again by counting turns
  back from the current one (the history cut moves only on a rewrite too).
- A change of a source already carried *rides the next swap* (the bill decides
  when the prompt changes, SPEC §6; :mod:`stm_memory.prompt.swap`): it waits, and is
  sent on its own, once, only when :data:`WAIT_TURNS` of this channel's turns have
  passed since that source was last delivered — so a source that changes every turn
  (raw turns, a busy channel) costs one delivery per ``WAIT_TURNS`` turns, not one
  per turn, and no change waits longer than that. Why four, measured
  (``benchmarks/frontier.py``, docs/cost-recall.md): a longer wait bills a little less
  (warm, OpenAI, the bench's conversation: 0.852 of the best peer at 4, 0.828 at 6,
  0.838 at 8, 0.829 at 12) but the news comes too late for some questions asked about
  it — ``stm-memory eval`` (scripted writer, 5 seeds, 120 turns) answers 100 % of the
  cross-channel questions at 4, 98 % at 6 and 8, 88 % at 12; and a briefing of raw
  turns shows only its source's last few turns, so a longer wait lets a turn age out of
  it undelivered. ``refresh_cadence`` moves the bill further for the same recall, so it
  is the one option along that frontier and this stays a constant.
- A *quiet* channel (its model never wrote its memory, or ignores the nudges:
  :mod:`stm_memory.prompt.quiet`) is sent nothing on its own, neither a change nor a
  new source: no swap would ever fold those deliveries away, so each would be billed
  at every later request (a model that never writes cost 1.67× the full history).
- A copy whose source is no longer shown to this scope — cleared, expired, made
  private, an opt-in withdrawn — leaves the next request (and the stored set).
- The set is bounded: past :data:`MAX_COPIES_FACTOR` × the channels shown, or
  :data:`MAX_COPY_TOKENS` estimated tokens, it starts again as a stable group. That
  re-bills everything after the group (the whole dialogue since the rewrite), so the
  bounds are set where carrying the copies, read from the cache at a tenth of the
  price each turn, has cost about as much as that re-bill: with a model that never
  rewrites its memory, the set was restarted every few turns at the old bound of
  twelve copies, and each restart re-billed the channel's whole history.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from stm_memory.model import MemoryEntry
from stm_memory.model.briefings import STABLE, BriefingCopy

__all__ = [
    "MAX_COPIES_FACTOR",
    "MAX_COPY_TOKENS",
    "WAIT_TURNS",
    "briefing_groups",
    "plan_briefings",
]

#: The stored set holds at most this many copies per channel shown.
MAX_COPIES_FACTOR = 16
#: ... and at most this many estimated tokens (about four characters a token).
MAX_COPY_TOKENS = 4_000
#: A change of a source already carried waits at most this many of this channel's
#: turns for the next swap before it is sent on its own (see the module docstring).
WAIT_TURNS = 4
#: A quoted raw turn as rendering writes it (``  Speaker: "words"``).
_QUOTE = re.compile(r'^  \S.*: ".*"$')


def plan_briefings(
    live: MemoryEntry | None,
    shown: Sequence[BriefingCopy],
    *,
    visible: Collection[str],
    limit: int,
    epoch: int | None = None,
    now: int | None = None,
    deliver: bool = True,
) -> tuple[tuple[BriefingCopy, ...], int]:
    """The copies this turn's requests carry, and the swap they hold for.

    ``live``: the channel's live entry (its stored set); ``shown``: the briefings
    assembly rendered now, newest first; ``visible``: the source keys this scope may be
    shown now (a copy of any other source is dropped). ``epoch``: the swap the set is
    for (:class:`~stm_memory.model.shown.ShownState` ``swap``; a stored set of another
    starts again); ``now``: the turn clock copies are placed by (the shown form's
    ``turns``). Both default to the live entry's rewrite counters. ``deliver=False``
    (a quiet channel, :mod:`stm_memory.prompt.quiet`): nothing is sent on its own
    between swaps, neither a change nor a new source; the set keeps what it carries,
    less what may no longer be shown."""
    if epoch is None:
        epoch = live.last_refreshed_turn if live is not None else 0
    if now is None:
        now = live.turns_since_refresh if live is not None else 0
    # (Assembly renders its copies as stable already: no copy made on the hot path.)
    stable = tuple(c if c.turn == STABLE else replace(c, turn=STABLE) for c in shown)
    if live is None or live.briefings_epoch != epoch:
        return stable, epoch
    kept = [c for c in live.briefings if c.source in visible and c.turn <= now]
    if not deliver:
        return tuple(kept), epoch
    new: list[BriefingCopy] = []
    for copy in shown:
        carried = [c for c in kept if c.source == copy.source]
        if carried and now - max(0, max(c.turn for c in carried)) < WAIT_TURNS:
            continue  # a change of a carried source rides the next swap, or waits
        fresh = _news(copy, carried)
        if fresh is not None:
            new.append(replace(fresh, turn=now))
    planned = (*kept, *new)
    if len(planned) > MAX_COPIES_FACTOR * max(1, limit) or (
        sum(len(c.text) for c in planned) > 4 * MAX_COPY_TOKENS
    ):
        return stable, epoch
    return planned, epoch


def _news(copy: BriefingCopy, earlier: Sequence[BriefingCopy]) -> BriefingCopy | None:
    """What of ``copy`` is new beside the copies of its source already carried: None
    when nothing is. A briefing of raw turns (a source with no distilled memory yet,
    which changes with each of its turns) brings only the turns not sent before: the
    earlier ones stay in the prompt where they were sent, and a prompt cache serves
    them."""
    if any(c.text == copy.text for c in earlier):
        return None
    head, *body = copy.text.split("\n")
    if not earlier or not body or not all(_QUOTE.match(line) for line in body):
        return copy
    sent = {line for c in earlier for line in c.text.split("\n")[1:]}
    fresh = [line for line in body if line not in sent]
    return replace(copy, text="\n".join([head, *fresh])) if fresh else None


def briefing_groups(
    copies: Sequence[BriefingCopy], *, turns_since_refresh: int
) -> list[tuple[int, list[str]]]:
    """``(turns back, entries)`` per place, in stored order: -1 the stable group, k
    the turn k turns before the current one."""
    groups: dict[int, list[str]] = {}
    for copy in copies:
        back = STABLE if copy.turn == STABLE else max(0, turns_since_refresh - copy.turn)
        groups.setdefault(back, []).append(copy.text)
    return sorted(groups.items())

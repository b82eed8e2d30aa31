"""Which briefings a request carries, and where: billed once per change. Pure.

A briefing is another channel's memory, shown so the model knows what happened
there. Providers bill a repeated prefix at about a tenth of the input price, so the
rule is that a briefing, once sent, is sent again unchanged at the same place until
this channel's own memory is rewritten (which re-bills everything after it anyway):

- When the memory is rewritten (or a channel has no set yet), the briefings shown go
  into the *stable* group right after this channel's memory.
- A briefing of raw turns (its source has no distilled memory yet) enters with only the
  turns not already sent: the earlier ones stand where they were sent.
- Between rewrites, a briefing that is new or changed (its source wrote new memory)
  enters once, right after the user message of the turn it first appears in, and
  stays there in later requests: ``BriefingCopy.turn`` records that turn as the
  channel's ``turns_since_refresh`` then, so a later request finds it again by
  counting turns back from the current one (the history cut moves only on a rewrite
  too). An older copy of a source that changed stays where it was sent; the model
  reads the newer one by its time.
- A copy whose source is no longer shown to this scope — cleared, expired, made
  private, an opt-in withdrawn — leaves the next request (and the stored set).
- The set is bounded: past :data:`MAX_COPIES_FACTOR` × the channels shown it starts
  again as a stable group (one re-billed request instead of an ever longer prompt).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import replace

from stm_memory.model import MemoryEntry
from stm_memory.model.briefings import STABLE, BriefingCopy

__all__ = ["MAX_COPIES_FACTOR", "briefing_groups", "plan_briefings"]

#: The stored set holds at most this many copies per channel shown.
MAX_COPIES_FACTOR = 4
#: A quoted raw turn as rendering writes it (``  Speaker: "words"``).
_QUOTE = re.compile(r'^  \S.*: ".*"$')


def plan_briefings(
    live: MemoryEntry | None,
    shown: Sequence[BriefingCopy],
    *,
    visible: Collection[str],
    limit: int,
) -> tuple[tuple[BriefingCopy, ...], int]:
    """The copies this turn's requests carry, and the memory rewrite they hold for.

    ``live``: the channel's live entry (its stored set and counters); ``shown``: the
    briefings assembly rendered now, newest first; ``visible``: the source keys this
    scope may be shown now (a copy of any other source is dropped)."""
    epoch = live.last_refreshed_turn if live is not None else 0
    now = live.turns_since_refresh if live is not None else 0
    # (Assembly renders its copies as stable already: no copy made on the hot path.)
    stable = tuple(c if c.turn == STABLE else replace(c, turn=STABLE) for c in shown)
    if live is None or live.briefings_epoch != epoch:
        return stable, epoch
    kept = [c for c in live.briefings if c.source in visible and c.turn <= now]
    new: list[BriefingCopy] = []
    for copy in shown:
        fresh = _news(copy, [c for c in kept if c.source == copy.source])
        if fresh is not None:
            new.append(replace(fresh, turn=now))
    planned = (*kept, *new)
    if len(planned) > MAX_COPIES_FACTOR * max(1, limit):
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

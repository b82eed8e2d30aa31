"""What a channel's requests show: :class:`ShownState`, kept beside the live entry.

Writing the memory and showing it are two events (SPEC §6, "the bill decides when the
prompt changes"). The model writes when it writes — durable at once, read by every
other channel's briefings and by erasure. What this channel's requests *show* — which
written memory, where the history is cut, the briefing set — changes only at a *swap*
(:mod:`stm_memory.prompt.swap` decides when one pays), so between swaps every request
extends the last whatever was written.

The state lives with the live entry in the live cache, written in the same
transaction as the turn's count (never in SQL rows or the outbox): losing it (a cache
flush, a restart) costs one swap, never a memory, since the memory itself is the
entry's. It holds a copy of this channel's own distilled memory as it was shown, so
erasure reaches it like the memory (``model/erasure.py``: a user in the entry's
provenance resets it, and the next request swaps to what is left).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stm_memory.model.dialogue import StoredMessage

__all__ = ["CLEARED_IDS", "ShownState"]

#: The cleared call ids a channel's shown state keeps (a long turn of 200 reads fits).
CLEARED_IDS = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownState:
    """The form a channel's requests show, fixed at its last swap."""

    #: The write shown (the entry's ``last_refreshed_turn`` then); 0: no memory shown,
    #: the dialogue goes uncut (what a full-history caller sends, up to the budget).
    epoch: int = 0
    #: The distilled memory of that write, as shown (a copy: the entry moves on).
    summary: str | None = None
    categories: Mapping[str, str] = field(default_factory=dict)
    #: The excerpts kept beside that memory (MemoryEntry.kept), as shown.
    kept: Sequence[StoredMessage] = ()
    #: Turns completed since that write: the history cut keeps these (and the overlap).
    turns: int = 0
    #: Swaps so far: the briefing set is fixed for one swap (``briefings_epoch``).
    swap: int = 0
    #: When the channel's last request was built: with the cache retention in force,
    #: whether its cached prefix has lapsed.
    at: datetime | None = None
    #: The memory tool left out of this form (stm_memory.prompt.quiet.tool_step): the
    #: model judged not to write (``""``: unnamed), None while the tool is listed; and
    #: the turns since the write when it was withdrawn (the retry waits for twice).
    withdrawn_for: str | None = None
    withdrawn_at: int = 0
    #: The provider billed the last request as a cache miss where the turn predicted a
    #: hit (stm_memory/model/receipt.py): its cache is gone whatever the clock says,
    #: and the next decision counts it as lapsed.
    missed: bool = False
    #: The call ids of the tool results this channel's requests left out (long turns,
    #: stm_memory/kit/long_turn.py), newest last: a later request that still carries
    #: one leaves it out in the same bytes, whatever its own size (ids only, no text).
    cleared: tuple[str, ...] = ()

    def later(
        self, at: datetime, *, missed: bool = False, cleared: Sequence[str] = ()
    ) -> ShownState:
        """The state after one more turn that ended at ``at`` (``missed``: billed as a
        miss where a hit was predicted; ``cleared``: the ids of the results its requests
        left out, kept after those before, the newest :data:`CLEARED_IDS`)."""
        return ShownState(
            epoch=self.epoch,
            summary=self.summary,
            categories=self.categories,
            kept=self.kept,
            turns=self.turns + 1,
            swap=self.swap,
            at=at,
            withdrawn_for=self.withdrawn_for,
            withdrawn_at=self.withdrawn_at,
            missed=missed,
            cleared=tuple(dict.fromkeys((*self.cleared, *cleared)))[-CLEARED_IDS:],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "summary": self.summary,
            "categories": dict(self.categories),
            **({"kept": [m.to_dict() for m in self.kept]} if self.kept else {}),
            "turns": self.turns,
            "swap": self.swap,
            "at": self.at.isoformat() if self.at is not None else None,
            **(
                {"withdrawn_for": self.withdrawn_for, "withdrawn_at": self.withdrawn_at}
                if self.withdrawn_for is not None
                else {}
            ),
            **({"missed": True} if self.missed else {}),
            **({"cleared": list(self.cleared)} if self.cleared else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ShownState:
        at = data.get("at")
        return cls(
            epoch=int(data.get("epoch") or 0),
            summary=data.get("summary"),
            categories=dict(data.get("categories") or {}),
            kept=tuple(StoredMessage.from_dict(m) for m in data.get("kept") or ()),
            turns=int(data.get("turns") or 0),
            swap=int(data.get("swap") or 0),
            at=datetime.fromisoformat(at) if at else None,
            withdrawn_for=_text_or_none(data.get("withdrawn_for")),
            withdrawn_at=int(data.get("withdrawn_at") or 0),
            missed=data.get("missed") is True,
            cleared=tuple(str(c) for c in data.get("cleared") or ()),
        )


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None

"""Stored briefing copies: the other channels' briefings a channel's requests carry.

Providers cache a request's longest byte-identical prefix, so a briefing is billed
once per change only if, once sent, it is sent again as the same bytes at the same
place. Its source channel moves on meanwhile (a new summary), so the text that was
sent is kept with the channel's live entry — a *copy* of another channel's words,
which is why each copy carries its source's provenance and channel: erasure
(``clear_user``), ``clear_channel``, ``clear_summary``, a privacy change and the
source's expiry reach it like every other copy (``docs/design.md#briefings``).

Copies live in the live cache only (like the captured dialogue): SQL rows and the
outbox never hold them, and an entry hydrated from SQL starts a new set.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["STABLE", "BriefingCopy"]

#: ``BriefingCopy.turn`` of a copy in the stable block after this channel's memory
#: (fixed when the memory was last rewritten).
STABLE = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class BriefingCopy:
    """One other channel's briefing as a channel's requests carry it."""

    #: The source entry's key (its live key).
    source: str
    channel_id: str
    server_id: str | None
    #: The rendered entry, byte for byte as it is sent.
    text: str
    #: Users whose words the text may hold (the source's provenance when copied).
    provenance: frozenset[str]
    #: ``turns_since_refresh`` of the turn it was first sent in (it stays after that
    #: turn's user message), or :data:`STABLE`.
    turn: int = STABLE

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "channel_id": self.channel_id,
            "server_id": self.server_id,
            "text": self.text,
            "provenance": sorted(self.provenance),
            "turn": self.turn,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BriefingCopy:
        return cls(
            source=str(data["source"]),
            channel_id=str(data["channel_id"]),
            server_id=data.get("server_id"),
            text=str(data["text"]),
            provenance=frozenset(data.get("provenance") or ()),
            turn=int(data.get("turn", STABLE)),
        )

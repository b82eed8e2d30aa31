"""What the memory did to the bill: one turn's input as the API billed it, the full
history's priced beside it with the same rates, and their totals per day. Pure.

Every entry point sees the caller's whole history each turn, so the request a
full-history caller would send is known: its size is ours as billed, less what the
memory placed, plus the dialogue it let us leave out (both estimated alike). It is
priced as a full-history caller is billed: while the cache is warm, the previous
request's prefix is read and the turn's new dialogue written; cold, all of it
written (each later step of a tool loop reads the step before). Ours is the API's
own count. Costs are in input-token units (1.0 = one uncached input token); output is
left out on both sides (the answer is the same either way).

Totals are kept per channel and UTC day on the channel's live entry, written with the
turn's count (no write of their own), for :data:`RECEIPT_DAYS` days.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import date
from typing import Any

from stm_memory.model.rates import CacheProfile

__all__ = [
    "RECEIPT_DAYS",
    "DayTotals",
    "Savings",
    "SavingsLine",
    "TurnBill",
    "add_to_receipt",
    "bill_turn",
    "full_history_cost",
    "receipt_from_dict",
    "receipt_to_dict",
    "savings_of",
]

#: Days a channel's receipt keeps (a month, and the week that starts it).
RECEIPT_DAYS = 35


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnBill:
    """One turn's bill (:meth:`MemoryTurn.finish <stm_memory.kit.MemoryTurn.finish>`
    sets it; ``TurnResult.bill``, ``turn.status.bill``).

    ``input_tokens`` / ``cached_tokens`` / ``written_tokens`` over the turn's
    ``calls`` model calls, as the API reported them, and ``cost`` at ``profile``'s
    rates; ``full_tokens`` and ``full_cost``: the full history's over as many calls.
    ``predicted_hit``: the turn expected its first request to read a cached prefix
    (None: no prediction, as after a lapse or on a first request); ``missed``: it
    did and the API billed none, so the next decision counts the cache as lapsed."""

    profile: str
    calls: int
    input_tokens: int
    cached_tokens: int
    written_tokens: int
    cost: float
    full_tokens: int
    full_cost: float
    predicted_hit: bool | None = None
    missed: bool = False

    @property
    def saved(self) -> float:
        """What the memory saved on this turn (negative: what it cost more)."""
        return self.full_cost - self.cost


def _priced(uncached: int, cached: int, written: int, profile: CacheProfile) -> float:
    return uncached + cached * profile.read_multiplier + written * profile.write_multiplier


def full_history_cost(
    *, tokens: int, new: int, calls: int, warm: bool, profile: CacheProfile
) -> float:
    """A full-history caller's bill for one turn of ``calls`` requests of ``tokens``
    input tokens, ``new`` of them the dialogue added since its last request: while
    ``warm`` the rest is read from the cache, and what is written is billed at the
    write rate (a prompt under the profile's minimum is neither read nor written)."""
    if tokens < profile.min_tokens:
        return float(tokens * max(calls, 1))
    # What it shares with its last request, in the cache's steps (OpenAI's 128 tokens).
    cached = max(0, tokens - new) // profile.step * profile.step if warm else 0
    first = _priced(0, cached, tokens - cached, profile)
    return first + max(calls - 1, 0) * tokens * profile.read_multiplier


def bill_turn(
    *,
    profile: CacheProfile,
    calls: int,
    input_tokens: int,
    cached_tokens: int,
    written_tokens: int,
    placed_delta: int,
    new_tokens: int,
    warm: bool,
    predicted_hit: bool | None,
    first_cached: int | None,
) -> TurnBill:
    """The :class:`TurnBill` of a turn whose calls the API billed as given.
    ``placed_delta``: the caller's dialogue less what our first request carried of it
    and of the memory (estimated; the full history's request is ours plus it);
    ``new_tokens``: the dialogue added since the caller's previous request;
    ``first_cached``: what the first call read (None: not reported)."""
    uncached = input_tokens - cached_tokens - written_tokens
    cost = _priced(uncached, cached_tokens, written_tokens, profile)
    first_input = input_tokens // max(calls, 1)
    full = max(0, first_input + placed_delta)
    full_cost = full_history_cost(
        tokens=full, new=new_tokens, calls=calls, warm=warm, profile=profile
    )
    missed = bool(predicted_hit) and first_cached == 0 and first_input >= profile.min_tokens
    return TurnBill(
        profile=profile.name,
        calls=calls,
        input_tokens=input_tokens,
        cached_tokens=cached_tokens,
        written_tokens=written_tokens,
        cost=round(cost, 3),
        full_tokens=full * max(calls, 1),
        full_cost=round(full_cost, 3),
        predicted_hit=predicted_hit,
        missed=missed,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DayTotals:
    """One channel's turns of one UTC day, billed (ours) and priced (the full
    history's)."""

    turns: int = 0
    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    written_tokens: int = 0
    cost: float = 0.0
    full_tokens: int = 0
    full_cost: float = 0.0
    missed: int = 0

    def __add__(self, other: DayTotals) -> DayTotals:
        return DayTotals(
            **{
                f.name: round(getattr(self, f.name) + getattr(other, f.name), 3)
                for f in fields(DayTotals)
            }
        )

    def with_turn(self, bill: TurnBill) -> DayTotals:
        return self + DayTotals(
            turns=1,
            calls=bill.calls,
            input_tokens=bill.input_tokens,
            cached_tokens=bill.cached_tokens,
            written_tokens=bill.written_tokens,
            cost=bill.cost,
            full_tokens=bill.full_tokens,
            full_cost=bill.full_cost,
            missed=int(bill.missed),
        )

    @property
    def saved(self) -> float:
        return self.full_cost - self.cost

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(DayTotals)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DayTotals:
        out = cls()
        for f in fields(DayTotals):
            value = data.get(f.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out = replace(out, **{f.name: type(getattr(out, f.name))(value)})
        return out


def receipt_to_dict(receipt: Mapping[str, DayTotals]) -> dict[str, Any]:
    """A receipt as JSON (days in order): how the live cache and the SQL row keep it."""
    return {day: totals.to_dict() for day, totals in sorted(receipt.items())}


def receipt_from_dict(raw: object) -> dict[str, DayTotals]:
    """:func:`receipt_to_dict` read back (anything else: an empty receipt)."""
    if not isinstance(raw, Mapping):
        return {}
    return {str(d): DayTotals.from_dict(t) for d, t in raw.items() if isinstance(t, Mapping)}


def add_to_receipt(
    receipt: Mapping[str, DayTotals], day: date, bill: TurnBill
) -> dict[str, DayTotals]:
    """``receipt`` (ISO day → totals) with ``bill`` added to ``day``'s, keeping the
    newest :data:`RECEIPT_DAYS` days."""
    key = day.isoformat()
    out = dict(receipt)
    out[key] = out.get(key, DayTotals()).with_turn(bill)
    if len(out) > RECEIPT_DAYS:
        out = {k: out[k] for k in sorted(out)[-RECEIPT_DAYS:]}
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SavingsLine:
    """One channel's totals of one day."""

    day: str
    server_id: str | None
    channel_id: str
    totals: DayTotals


@dataclass(frozen=True, slots=True)
class Savings:
    """What the memory did to the bill over the channels and days read
    (:meth:`ShortTermMemory.savings <stm_memory.ShortTermMemory.savings>`)."""

    lines: tuple[SavingsLine, ...] = ()

    @property
    def total(self) -> DayTotals:
        return sum((line.totals for line in self.lines), DayTotals())

    def by_day(self) -> dict[str, DayTotals]:
        """Totals per ISO day, oldest first."""
        out: dict[str, DayTotals] = {}
        for line in sorted(self.lines, key=lambda x: x.day):
            out[line.day] = out.get(line.day, DayTotals()) + line.totals
        return out

    def by_channel(self) -> dict[tuple[str | None, str], DayTotals]:
        """Totals per ``(server_id, channel_id)``."""
        out: dict[tuple[str | None, str], DayTotals] = {}
        for line in self.lines:
            key = (line.server_id, line.channel_id)
            out[key] = out.get(key, DayTotals()) + line.totals
        return out


def savings_of(
    entries: Iterable[tuple[str | None, str, Mapping[str, DayTotals]]], *, since: date | None
) -> Savings:
    """The :class:`Savings` of ``(server_id, channel_id, receipt)`` triples, from
    ``since`` (an ISO day compares as a date)."""
    first = since.isoformat() if since is not None else ""
    lines = [
        SavingsLine(day=day, server_id=server, channel_id=channel, totals=totals)
        for server, channel, receipt in entries
        for day, totals in receipt.items()
        if day >= first
    ]
    return Savings(tuple(sorted(lines, key=lambda x: (x.day, x.server_id or "", x.channel_id))))

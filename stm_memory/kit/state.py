"""The memory turn's lifecycle as one table (h11's ``_state.py`` habit): every step a
:class:`~stm_memory.kit.MemoryTurn` takes, in every phase, and where it leads, as data.

::

    BEGUN ──assemble()──► ASSEMBLED ──finish()──► FINISHED
      └───────────────────finish()──────────────────┘

A phase only moves forward. A step the table refuses is the integration's bug, raised as
:class:`~stm_memory.TurnOrderError` naming the order; a step it marks ``runs=False``
already ran and does nothing again (``finish`` twice, ``assemble`` twice). A turn that is
*off* (no scope, or its beginning failed) is not a phase of its own: it goes through the
same table, only placing nothing and writing nothing. Nor is ``abandon()``: it counts the
turn where it stands, and the turn may still go on and finish.

Pure data and one lookup: the turn holds its phase under its lock, asks :func:`advance`
before each step and writes what it answers under that lock (``assemble`` once its read
is done, unless ``finish`` came meanwhile).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from stm_memory.errors import TurnOrderError

if TYPE_CHECKING:
    from stm_memory.model.receipt import TurnBill
    from stm_memory.prompt.placement import MemoryContext
    from stm_memory.prompt.quiet import Writing
    from stm_memory.prompt.swap import SwapDecision

__all__ = [
    "ORDER",
    "TRANSITIONS",
    "Move",
    "Refuse",
    "TurnEvent",
    "TurnPhase",
    "TurnStatus",
    "advance",
]

#: The order every refused step names.
ORDER = (
    "a turn runs begin → assemble → per request prepare / view, tool, "
    "memory_call → finish (or abandon)"
)


class TurnPhase(enum.Enum):
    """Where a :class:`~stm_memory.kit.MemoryTurn` stands (``MemoryTurn.status.phase``).

    - ``BEGUN``: ``MemoryTurn.begin`` returned (or the turn was built off); the guards are
      decided, the user's message may still be noted; no request may be built yet.
    - ``ASSEMBLED``: ``assemble`` read the memory (once): requests are built, the tool
      offered, memory calls run.
    - ``FINISHED``: ``finish`` captured and ended the turn (once): no assembly and no
      memory call any more; a finished turn keeps the context it assembled, so a
      request built late still gets it."""

    BEGUN = "begun"
    ASSEMBLED = "assembled"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class TurnStatus:
    """What a turn knows, read at once under its lock (``MemoryTurn.status``)."""

    #: Where the turn stands: begun, assembled or finished.
    phase: TurnPhase
    #: Memory is on for this turn (it has a scope and began).
    active: bool
    #: The memory tool is in this turn's requests: no guard of the turn's snapshot hides
    #: it (not in a "remember this permanently" turn …). This turn's update does not
    #: withdraw it: every step keeps the tool list (a second call fails when run).
    tool_offered: bool
    #: This turn's one update ran.
    updated: bool
    #: Whether this channel's memory is being written (:class:`~stm_memory.Writing`),
    #: judged at assembly from its counters; None before, or when memory is off.
    writing: Writing | None
    #: What this turn's requests show and why (swap or hold, the rule, the estimate in
    #: tokens), once its first request was built; None before, or when memory is off.
    decision: SwapDecision | None
    #: The assembled memory context (empty before ``assemble`` or when off).
    context: MemoryContext
    #: What the turn's requests were billed, from the usage the API reported, and the
    #: full history's priced beside it (:class:`~stm_memory.TurnBill`), once
    #: ``finish`` was given the usage; None before, or when memory is off.
    bill: TurnBill | None = None

    @property
    def offer(self) -> Literal["offer"] | None:
        """How a request carries the memory tool while nothing else decides it (a tool
        a framework asks for apart from a request): offered, or not at all."""
        return "offer" if self.tool_offered else None

    def tool_listed(self, *, nudged: bool) -> bool:
        """Whether a tool list a framework builds apart from the request (the Agents
        SDK's ``is_enabled`` on a plain agent, which is both what the model is sent and
        what a call can reach) lists the memory tool: while it is offered; and, when
        the request already carried the nudge (``nudged``: placed before a guard came
        to hide the tool), still, so a call the nudge asked for gets the guard's failed
        result from the turn instead of the framework's "tool not found"."""
        return self.tool_offered or (nudged and self.active)


class TurnEvent(enum.Enum):
    """A step of the turn; its value is the method an error names."""

    NOTE_USER = "note_user_message"
    ASSEMBLE = "assemble"
    REQUEST = "prepare"  # or view(): a request of the turn
    MEMORY_CALL = "memory_call"
    ABANDON = "abandon"
    FINISH = "finish"


@dataclass(frozen=True, slots=True)
class Move:
    """The step is allowed and leaves the turn in ``to``; ``runs=False``: it already
    ran, and does nothing again."""

    to: TurnPhase
    runs: bool = True


@dataclass(frozen=True, slots=True)
class Refuse:
    """The step is out of order here: ``why`` completes ``"<step>() <why>"``."""

    why: str


_B, _A, _F = TurnPhase.BEGUN, TurnPhase.ASSEMBLED, TurnPhase.FINISHED
_E = TurnEvent

#: Every (phase, step) pair, and what it does.
TRANSITIONS: Final[Mapping[tuple[TurnPhase, TurnEvent], Move | Refuse]] = {
    (_B, _E.NOTE_USER): Move(_B),
    (_B, _E.ASSEMBLE): Move(_A),
    (_B, _E.REQUEST): Refuse("before assemble()"),
    (_B, _E.MEMORY_CALL): Move(_B),
    (_B, _E.ABANDON): Move(_B),
    (_B, _E.FINISH): Move(_F),
    (_A, _E.NOTE_USER): Move(_A),
    (_A, _E.ASSEMBLE): Move(_A, runs=False),  # the memory is read once
    (_A, _E.REQUEST): Move(_A),
    (_A, _E.MEMORY_CALL): Move(_A),
    (_A, _E.ABANDON): Move(_A),
    (_A, _E.FINISH): Move(_F),
    (_F, _E.NOTE_USER): Move(_F),
    (_F, _E.ASSEMBLE): Refuse("after finish()"),
    # A request built late gets the context the turn assembled (never assembled: the
    # turn refuses it as before assemble()).
    (_F, _E.REQUEST): Move(_F),
    (_F, _E.MEMORY_CALL): Refuse("after finish()"),
    (_F, _E.ABANDON): Move(_F, runs=False),  # finish counted the turn
    (_F, _E.FINISH): Move(_F, runs=False),
}


def advance(phase: TurnPhase, event: TurnEvent) -> Move:
    """The move ``event`` makes from ``phase``; a refused one raises
    :class:`~stm_memory.TurnOrderError`."""
    found = TRANSITIONS[phase, event]
    if isinstance(found, Refuse):
        raise TurnOrderError(f"{event.value}() {found.why}: {ORDER}")
    return found

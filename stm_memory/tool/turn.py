"""Per-turn state and the guards that decide whether the memory tool is offered."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stm_memory.model import Category, Scope, ServerSettings, UserSettings
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.receipt import TurnBill
from stm_memory.model.shown import ShownState
from stm_memory.model.tool_results import KeptResult

__all__ = ["TOOL_NAME", "TurnContext", "TurnRecord", "failure", "success"]

TOOL_NAME = "update_short_term_memory"


#: Details a write's result names (each cut to DETAIL_SHOWN code points): enough for the
#: model to find them in what it was shown, a few dozen tokens at most.
DETAILS_NAMED = 12
DETAIL_SHOWN = 40


def success(
    note: str | None = None, *, left_out: Sequence[str] = (), dropped: Sequence[str] = ()
) -> dict[str, Any]:
    """A completed write. ``left_out``: details of the turns it replaces that it does
    not carry (model/kept.py); they are kept beside it, and the result names them so
    the next write can carry them (a write that does releases them). ``dropped``:
    details left out at every write since they were said that no longer fit beside it
    (``Limits.detail_budget``): said so, once."""
    result: dict[str, Any] = {"status": "completed"}
    notes = [note] if note else []
    if left_out:
        named = [_shortened(d) for d in left_out[:DETAILS_NAMED]]
        more = len(left_out) - len(named)
        listed = ", ".join(f"'{d}'" for d in named) + (f" and {more} more" if more > 0 else "")
        notes.append(
            f"Stored. It leaves out details said earlier: {listed}. They stay in front of "
            "you, quoted beside the memory, until an update carries them: include those "
            "that still matter next time."
        )
        result["left_out"] = named
    if dropped:
        gone = ", ".join(f"'{_shortened(d)}'" for d in dropped[:DETAILS_NAMED])
        notes.append(f"Older details no longer fit beside the memory and were dropped: {gone}.")
        result["dropped"] = [_shortened(d) for d in dropped[:DETAILS_NAMED]]
    if notes:
        result["note"] = " ".join(notes)
    return result


def _shortened(detail: str) -> str:
    one = " ".join(detail.split())
    return one if len(one) <= DETAIL_SHOWN else one[: DETAIL_SHOWN - 1].rstrip() + "…"


def failure(reason: str) -> dict[str, Any]:
    return {"status": "tool_execution_failed", "reason": reason, "tool_name": TOOL_NAME}


@dataclass(eq=False, kw_only=True)
class TurnContext:
    """One responding turn of one persona in one channel.

    Built by ``ShortTermMemory.begin_turn``. It snapshots the server's settings and
    categories, so the schema the model saw is the one its call is checked against
    even if an admin edits categories mid-turn.
    """

    scope: Scope
    provider: str | None
    user_message: str | None
    settings: ServerSettings
    categories: tuple[Category, ...]
    user_settings: UserSettings
    long_term_intent: bool
    provider_excluded: bool
    started_at: datetime
    # False when the model cannot call tools at all: no tool, no same-channel memory.
    tools_available: bool = True
    # The model writes its tool calls as text and no writer= stands in for it: the
    # memory is shown, but nobody writes it (MemoryEntry.no_writer).
    unwritten: bool = False
    updated: bool = False
    #: The call ids of the tool results the turn's requests left out (MemoryTurn sets
    #: them before its commit), stored with the shown state.
    cleared_ids: tuple[str, ...] = ()
    ended: bool = False
    # Provenance of the other channels' briefings assembly showed this turn: an update
    # written after seeing them may carry their users' words (see model/erasure.py).
    shown_provenance: frozenset[str] = frozenset()
    # The briefing copies this turn's requests carry and the memory rewrite they were
    # fixed for (assembly plans them; end_turn stores them with the live entry).
    briefings: tuple[BriefingCopy, ...] | None = None
    briefings_epoch: int | None = None
    # The form this turn's requests show (the held one, or the newest after a swap)
    # and the stored swap it was read against: end_turn stores it with the entry
    # unless another process swapped meanwhile (stm_memory/model/shown.py).
    shown_form: ShownState | None = None
    shown_base: int = 0
    # The channel's captured turns as assembly read them (None: not read). A turn
    # passed alone is captured after them without reading them again; the write
    # checks they are still what the channel holds (ShortTermMemory.commit).
    seen_turns: Sequence[StoredMessage] | None = None
    # What this turn's requests were billed, and the full history's priced beside it
    # (MemoryTurn.finish sets it; end_turn adds it to the channel's receipt).
    bill: TurnBill | None = None
    # Re-entrant: MemoryTurn steps hold it too (one lock per turn) and call in here.
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @property
    def lock(self) -> threading.RLock:
        """The turn's one lock: the engine's changes to this state and the
        :class:`~stm_memory.kit.MemoryTurn` steps around it take the same one."""
        return self._lock

    @property
    def summary_mode(self) -> bool:
        """Summary mode: no categories, or the single default category ``summary``."""
        cats = self.categories
        return not cats or (len(cats) == 1 and cats[0].label.strip().lower() == "summary")

    def guard_reason(
        self,
        *,
        enabled: bool | None = None,
        full_privacy: bool | None = None,
        executing: bool = True,
    ) -> str | None:
        """Why the tool may not run now, the first guard that fails; None when it may.

        The order is fixed (and documented in ``docs/design.md#the-tool-and-its-guards``)
        so the model always gets the same reason for the same situation.

        ``enabled`` / ``full_privacy`` override the snapshot with current settings: at
        execution the engine re-reads them, so a server switched off or a user who
        chose full privacy after the turn began is honoured at once.

        ``executing=False`` asks whether the tool is *offered*: this turn's own update
        does not withdraw it (SPEC §3, amended). The tool list heads every request's
        cached prefix, so a step that dropped it would re-bill its whole request; a
        second call still gets the "already updated" failure when it runs.
        """
        if enabled is None:
            enabled = self.settings.short_term_memory_enabled
        if full_privacy is None:
            full_privacy = self.user_settings.full_privacy
        if not self.tools_available:
            return "Tools are not available to this model in this turn."
        if not enabled:
            return "Short-term memory is disabled for this server; do not call this tool."
        if self.long_term_intent:
            return (
                "The user explicitly asked to remember something permanently this turn. "
                "That belongs in long-term memory, not in update_short_term_memory."
            )
        if executing and self.updated:
            return (
                "Short-term memory was already updated this turn; it can be updated "
                "once per turn. Continue with your answer."
            )
        if self.provider_excluded:
            return f"update_short_term_memory is not available for provider {self.provider!r}."
        if full_privacy:
            return "The user has enabled full privacy; short-term memory is not kept for them."
        return None

    @property
    def no_writer(self) -> bool:
        """Nobody can write the memory this turn (its writing status is ``off``)."""
        return not self.tools_available or self.unwritten

    @property
    def tool_offered(self) -> bool:
        """The tool is in this turn's requests: decided by the guards of the turn's
        snapshot, so it holds for every step (an update does not withdraw it)."""
        return self.guard_reason(executing=False) is None

    def claim_update(self) -> bool:
        """Atomically take this turn's one update; False if it was already taken."""
        with self._lock:
            if self.updated:
                return False
            self.updated = True
            return True

    def release_update(self) -> None:
        with self._lock:
            self.updated = False

    def mark_ended(self) -> bool:
        """Atomically end the turn; False if it had already ended (ending is idempotent:
        a failed step ends it early and the normal end must not count it twice)."""
        with self._lock:
            if self.ended:
                return False
            self.ended = True
            return True

    def note_user_message(self, text: str, *, long_term_intent: bool) -> None:
        """Take the user's message of a turn begun without one (the first one given
        wins: a turn has one user message), with what the intent detector made of it."""
        with self._lock:
            if self.user_message is None:
                self.user_message = text
                self.long_term_intent = long_term_intent

    def note_shown(self, provenance: frozenset[str]) -> None:
        """Record whose words the model was shown this turn besides its user's (the
        other channels' briefings): an update written after seeing them may carry them."""
        with self._lock:
            self.shown_provenance = self.shown_provenance | provenance

    def note_briefings(
        self,
        briefings: tuple[BriefingCopy, ...] | None,
        epoch: int,
        *,
        shown: ShownState | None = None,
        base: int = 0,
    ) -> None:
        """Record the briefing copies this turn's requests carry (None: assembly had no
        say, nothing to store) and the form they show, read against the stored swap
        ``base``."""
        with self._lock:
            self.briefings = briefings
            self.briefings_epoch = epoch
            self.shown_form = shown
            self.shown_base = base


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRecord:
    """What a finished turn leaves, for the engine's one write (``ShortTermMemory.commit``):
    the turn counted and, unless ``dialogue`` is None, its dialogue captured.

    ``dialogue`` is the whole record as the caller keeps it, or this turn alone when it
    follows the stored turns: ``follows``, as the caller has just read them (speakers
    are matched against them, nothing is read again), or ``follows_seen``, the turns
    assembly read (``TurnContext.seen_turns``: the write checks the channel still holds
    them, and if another turn captured meanwhile, captures again on what it holds)."""

    turn: TurnContext
    dialogue: Sequence[Any] | None = None
    follows: Sequence[StoredMessage] | None = None
    follows_seen: bool = False
    #: The tool results the turn's requests left out, kept to be read back later.
    cleared: Sequence[KeptResult] = ()

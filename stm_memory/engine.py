"""ShortTermMemory: the write path, capture, counters, hydration, deletion and janitor."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, date, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from stm_memory.bulk import CACHE_BATCH, ProgressCallback, batched, reporting
from stm_memory.cache.base import LiveCache
from stm_memory.config import Limits, unknown_options
from stm_memory.durability.outbox import Outbox
from stm_memory.durability.persister import Persister
from stm_memory.durability.writers import WriterLease, dead_writers, forget_writers
from stm_memory.errors import ConfigurationError, StmError, ValidationError
from stm_memory.live.deletion import Deletions
from stm_memory.live.entries import LiveEntries
from stm_memory.live.repair import Repaired, repair_cache
from stm_memory.live.results import keep_results, kept_result
from stm_memory.live.scan import cached_entry_keys, evict_in_batches
from stm_memory.live.settings import SettingsBook
from stm_memory.model import (
    DEFAULT_CATEGORY,
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    StoredMessage,
    UserSettings,
    check_owner_id,
    key_for,
)
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.changes import UNCHECKED_KEPT, captured, counted, refreshed
from stm_memory.model.dialogue import turn_start, with_stored_speakers
from stm_memory.model.erasure import speakers
from stm_memory.model.kept import left_out, written
from stm_memory.model.messages import all_dialogue
from stm_memory.model.receipt import Savings, savings_of
from stm_memory.model.tombstones import marked
from stm_memory.model.tool_results import KeptResult
from stm_memory.prompt.assembly import MemoryContext, assemble_context
from stm_memory.prompt.quiet import Writing, writing
from stm_memory.store.base import MemoryStore
from stm_memory.tool.arguments import UpdateArgs, parse_update_arguments
from stm_memory.tool.intent import IntentDetector, detect_long_term_intent
from stm_memory.tool.turn import TurnContext, TurnRecord, failure, success
from stm_memory.wiring import open_backends

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from stm_memory.durability.janitor import Janitor

__all__ = ["ShortTermMemory"]

log = logging.getLogger("stm_memory")

Clock = Callable[[], datetime]


_EXPIRY_BUCKETS = ("expired", "< 1 h", "< 6 h", "< 24 h")
#: The model note of a model whose server returns its tool calls as message text.
TOOLS_AS_TEXT = "tools as text"


def _expiry_bucket(left: timedelta) -> str:
    if left <= timedelta(0):
        return "expired"
    if left < timedelta(hours=1):
        return "< 1 h"
    return "< 6 h" if left < timedelta(hours=6) else "< 24 h"


def _check_scope(scope: object) -> None:
    if not isinstance(scope, Scope):
        raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")


def _system_clock() -> datetime:
    return datetime.now(UTC)


class _TurnsMoved(Exception):
    """The channel's captured turns changed since the turn read them (commit)."""


def _same_turns(held: Sequence[StoredMessage], seen: Sequence[StoredMessage]) -> bool:
    # The same object when nothing was written since (entries decoded once are shared).
    return held is seen or (len(held) == len(seen) and tuple(held) == tuple(seen))


class _OncePer:
    """Keys seen, bounded: ``add`` is True the first time a key is seen (thread-safe)."""

    def __init__(self, size: int = 4096) -> None:
        self._seen: dict[str, None] = {}
        self._size = size
        self._lock = threading.Lock()

    def __contains__(self, key: str) -> bool:
        return key in self._seen

    def add(self, key: str) -> bool:
        with self._lock:
            if key in self._seen:
                return False
            if len(self._seen) >= self._size:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = None
            return True

    def discard(self, key: str) -> None:
        with self._lock:
            self._seen.pop(key, None)


class ShortTermMemory:
    """Scoped short-term memory for chat agents: the facade over the live cache, the rows
    store and the outbox (how they fit: ``docs/design.md``)."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        cache: LiveCache,
        outbox: Outbox,
        clock: Clock | None = None,
        limits: Limits | None = None,
        intent_detector: IntentDetector | None = None,
        excluded_providers: Iterable[str] = ("novelai",),
        settings_ttl: float = 5.0,
    ) -> None:
        self._store = store
        self._cache = cache
        self._outbox = outbox
        self.limits = limits or Limits.from_env()
        self._clock = clock or _system_clock
        self.now()  # a naive clock is refused here, not in the middle of a turn
        self.intent_detector: IntentDetector = intent_detector or detect_long_term_intent
        self.excluded_providers = frozenset(p.lower() for p in excluded_providers)
        self._store.setup()
        self._settings = SettingsBook(store, self.now, ttl=settings_ttl)
        self._live = LiveEntries(cache, store, outbox, self.limits, self.now)
        self._persister = Persister(store, outbox, self.now)
        self._deletions = Deletions(
            cache=cache,
            store=store,
            outbox=outbox,
            live=self._live,
            persister=self._persister,
            clock=self.now,
        )
        self._janitor: Janitor | None = None
        self._closed = False
        self._erasure_key: bytes | None = None
        self._cut_warned = _OncePer()
        self._key_warned = _OncePer()
        # Models seen writing tool calls as text (kit.MemoryTurn.text_call): offered no
        # tool from then on, in every channel of this memory.
        self._text_callers = _OncePer()
        self._read_model_notes()
        self.mark_key()  # read once now; a database that cannot answer is asked again later
        # Start-up: replay what an earlier run queued; then, if a process of this host
        # died holding a writer lease, repair what a kill between a cache write and its
        # SQL write may have left behind (see live.repair and durability.writers).
        crashed = dead_writers(cache)
        self._lease = WriterLease(cache)
        try:
            if self._persister.flush_all() and crashed:
                self.repair()
                forget_writers(cache, crashed)
        except BaseException:
            # Not built: the lease must not outlive it (the caller closes the backends).
            self._lease.release()
            raise

    # -- construction ------------------------------------------------------------------

    @classmethod
    def from_url(
        cls,
        database_url: str = "sqlite:///stm.db",
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        redis_url: str | None = None,
        clock: Clock | None = None,
        outbox_path: str | os.PathLike[str] | None = None,
        intent_detector: IntentDetector | None = None,
        excluded_providers: Iterable[str] = ("novelai",),
        timeout: float = 5.0,
        settings_ttl: float = 5.0,
        **limits: Any,
    ) -> ShortTermMemory:
        """Build from URLs: SQLite/PostgreSQL rows, diskcache (default) or Redis live cache.

        ``limits`` are the :class:`~stm_memory.Limits` fields (``summary_ttl``,
        ``bare_ttl``, ``max_summary_length``, …) and override their environment variables.
        """
        names = [f.name for f in fields(Limits)]
        if unknown := set(limits) - set(names):
            # Named with from_url's own options (Limits alone would name only its fields).
            own = inspect.signature(cls.from_url).parameters
            names += [p for p in own if p not in ("database_url", "limits")]
            raise unknown_options("ShortTermMemory.from_url", unknown, names)
        limit_values = Limits.from_env(**limits)
        backends = open_backends(
            database_url,
            cache_dir=cache_dir,
            redis_url=redis_url,
            outbox_path=outbox_path,
            clock=clock,
            timeout=timeout,
        )
        try:
            return cls(
                store=backends.store,
                cache=backends.cache,
                outbox=backends.outbox,
                clock=clock,
                limits=limit_values,
                intent_detector=intent_detector,
                excluded_providers=excluded_providers,
                settings_ttl=settings_ttl,
            )
        except BaseException:
            backends.close()
            raise

    def now(self) -> datetime:
        value = self._clock()
        if value.tzinfo is None:
            raise ConfigurationError("clock= must return timezone-aware datetimes")
        return value.astimezone(UTC)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop_janitor()
        self._lease.release()
        self._cache.close()
        self._outbox.close()
        self._store.close()

    # -- settings (see settings.py) ------------------------------------------------------

    def server_settings(self, server_id: str) -> ServerSettings:
        """The server's settings (defaults for a server never configured)."""
        return self._settings.server_settings(server_id)

    def configure_server(self, server_id: str, **settings: Any) -> ServerSettings:
        """Change server settings (the fields of :class:`ServerSettings`); unknown names
        or bad values raise
        :class:`ConfigurationError` and nothing is written. A privacy change
        (``private_channel_ids``, ``stm_privacy_bypass``) also removes the stored
        briefing copies of the server's channels: the next turn shows what the new
        rule allows, as a new copy."""
        result = self._settings.configure_server(server_id, **settings)
        if settings.keys() & {"private_channel_ids", "stm_privacy_bypass"}:
            self._deletions.drop_copies(lambda copy: copy.server_id == server_id)
        return result

    def categories(self, server_id: str) -> list[Category]:
        """The server's categories, or the single default ``summary`` category."""
        return self._settings.categories(server_id)

    def set_categories(
        self, server_id: str, categories: Sequence[Category | str]
    ) -> list[Category]:
        """Replace a server's categories (at most 5, non-empty labels). Each gets a slug
        from its label (:func:`~stm_memory.model.text.unique_slugs`), the name of its
        tool argument. An empty list restores the default summary mode."""
        return self._settings.set_categories(server_id, categories)

    def user_settings(self, user_id: str) -> UserSettings:
        return self._settings.user_settings(user_id)

    def configure_user(self, user_id: str, **settings: Any) -> UserSettings:
        """Change a user's privacy settings (``cross_server_opt_in``, ``full_privacy``).
        Withdrawing the cross-server opt-in also removes the stored briefing copies of
        the user's own entries (they were shown elsewhere under it); choosing full
        privacy removes their words from the excerpts kept beside every live memory."""
        result = self._settings.configure_user(user_id, **settings)
        if settings.get("full_privacy") is True:
            # Their words are stored nowhere from now on: not even quoted beside a memory.
            self._deletions.drop_kept(user_id)
        if settings.get("cross_server_opt_in") is False:
            own = key_for("user", user_id, "")
            self._deletions.drop_copies(lambda copy: copy.source.startswith(own))
        return result

    # -- turns ---------------------------------------------------------------------------

    def begin_turn(
        self,
        scope: Scope,
        *,
        provider: str | None = None,
        user_message: str | None = None,
        tools_available: bool = True,
    ) -> TurnContext:
        """Snapshot settings and categories for one responding turn."""
        _check_scope(scope)
        if user_message is not None and not isinstance(user_message, str):
            raise ValidationError("user_message must be a string or None")
        server = scope.server_id
        return self._turn(
            scope,
            provider=provider,
            user_message=user_message,
            settings=self.server_settings(server) if server else ServerSettings(),
            categories=tuple(self.categories(server)) if server else (DEFAULT_CATEGORY,),
            user_settings=self.user_settings(scope.user_id),
            tools_available=tools_available,
        )

    def default_turn(self, scope: Scope, *, provider: str | None = None) -> TurnContext:
        """A turn with the default settings (summary mode) and no storage read: what a
        tool built before any turn began describes itself with. It describes, it does not
        write: a memory call runs against a begun turn."""
        _check_scope(scope)
        return self._turn(
            scope,
            provider=provider,
            user_message=None,
            settings=ServerSettings(),
            categories=(DEFAULT_CATEGORY,),
            user_settings=UserSettings(),
        )

    def _turn(
        self,
        scope: Scope,
        *,
        provider: str | None,
        user_message: str | None,
        settings: ServerSettings,
        categories: tuple[Category, ...],
        user_settings: UserSettings,
        tools_available: bool = True,
    ) -> TurnContext:
        return TurnContext(
            scope=scope,
            provider=provider,
            user_message=user_message,
            settings=settings,
            categories=categories,
            user_settings=user_settings,
            long_term_intent=self._long_term_intent(user_message),
            provider_excluded=(provider or "").lower() in self.excluded_providers,
            tools_available=tools_available,
            started_at=self.now(),
        )

    def note_user_message(self, turn: TurnContext, text: str | None) -> None:
        """Give a turn begun before its user message existed that message (a chat
        history or an Agents SDK session is read before it is handed the new input),
        so the long-term-intent guard sees it before the tool is offered or runs. A
        turn that has a user message keeps it, as ``begin_turn`` takes only one."""
        if text is not None and not isinstance(text, str):
            raise ValidationError("the user message must be a string or None")
        if not text or turn.user_message is not None:
            return
        turn.note_user_message(text, long_term_intent=self._long_term_intent(text))

    def _long_term_intent(self, text: str | None) -> bool:
        if not text:
            return False
        try:
            return bool(self.intent_detector(text))
        except Exception:  # a custom detector must not break the turn
            log.exception("stm-memory: intent detector failed; assuming no intent")
            return False

    def tool(self, turn: TurnContext) -> BaseTool | None:
        """The LangChain tool bound to this turn, or None when a guard hides it."""
        # Imported here: langchain_core.tools is heavy and only a tool-using turn needs it.
        from stm_memory.tool.memory_tool import build_tool

        return build_tool(self, turn) if turn.tool_offered else None

    def update(self, turn: TurnContext, args: object) -> dict[str, Any]:
        """Run ``update_short_term_memory``: a result dict, never an exception."""
        reason = self._execution_guard(turn)
        if reason:
            return failure(reason)
        parsed = parse_update_arguments(
            args,
            summary_mode=turn.summary_mode,
            categories=turn.categories,
            limit=self.limits.max_summary_length,
        )
        if isinstance(parsed, str):
            return failure(parsed)
        if not turn.claim_update():
            return failure(turn.guard_reason() or "Already updated this turn.")
        before: list[StoredMessage] = []
        try:
            live = self._write(turn, parsed, before)
        except StmError as exc:
            turn.release_update()
            log.error("stm-memory: update failed for %s: %s", turn.scope.live_key, exc)
            return failure("Short-term memory could not be stored right now; continue.")
        left, gone = self._left_out(live, before)
        if left:
            log.info(
                "stm-memory: the update of %s leaves out %d detail(s) of the turns it "
                "replaces; kept beside it: %s",
                turn.scope.live_key,
                len(left),
                ", ".join(left),
            )
        if gone:
            # Routine with a writer that keeps leaving them out (the model is told in
            # the result): information, not a warning on every write of a long channel.
            log.info(
                "stm-memory: %d older detail(s) left out of %s's memory at every write "
                "since no longer fit in detail_budget (%d) and were dropped: %s",
                len(gone),
                turn.scope.live_key,
                self.limits.detail_budget,
                ", ".join(gone),
            )
        if parsed.cut and self._cut_warned.add(turn.scope.live_key):
            # The model is told in its result; the developer once per scope (a model
            # that keeps writing too long would otherwise fill the log).
            log.warning(
                "stm-memory: %s: the model wrote %s longer than max_summary_length (%d); "
                "stored cut to it (later cuts in this channel are not logged)",
                turn.scope.live_key,
                ", ".join(repr(n) for n in parsed.cut),
                self.limits.max_summary_length,
            )
        note = parsed.note(self.limits.max_summary_length)
        return success(note, left_out=left, dropped=gone)

    @staticmethod
    def _left_out(
        live: MemoryEntry | None, before: Sequence[StoredMessage]
    ) -> tuple[list[str], list[str]]:
        """What a write left out and keeps beside the memory, and what it left out that
        was kept before and no longer fits (model/kept.py ``reconcile``)."""
        if live is None:
            return [], []
        memory = written(live.summary, live.categories.values())
        still = {(m.timestamp, m.role, m.name) for m in live.kept}
        # An excerpt that left without the memory carrying it was dropped for the budget.
        gone = [m for m in before if (m.timestamp, m.role, m.name) not in still]
        return left_out(live.kept, memory), left_out(gone, memory)

    def _execution_guard(self, turn: TurnContext) -> str | None:
        """The turn's guards, with the privacy-relevant settings re-read now."""
        scope = turn.scope
        try:
            enabled = (
                self.server_settings(scope.server_id).short_term_memory_enabled
                if scope.server_id
                else True
            )
            full_privacy = self.user_settings(scope.user_id).full_privacy
        except StmError as exc:  # settings unreadable: fall back to the snapshot
            log.warning("stm-memory: settings re-check failed, using the snapshot: %s", exc)
            return turn.guard_reason()
        # Either the snapshot or the current settings can block: the stricter wins.
        return turn.guard_reason(
            enabled=enabled and turn.settings.short_term_memory_enabled,
            full_privacy=full_privacy or turn.user_settings.full_privacy,
        )

    def _write(
        self, turn: TurnContext, args: UpdateArgs, before: list[StoredMessage]
    ) -> MemoryEntry | None:
        """Store what the model wrote; the live entry after the write. ``before``
        receives the excerpts kept beside the memory it replaced."""
        scope = turn.scope
        keys = scope.keys
        live_key = keys[-1]  # the server key in a server, else the user key (see Scope.keys)
        now = self.now()
        order = [c.slug for c in turn.categories]

        # What the model wrote can hold the words of this turn's user and of everyone
        # behind the briefings it was shown.
        sources = turn.shown_provenance | {scope.user_id}

        def change(entry: MemoryEntry) -> dict[str, Any]:
            if entry.key == live_key:
                before[:] = entry.kept  # as this attempt read it (a retry reads again)
            return refreshed(
                entry,
                summary=args.summary,
                categories=args.categories,
                order=order,
                sources=sources,
                now=now,
                live_key=live_key,
                detail_budget=self.limits.detail_budget,
            )

        return self._apply(scope, keys, change, now).get(live_key)

    def capture(self, scope: Scope, messages: Sequence[Any]) -> MemoryEntry | None:
        """Store the last dialogue turns of the channel (passive capture: what the model
        reads as recent dialogue until it next writes the memory); returns the live entry."""
        _check_scope(scope)
        now = self.now()
        capture = self._captured(scope, messages, now)
        if capture is None:
            return None
        return self._apply(scope, scope.keys, capture, now).get(scope.live_key)

    def commit(self, record: TurnRecord) -> None:
        """End a turn in one write (what ``MemoryTurn.finish`` and ``abandon`` run):
        :meth:`capture` its dialogue (:class:`~stm_memory.tool.turn.TurnRecord`; none:
        counted only) and :meth:`end_turn`, in one cache transaction and one SQL
        transaction. A dialogue that cannot be read is logged and not captured; the
        turn still counts."""
        if not isinstance(record, TurnRecord):
            raise ValidationError(f"commit() takes a TurnRecord, got {type(record).__name__}")
        if record.cleared:
            self._keep_results(record.turn, record.cleared)
        if record.dialogue is None:
            self.end_turn(record.turn)
            return
        follows = record.follows
        self._finish_turn(
            record.turn,
            record.dialogue,
            stored=follows,
            after_stored=follows is not None or record.follows_seen,
        )

    def _keep_results(self, turn: TurnContext, results: Sequence[KeptResult]) -> None:
        """Keep the tool results a turn's requests left out, for reading back
        (``live/results.py``): not for a user in full privacy. A failure is logged: the
        turn still ends (its caller's record still holds them)."""
        if turn.user_settings.full_privacy or self.user_settings(turn.scope.user_id).full_privacy:
            return
        try:
            keep_results(
                self._cache, turn.scope, results, now=self.now(), life=self.limits.summary_ttl
            )
        except Exception:
            log.exception("stm-memory: keeping the turn's cleared tool results failed")

    def kept_result(self, scope: Scope, call_id: str) -> KeptResult | None:
        """A tool result a turn of ``scope``'s user in its channel left out of its
        requests, kept by :meth:`commit` (``read_tool_result``); None when none is."""
        _check_scope(scope)
        life = self.limits.summary_ttl
        return kept_result(self._cache, scope, call_id, now=self.now(), life=life)

    def _finish_turn(
        self,
        turn: TurnContext,
        messages: Sequence[Any],
        *,
        stored: Sequence[StoredMessage] | None,
        after_stored: bool,
    ) -> None:
        """:meth:`commit` of a captured turn. ``stored``: the live entry's captured turns
        as the caller has just read them, which the speakers are matched against
        instead of reading the entry again. ``after_stored``: ``messages`` is this turn
        alone, to follow the stored turns; they are taken as they are, not read back
        from dicts."""
        scope = turn.scope
        now = self.now()
        # A turn passed alone follows the turns assembly read (not read again): the
        # write checks the channel still holds them, and if another turn captured
        # meanwhile, this capture is made again on what it holds now.
        seen = turn.seen_turns if after_stored and stored is None else None
        try:
            capture = self._captured(
                scope,
                messages,
                now,
                live_turns=stored if stored is not None else seen,
                after_stored=after_stored,
            )
        except Exception:
            log.exception("stm-memory: reading the dialogue failed; it is not captured")
            capture = None
        count = self._counting(turn)
        if capture is None and count is None:
            return
        try:
            self._finish_write(scope, capture, count, now, seen=seen)
        except _TurnsMoved:
            try:
                capture = self._captured(scope, messages, now, after_stored=True)
            except Exception:
                # Capture replaces the stored turns: unreadable now, this turn alone
                # would overwrite them. Not captured; the turn still counts.
                log.exception("stm-memory: reading memory failed; the dialogue is not captured")
                capture = None
            if capture is None and count is None:
                return
            self._finish_write(scope, capture, count, now, seen=None)

    def _finish_write(
        self,
        scope: Scope,
        capture: Callable[[MemoryEntry], dict[str, Any]] | None,
        count: Callable[[MemoryEntry], dict[str, Any]] | None,
        now: datetime,
        *,
        seen: Sequence[StoredMessage] | None,
    ) -> None:
        """:meth:`commit`'s one write; ``seen``: the turns the capture follows,
        which the live entry must still hold (else :class:`_TurnsMoved`, nothing
        written)."""
        live_key = scope.live_key

        def change(entry: MemoryEntry) -> dict[str, Any]:
            if seen is not None and entry.key == live_key and not _same_turns(entry.messages, seen):
                raise _TurnsMoved
            fields = capture(entry) if capture is not None else {}
            if count is not None and entry.key == live_key:
                fields |= count(entry)  # captured() leaves the counters alone
            return fields

        keys = scope.keys if capture is not None else [live_key]
        try:
            self._apply(scope, keys, change, now)
        except _TurnsMoved:
            raise
        except Exception:
            if capture is None or count is None:
                raise
            # The capture's write failed (a key it needs could not be read, say): the
            # turn still counts, alone, as end_turn would have; the failure is reported.
            self._apply(scope, [live_key], count, now)
            raise

    def _apply(
        self,
        scope: Scope,
        keys: Sequence[str],
        change: Callable[[MemoryEntry], dict[str, Any]],
        now: datetime,
    ) -> dict[str, MemoryEntry]:
        """``change`` on the entries of ``keys``: one cache transaction, then their rows
        (one SQL transaction, or the outbox)."""
        entries = self._live.mutate(scope, keys, change)
        self._persister.write(list(entries.values()), now)
        return entries

    def _captured(
        self,
        scope: Scope,
        messages: Sequence[Any],
        now: datetime,
        *,
        live_turns: Sequence[StoredMessage] | None = None,
        after_stored: bool = False,
    ) -> Callable[[MemoryEntry], dict[str, Any]] | None:
        """The change capturing ``messages`` for ``scope``, None when nothing of it is
        stored (the user is in full privacy, or nobody's words may be kept).
        ``live_turns``: the live entry's turns, when the caller has just read them;
        ``after_stored``: ``messages`` follow them (see :meth:`_finish_turn`)."""
        if self.user_settings(scope.user_id).full_privacy:
            return None
        said = all_dialogue(messages, now=now)
        if after_stored:
            if live_turns is None:
                live = self.get(scope)
                live_turns = live.messages if live else ()
            # Stored turns are stored as they are: already clean, with their speakers
            # and first timestamps (the write then re-encodes none of them).
            said = (*live_turns, *said)
        current = len(live_turns) if after_stored and live_turns is not None else None
        if scope.server_id is None:
            current = 0  # a direct conversation: every word in it is its user's
        if any(m.user_id is None for m in said):
            # A turn the channel's store already holds keeps the speaker it was stored
            # with; only this turn's new ones are this turn's user's. Read before the
            # atomic write (the privacy check below needs the speakers), so a capture
            # racing this one can make a repeated turn count as new.
            if live_turns is None:
                live = self.get(scope)
                live_turns = live.messages if live else ()
            said = with_stored_speakers(said, live_turns, default=scope.user_id, current=current)
        key = self.mark_key()
        if key is not None:
            said = marked(said, key)
        # This turn's own messages: never taken for an erased one that said the same.
        fresh = len(said) - (turn_start(said) if current is None else current)
        voices = speakers(said)
        # A user in full privacy is never stored, whoever's turn this is. (Settings
        # that cannot be read count as full privacy: SettingsBook fails closed.) Nor is
        # a message nobody can be credited with: erasure could not reach it.
        private = {u for u in voices if u != scope.user_id and self.user_settings(u).full_privacy}
        kept = self.limits.messages_kept
        window = tuple(m for m in said if m.user_id is not None and m.user_id not in private)
        window = window[-UNCHECKED_KEPT * kept :]
        if not window:
            return None
        fresh = min(fresh, len(window))

        def change(entry: MemoryEntry) -> dict[str, Any]:
            return captured(
                entry,
                stored=window,
                messages_kept=kept,
                voices=voices,
                now=now,
                private=private,
                fresh=fresh,
            )

        return change

    def end_turn(self, turn: TurnContext) -> None:
        """Count the turn on the live scope, unless this turn refreshed the memory."""
        count = self._counting(turn)
        if count is None:
            return
        self._apply(turn.scope, [turn.scope.live_key], count, self.now())

    def _counting(self, turn: TurnContext) -> Callable[[MemoryEntry], dict[str, Any]] | None:
        """Mark ``turn`` ended; the change counting it, None when it is not counted (it
        ended before, or its user is in full privacy). A turn that refreshed the memory
        is not counted as a turn without one, but its requests still showed a form: that
        is stored (model/shown.py)."""
        if not turn.mark_ended():
            return None
        if turn.user_settings.full_privacy:
            return None
        if turn.updated and turn.shown_form is None:
            return None
        briefings, epoch, bill = turn.briefings, turn.briefings_epoch, turn.bill
        shown, base, refreshed, at = turn.shown_form, turn.shown_base, turn.updated, self.now()
        no_writer = turn.no_writer
        cleared = turn.cleared_ids

        def change(entry: MemoryEntry) -> dict[str, Any]:
            return counted(
                entry,
                briefings=briefings,
                epoch=epoch,
                shown=shown,
                base=base,
                at=at,
                refreshed=refreshed,
                bill=bill,
                no_writer=no_writer,
                cleared=cleared,
            )

        return change

    def writes_tools_as_text(self, model: str) -> bool:
        """Whether ``model`` writes its tool calls as message text (a small open model
        behind a server that parses none), as a turn of any process of this database
        saw it do: its turns are offered no tool (``stm-memory doctor`` lists it)."""
        return model in self._text_callers

    def note_text_caller(self, model: str) -> bool:
        """``model`` just wrote a tool call as text: kept (in this process at once, in
        the database for every other that starts). True the first time this process
        sees it (the turn warns then)."""
        if not self._text_callers.add(model):
            return False
        try:
            self._store.note_model(model, TOOLS_AS_TEXT, self.now())
        except Exception as exc:  # this process still knows; the next start asks again
            log.warning("stm-memory: noting model %r failed: %s", model, exc)
        return True

    def model_notes(self) -> dict[str, tuple[str, datetime]]:
        """What turns learnt about models, from the database: each model's note (
        ``"tools as text"``: it writes its tool calls as message text) and when."""
        return self._store.model_notes()

    def forget_model(self, model: str) -> bool:
        """Forget what turns learnt about ``model`` (its server now parses its tool
        calls): its turns are offered the memory tool again, in processes started from
        now on and in this one. False when nothing was noted."""
        forgot = self._store.forget_model(model)
        self._text_callers.discard(model)
        return forgot

    def _read_model_notes(self) -> None:
        try:
            notes = self._store.model_notes()
        except Exception as exc:  # a database that cannot answer: learnt again by turns
            log.warning("stm-memory: reading the model notes failed: %s", exc)
            return
        for model, (note, _) in notes.items():
            if note == TOOLS_AS_TEXT:
                self._text_callers.add(model)

    def mark_key(self) -> bytes | None:
        """The key of the marks erasure keeps (model/tombstones.py): ``STM_ERASURE_KEY``,
        else the database's own, made once and kept in a table of its own. None while
        the database cannot be read (messages captured meanwhile carry no mark)."""
        if self._erasure_key is None:
            configured = os.environ.get("STM_ERASURE_KEY")
            try:
                text = configured or self._store.secret("erasure_key", secrets.token_hex(32))
            except Exception as exc:
                if self._key_warned.add("erasure_key"):  # once, not at every capture
                    log.warning("stm-memory: the erasure key could not be read: %s", exc)
                return None
            self._erasure_key = text.encode()
        return self._erasure_key

    # -- reads ---------------------------------------------------------------------------

    def get(self, scope: Scope) -> MemoryEntry | None:
        """The live entry of the scope (hydrating on a miss), None if absent or expired."""
        return self.get_key(scope.live_key)

    def writing_status(self, scope: Scope) -> Writing:
        """Whether the scope's channel memory is being written (:class:`Writing`), judged
        from its counters as its turns judge them: ``off`` where a guard hides the tool
        (memory off for the server, the user's full privacy) or where nobody could
        write it at the channel's last turn (``tool_calling=False``, or a model that
        writes its tool calls as text, without ``writer=``), ``not_writing`` once its
        model ignored the nudges (docs/open-models.md)."""
        _check_scope(scope)
        settings = self.server_settings(scope.server_id) if scope.server_id else ServerSettings()
        private = self.user_settings(scope.user_id).full_privacy
        # The counters outlive expiry (they are bookkeeping): read the entry as cached.
        entry = self._live.get_many([scope.live_key]).get(scope.live_key)
        nobody = entry is not None and entry.no_writer
        return writing(
            offered=settings.short_term_memory_enabled and not private and not nobody,
            writes=entry.last_refreshed_turn if entry is not None else 0,
            turns_since_refresh=entry.turns_since_refresh if entry is not None else 0,
            cadence=settings.refresh_cadence,
        )

    def get_key(self, key: str) -> MemoryEntry | None:
        entry = self._live.get_many([key]).get(key)
        if entry is None or not self._live.is_live(entry, self.now()):
            return None
        return entry

    def build_context(self, turn: TurnContext) -> MemoryContext:
        """Memory content and nudge for this turn, with their injection depths. The turn
        records whose words the briefings show, for the provenance of its update."""
        context = assemble_context(
            turn,
            entries=self._live,
            settings=self._settings,
            limits=self.limits,
            clock=self.now,
            mark_key=self.mark_key(),
        )
        turn.note_shown(context.sources)
        if context.ledger is not None:
            turn.note_briefings(
                context.ledger,
                context.ledger_epoch,
                shown=context.shown,
                base=context.shown_base,
            )
        return context

    # -- deletion ------------------------------------------------------------------------

    def clear_channel(self, channel_id: str, *, progress: ProgressCallback | None = None) -> int:
        """Forget a channel everywhere (the "/refresh" command). Returns SQL rows deleted
        now (0 when the delete is queued for an unreachable database). Cache and rows
        go in batches; ``progress(phase, done, total)`` is called after each (see
        :mod:`stm_memory.bulk`)."""
        Scope(channel_id=channel_id, user_id="_")
        return self._deletions.clear_channel(channel_id, progress=progress)

    def clear_user(self, user_id: str, *, progress: ProgressCallback | None = None) -> int:
        """Erase a user (see :mod:`stm_memory.model.erasure`): delete their user-scope
        entries in every server, DM, thread and persona; remove their words from every
        other entry and clear the distilled memory of every entry their words may have
        reached (its provenance); other users' words stay. The replies of their turns
        go with their words, and each message removed leaves a mark (a keyed digest,
        no text, :mod:`stm_memory.model.tombstones`) so that a caller's history that
        still holds it (a shared checkpointer thread) never has it captured again nor
        sent. Queued durably like every delete, and the embedded stores' files are
        checkpointed afterwards so the words leave the bytes on disk. Returns the SQL
        rows deleted or cleared now (0 when queued; an id nothing holds is logged).
        Cache and rows go in batches; ``progress(phase, done, total)`` is called
        after each."""
        check_owner_id("user_id", user_id)
        return self._deletions.clear_user(user_id, progress=progress)

    def clear_summary(self, scope: Scope) -> int:
        """Drop the distilled memory (summary and categories) of a scope, keep the rest."""
        return self._deletions.clear_summary(scope)

    # -- maintenance ---------------------------------------------------------------------

    def flush(self) -> int:
        """Replay queued writes now; returns how many landed."""
        return self._persister.flush()

    def repair(self, *, progress: ProgressCallback | None = None) -> Repaired:
        """Compare the live cache with SQL and move the older side forward (run at
        start-up and by the janitor; safe while other processes write). Does nothing
        while the outbox holds writes: they are newer than their rows, and the cache
        would look ahead of SQL for the wrong reason. The cache is read in batches;
        ``progress(phase, done, total)`` is called after each (see ``_bulk``)."""
        if self._outbox.has_pending():
            log.info("stm-memory: repair skipped, the outbox still holds writes")
            return Repaired()
        with reporting(progress):
            return repair_cache(self._live, self.now())

    def run_janitor(self, *, progress: ProgressCallback | None = None) -> int:
        """Replay the outbox, repair cache/SQL disagreements, delete rows idle past the
        retention, reclaim cache space. Returns the number of rows deleted. Repair,
        eviction and deletion go in batches; ``progress(phase, done, total)`` is
        called after each (see ``_bulk``)."""
        with reporting(progress):
            self._persister.flush()
            if not self._outbox.has_pending():
                crashed = dead_writers(self._cache)
                self.repair()
                forget_writers(self._cache, crashed)
            cutoff = self.now() - self.limits.janitor_retention
            # Evict first, as SQL lists the idle rows batch by batch: a cached entry
            # outliving its row would carry its counters into a row SQL re-creates from
            # zero. (Evicting a row that turns out to be kept is harmless: it hydrates
            # again.)
            stale = (key for keys in self._store.keys_older_than(cutoff) for key in keys)
            evict_in_batches(self._live.evict, stale)
            deleted = self._store.delete_older_than(cutoff)
            self._drop_expired_copies()
            self._cache.expire()
        log.info("stm-memory: janitor deleted %d rows idle since %s", deleted, cutoff)
        return deleted

    def _drop_expired_copies(self) -> None:
        """Briefing copies whose source is no longer live leave the disk too (each
        request already leaves them out)."""
        now, alive = self.now(), dict[str, bool]()

        def stale(copy: BriefingCopy) -> bool:
            if copy.source not in alive:
                entry = self._live.get_many([copy.source]).get(copy.source)
                alive[copy.source] = entry is not None and self._live.is_live(entry, now)
            return not alive[copy.source]

        self._deletions.drop_copies(stale)

    def start_janitor(self) -> Janitor:
        """Run the janitor in a background thread (first run after
        ``janitor_first_run``, then every ``janitor_interval``); ``stop()`` ends it."""
        from stm_memory.durability.janitor import Janitor

        if self._janitor is None or not self._janitor.is_alive():
            self._janitor = Janitor(
                self.run_janitor,
                first_run=self.limits.janitor_first_run.total_seconds(),
                interval=self.limits.janitor_interval.total_seconds(),
            )
            self._janitor.start()
        return self._janitor

    def stop_janitor(self) -> None:
        if self._janitor is not None:
            self._janitor.stop()
            self._janitor = None

    # -- async twins: the sync path is the one implementation -----------------------------

    async def aupdate(self, turn: TurnContext, args: object) -> dict[str, Any]:
        return await asyncio.to_thread(self.update, turn, args)

    async def abegin_turn(
        self,
        scope: Scope,
        *,
        provider: str | None = None,
        user_message: str | None = None,
        tools_available: bool = True,
    ) -> TurnContext:
        return await asyncio.to_thread(
            lambda: self.begin_turn(
                scope,
                provider=provider,
                user_message=user_message,
                tools_available=tools_available,
            )
        )

    async def abuild_context(self, turn: TurnContext) -> MemoryContext:
        return await asyncio.to_thread(self.build_context, turn)

    async def awriting_status(self, scope: Scope) -> Writing:
        return await asyncio.to_thread(self.writing_status, scope)

    async def anote_text_caller(self, model: str) -> bool:
        return await asyncio.to_thread(self.note_text_caller, model)

    async def aget(self, scope: Scope) -> MemoryEntry | None:
        return await asyncio.to_thread(self.get, scope)

    async def akept_result(self, scope: Scope, call_id: str) -> KeptResult | None:
        return await asyncio.to_thread(self.kept_result, scope, call_id)

    async def acapture(self, scope: Scope, messages: Sequence[Any]) -> MemoryEntry | None:
        return await asyncio.to_thread(self.capture, scope, messages)

    async def aend_turn(self, turn: TurnContext) -> None:
        await asyncio.to_thread(self.end_turn, turn)

    async def acommit(self, record: TurnRecord) -> None:
        await asyncio.to_thread(self.commit, record)

    async def aclear_channel(self, channel_id: str) -> int:
        return await asyncio.to_thread(self.clear_channel, channel_id)

    async def aclear_user(self, user_id: str) -> int:
        return await asyncio.to_thread(self.clear_user, user_id)

    async def aclear_summary(self, scope: Scope) -> int:
        return await asyncio.to_thread(self.clear_summary, scope)

    async def aflush(self) -> int:
        return await asyncio.to_thread(self.flush)

    async def arun_janitor(self) -> int:
        return await asyncio.to_thread(self.run_janitor)

    def stats(self) -> Mapping[str, Any]:
        """Counts for the CLI and dashboards: cached entries, rows, queued writes."""
        return {
            "cache_entries": sum(1 for _ in cached_entry_keys(self._cache)),
            "rows": self._store.count_rows(),
            "queued_writes": len(self._outbox),
        }

    def expiry_buckets(self) -> dict[str, int]:
        """The cached entries by time left before they expire (``stm-memory stats``).
        Reads every cached entry: an administration call, not one to poll."""
        now = self.now()
        buckets = dict.fromkeys(_EXPIRY_BUCKETS, 0)
        for keys in batched(cached_entry_keys(self._cache), CACHE_BATCH):
            for entry in self._live.get_many(keys).values():
                left = entry.expires_at(
                    summary_ttl=self.limits.summary_ttl, bare_ttl=self.limits.bare_ttl
                )
                buckets[_expiry_bucket(left - now)] += 1
        return buckets

    def stored_rows(
        self, *, server_id: str | None = None, user_id: str | None = None, limit: int = 1000
    ) -> list[MemoryEntry]:
        """Rows of a server or a user as SQL holds them, newest first (administration)."""
        return self._store.list_rows(server_id=server_id, user_id=user_id, limit=limit)

    def savings(
        self, *, server_id: str | None = None, since: date | None = None, limit: int = 100_000
    ) -> Savings:
        """What the memory did to the bill, from the receipts the turns kept (per
        channel and UTC day, ``since`` that day; a server's channels, or every row
        read, ``limit`` of them newest first): each turn's input as the API billed it
        beside the full history's, priced with the same rates
        (:mod:`stm_memory.model.receipt`)."""
        rows = self._store.list_rows(server_id=server_id, limit=limit)
        return savings_of(((r.server_id, r.channel_id, r.receipt) for r in rows), since=since)

    def has_queued_writes(self) -> bool:
        """Whether writes or deletes wait in the outbox (the database was unreachable)."""
        return self._outbox.has_pending()

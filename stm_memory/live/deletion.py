"""Deletion: forgetting a channel, erasing a user, clearing a summary.

Each runs the same way: the delete is queued durably first (the persister's
``begin_delete``), then the live cache is evicted or rewritten in batches, queued writes
it would undo are purged from the outbox, and SQL runs it (or it stays queued while the
database is unreachable, and hydration keeps the deleted rows out of sight meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from stm_memory.bulk import CACHE_BATCH, ERASE_CACHED, ProgressCallback, Tally, batched, reporting
from stm_memory.cache.base import LiveCache
from stm_memory.durability.outbox import Outbox
from stm_memory.durability.persister import Persister
from stm_memory.live.entries import LiveEntries
from stm_memory.live.results import delete_results
from stm_memory.live.scan import cached_entry_keys, evict_in_batches
from stm_memory.model import MemoryEntry, Scope, key_for, parse_key
from stm_memory.model.briefings import BriefingCopy
from stm_memory.model.erasure import (
    cleared_shown,
    erase_user,
    unknown_provenance,
    without_kept_of,
)
from stm_memory.store.base import MemoryStore

__all__ = ["Deletions"]

log = logging.getLogger("stm_memory")

# Cached entries read per round trip while an erasure scans the cache.
_ERASE_BATCH = 500


def _scope_of(key: str, server_id: str | None) -> Scope:
    """The scope a cached entry belongs to, from its key (and its server, for a
    user-scope entry inside a server)."""
    kind, owner, channel, persona = parse_key(key)
    if kind == "server":
        return Scope(channel_id=channel, user_id="_", server_id=owner, persona_id=persona)
    return Scope(channel_id=channel, user_id=owner, server_id=server_id, persona_id=persona)


def _as_dated(last_updated: datetime) -> Callable[[MemoryEntry], dict[str, Any]]:
    """A change of nothing but the revision, for an entry last active at
    ``last_updated``: an erasure is not activity, so an entry it left expired (its
    memory cleared, only its shorter life left) stays expired, not made anew."""

    def change(entry: MemoryEntry) -> dict[str, Any]:
        return {"last_updated": last_updated}

    return change


class Deletions:
    """The deletions of one :class:`~stm_memory.ShortTermMemory`."""

    def __init__(
        self,
        *,
        cache: LiveCache,
        store: MemoryStore,
        outbox: Outbox,
        live: LiveEntries,
        persister: Persister,
        clock: Callable[[], datetime],
    ) -> None:
        self._cache = cache
        self._store = store
        self._outbox = outbox
        self._live = live
        self._persister = persister
        self.now = clock

    def clear_channel(self, channel_id: str, *, progress: ProgressCallback | None = None) -> int:
        """Forget a channel everywhere. Returns SQL rows deleted now (0 when the delete is
        queued for an unreachable database)."""
        payload = {"channel_id": channel_id, "at": self.now().isoformat()}
        item = self._persister.begin_delete("delete_channel", payload, channel_id=channel_id)
        with reporting(progress):
            # Before and after the scan: a fallback cache that may miss copies held by
            # the primary keeps the deletion for them whichever side of an outage it
            # ran on.
            self._cache.record_deletion("channel", channel_id)
            keys = cached_entry_keys(self._cache)
            evict_in_batches(self._live.evict, (k for k in keys if parse_key(k)[2] == channel_id))
            delete_results(self._cache, channels=frozenset({channel_id}))
            self._cache.record_deletion("channel", channel_id)
            self._outbox.purge_channel(channel_id)
            dropped = self.drop_copies(lambda copy: copy.channel_id == channel_id)
            count = self._persister.finish_delete(item) or 0
        if dropped:  # other channels' copies of its words left the cache's bytes too
            self._compact(self._cache)
        return count

    def clear_user(self, user_id: str, *, progress: ProgressCallback | None = None) -> int:
        """Erase a user: their own entries go, their words leave every other entry, and
        the distilled memory their words may have reached is cleared (see
        ``ShortTermMemory.clear_user``). Returns the SQL rows deleted or cleared now."""
        now = self.now()
        item = self._persister.begin_delete(
            "forget_user", {"user_id": user_id, "at": now.isoformat()}, user_id=user_id
        )
        with reporting(progress):
            self._cache.record_deletion("user", user_id)  # before and after: see clear_channel
            # The user's own entries are exactly the keys under this prefix (ids are
            # escaped: an owner id never holds the ":" that ends it).
            owned = 0

            def evict(keys: list[str]) -> None:
                nonlocal owned
                owned += len(keys)
                self._live.evict(keys)

            evict_in_batches(evict, cached_entry_keys(self._cache, key_for("user", user_id, "")))
            # The tool results their turns cleared, kept apart from the entries (and
            # outliving an entry the janitor evicted).
            owned += delete_results(self._cache, users=frozenset({user_id}))
            self._outbox.purge_user(user_id)
            erased = self._erase_from_shared(user_id)
            self._cache.record_deletion("user", user_id)
            count = self._persister.finish_delete(item) or 0
        if not (owned or erased or count):
            # A typo'd id erases nothing: say so, rather than let it pass for an erasure.
            log.info("stm-memory: clear_user(%r): nothing stored holds this user's words", user_id)
        # The erased entries' rows are written after the SQL erasure, behind it in
        # the outbox if it is queued. Each is dated by its own last activity: an
        # erasure is not activity, so the janitor's clock does not move (as
        # SqlStore.forget_user leaves it). Written as the cache holds them now: an
        # entry deleted since gets no row back. Their revision is moved on first: the
        # SQL erasure may have given a row the revision the cache's erasure gave its
        # entry, and the row must take the marks the entry now carries.
        for batch in batched(erased, CACHE_BATCH):
            for key, held in self._live.cached(batch).items():
                scope = _scope_of(key, held.server_id)
                dated = _as_dated(held.last_updated)
                moved = self._live.mutate(scope, [key], dated, existing_only=True)
                for entry in moved.values():
                    self._persister.write([entry], entry.last_updated)
        self._compact()
        return count

    def _erase_from_shared(self, user_id: str) -> list[str]:
        """Remove ``user_id``'s words from the queued writes and the cached entries of
        other users and servers (in batches drawn from the cache's scan: a cache may
        hold many entries); returns the keys of the entries changed, whose rows are
        still to be written."""

        def redact(snapshot: dict[str, Any]) -> dict[str, Any] | None:
            entry = MemoryEntry.from_dict(snapshot)
            changes = erase_user(entry, user_id) or unknown_provenance(snapshot)
            return entry.evolve(changes).to_dict() if changes else None

        self._outbox.rewrite_rows(redact)
        erased: list[str] = []
        scanned = Tally(ERASE_CACHED)
        now = self.now()
        for keys in batched(cached_entry_keys(self._cache), _ERASE_BATCH):
            batch = self._cache.get_many(keys)
            expired: list[str] = []
            for key, raw in batch.items():
                legacy = unknown_provenance(raw)
                cached = MemoryEntry.from_dict(raw)
                if erase_user(cached, user_id) is None and legacy is None:
                    continue
                if not self._live.is_live(cached, now):
                    # Its content is gone already; rewriting it would revive it as a
                    # fresh entry. Evicted: its counters live on in the row.
                    expired.append(key)
                    continue

                def change(
                    entry: MemoryEntry, legacy: dict[str, Any] | None = legacy
                ) -> dict[str, Any]:
                    # Decided again inside the transaction: the entry may have moved on.
                    return erase_user(entry, user_id) or legacy or {}

                scope = _scope_of(key, raw.get("server_id"))
                erased += self._live.mutate(scope, [key], change, existing_only=True)
            self._live.evict(expired)
            scanned.add(len(keys))
        scanned.end()
        return erased

    def drop_copies(self, stale: Callable[[BriefingCopy], bool]) -> int:
        """Remove the briefing copies ``stale`` picks from every cached entry (another
        channel's words, stored where they were sent: a deletion, a privacy change or
        an expiry of their source reaches them here). Returns the entries changed.

        An entry's activity time is left alone: dropping a copy is not a turn."""

        def holds(raw: Mapping[str, Any]) -> bool:
            copies = raw.get("briefings") or ()
            return any(stale(BriefingCopy.from_dict(c)) for c in copies)

        def change(entry: MemoryEntry) -> dict[str, Any]:
            # Decided again inside the transaction: the entry may have moved on.
            kept = tuple(c for c in entry.briefings if not stale(c))
            return {} if len(kept) == len(entry.briefings) else {"briefings": kept}

        return len(self._change_cached(holds, change))

    def drop_kept(self, user_id: str) -> int:
        """Remove ``user_id``'s words from the excerpts kept beside every cached
        memory, and write the changed entries' rows (a user who chose full privacy:
        their words are stored nowhere from now on). Returns the entries changed."""

        def holds(raw: Mapping[str, Any]) -> bool:
            shown = (raw.get("shown") or {}).get("kept") or ()
            return any(m.get("user_id") == user_id for m in (*(raw.get("kept") or ()), *shown))

        changed = self._change_cached(holds, lambda entry: without_kept_of(entry, {user_id}))
        delete_results(self._cache, users=frozenset({user_id}))  # their turns' tool results
        for entry in changed:
            self._persister.write([entry], entry.last_updated)
        return len(changed)

    def _change_cached(
        self,
        holds: Callable[[Mapping[str, Any]], bool],
        change: Callable[[MemoryEntry], dict[str, Any]],
    ) -> list[MemoryEntry]:
        """``change`` on every cached entry whose cached value ``holds`` says may need it
        (read without decoding the rest); the entries it wrote."""
        changed: list[MemoryEntry] = []
        for keys in batched(cached_entry_keys(self._cache), _ERASE_BATCH):
            for key, raw in self._cache.get_many(keys).items():
                if holds(raw):
                    scope = _scope_of(key, raw.get("server_id"))
                    changed += self._live.mutate(scope, [key], change, existing_only=True).values()
        return changed

    def _compact(self, *parts: MemoryStore | LiveCache | Outbox) -> None:
        """Checkpoint the embedded stores (default all three) after an erasure, or the
        live cache after copies left it (best effort: a failure is logged; the next
        erasure or checkpoint catches up)."""
        for part in parts or (self._store, self._cache, self._outbox):
            try:
                part.compact()
            except Exception as exc:
                log.warning("stm-memory: checkpoint after erasure failed: %s", exc)

    def clear_summary(self, scope: Scope) -> int:
        """Drop the distilled memory (summary, categories and the details kept beside
        them) of a scope, keep the rest."""
        keys = list(scope.keys)
        now = self.now()
        item = self._persister.begin_delete(
            "clear_summary", {"keys": keys, "at": now.isoformat()}, row_key=scope.live_key
        )

        def clear(entry: MemoryEntry) -> dict[str, Any]:
            # The copy this channel's requests show goes with the memory (at once).
            return {
                "summary": None,
                "categories": {},
                "kept": (),
                "last_updated": now,
                "shown": cleared_shown(entry),
            }

        present = self._cache.get_many(keys)
        if present:
            self._live.mutate(scope, list(present), clear)
        self._outbox.purge_keys(keys)
        # Other channels' copies of this memory were sent as it was: they go too.
        dropped = self.drop_copies(lambda copy: copy.source in keys)
        count = self._persister.finish_delete(item) or 0
        if dropped:
            self._compact(self._cache)
        return count

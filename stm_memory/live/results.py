"""A long turn's cleared tool results, kept in the live cache beside its user's entry.

A result a turn's requests left out (``stm_memory/prompt/clearing.py``) stays readable
back by its call id after the turn (``read_tool_result``), for a caller that does not
keep its record or a later process. One value per user entry (:func:`results_key`):
the turn's user's, so erasing the user or the channel reaches it (``live/deletion.py``,
``live/replay.py``), like every other copy. Cache-only, as the captured dialogue is:
never in SQL rows or the outbox. Each result lives as long as a summarised entry
(``Limits.summary_ttl``), decided from the engine's clock; the cache's native TTL only
cleans up.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from stm_memory.bulk import CACHE_BATCH, batched
from stm_memory.cache.base import CacheValue, LiveCache, Write
from stm_memory.model import RESULTS_PREFIX, Scope, key_for, parse_results_key, results_key
from stm_memory.model.tool_results import KeptResult

__all__ = ["KEPT_CHARS", "delete_results", "keep_results", "kept_result"]

#: The characters kept per user and channel: the newest results first (a long turn of
#: 200 reads of ~7,000 characters holds 1.4M).
KEPT_CHARS = 2_000_000


def _live(held: Mapping[str, Any], now: datetime, life: timedelta) -> dict[str, Any]:
    cutoff = now - life
    return {
        call_id: item
        for call_id, item in held.items()
        if isinstance(item, Mapping) and datetime.fromisoformat(str(item.get("at"))) > cutoff
    }


def keep_results(
    cache: LiveCache,
    scope: Scope,
    results: Sequence[KeptResult],
    *,
    now: datetime,
    life: timedelta,
) -> None:
    """Add ``results`` to what ``scope``'s user keeps in its channel, in one
    transaction: those past ``life`` leave, then the oldest beyond :data:`KEPT_CHARS`."""
    if not results:
        return
    key = results_key(scope.user_key)
    at = now.isoformat()

    def change(current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        held = _live((current.get(key) or {}).get("results") or {}, now, life)
        for result in results:
            held.pop(result.call_id, None)  # re-kept: it moves to the newest
            held[result.call_id] = {"tool": result.tool, "text": result.text, "at": at}
        total, kept = 0, dict[str, Any]()
        for call_id, item in reversed(held.items()):  # newest first
            total += len(item["text"])
            if total > KEPT_CHARS and kept:
                break
            kept[call_id] = item
        value = {"results": dict(reversed(kept.items()))}
        return {key: Write(value, ttl=life.total_seconds())}

    cache.atomic([key], change)


def kept_result(
    cache: LiveCache, scope: Scope, call_id: str, *, now: datetime, life: timedelta
) -> KeptResult | None:
    """The result of ``call_id`` kept for ``scope``'s user in its channel, None when
    none is (another scope's id, expired, never kept)."""
    value = cache.get_many([results_key(scope.user_key)])
    held = next(iter(value.values()), None) or {}
    item = _live(held.get("results") or {}, now, life).get(call_id)
    if item is None:
        return None
    return KeptResult(call_id, str(item.get("tool") or ""), str(item["text"]))


def delete_results(
    cache: LiveCache,
    *,
    users: frozenset[str] = frozenset(),
    channels: frozenset[str] = frozenset(),
) -> int:
    """Delete the kept results of ``users`` (in every channel) and of every user in
    ``channels``; returns the values deleted."""
    if not users and not channels:
        return 0
    if users and not channels and len(users) == 1:
        # A user's values are exactly the keys under this prefix (ids are escaped).
        (user,) = users
        keys: Iterator[str] = iter(cache.iter_keys(results_key(key_for("user", user, ""))))
    else:
        keys = (
            k
            for k in cache.iter_keys(RESULTS_PREFIX)
            if (parts := parse_results_key(k))[0] in users or parts[1] in channels
        )
    deleted = 0
    for batch in batched(keys, CACHE_BATCH):
        deleted += cache.delete_many(batch)
    return deleted

"""The live cache in SQL: one cache for every host on the rows database.

:class:`~stm_memory.cache.resilient.ResilientCache` turns to it while the primary
live cache (Redis; diskcache on one host) is unreachable. A per-host cache cannot be
right then: two hosts would count the same turns apart, and one host's older copy
would overwrite the summary another host just stored. The rows database is the one
thing every host still shares, so degraded mode keeps the live cache there, with the
same :class:`~stm_memory.cache.base.LiveCache` contract as any backend.

Atomic writes are one transaction each. On PostgreSQL the keys' rows are created if
missing (a placeholder without a value) and locked in key order with ``SELECT … FOR
UPDATE``, so two hosts bumping one counter queue on its row lock and both bumps count;
on SQLite ``BEGIN IMMEDIATE`` (the engine's begin hook) serialises writers.

Deletions leave tombstones and removed index members leave a NULL score, so that when
the primary returns, :meth:`SqlLiveCache.drain_into` can delete the primary's stale
copies too, not only copy what SQL holds. With ``fenced=True`` every call reads the
degraded flag in its own transaction and raises :class:`PrimaryHealed` once a host has
drained the cache back into the primary: no write can land here after the drain.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from stm_memory.cache.base import AtomicFn, CacheValue, LiveCache, Write
from stm_memory.errors import CacheError
from stm_memory.store.keys import db_key
from stm_memory.store.schema import live_deletions, live_ranks, live_state, live_values

__all__ = ["Deletion", "PrimaryHealed", "SqlLiveCache"]

T = TypeVar("T")

#: A channel or user deletion made while degraded: ``("channel", id)`` or ``("user", id)``.
Deletion = tuple[str, str]

# Keys per statement (SQLite caps parameters) and per batch moved by a drain.
_CHUNK = 500
# Attempts of a PostgreSQL transaction that lost a deadlock to another host.
_ATTEMPTS = 5


class PrimaryHealed(Exception):
    """The hosts left degraded mode: the call must go to the primary cache instead."""


def _escape_like(text: str) -> str:
    return text.replace("!", "!!").replace("%", "!%").replace("_", "!_")


class SqlLiveCache(LiveCache):
    """Live cache in the ``stm_live_*`` tables of the rows database (schema v4)."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        fenced: bool = False,
        serial: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.engine = engine
        self.fenced = fenced
        self._pg = engine.dialect.name == "postgresql"
        self._insert = postgresql.insert if self._pg else sqlite.insert
        # An in-memory SQLite database is one connection shared by every thread: the
        # store's lock serialises its transactions (see SqlStore).
        self._serial = serial or nullcontext()

    # -- plumbing ----------------------------------------------------------------------

    def _run(self, action: str, body: Callable[[Connection], T], *, fence: bool = True) -> T:
        for attempt in range(_ATTEMPTS):
            try:
                with self._serial, self.engine.begin() as conn:
                    if fence and self.fenced:
                        self._check_fence(conn)
                    return body(conn)
            except sa.exc.OperationalError as exc:
                if self._pg and _lost_race(exc) and attempt < _ATTEMPTS - 1:
                    continue
                raise CacheError(f"SQL live cache {action} failed: {exc}") from exc
            except sa.exc.SQLAlchemyError as exc:
                raise CacheError(f"SQL live cache {action} failed: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _check_fence(self, conn: Connection) -> None:
        stmt = sa.select(live_state.c.degraded).where(live_state.c.id == 1)
        if self._pg:
            # Shared: degraded writers run side by side; the drain's FOR UPDATE waits
            # for them and makes every later one see the flag it clears.
            stmt = stmt.with_for_update(read=True)
        if not conn.execute(stmt).scalar():
            raise PrimaryHealed

    def _select(self, conn: Connection, keys: Sequence[str], *, lock: bool) -> dict[str, Any]:
        v = live_values.c
        found: dict[str, Any] = {}
        slots = sorted({db_key(k) for k in keys})
        for start in range(0, len(slots), _CHUNK):
            stmt = (
                sa.select(v.key, v.value, v.expires_at)
                .where(v.slot.in_(slots[start : start + _CHUNK]))
                .order_by(v.slot)
            )
            if lock and self._pg:
                stmt = stmt.with_for_update()
            found.update((row.key, row) for row in conn.execute(stmt))
        return found

    @staticmethod
    def _live(row: Any, now: float) -> CacheValue | None:
        if row is None or row.value is None:
            return None
        if row.expires_at is not None and row.expires_at <= now:
            return None
        value: CacheValue = json.loads(row.value)
        return value

    def _put(self, conn: Connection, key: str, write: Write, now: float) -> None:
        value = None if write.value is None else json.dumps(write.value, separators=(",", ":"))
        expires = None if write.ttl is None or value is None else now + write.ttl
        stmt = self._insert(live_values).values(
            slot=db_key(key), key=key, value=value, expires_at=expires, deleted=value is None
        )
        ex = stmt.excluded
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[live_values.c.slot],
                set_={"value": ex.value, "expires_at": ex.expires_at, "deleted": ex.deleted},
            )
        )
        if write.rank is not None:
            self._rank(conn, write.rank.index, key, write.rank.score, higher_only=False)

    def _rank(
        self, conn: Connection, index: str, member: str, score: float | None, *, higher_only: bool
    ) -> None:
        r = live_ranks.c
        stmt = self._insert(live_ranks).values(
            idx=db_key(index),
            member_slot=db_key(member),
            index_name=index,
            member=member,
            score=score,
        )
        where = None
        if higher_only and score is not None:
            where = sa.or_(r.score.is_(None), stmt.excluded.score > r.score)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[r.idx, r.member_slot],
                set_={"score": stmt.excluded.score},
                where=where,
            )
        )

    # -- LiveCache ---------------------------------------------------------------------

    def get_many(self, keys: Sequence[str]) -> dict[str, CacheValue]:
        if not keys:
            return {}

        def body(conn: Connection) -> dict[str, CacheValue]:
            found = self._select(conn, keys, lock=False)
            now = time.time()
            out: dict[str, CacheValue] = {}
            for key in keys:
                value = self._live(found.get(key), now)
                if value is not None:
                    out[key] = value
            return out

        return self._run("read", body)

    def atomic(self, keys: Sequence[str], fn: AtomicFn) -> dict[str, CacheValue | None]:
        def body(conn: Connection) -> dict[str, CacheValue | None]:
            now = time.time()
            if keys and self._pg:
                # A missing key has no row to lock: create an empty one first (in key
                # order, like the locks), so a second writer waits for this one.
                rows = [
                    {"slot": slot, "key": key}
                    for slot, key in sorted({db_key(k): k for k in keys}.items())
                ]
                conn.execute(self._insert(live_values).values(rows).on_conflict_do_nothing())
            found = self._select(conn, keys, lock=True)
            current = {k: self._live(found.get(k), now) for k in keys}
            writes = fn(current)
            for key in sorted(writes):
                self._put(conn, key, writes[key], now)
                current[key] = writes[key].value
            return current

        return self._run("atomic update", body)

    def add_many(self, items: Mapping[str, Write]) -> int:
        def body(conn: Connection) -> int:
            now = time.time()
            found = self._select(conn, list(items), lock=True)
            added = 0
            for key in sorted(items):
                write = items[key]
                if write.value is None or self._live(found.get(key), now) is not None:
                    continue
                self._put(conn, key, write, now)
                added += 1
            return added

        return self._run("add", body) if items else 0

    def delete_many(self, keys: Sequence[str]) -> int:
        def body(conn: Connection) -> int:
            now = time.time()
            found = self._select(conn, keys, lock=True)
            live = sum(1 for k in set(keys) if self._live(found.get(k), now) is not None)
            # Tombstones for every key, present here or not: the primary may hold a copy.
            for key in sorted(set(keys)):
                self._put(conn, key, Write(None), now)
            return live

        return self._run("delete", body) if keys else 0

    def iter_keys(self, prefix: str = "") -> Iterator[str]:
        v = live_values.c

        def body(conn: Connection) -> list[str]:
            stmt = sa.select(v.key).where(
                v.value.is_not(None),
                sa.or_(v.expires_at.is_(None), v.expires_at > time.time()),
            )
            if prefix:
                stmt = stmt.where(v.key.like(_escape_like(prefix) + "%", escape="!"))
            return [key for key in conn.execute(stmt.order_by(v.slot)).scalars()]

        return iter(self._run("scan", body))

    def ranked(self, index: str, *, offset: int = 0, count: int) -> list[tuple[str, float]]:
        if count <= 0:
            return []
        r = live_ranks.c

        def body(conn: Connection) -> list[tuple[str, float]]:
            stmt = (
                sa.select(r.member, r.score)
                .where(r.idx == db_key(index), r.score.is_not(None))
                .order_by(r.score.desc(), r.member_slot)
                .offset(offset)
                .limit(count)
            )
            return [(m, float(s)) for m, s in conn.execute(stmt)]

        return self._run("index read", body)

    def rank_many(self, index: str, members: Mapping[str, float | None]) -> None:
        def body(conn: Connection) -> None:
            for member in sorted(members):
                self._rank(conn, index, member, members[member], higher_only=True)

        if members:
            self._run("index write", body)

    def expire(self) -> int:
        v = live_values.c

        def body(conn: Connection) -> int:
            stmt = sa.delete(live_values).where(
                v.value.is_not(None), v.expires_at.is_not(None), v.expires_at <= time.time()
            )
            return int(conn.execute(stmt).rowcount)

        return self._run("expire", body)

    # -- degraded mode -----------------------------------------------------------------

    def mark_degraded(self) -> None:
        """Record that the primary is unreachable (every host's calls come here now)."""

        def body(conn: Connection) -> None:
            stmt = self._insert(live_state).values(id=1, degraded=True, since=time.time())
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[live_state.c.id],
                    set_={
                        "degraded": True,
                        "since": sa.func.coalesce(live_state.c.since, stmt.excluded.since),
                    },
                )
            )

        self._run("degraded-mode switch", body, fence=False)

    def is_degraded(self) -> bool:
        def body(conn: Connection) -> bool:
            stmt = sa.select(live_state.c.degraded).where(live_state.c.id == 1)
            return bool(conn.execute(stmt).scalar())

        return self._run("state read", body, fence=False)

    def record_deletion(self, kind: str, target: str) -> None:
        """Keep a channel/user deletion for :meth:`drain_into` to replay (fenced: after
        a drain, the caller's deletion must go to the primary instead)."""

        def body(conn: Connection) -> None:
            conn.execute(sa.insert(live_deletions).values(kind=kind, target=target))

        self._run("deletion log", body)

    def drain_into(
        self,
        primary: LiveCache,
        replay: Callable[[LiveCache, Sequence[Deletion]], None],
    ) -> int:
        """Leave degraded mode: replay the deletions on ``primary`` (``replay`` evicts
        what each deleted there), move every value, tombstone and index change to it,
        empty the tables and clear the flag — all under the flag's row lock, so no
        degraded write runs meanwhile. Raises :class:`CacheError` (and changes nothing
        here) if either side fails. Returns how many values and tombstones moved; 0 when
        another host drained first."""

        def body(conn: Connection) -> int:
            stmt = sa.select(live_state.c.degraded).where(live_state.c.id == 1)
            if self._pg:
                stmt = stmt.with_for_update()
            if not conn.execute(stmt).scalar():
                return 0
            d = live_deletions.c
            deletions = [
                (k, t) for k, t in conn.execute(sa.select(d.kind, d.target).order_by(d.seq))
            ]
            if deletions:
                replay(primary, deletions)
            moved = self._move_values(conn, primary)
            self._move_ranks(conn, primary)
            for table in (live_values, live_ranks, live_deletions):
                conn.execute(sa.delete(table))
            conn.execute(sa.update(live_state).values(degraded=False, since=None))
            return moved

        return self._run("drain", body, fence=False)

    def _move_values(self, conn: Connection, primary: LiveCache) -> int:
        v = live_values.c
        now = time.time()
        moved = 0
        last = ""
        while True:
            rows = conn.execute(
                sa.select(v.slot, v.key, v.value, v.expires_at, v.deleted)
                .where(v.slot > last)
                .order_by(v.slot)
                .limit(_CHUNK)
            ).all()
            if not rows:
                return moved
            last = rows[-1].slot
            gone = [r.key for r in rows if r.deleted]
            writes = {
                r.key: Write(
                    json.loads(r.value), None if r.expires_at is None else r.expires_at - now
                )
                for r in rows
                if r.value is not None and (r.expires_at is None or r.expires_at > now)
            }
            if gone:
                primary.delete_many(gone)
            for key, write in writes.items():
                # One key per write: a cluster cannot write keys of two slots at once.
                primary.atomic([key], _overwrite(key, write))
            moved += len(gone) + len(writes)

    def _move_ranks(self, conn: Connection, primary: LiveCache) -> None:
        r = live_ranks.c
        by_index: dict[str, dict[str, float | None]] = {}
        for index, member, score in conn.execute(
            sa.select(r.index_name, r.member, r.score).order_by(r.idx, r.member_slot)
        ):
            by_index.setdefault(index, {})[member] = score
        for index, members in by_index.items():
            primary.rank_many(index, members)


def _overwrite(key: str, write: Write) -> AtomicFn:
    def fn(_current: Mapping[str, CacheValue | None]) -> dict[str, Write]:
        return {key: write}

    return fn


def _lost_race(exc: sa.exc.OperationalError) -> bool:
    # psycopg: deadlock_detected (40P01) and serialization_failure (40001).
    code = getattr(exc.orig, "sqlstate", None)
    return code in ("40P01", "40001")

"""A durable local queue of SQL writes and deletes that could not land yet.

It lives in its own SQLite file beside the live cache (stdlib ``sqlite3``), so it
keeps working while the main database is down. Items are replayed in order; each
carries an ``op_id``; a delete records it in the same transaction, so its replay is
exactly-once even when two processes flush together, and a row write carries the
entry's revision, which makes its replay a no-op once it has landed.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeAlias

from stm_memory.errors import StorageError

__all__ = ["DELETE_KINDS", "Outbox", "OutboxItem", "OutboxKind"]

OutboxKind: TypeAlias = Literal[
    "put_rows",
    "delete_channel",
    "delete_user",
    "forget_user",
    "clear_summary",
]
DELETE_KINDS: frozenset[str] = frozenset(
    {"delete_channel", "delete_user", "forget_user", "clear_summary"}
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    op_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    row_key TEXT,
    channel_id TEXT,
    user_id TEXT,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS ix_outbox_channel ON outbox(channel_id);
CREATE INDEX IF NOT EXISTS ix_outbox_user ON outbox(user_id);
CREATE INDEX IF NOT EXISTS ix_outbox_key ON outbox(row_key);
"""


@dataclass(frozen=True, slots=True)
class OutboxItem:
    id: int
    op_id: str
    kind: OutboxKind
    row_key: str | None
    channel_id: str | None
    user_id: str | None
    payload: dict[str, Any]
    created_at: datetime
    attempts: int


def _redacted(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with no distilled content left in its entries."""

    def strip(entry: dict[str, Any]) -> dict[str, Any]:
        return entry | {"summary": None, "categories": {}, "kept": []}

    out = dict(payload)
    if "entries" in out:
        out["entries"] = [strip(e) for e in out["entries"]]
    return out


class Outbox:
    """FIFO of pending store operations in ``path`` (``":memory:"`` for tests)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode=WAL")
            # FULL: an outbox item exists because the database was down; losing it
            # to a power cut would lose the user's memory.
            self._conn.execute("PRAGMA synchronous=FULL")
            # Queued writes carry raw turns: a purged or redacted one is overwritten
            # with zeros, not left in free pages (erasure reaches the bytes).
            self._conn.execute("PRAGMA secure_delete=ON")
            self._conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot open the outbox at {self.path}: {exc}") from exc
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def enqueue(
        self,
        kind: OutboxKind,
        payload: dict[str, Any],
        *,
        at: datetime,
        row_key: str | None = None,
        channel_id: str | None = None,
        user_id: str | None = None,
    ) -> OutboxItem:
        op_id = uuid.uuid4().hex
        with self._tx() as conn:
            cur = conn.execute(
                "INSERT INTO outbox (op_id, kind, row_key, channel_id, user_id, payload,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (op_id, kind, row_key, channel_id, user_id, json.dumps(payload), at.isoformat()),
            )
            item_id = int(cur.lastrowid or 0)
        return OutboxItem(item_id, op_id, kind, row_key, channel_id, user_id, payload, at, 0)

    def pending(self, limit: int = 1000) -> list[OutboxItem]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, op_id, kind, row_key, channel_id, user_id, payload, created_at,"
                " attempts FROM outbox ORDER BY id LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            OutboxItem(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                json.loads(r[6]),
                datetime.fromisoformat(r[7]),
                r[8],
            )
            for r in rows
        ]

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM outbox").fetchone()[0])

    def has_pending(self) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM outbox LIMIT 1").fetchone() is not None

    def remove(self, item_id: int) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM outbox WHERE id = ?", (item_id,))

    def mark_attempt(self, item_id: int) -> None:
        with self._tx() as conn:
            conn.execute("UPDATE outbox SET attempts = attempts + 1 WHERE id = ?", (item_id,))

    def _purge(self, column: str, value: str, keep: frozenset[str] = DELETE_KINDS) -> int:
        placeholders = ",".join("?" for _ in keep)
        with self._tx() as conn:
            cur = conn.execute(
                f"DELETE FROM outbox WHERE {column} = ? AND kind NOT IN ({placeholders})",
                (value, *sorted(keep)),
            )
            return int(cur.rowcount)

    def purge_channel(self, channel_id: str) -> int:
        """Drop queued writes of a channel, so a replay cannot resurrect deleted data."""
        return self._purge("channel_id", channel_id)

    def purge_user(self, user_id: str) -> int:
        """Drop queued writes of a user's user-scope rows."""
        return self._purge("user_id", user_id)

    def purge_keys(self, keys: Sequence[str]) -> int:
        """Strip the summary and categories from queued writes of these rows (a summary
        clear). The items themselves stay: they also carry the counters, which must
        still land, and the clear queued after them replays last, so nothing they
        hold can outlive it. Returns how many items were redacted."""
        if not keys:
            return 0
        placeholders = ",".join("?" for _ in keys)
        kinds = ",".join("?" for _ in DELETE_KINDS)
        with self._tx() as conn:
            rows = conn.execute(
                f"SELECT id, payload FROM outbox WHERE row_key IN ({placeholders})"
                f" AND kind NOT IN ({kinds})",
                (*keys, *sorted(DELETE_KINDS)),
            ).fetchall()
            for item_id, raw in rows:
                payload = _redacted(json.loads(raw))
                conn.execute(
                    "UPDATE outbox SET payload = ? WHERE id = ?", (json.dumps(payload), item_id)
                )
        return len(rows)

    def latest_snapshot(self, row_key: str) -> tuple[int, dict[str, Any]] | None:
        """The newest queued entry snapshot of a row (row writes carry the whole
        entry) and its item id, so hydration can show what SQL will hold once the
        queue lands."""
        with self._lock:
            row = self._conn.execute(
                "SELECT id, payload FROM outbox WHERE row_key = ? AND kind = 'put_rows'"
                " ORDER BY id DESC LIMIT 1",
                (row_key,),
            ).fetchone()
        if row is None:
            return None
        entries = json.loads(row[1]).get("entries") or []
        return (int(row[0]), dict(entries[0])) if entries else None

    def blocking_delete(
        self, *, row_key: str, channel_id: str, user_id: str | None, after: int = 0
    ) -> tuple[OutboxKind, datetime | None] | None:
        """The kind of a queued delete that covers this row, if any (hydration checks
        this so data whose deletion has not reached SQL yet is never loaded back).
        Only deletes queued after item ``after`` count: a write queued behind a
        delete is newer than it. Returns the kind and, for a summary clear, its time."""
        with self._lock:
            row = self._conn.execute(
                "SELECT kind, json_extract(payload, '$.at') FROM outbox WHERE id > ? AND ("
                "(kind = 'delete_channel' AND channel_id = ?)"
                " OR (kind IN ('delete_user', 'forget_user') AND user_id = ?)"
                # One clear_summary item covers every key of its scope (the payload's
                # "keys"), not only the row_key it was filed under.
                " OR (kind = 'clear_summary' AND (row_key = ? OR EXISTS ("
                "SELECT 1 FROM json_each(outbox.payload, '$.keys') WHERE value = ?))))"
                # A pending row delete outranks a pending summary clear of the row.
                " ORDER BY kind = 'clear_summary', id DESC LIMIT 1",
                (after, channel_id, user_id, row_key, row_key),
            ).fetchone()
        if row is None:
            return None
        return row[0], datetime.fromisoformat(row[1]) if row[1] else None

    def pending_forgets(self) -> list[tuple[int, str]]:
        """``(item id, user id)`` of every erasure still queued: hydration clears what
        their words reached before SQL does."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT id, user_id FROM outbox WHERE kind = 'forget_user' ORDER BY id"
            ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def rewrite_rows(self, fn: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Apply ``fn`` to the entry snapshot of every queued row write (``None``: leave
        it as it is), in one transaction. Returns how many items changed."""
        changed = 0
        with self._tx() as conn:
            rows = conn.execute("SELECT id, payload FROM outbox WHERE kind = 'put_rows'").fetchall()
            for item_id, raw in rows:
                payload = json.loads(raw)
                entries = payload.get("entries") or []
                new = [fn(e) for e in entries]
                if all(n is None for n in new):
                    continue
                payload["entries"] = [
                    n if n is not None else e for n, e in zip(new, entries, strict=True)
                ]
                conn.execute(
                    "UPDATE outbox SET payload = ? WHERE id = ?", (json.dumps(payload), item_id)
                )
                changed += 1
        return changed

    def compact(self) -> None:
        """Checkpoint and truncate the write-ahead log (see ``secure_delete`` above)."""
        if self.path == ":memory:":
            return
        with self._lock:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    @property
    def closed(self) -> bool:
        """Closed: its file is released (another process may take it, or remove it)."""
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            self._closed = True

"""Direct SQL on a diskcache directory's ``Cache`` table: DiskLiveCache's reads, writes
and key scans.

Why not ``diskcache.Cache.get``/``set``: an update reads two keys and writes them back in
one transaction. Through the public API that is two SELECTs to read, then per key a
second SELECT of the same row (``set`` looks the key up again to find its rowid and old
file) and an UPDATE, with a context manager, a property lookup and a key conversion
around every statement. Here it is one SELECT for all the keys and one UPDATE per key by
the rowid that SELECT returned, inside the same ``BEGIN IMMEDIATE`` transaction. Batch
adds (hydration) and deletes work the same way, and a key scan is one range query on
the key index instead of a lookup per key.

What this relies on, and checks when it opens: diskcache's file format (the ``Cache``
table and its columns, key ``raw = 1`` for ``str`` keys, ``DBNAME``) and its public
``Disk.store``/``Disk.fetch``/``Disk.remove`` for values. The values written here are
exactly what ``Cache.set`` would write (same serialisation, same columns, the table's
own triggers keep diskcache's count and size), so ``diskcache.Cache.get`` reads them and
``Cache.expire``/``iterkeys``/``add``/``delete`` keep working on the same directory.
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final, TypeAlias, TypeVar

import diskcache
from diskcache.core import DBNAME, MODE_PICKLE

from stm_memory._sqlite.connections import ThreadConnections

__all__ = ["CacheRows", "Row", "SchemaMismatch", "Transaction", "live_at"]

T = TypeVar("T")

# The columns this module reads or writes; any diskcache 5.x database has them.
_COLUMNS = frozenset(
    {
        "key",
        "raw",
        "store_time",
        "expire_time",
        "access_time",
        "access_count",
        "tag",
        "size",
        "mode",
        "filename",
        "value",
    }
)

_SELECT = (
    "SELECT key, rowid, expire_time, mode, filename, value FROM Cache WHERE raw = 1 AND key IN"
)
_SELECT_ONE = f"{_SELECT} (?)"
_UPDATE = (
    "UPDATE Cache SET store_time = ?, expire_time = ?, access_time = ?, access_count = 0,"
    " tag = NULL, size = ?, mode = ?, filename = ?, value = ? WHERE rowid = ?"
)
_INSERT = (
    "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count,"
    " tag, size, mode, filename, value) VALUES (?, 1, ?, ?, ?, 0, NULL, ?, ?, ?, ?)"
)
_DELETE = "DELETE FROM Cache WHERE rowid = ?"
_KEYS = (
    "SELECT key FROM Cache WHERE raw = 1 AND key >= ? AND (expire_time IS NULL OR expire_time > ?)"
)
_CHUNK = 500

# Ordered indexes (LiveCache.ranked) in a table of our own beside diskcache's: the
# same file and transactions as the values, and an index that serves "newest first"
# as a range read. diskcache ignores tables it does not know.
_RANK_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS stm_rank (idx TEXT NOT NULL, member TEXT NOT NULL,"
    " score REAL NOT NULL, PRIMARY KEY (idx, member)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS stm_rank_order ON stm_rank (idx, score DESC, member)",
)
_RANK_SET = (
    "INSERT INTO stm_rank (idx, member, score) VALUES (?, ?, ?)"
    " ON CONFLICT (idx, member) DO UPDATE SET score = excluded.score"
)
_RANK_RAISE = (
    "INSERT INTO stm_rank (idx, member, score) VALUES (?, ?, ?)"
    " ON CONFLICT (idx, member) DO UPDATE SET score = excluded.score"
    " WHERE excluded.score > stm_rank.score"
)
_RANK_DELETE = "DELETE FROM stm_rank WHERE idx = ? AND member = ?"
_RANKED = (
    "SELECT member, score FROM stm_rank WHERE idx = ?"
    " ORDER BY score DESC, member ASC LIMIT ? OFFSET ?"
)


class SchemaMismatch(Exception):
    """The directory's ``Cache`` table is not the diskcache 5 format this module writes."""


# One stored key as _SELECT returns it: (key, rowid, expire_time, mode, filename, value).
# A plain tuple, not a class: two are built per update, on the hot path.
Row: TypeAlias = tuple[str, int, float | None, int, str | None, Any]
_ROWID: Final = 1
_EXPIRE: Final = 2
_MODE: Final = 3
_FILENAME: Final = 4
_VALUE: Final = 5


def live_at(row: Row, now: float) -> bool:
    """Whether the row's native TTL has not run out (as ``Cache.get`` decides)."""
    expire_time = row[_EXPIRE]
    return expire_time is None or expire_time > now


class Transaction:
    """Statements inside one ``BEGIN IMMEDIATE`` transaction (see :meth:`CacheRows.write`)."""

    def __init__(self, rows: CacheRows, con: sqlite3.Connection, now: float) -> None:
        self._rows = rows
        self._con = con
        self.now = now
        # Value files: removed after a commit (replaced or deleted values), or after a
        # rollback (values this transaction wrote), as Cache.set does.
        self.replaced_files: list[str] = []
        self.written_files: list[str] = []

    def select(self, keys: Sequence[str]) -> dict[str, Row]:
        return self._rows.select_on(self._con, keys)

    def put(self, key: str, row: Row | None, value: Any, ttl: float | None) -> bytes | None:
        """Store ``value`` under ``key``; ``row`` is the key's current row (from
        :meth:`select` in this transaction), or None when it has none. Returns the
        pickled form kept in the row (:meth:`CacheRows.pickled`), None for another."""
        now = self.now
        size, mode, filename, db_value = self._rows.disk.store(value, False, key=key)
        if filename is not None:
            self.written_files.append(filename)
        expire_time = None if ttl is None else now + ttl
        if row is None:
            self._con.execute(_INSERT, (key, now, expire_time, now, size, mode, filename, db_value))
        else:
            if row[_FILENAME] is not None:
                self.replaced_files.append(row[_FILENAME])
            self._con.execute(
                _UPDATE, (now, expire_time, now, size, mode, filename, db_value, row[_ROWID])
            )
        if mode != MODE_PICKLE or filename is not None or not self._rows.plain_disk:
            return None
        # diskcache hands the pickle to SQLite as a memoryview of its bytes.
        stored = db_value.obj if isinstance(db_value, memoryview) else db_value
        return stored if type(stored) is bytes else None

    def delete(self, row: Row) -> None:
        self._con.execute(_DELETE, (row[_ROWID],))
        if row[_FILENAME] is not None:
            self.replaced_files.append(row[_FILENAME])

    def rank(self, index: str, member: str, score: float | None, *, higher_only: bool) -> None:
        """Set (``higher_only``: raise) or, with ``score=None``, remove a member."""
        if score is None:
            self._con.execute(_RANK_DELETE, (index, member))
        else:
            self._con.execute(_RANK_RAISE if higher_only else _RANK_SET, (index, member, score))

    def set_ranks(self, ranks: Sequence[tuple[str, str, float]]) -> None:
        """Set the scores of ``(index, member, score)`` rows: one statement for all (an
        update moves two entries)."""
        if len(ranks) == 1:
            self._con.execute(_RANK_SET, ranks[0])
        elif ranks:
            self._con.executemany(_RANK_SET, ranks)


class CacheRows:
    """Per-thread connections to the ``Cache`` table of one diskcache directory."""

    def __init__(self, cache: diskcache.Cache) -> None:
        self.disk = cache.disk
        # diskcache's own Disk, not a subclass that stores values its own way.
        self.plain_disk = type(cache.disk) is diskcache.Disk
        self._pragmas: list[tuple[str, int | str]] | None = None
        self._connections = ThreadConnections(
            os.path.join(cache.directory, DBNAME), timeout=cache.timeout, setup=self._setup
        )
        self._check_schema()

    def _check_schema(self) -> None:
        con = self._connection()
        columns = {row[1] for row in con.execute("PRAGMA table_info(Cache)")}
        if missing := _COLUMNS - columns:
            raise SchemaMismatch(
                f"the Cache table of {self._connections.path} lacks columns {sorted(missing)}"
                f" (diskcache {diskcache.__version__}; stm-memory writes the diskcache 5 format)"
            )
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'stm_rank_order'").fetchone():
            return
        for statement in _RANK_SCHEMA:
            con.execute(statement)

    def _connection(self) -> sqlite3.Connection:
        return self._connections.get()

    def _setup(self, con: sqlite3.Connection) -> None:
        if self._pragmas is None:
            # The per-connection pragmas diskcache applies to its own connections
            # (synchronous, mmap and page cache size), from its Settings table, as it
            # applies them (a number or a keyword such as NORMAL); journal_mode is the
            # file's own and stays as diskcache set it.
            self._pragmas = [
                (name.removeprefix("sqlite_"), value)
                for name, value in con.execute("SELECT key, value FROM Settings")
                if name.startswith("sqlite_")
                and name != "sqlite_journal_mode"
                and name.removeprefix("sqlite_").isidentifier()
                and (type(value) is int or (isinstance(value, str) and value.isalnum()))
            ]
        for name, value in self._pragmas:
            con.execute(f"PRAGMA {name} = {value}")

    # -- reads ------------------------------------------------------------------------

    def select_on(self, con: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Row]:
        if len(keys) == 1:
            # One key (a get, an index read) is most reads: a constant statement, no
            # placeholder list or chunk loop to build.
            return {row[0]: row for row in con.execute(_SELECT_ONE, (keys[0],))}
        found: dict[str, Row] = {}
        # In chunks: SQLite caps the number of parameters of one statement.
        for start in range(0, len(keys), _CHUNK):
            chunk = tuple(keys[start : start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            found.update((row[0], row) for row in con.execute(f"{_SELECT} ({marks})", chunk))
        return found

    def select(self, keys: Sequence[str]) -> dict[str, Row]:
        """The rows of ``keys`` (natively expired ones included), outside a transaction:
        up to 500 keys per statement, each statement a consistent snapshot."""
        return self.select_on(self._connection(), keys)

    def keys(self, prefix: str, now: float) -> list[str]:
        """The ``str`` keys starting with ``prefix`` whose native TTL has not run out:
        one range scan of the key index, not a lookup per key."""
        sql = _KEYS
        params: list[Any] = [prefix, now]
        last = ord(prefix[-1]) if prefix else 0x10FFFF
        if last < 0x10FFFF:  # keys with the prefix sort before the prefix moved one on
            sql += " AND key < ?"
            params.append(prefix[:-1] + chr(last + 1))
        found = self._connection().execute(sql, params)
        return [key for (key,) in found if type(key) is str and key.startswith(prefix)]

    def ranked(self, index: str, offset: int, count: int) -> list[tuple[str, float]]:
        found = self._connection().execute(_RANKED, (index, count, offset))
        return [(member, float(score)) for member, score in found]

    def pickled(self, row: Row) -> bytes | None:
        """The row's value as pickled bytes when the row holds them itself (what
        diskcache does for a value under its file size), else None."""
        value = row[_VALUE]
        if row[_MODE] == MODE_PICKLE and type(value) is bytes and self.plain_disk:
            return value
        return None

    def fetch(self, row: Row) -> Any:
        """The stored value (``OSError`` when its file is gone; unpickling errors as raised)."""
        value = row[_VALUE]
        if row[_MODE] == MODE_PICKLE and value is not None and self.plain_disk:
            # What diskcache's own Disk.fetch does for a value kept in the row, without
            # the file object it wraps the bytes in (every entry read is one of these).
            return pickle.loads(value)
        return self.disk.fetch(row[_MODE], row[_FILENAME], value, False)

    # -- writes -----------------------------------------------------------------------

    def write(self, body: Callable[[Transaction], T]) -> T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction, committed when it returns
        and rolled back when it raises. It serialises writers across threads and
        processes like ``Cache.transact``, waiting for a busy database as its
        ``retry=True`` does. (A plain function, not a context manager: this is the
        per-update path.)"""
        con = self._connection()
        while True:
            try:
                con.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
        tx = Transaction(self, con, time.time())
        try:
            result = body(tx)
            con.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            for name in tx.written_files:
                self.disk.remove(name)
            raise
        for name in tx.replaced_files:
            self.disk.remove(name)
        return result

    def checkpoint(self) -> None:
        self._connections.checkpoint()

    def close(self) -> None:
        self._connections.close()

"""The SQLite write hot path without SQLAlchemy's per-call machinery.

Why: an update is two upserts in one transaction, and through SQLAlchemy's
Connection (pool checkout, events, transaction objects, result wrapping) it cost
several times the SQL itself. Here the *same* SQLAlchemy statements are compiled
once to SQLite text, and run on a per-thread ``sqlite3`` connection inside
``BEGIN IMMEDIATE`` … ``COMMIT``. The SQL stays defined in one place (``sql.py``);
only the executor differs, and the store contract suite runs through it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.types import TypeEngine

from stm_memory._sqlite.connections import ThreadConnections
from stm_memory.errors import DatabaseError, RejectedWriteError

__all__ = ["CompiledSql", "RawSqlite"]

_DIALECT = sqlite.dialect()


def _identity(value: Any) -> Any:
    return value


@lru_cache(maxsize=256)
def _datetime_text(value: datetime | None) -> str | None:
    # SQLAlchemy's SQLite DATETIME storage format (naive UTC), which it parses back.
    # Memoised: one write stamps the same instant up to four times per row (created,
    # updated, last_updated, refreshed_at). isoformat, not strftime: SQLAlchemy's exact
    # text (strftime does not zero-pad years before 1000), and the cheaper call.
    return None if value is None else value.isoformat(" ", "microseconds")


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    return "{}" if not value and isinstance(value, dict) else json.dumps(value)


def _converter(type_: TypeEngine[Any]) -> Callable[[Any], Any]:
    """What SQLAlchemy's SQLite bind processor for ``type_`` would send."""
    if isinstance(type_, sa.DateTime):
        return _datetime_text
    if isinstance(type_, sa.JSON):
        return _json_text
    return _identity


def _picker(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Sequence[Any]]:
    if len(names) == 1:  # itemgetter of one name returns the bare value
        name = names[0]
        return lambda values: (values[name],)
    if not names:
        return lambda values: ()
    return itemgetter(*names)


@dataclass(frozen=True, slots=True)
class CompiledSql:
    """A statement compiled to SQLite text, with its positional parameters' order,
    constant values and per-parameter conversions (decided once, not per row)."""

    text: str
    names: tuple[str, ...]
    constants: Mapping[str, Any]
    # (position, conversion) for the parameters whose Python value is not what SQLite
    # takes (datetimes, JSON): the rest bind as they are.
    conversions: tuple[tuple[int, Callable[[Any], Any]], ...]
    # The parameters' values in order from a mapping holding them all (KeyError if not).
    pick: Callable[[Mapping[str, Any]], Sequence[Any]]

    @classmethod
    def of(cls, stmt: ClauseElement) -> CompiledSql:
        compiled = stmt.compile(dialect=_DIALECT)
        assert isinstance(compiled, SQLCompiler)
        names = tuple(compiled.positiontup or ())
        binds = compiled.binds
        constants = {n: binds[n].value for n in names if n in binds}
        conversions = tuple(
            (i, convert)
            for i, n in enumerate(names)
            if n in binds and (convert := _converter(binds[n].type)) is not _identity
        )
        return cls(str(compiled), names, constants, conversions, _picker(names))

    def params(self, values: Mapping[str, Any]) -> list[Any]:
        try:
            # The row statements get a value for every parameter: one C-level lookup.
            out = list(self.pick(values))
        except KeyError:
            constants = self.constants
            out = [values[n] if n in values else constants.get(n) for n in self.names]
        for i, convert in self.conversions:
            out[i] = convert(out[i])
        return out


class RawSqlite:
    """Per-thread ``sqlite3`` connections to one database file, for write transactions."""

    def __init__(self, path: str, *, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._connections = ThreadConnections(path, timeout=timeout, setup=self._setup)

    def _setup(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        conn.execute("PRAGMA secure_delete=ON")

    def _connection(self) -> sqlite3.Connection:
        return self._connections.get()

    def write(self, text: str, rows: Iterable[Sequence[Any]]) -> int:
        """Run ``text`` once per parameter row inside ``BEGIN IMMEDIATE`` … ``COMMIT``
        (the write lock up front, so writers queue on the busy timeout); rows changed.
        Errors become the store's exception types. A plain function, not a context
        manager: this is the per-update path."""
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc
        try:
            changed = 0
            for params in rows:
                changed += conn.execute(text, params).rowcount
            conn.execute("COMMIT")
            return changed
        except BaseException as exc:
            # The transaction may already be gone (e.g. after SQLITE_FULL).
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.IntegrityError):
                raise RejectedWriteError(f"IntegrityError: {exc}") from exc
            if isinstance(exc, sqlite3.Error):
                raise DatabaseError(f"{type(exc).__name__}: {exc}") from exc
            raise

    def checkpoint(self) -> None:
        self._connections.checkpoint()

    def close(self) -> None:
        self._connections.close()

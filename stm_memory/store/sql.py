"""SqlStore: SQLAlchemy Core on SQLite (embedded default) and PostgreSQL (psycopg 3)."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.pool import StaticPool

from stm_memory._sqlite.raw import CompiledSql, RawSqlite
from stm_memory.bulk import DELETE_ROWS, ERASE_ROWS, Tally, listening
from stm_memory.errors import ConfigurationError, DatabaseError, RejectedWriteError
from stm_memory.model import (
    Category,
    MemoryEntry,
    ScopeKind,
    ServerSettings,
    UserSettings,
    key_for,
    next_rev,
)
from stm_memory.model.dialogue import StoredMessage
from stm_memory.model.entry import CACHE_ONLY_FIELDS, check_fields
from stm_memory.model.receipt import DayTotals, receipt_from_dict, receipt_to_dict
from stm_memory.store.base import MemoryStore
from stm_memory.store.keys import db_key, is_digest_key
from stm_memory.store.schema import (
    applied_ops,
    categories,
    channel_resets,
    memories,
    migrate,
    model_notes,
    secrets,
    server_settings,
    user_settings,
)

__all__ = ["BATCH_SIZE", "SqlStore", "create_sql_engine"]

log = logging.getLogger("stm_memory.store")
T = TypeVar("T")


#: Rows a bulk delete, erasure or janitor sweep changes (or scans) per transaction.
#: Large enough that per-transaction costs (a commit, the op-id claim) vanish next to
#: the rows, small enough that one batch holds SQLite's write lock for tens of
#: milliseconds (turns queue behind it rather than time out) and its keys stay well
#: under the bound-parameter limits (SQLite 32,766; PostgreSQL 65,535).
BATCH_SIZE = 5000


def _like_pattern(text: str) -> str:
    """``%text%`` for LIKE with ``!`` as the escape character (JSON text is full of
    backslashes, PostgreSQL's default escape)."""
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return f"%{escaped}%"


def _database_error(exc: sa.exc.SQLAlchemyError) -> DatabaseError:
    message = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, sa.exc.IntegrityError | sa.exc.DataError):
        return RejectedWriteError(message)
    return DatabaseError(message)


def _utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything we write is UTC.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _naive_utc(value: datetime) -> datetime:
    if value.tzinfo is UTC:  # the common case: skip astimezone's copy (hot path)
        return value.replace(tzinfo=None)
    return _utc(value).replace(tzinfo=None)


def create_sql_engine(url: str, *, timeout: float = 5.0, echo: bool = False) -> sa.Engine:
    """An engine tuned per dialect. ``timeout`` bounds lock waits / connection attempts."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError as exc:
        raise DatabaseError(f"invalid database URL {url!r}: {exc}; {_URL_FORMS}") from exc
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise DatabaseError(f"database_url: unknown database {backend!r} in {url!r}; {_URL_FORMS}")
    if backend == "sqlite":
        memory_db = parsed.database in (None, "", ":memory:")
        engine = sa.create_engine(
            parsed,
            echo=echo,
            # An in-memory database exists per connection: share one across threads.
            poolclass=StaticPool if memory_db else None,
            connect_args={"check_same_thread": False, "timeout": timeout},
        )
        _tune_sqlite(engine, timeout=timeout, wal=not memory_db)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        try:
            return sa.create_engine(
                parsed,
                echo=echo,
                pool_pre_ping=True,
                connect_args={"connect_timeout": max(1, int(timeout))},
            )
        except ImportError as exc:
            raise DatabaseError(
                f"database_url {parsed.drivername!r} needs its driver ({exc.name or exc}): "
                'pip install "stm-memory[postgres]"'
            ) from exc
    raise AssertionError(backend)  # refused above


_URL_FORMS = (
    "the forms are sqlite:///path/to/stm.db (embedded), sqlite:///:memory: and "
    "postgresql+psycopg://user:password@host/dbname"
)


def _tune_sqlite(engine: sa.Engine, *, timeout: float, wal: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's implicit
        # transactions would start DEFERRED and fail upgrades with SQLITE_BUSY).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        if wal:
            # WAL lets readers run beside the writer; NORMAL is durable across
            # process crashes and skips an fsync per commit.
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        # Deleted rows are overwritten with zeros: erasure reaches the file's bytes.
        cur.execute("PRAGMA secure_delete=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Reads run in autocommit (WAL readers need no lock). Writes take the write
        # lock up front with IMMEDIATE, so two writers queue on the busy timeout
        # instead of one failing at once when it upgrades a read lock.
        if not conn.get_execution_options().get("stm_read"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")


# -- entries as rows --------------------------------------------------------------------
#
# Every MemoryEntry field is declared once in ROW below, with its column and how it is
# kept there, or in CACHE_ONLY_FIELDS (model/entry.py). The row writer and reader are
# planned from ROW at import, and the plan is checked against the dataclass and the
# table: a field added to MemoryEntry fails loudly here, naming it, until it is given
# a column (or declared cache-only), instead of silently never reaching its row.


def _kind(row: Mapping[Any, Any]) -> ScopeKind:
    return "server" if row["scope_kind"] == "server" else "user"


def _cache_key(row: Mapping[Any, Any]) -> str:
    """The entry's key (a digest key is rebuilt from the ids the row holds)."""
    key: str = row["key"]
    if not is_digest_key(key):
        return key
    kind = _kind(row)
    owner = row["server_id"] if kind == "server" else row["user_id"]
    return key_for(kind, owner, row["channel_id"], row["persona_id"])


def _categories(row: Mapping[Any, Any]) -> dict[str, str]:
    return dict(row["categories"] or {})


def _kept_rows(kept: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    return [m.to_dict() for m in kept]


def _kept(row: Mapping[Any, Any]) -> tuple[StoredMessage, ...]:
    return tuple(StoredMessage.from_dict(m) for m in row["kept"] or ())


def _receipt(row: Mapping[Any, Any]) -> dict[str, DayTotals]:
    return receipt_from_dict(row["receipt"])


def _provenance(row: Mapping[Any, Any]) -> frozenset[str]:
    return frozenset(row["provenance"] or ())


def _forgotten(row: Mapping[Any, Any]) -> frozenset[str]:
    return frozenset(row["forgotten"] or ())


def _no_writer(row: Mapping[Any, Any]) -> bool:
    return bool(row["no_writer"])


def _last_updated(row: Mapping[Any, Any]) -> datetime:
    # Rows written before schema v2 have no last_updated of their own.
    return _utc(row["last_updated"] or row["updated_at"])


def _refreshed_at(row: Mapping[Any, Any]) -> datetime | None:
    return _utc(row["refreshed_at"]) if row["refreshed_at"] else None


def _rev(row: Mapping[Any, Any]) -> int:
    return int(row["rev"] or 0)


class Column(NamedTuple):
    """How one MemoryEntry field is kept in its column of the rows table."""

    #: The column (None: the one of the field's name).
    name: str | None = None
    #: The column's value from the field's (None: the value as it is).
    write: Callable[[Any], Any] | None = None
    #: The field's value from the row read (None: the column's value as it is).
    read: Callable[[Mapping[Any, Any]], Any] | None = None
    #: A timestamp: written through the dialect's conversion (SqlStore._stamp), not
    #: ``write``.
    stamped: bool = False


_AS_IS = Column()

#: How each MemoryEntry field but CACHE_ONLY_FIELDS is kept in its SQL row.
ROW: dict[str, Column] = {
    "key": Column(write=db_key, read=_cache_key),
    "kind": Column("scope_kind", read=_kind),
    "channel_id": _AS_IS,
    "server_id": _AS_IS,
    "user_id": _AS_IS,
    "persona_id": _AS_IS,
    "parent_channel_id": _AS_IS,
    "channel_name": _AS_IS,
    "server_name": _AS_IS,
    "summary": _AS_IS,
    "categories": Column(write=dict, read=_categories),
    "kept": Column(write=_kept_rows, read=_kept),
    "turns_since_refresh": _AS_IS,
    "last_refreshed_turn": _AS_IS,
    "turns_since_reset": _AS_IS,
    # Sorted: a stable JSON text, which erasure searches (_erase_provenance).
    "provenance": Column(write=sorted, read=_provenance),
    "last_updated": Column(stamped=True, read=_last_updated),
    "refreshed_at": Column(stamped=True, read=_refreshed_at),
    "rev": Column(read=_rev),
    "receipt": Column(write=receipt_to_dict, read=_receipt),
    "forgotten": Column(write=sorted, read=_forgotten),
    "no_writer": Column(read=_no_writer),
}

#: The row's own stamps, of no entry field: created by its first write, last written.
_SQL_ONLY = ("created_at", "updated_at")
#: The row's identity (with created_at): set by its first write, never rewritten.
_IDENTITY = ("key", "scope_kind", "server_id", "user_id", "channel_id", "persona_id", "created_at")


def _check_row_plan(cls: type[MemoryEntry] = MemoryEntry) -> None:
    """Raise TypeError unless ROW and CACHE_ONLY_FIELDS declare each field of ``cls``
    once, and ROW's columns with _SQL_ONLY are the rows table's columns, each written
    once (a column nothing writes would be written NULL)."""
    check_fields(cls, [*ROW, *CACHE_ONLY_FIELDS], "store/sql.py ROW or CACHE_ONLY_FIELDS")
    columns = [col.name or name for name, col in ROW.items()] + list(_SQL_ONLY)
    table = set(memories.c.keys())
    problems = [f"no column {c!r} in the rows table" for c in {*columns, *_IDENTITY} - table]
    problems += [f"nothing writes column {c!r}" for c in table - set(columns)]
    problems += [f"column {c!r} is written {n} times" for c, n in Counter(columns).items() if n > 1]
    if problems:
        raise TypeError(f"store/sql.py ROW: {'; '.join(sorted(problems))}")


_check_row_plan()
# The plan, once: the fields in their dataclass order, by how they are written and read.
_FIELDS = [f.name for f in fields(MemoryEntry) if f.name in ROW]
_COLUMN_OF = {n: ROW[n].name or n for n in _FIELDS}
_COLUMNS = (*_COLUMN_OF.values(), *_SQL_ONLY)
_STAMPED = tuple((n, _COLUMN_OF[n]) for n in _FIELDS if ROW[n].stamped)
_WRITES = tuple((n, _COLUMN_OF[n], w) for n in _FIELDS if (w := ROW[n].write) is not None)
_WRITTEN_AS_IS = [n for n in _FIELDS if ROW[n].write is None and not ROW[n].stamped]
_WRITTEN_AS_IS_COLUMNS = tuple(_COLUMN_OF[n] for n in _WRITTEN_AS_IS)
_written_as_is = attrgetter(*_WRITTEN_AS_IS)
_READS = tuple((n, read) for n in _FIELDS if (read := ROW[n].read) is not None)
_READ_AS_IS = tuple(n for n in _FIELDS if ROW[n].read is None)
_read_as_is = itemgetter(*(_COLUMN_OF[n] for n in _READ_AS_IS))


@dataclass(frozen=True, slots=True)
class _Batch:
    """One transaction's share of a bulk operation."""

    changed: int  # rows deleted or cleared: what the operation returns
    scanned: int  # rows gone through: its progress
    last: bool  # nothing is left to do in its phase


class SqlStore(MemoryStore):
    """Rows of :mod:`stm_memory.store.schema` through SQLAlchemy Core.

    ``batch_size``: the rows a bulk delete, erasure or janitor sweep handles per
    transaction (:data:`BATCH_SIZE` by default; see "bulk deletes" below)."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        clock: Callable[[], datetime] | None = None,
        timeout: float = 5.0,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(f"batch_size must be at least 1, got {batch_size}")
        self.engine = engine
        self.batch_size = batch_size
        # The engine's injectable clock: applied-op stamps are pruned by the janitor
        # against that same clock.
        self._clock = clock or (lambda: datetime.now(UTC))
        self.dialect = engine.dialect.name
        insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        if self.dialect not in ("postgresql", "sqlite"):
            raise DatabaseError(f"unsupported database dialect {self.dialect!r}")
        self._insert = insert
        # PostgreSQL gets aware datetimes: a naive one would be read in the *session*
        # time zone by ``timestamptz`` and shift every stamp on a non-UTC server.
        # SQLite stores text without an offset, so it gets naive UTC.
        self._stamp = _utc if self.dialect == "postgresql" else _naive_utc
        # An in-memory SQLite database is one DBAPI connection shared by every thread
        # (StaticPool); two transactions on it at once fail ("cannot start a
        # transaction within a transaction"), so access to it is serialised.
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if isinstance(engine.pool, StaticPool) else nullcontext()
        )
        m = memories.c
        ins = insert(memories)
        ex = ins.excluded
        # The snapshot a row write sets: every column but the identity and created_at.
        # A write from a scope that lacks the parent or display names (an entry that
        # expired and was rebuilt from a bare scope) must not erase the stored ones:
        # privacy rules need the parent after a restart.
        names = ("parent_channel_id", "channel_name", "server_name")
        snapshot: dict[str, Any] = {
            col: sa.func.coalesce(ex[col], m[col]) if col in names else ex[col]
            for col in _COLUMNS
            if col not in _IDENTITY
        }
        # Built once; SQLAlchemy caches the compiled form (and _sqlite/raw compiles it
        # once), so the hot path pays only for parameter binding.
        self._put = ins.on_conflict_do_update(
            index_elements=[m.key], set_=snapshot, where=ex.rev > m.rev
        )

        # Repair's write: update-only, so a row deleted meanwhile stays deleted.
        # (Bind names get a prefix: SQLAlchemy reserves column names in SET.)
        def bind(col: str) -> Any:
            return sa.bindparam(f"v_{col}", type_=m[col].type)

        self._advance = (
            sa.update(memories)
            .where(m.key == bind("key"), m.rev < bind("rev"))
            .values(
                {col: bind(col) for col in snapshot if col not in names}
                | {col: sa.func.coalesce(bind(col), m[col]) for col in names}
            )
        )
        self._select = sa.select(memories)
        # File-backed SQLite: row writes skip SQLAlchemy's per-call machinery (see
        # _sqlite/raw). An in-memory database lives in the pool's one connection.
        self._raw: RawSqlite | None = None
        database = engine.url.database
        if self.dialect == "sqlite" and database not in (None, "", ":memory:"):
            self._raw = RawSqlite(database, timeout=timeout)
        self._compiled: dict[int, CompiledSql] = {}

    # -- plumbing --------------------------------------------------------------------

    @property
    def serial(self) -> AbstractContextManager[Any]:
        """The lock every transaction on this engine takes (a real one only for an
        in-memory SQLite database, whose one connection all threads share)."""
        return self._serial

    def setup(self) -> None:
        with self._serial:
            self._guard(lambda: migrate(self.engine))

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except sa.exc.SQLAlchemyError as exc:
            raise _database_error(exc) from exc

    @contextmanager
    def _tx(self, op_id: str | None) -> Iterator[Connection | None]:
        """A write transaction; yields None when ``op_id`` was applied before."""
        try:
            with self._serial, self.engine.begin() as conn:
                # Without this, SQLAlchemy 2.1 reports rowcount -1 for psycopg INSERTs,
                # and the applied-op check below would never see a duplicate.
                conn.execution_options(preserve_rowcount=True)
                if op_id is not None:
                    stmt = self._insert(applied_ops).values(
                        op_id=op_id, applied_at=self._stamp(self._clock())
                    )
                    if conn.execute(stmt.on_conflict_do_nothing()).rowcount == 0:
                        yield None
                        return
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise _database_error(exc) from exc

    def _read(self, fn: Callable[[Connection], T]) -> T:
        def run() -> T:
            with self._serial, self.engine.connect() as conn:
                return fn(conn.execution_options(stm_read=True))

        return self._guard(run)

    def _row_params(self, entry: MemoryEntry, at: datetime) -> dict[str, Any]:
        """``entry``'s row as ROW declares it, stamped ``at`` (created_at, updated_at)."""
        stamp = self._stamp(at)
        row = dict(zip(_WRITTEN_AS_IS_COLUMNS, _written_as_is(entry), strict=False))
        for name, column, write in _WRITES:
            row[column] = write(getattr(entry, name))
        # An update stamps one instant everywhere (the engine passes the same object):
        # convert it once. An identity test is all it takes to notice.
        for name, column in _STAMPED:
            value = getattr(entry, name)
            row[column] = None if value is None else stamp if value is at else self._stamp(value)
        row["created_at"] = row["updated_at"] = stamp
        return row

    @staticmethod
    def _entry(row: Mapping[Any, Any]) -> MemoryEntry:
        values = dict(zip(_READ_AS_IS, _read_as_is(row), strict=False))
        for name, read in _READS:
            values[name] = read(row)
        return MemoryEntry(**values)

    # -- memory rows -----------------------------------------------------------------

    def _sql(self, stmt: Any) -> CompiledSql:
        compiled = self._compiled.get(id(stmt))
        if compiled is None:
            compiled = self._compiled[id(stmt)] = CompiledSql.of(stmt)
        return compiled

    def _write_rows(self, stmt: Any, params: Sequence[dict[str, Any]]) -> int:
        """Run one row statement per parameter set in one transaction; rows written."""
        if not params:
            return 0
        if self._raw is None:
            with self._tx(None) as conn:
                assert conn is not None
                return sum(int(conn.execute(stmt, p).rowcount) for p in params)
        compiled = self._sql(stmt)
        return self._raw.write(compiled.text, [compiled.params(p) for p in params])

    def put_rows(self, entries: Sequence[MemoryEntry], at: datetime) -> int:
        return self._write_rows(self._put, [self._row_params(e, at) for e in entries])

    def advance_rows(self, entries: Sequence[MemoryEntry], at: datetime) -> int:
        params = [{f"v_{k}": v for k, v in self._row_params(e, at).items()} for e in entries]
        return self._write_rows(self._advance, params)

    def load_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        if not keys:
            return {}
        stmt = self._select.where(memories.c.key.in_([db_key(k) for k in keys]))
        rows = self._read(lambda c: c.execute(stmt).mappings().all())
        entries = (self._entry(row) for row in rows)
        return {e.key: e for e in entries}

    def _load_where(self, *clauses: Any) -> list[MemoryEntry]:
        stmt = self._select.where(*clauses).order_by(memories.c.updated_at.desc())
        return [self._entry(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    def load_server(self, server_id: str) -> list[MemoryEntry]:
        m = memories.c
        return self._load_where(m.server_id == server_id, m.scope_kind == "server")

    def load_user(self, user_id: str) -> list[MemoryEntry]:
        m = memories.c
        return self._load_where(m.user_id == user_id, m.scope_kind == "user")

    def list_rows(
        self, *, server_id: str | None = None, user_id: str | None = None, limit: int = 1000
    ) -> list[MemoryEntry]:
        clauses = []
        if server_id is not None:
            clauses.append(memories.c.server_id == server_id)
        if user_id is not None:
            clauses.append(memories.c.user_id == user_id)
        stmt = self._select.where(*clauses).order_by(memories.c.updated_at.desc()).limit(limit)
        return [self._entry(r) for r in self._read(lambda c: c.execute(stmt).mappings().all())]

    # -- bulk deletes ------------------------------------------------------------------
    #
    # A delete of a channel, of a user or of the idle rows may reach a million rows: it
    # runs as a series of transactions of ``batch_size`` rows each. Replay stays
    # exactly-once. Every one of those transactions claims the operation's ``op_id``
    # (see _tx) and all but the last release the claim before they commit, so a crash
    # (or a database failure) between two batches leaves the operation unapplied and
    # still queued in the outbox, and its replay finishes what is left; once the last
    # batch has committed, a replay does nothing, and never deletes rows written
    # since. Two replays running at once queue on the claim batch by batch; the one
    # that comes second after the last batch stops there.

    def _batches(
        self,
        op_id: str | None,
        tally: Tally,
        work: Callable[[Connection], _Batch],
        *,
        completes: bool = True,
    ) -> int:
        """Run ``work`` in one transaction per batch until it returns its phase's last
        batch; returns the rows changed. With ``completes``, the phase's last batch is
        the operation's last one (it keeps the ``op_id`` claim). Stops early when the
        operation was applied meanwhile, by a concurrent replay."""
        changed = 0
        while True:
            with self._tx(op_id) as conn:
                if conn is None:
                    return changed
                batch = work(conn)
                if op_id is not None and not (batch.last and completes):
                    conn.execute(sa.delete(applied_ops).where(applied_ops.c.op_id == op_id))
            changed += batch.changed
            tally.add(batch.scanned, last=batch.last)
            if batch.last:
                return changed

    def _count(self, where: Any) -> int | None:
        """How many rows match ``where``: a progress total (None when nobody listens)."""
        if not listening():
            return None
        stmt = sa.select(sa.func.count()).select_from(memories).where(where)
        return int(self._read(lambda c: c.execute(stmt).scalar_one()))

    def _fetch(self, stmt: Any) -> Sequence[RowMapping]:
        return self._read(lambda c: c.execute(stmt).mappings().all())

    def _delete_rows(
        self,
        where: Any,
        op_id: str | None,
        *,
        first: Callable[[Connection], None] | None = None,
        completes: bool = True,
    ) -> int:
        """Delete the rows matching ``where``, ``batch_size`` per transaction (``first``
        runs in the first of them; ``completes``: see _batches). Each batch takes the
        first rows left: the rows of the batches before are gone, so no key needs
        remembering, and the database picks them by its index, with no sort."""
        m = memories.c
        size = self.batch_size
        some = sa.delete(memories).where(m.key.in_(sa.select(m.key).where(where).limit(size)))
        any_left = sa.select(m.key).where(where).limit(1)
        started = False

        def work(conn: Connection) -> _Batch:
            nonlocal started
            if first is not None and not started:
                first(conn)
            deleted = int(conn.execute(some).rowcount)
            started = True
            # Fewer than a batch is the last batch, unless a concurrent delete took rows
            # this one had picked (PostgreSQL runs them side by side) and more are left.
            last = deleted < size and conn.execute(any_left).first() is None
            return _Batch(deleted, deleted, last=last)

        tally = Tally(DELETE_ROWS, self._count(where))
        return self._batches(op_id, tally, work, completes=completes)

    def delete_channel(
        self, channel_id: str, *, op_id: str | None = None, at: datetime | None = None
    ) -> int:
        stamp = at or self._clock()
        # The reset is recorded in the transaction of the first batch, so no reader
        # ever sees rows of the channel gone without the reset point. (A replay after
        # an interruption records it again, at the same instant.)
        return self._delete_rows(
            memories.c.channel_id == channel_id,
            op_id,
            first=lambda conn: self._mark_reset(conn, [channel_id], stamp),
        )

    def _mark_reset(self, conn: Connection, channel_ids: Sequence[str], at: datetime) -> None:
        stamp = self._stamp(at)
        for channel_id in channel_ids:
            mark = self._insert(channel_resets).values(channel_id=channel_id, reset_at=stamp)
            conn.execute(
                mark.on_conflict_do_update(
                    index_elements=[channel_resets.c.channel_id], set_={"reset_at": stamp}
                )
            )

    def channel_reset_at(self, channel_id: str) -> datetime | None:
        stmt = sa.select(channel_resets.c.reset_at).where(channel_resets.c.channel_id == channel_id)
        value = self._read(lambda c: c.execute(stmt).scalar())
        return _utc(value) if value is not None else None

    def delete_user(self, user_id: str, *, op_id: str | None = None) -> int:
        m = memories.c
        return self._delete_rows(sa.and_(m.user_id == user_id, m.scope_kind == "user"), op_id)

    def forget_user(self, user_id: str, at: datetime, *, op_id: str | None = None) -> int:
        m = memories.c
        own = sa.and_(m.user_id == user_id, m.scope_kind == "user")
        c = channel_resets.c
        stamp = self._stamp(at)
        # The user's DMs are theirs alone: like a cleared channel, each starts afresh, so
        # a caller's own transcript of it is not sent to the model again. Recorded for
        # all of them (in SQL: no list of them is read) with the first batch, as
        # delete_channel records its reset.
        dms = sa.select(m.channel_id, sa.literal(stamp, c.reset_at.type))
        mark = self._insert(channel_resets).from_select(
            [c.channel_id, c.reset_at], dms.where(own, m.server_id.is_(None)).distinct()
        )
        mark = mark.on_conflict_do_update(index_elements=[c.channel_id], set_={"reset_at": stamp})

        def mark_dms(conn: Connection) -> None:
            conn.execute(mark)

        deleted = self._delete_rows(own, op_id, first=mark_dms, completes=False)
        return deleted + self._erase_provenance(user_id, at, op_id)

    def _erase_provenance(self, user_id: str, at: datetime, op_id: str | None) -> int:
        """forget_user's second phase: clear the distilled memory of the rows whose
        provenance may hold the user. No index can answer that (a LIKE over JSON
        text), so the table is scanned in key order, ``batch_size`` rows per
        transaction: one statement over a million rows would hold the write lock for
        as long as it takes."""
        m = memories.c
        size = self.batch_size
        # Rows whose provenance may hold the user: found by the id's text in the JSON
        # list (as written, or JSON-escaped), then checked exactly.
        text = sa.cast(m.provenance, sa.Text)
        patterns = {_like_pattern(user_id), _like_pattern(json.dumps(user_id)[1:-1])}
        named = sa.or_(*(text.like(p, escape="!") for p in patterns))
        # Rows written before provenance was kept (NULL) may hold anyone's words:
        # their distilled memory goes too (it is short-term: a day at most).
        distilled = sa.or_(m.summary.is_not(None), sa.cast(m.categories, sa.Text) != "{}")
        unknown = sa.and_(m.provenance.is_(None), distilled)
        clock = next_rev(0, at)
        clear = sa.update(memories).values(
            summary=None,
            categories={},
            kept=None,
            # Rows keep no captured turns: nobody's words are left in them.
            provenance=[],
            # Neither last_updated nor updated_at moves: an erasure is not activity,
            # and extends neither the entry's life nor the row's.
            rev=sa.case((m.rev + 1 > clock, m.rev + 1), else_=clock),
        )
        after: str | None = None  # the last key of the window before

        def erase(conn: Connection) -> _Batch:
            nonlocal after
            window = [] if after is None else [m.key > after]
            # The window ends at the batch_size-th key on (None: the rest of the table).
            upper = conn.execute(
                sa.select(m.key).where(*window).order_by(m.key).offset(size - 1).limit(1)
            ).scalar()
            if upper is None:
                count = sa.select(sa.func.count()).select_from(memories).where(*window)
                scanned = int(conn.execute(count).scalar_one())
            else:
                window.append(m.key <= upper)
                scanned = size
            candidates = conn.execute(
                sa.select(m.key, m.provenance).where(*window, sa.or_(named, unknown))
            ).all()
            # A NULL provenance only matches ``unknown``; the others are checked exactly.
            keys = [
                k for k, provenance in candidates if provenance is None or user_id in provenance
            ]
            if keys:
                conn.execute(clear.where(m.key.in_(keys)))
            after = upper
            return _Batch(len(keys), scanned, last=upper is None)

        return self._batches(op_id, Tally(ERASE_ROWS, self._count(sa.true())), erase)

    def compact(self) -> None:
        if self.dialect != "sqlite" or self.engine.url.database in (None, "", ":memory:"):
            return  # PostgreSQL: dead tuples stay until VACUUM (docs/concepts/erasure.md)
        self._checkpoint()

    def _checkpoint(self) -> None:
        # A read connection: no BEGIN around it (a checkpoint cannot run in one).
        self._read(lambda c: c.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
        if self._raw is not None:
            self._raw.checkpoint()

    def clear_summary(self, keys: Sequence[str], at: datetime, *, op_id: str | None = None) -> int:
        with self._tx(op_id) as conn:
            if conn is None:
                return 0
            m = memories.c
            # What the cache's own clear does to the rev (model.next_rev), in SQL.
            clock = next_rev(0, at)
            stmt = (
                sa.update(memories)
                .where(m.key.in_([db_key(k) for k in keys]))
                .values(
                    summary=None,
                    categories={},
                    kept=None,
                    updated_at=self._stamp(at),
                    last_updated=self._stamp(at),
                    rev=sa.case((m.rev + 1 > clock, m.rev + 1), else_=clock),
                )
            )
            return int(conn.execute(stmt).rowcount)

    def keys_older_than(self, cutoff: datetime) -> Iterator[list[str]]:
        m = memories.c
        size = self.batch_size
        # Keyset pagination by primary key, the idle test a filter: each run reads the
        # table once in key order (about a second per million rows). No index orders
        # the idle rows by anything unique: on the updated_at one, every page would
        # sort all the rows that share a stamp (a bulk import shares one). Key order
        # also groups each owner's entries, so evicting a batch edits few indexes.
        page = (
            sa.select(m.key, m.scope_kind, m.server_id, m.user_id, m.channel_id, m.persona_id)
            .where(m.updated_at < self._stamp(cutoff))
            .order_by(m.key)
            .limit(size)
        )
        stmt = page
        while True:
            rows = self._fetch(stmt)
            if rows:
                yield [_cache_key(r) for r in rows]
            if len(rows) < size:
                return
            stmt = page.where(m.key > rows[-1]["key"])

    def delete_older_than(self, cutoff: datetime) -> int:
        stamp = self._stamp(cutoff)
        deleted = self._delete_rows(memories.c.updated_at < stamp, None)
        with self._tx(None) as conn:
            assert conn is not None
            conn.execute(sa.delete(applied_ops).where(applied_ops.c.applied_at < stamp))
        return deleted

    def count_rows(self) -> int:
        stmt = sa.select(sa.func.count()).select_from(memories)
        return int(self._read(lambda c: c.execute(stmt).scalar_one()))

    # -- settings --------------------------------------------------------------------

    def get_server_settings(self, server_id: str) -> ServerSettings | None:
        stmt = sa.select(server_settings).where(server_settings.c.server_id == server_id)
        row = self._read(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            return None
        data = {k: row[k] for k in ServerSettings.field_names()}
        data["private_channel_ids"] = frozenset(data["private_channel_ids"] or ())
        return ServerSettings(**data)

    def put_server_settings(self, server_id: str, settings: ServerSettings, at: datetime) -> None:
        values = settings.to_dict() | {"server_id": server_id, "updated_at": self._stamp(at)}
        stmt = self._insert(server_settings).values(**values)
        update = {k: v for k, v in values.items() if k != "server_id"}
        with self._tx(None) as conn:
            assert conn is not None
            conn.execute(stmt.on_conflict_do_update(index_elements=["server_id"], set_=update))

    def get_categories(self, server_id: str) -> list[Category]:
        c = categories.c
        stmt = sa.select(categories).where(c.server_id == server_id).order_by(c.position)
        rows = self._read(lambda conn: conn.execute(stmt).mappings().all())
        return [Category(r["label"], r["description"], r["slug"]) for r in rows]

    def set_categories(self, server_id: str, cats: Sequence[Category]) -> None:
        with self._tx(None) as conn:
            assert conn is not None
            conn.execute(sa.delete(categories).where(categories.c.server_id == server_id))
            if cats:
                conn.execute(
                    sa.insert(categories),
                    [
                        {
                            "server_id": server_id,
                            "position": i,
                            "label": cat.label,
                            "description": cat.description,
                            "slug": cat.slug,
                        }
                        for i, cat in enumerate(cats)
                    ],
                )

    def get_user_settings(self, user_id: str) -> UserSettings | None:
        stmt = sa.select(user_settings).where(user_settings.c.user_id == user_id)
        row = self._read(lambda c: c.execute(stmt).mappings().first())
        if row is None:
            return None
        return UserSettings(
            cross_server_opt_in=row["cross_server_opt_in"], full_privacy=row["full_privacy"]
        )

    def put_user_settings(self, user_id: str, settings: UserSettings, at: datetime) -> None:
        values = {
            "cross_server_opt_in": settings.cross_server_opt_in,
            "full_privacy": settings.full_privacy,
            "updated_at": self._stamp(at),
        }
        stmt = self._insert(user_settings).values(user_id=user_id, **values)
        with self._tx(None) as conn:
            assert conn is not None
            conn.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_=values))

    def secret(self, name: str, make: str) -> str:
        stmt = sa.select(secrets.c.value).where(secrets.c.name == name)
        value = self._read(lambda c: c.execute(stmt).scalar())
        if value is not None:
            return str(value)
        with self._tx(None) as conn:
            assert conn is not None
            conn.execute(
                self._insert(secrets).values(name=name, value=make).on_conflict_do_nothing()
            )
            return str(conn.execute(stmt).scalar_one())

    def note_model(self, model: str, note: str, at: datetime) -> None:
        with self._tx(None) as conn:
            assert conn is not None
            row = {"model": model, "note": note, "noted_at": self._stamp(at)}
            conn.execute(self._insert(model_notes).values(**row).on_conflict_do_nothing())

    def model_notes(self) -> dict[str, tuple[str, datetime]]:
        stmt = sa.select(model_notes.c.model, model_notes.c.note, model_notes.c.noted_at)
        rows = self._read(lambda c: c.execute(stmt).all())
        return {str(r.model): (str(r.note), _utc(r.noted_at)) for r in rows}

    def forget_model(self, model: str) -> bool:
        with self._tx(None) as conn:
            assert conn is not None
            gone = conn.execute(sa.delete(model_notes).where(model_notes.c.model == model))
            return bool(gone.rowcount)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
        self.engine.dispose()

"""SQL tables and versioned, idempotent migrations.

Why a small migration table instead of Alembic: this is an embedded library whose
users never run a migration command; the schema must upgrade itself on first use,
under the caller's engine, for SQLite and PostgreSQL alike (langgraph's checkpoint
savers do the same). Each migration runs once, in order, inside one transaction
that also records its version, so a crash mid-migration leaves the old version.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

__all__ = [
    "MIGRATIONS",
    "applied_ops",
    "categories",
    "channel_resets",
    "current_version",
    "live_deletions",
    "live_ranks",
    "live_state",
    "live_values",
    "memories",
    "metadata",
    "migrate",
    "model_notes",
    "schema_version",
    "secrets",
    "server_settings",
    "user_settings",
]

metadata = sa.MetaData()

UtcDateTime = sa.DateTime(timezone=True)

memories = sa.Table(
    "short_term_memories",
    metadata,
    # The cache key is the one unique key every upsert targets: it already encodes
    # (scope kind, owner, channel, persona) and avoids NULL-in-unique-index pitfalls.
    sa.Column("key", sa.String(2200), primary_key=True),
    sa.Column("scope_kind", sa.String(8), nullable=False),
    sa.Column("server_id", sa.String(512)),
    sa.Column("user_id", sa.String(512)),
    sa.Column("channel_id", sa.String(512), nullable=False),
    sa.Column("persona_id", sa.String(512)),
    sa.Column("parent_channel_id", sa.String(512)),
    sa.Column("channel_name", sa.Text),
    sa.Column("server_name", sa.Text),
    sa.Column("summary", sa.Text),
    sa.Column("categories", sa.JSON, nullable=False),
    sa.Column("turns_since_refresh", sa.Integer, nullable=False),
    sa.Column("last_refreshed_turn", sa.Integer, nullable=False),
    # updated_at: the row's last activity (any write; the janitor's clock).
    sa.Column("created_at", UtcDateTime, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
    # v2: the entry's own expiry clock and refresh stamp, and its revision, so a row
    # hydrates to exactly the entry the cache held (see MemoryEntry.rev).
    sa.Column("last_updated", UtcDateTime),
    sa.Column("refreshed_at", UtcDateTime),
    sa.Column("rev", sa.BigInteger, nullable=False, server_default="0"),
    # v3: turns counted since the channel was reset (NULL: dialogue before the row may
    # exist), so the history cut holds after a restart (MemoryEntry.turns_since_reset).
    sa.Column("turns_since_reset", sa.Integer),
    # v3: the users whose words may be in the row's distilled memory (a JSON list), so
    # clear_user reaches shared entries after a restart (MemoryEntry.provenance).
    sa.Column("provenance", sa.JSON),
    # v5: excerpts of dropped turns the written memory leaves out (a JSON list of
    # turns), so they outlive a restart like the memory (MemoryEntry.kept).
    sa.Column("kept", sa.JSON),
    # v6: what the memory did to the channel's bill, per day (MemoryEntry.receipt).
    sa.Column("receipt", sa.JSON),
    # v7: the marks of the messages erasure removed (a JSON list of keyed digests, no
    # text), so the caller's copy stays forgotten after a restart (MemoryEntry.forgotten).
    sa.Column("forgotten", sa.JSON),
    # v8: nobody could write the memory at the channel's last turn (MemoryEntry.no_writer).
    sa.Column("no_writer", sa.Boolean),
    sa.Index("ix_stm_updated_at", "updated_at"),
    sa.Index("ix_stm_channel", "channel_id"),
    sa.Index("ix_stm_user", "user_id", "scope_kind"),
    sa.Index("ix_stm_server", "server_id", "scope_kind"),
)

categories = sa.Table(
    "stm_categories",
    metadata,
    sa.Column("server_id", sa.String(512), primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("slug", sa.String(64), nullable=False),
    sa.CheckConstraint("position >= 0 AND position <= 4", name="ck_stm_category_position"),
)

server_settings = sa.Table(
    "stm_server_settings",
    metadata,
    sa.Column("server_id", sa.String(512), primary_key=True),
    sa.Column("short_term_memory_enabled", sa.Boolean, nullable=False),
    sa.Column("refresh_cadence", sa.Integer, nullable=False),
    sa.Column("render_mode", sa.String(16), nullable=False),
    sa.Column("crude_message_count", sa.Integer, nullable=False),
    sa.Column("tool_description_override", sa.Text),
    sa.Column("update_nudge_override", sa.Text),
    sa.Column("nudge_injection_depth", sa.Integer, nullable=False),
    sa.Column("content_injection_depth", sa.Integer, nullable=False),
    sa.Column("private_channel_ids", sa.JSON, nullable=False),
    sa.Column("stm_privacy_bypass", sa.Boolean, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

user_settings = sa.Table(
    "stm_user_settings",
    metadata,
    sa.Column("user_id", sa.String(512), primary_key=True),
    sa.Column("cross_server_opt_in", sa.Boolean, nullable=False),
    sa.Column("full_privacy", sa.Boolean, nullable=False),
    sa.Column("updated_at", UtcDateTime, nullable=False),
)

# Ids of outbox operations already applied: replay is exactly-once because the
# operation and its id commit in the same transaction.
applied_ops = sa.Table(
    "stm_applied_ops",
    metadata,
    sa.Column("op_id", sa.String(64), primary_key=True),
    sa.Column("applied_at", UtcDateTime, nullable=False),
)

# v3: channels reset by clear_channel ("/refresh"). Holds no content, only the fact,
# so a caller that keeps its whole thread never has the dialogue from before the
# reset sent again (the next entry of the channel starts counting from zero).
channel_resets = sa.Table(
    "stm_channel_resets",
    metadata,
    sa.Column("channel_id", sa.String(512), primary_key=True),
    sa.Column("reset_at", UtcDateTime, nullable=False),
)

# v4: the live cache in SQL (cache/sql.py), shared by every host while the primary
# live cache (Redis, diskcache) is unreachable. A row without a value is absent;
# ``deleted`` marks a tombstone: the key was deleted here, and the primary's copy
# must go too when it returns.
live_values = sa.Table(
    "stm_live_values",
    metadata,
    # The key as the rows table stores it (a digest past 1 KB), and the key itself.
    sa.Column("slot", sa.String(1100), primary_key=True),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("value", sa.Text),
    sa.Column("expires_at", sa.Float),
    sa.Column("deleted", sa.Boolean, nullable=False, server_default=sa.false()),
)

# v4: ordered indexes of the SQL live cache; a NULL score is a removal to replay.
live_ranks = sa.Table(
    "stm_live_ranks",
    metadata,
    sa.Column("idx", sa.String(1100), primary_key=True),
    sa.Column("member_slot", sa.String(1100), primary_key=True),
    sa.Column("index_name", sa.Text, nullable=False),
    sa.Column("member", sa.Text, nullable=False),
    sa.Column("score", sa.Float),
    sa.Index("ix_stm_live_rank_order", "idx", "score", "member_slot"),
)

# v4: whether the hosts are in degraded mode (one row, id 1); every degraded write
# reads it in its own transaction, so no write lands here after the primary healed.
live_state = sa.Table(
    "stm_live_state",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("degraded", sa.Boolean, nullable=False),
    sa.Column("since", sa.Float),
)

# v4: channel and user deletions made while degraded, replayed on the primary's
# copies when it returns (a deletion there scanned only what SQL held).
live_deletions = sa.Table(
    "stm_live_deletions",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("target", sa.Text, nullable=False),
)

# Secrets the library makes once per database (the erasure key, model/tombstones.py):
# a table of their own, never beside what they protect.
secrets = sa.Table(
    "stm_secrets",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# What turns learnt about a model, for every process of the database (v8): "tools as
# text", a model whose server returns its tool calls as message text (kit.MemoryTurn).
model_notes = sa.Table(
    "stm_model_notes",
    metadata,
    sa.Column("model", sa.String(255), primary_key=True),
    sa.Column("note", sa.String(32), nullable=False),
    sa.Column("noted_at", UtcDateTime, nullable=False),
)

schema_version = sa.Table(
    "stm_schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("applied_at", UtcDateTime, nullable=False, server_default=sa.func.now()),
)


def _v1_initial(conn: Connection) -> None:
    for table in (memories, categories, server_settings, user_settings, applied_ops):
        table.create(conn, checkfirst=True)


def _v2_row_revisions(conn: Connection) -> None:
    # A database created by this release already has the columns (v1 creates the
    # table from the current definition); one created earlier gets them added. Old
    # rows keep rev 0 and read last_updated from updated_at until their next write.
    present = {c["name"] for c in sa.inspect(conn).get_columns(memories.name)}
    preparer = conn.dialect.identifier_preparer
    for name in ("last_updated", "refreshed_at", "rev"):
        if name in present:
            continue
        column = memories.c[name]
        ddl = column.type.compile(dialect=conn.dialect)
        default = " NOT NULL DEFAULT 0" if name == "rev" else ""
        conn.execute(
            sa.text(
                f"ALTER TABLE {preparer.quote(memories.name)}"
                f" ADD COLUMN {preparer.quote(name)} {ddl}{default}"
            )
        )


def _add_columns(conn: Connection, names: tuple[str, ...]) -> None:
    present = {c["name"] for c in sa.inspect(conn).get_columns(memories.name)}
    preparer = conn.dialect.identifier_preparer
    for name in names:
        if name in present:
            continue
        ddl = memories.c[name].type.compile(dialect=conn.dialect)
        conn.execute(
            sa.text(
                f"ALTER TABLE {preparer.quote(memories.name)}"
                f" ADD COLUMN {preparer.quote(name)} {ddl}"
            )
        )


def _v3_history_and_provenance(conn: Connection) -> None:
    # Old rows keep NULL: their earlier dialogue and their provenance are unknown.
    _add_columns(conn, ("turns_since_reset", "provenance"))
    channel_resets.create(conn, checkfirst=True)


def _v4_live_cache_in_sql(conn: Connection) -> None:
    for table in (live_values, live_ranks, live_state, live_deletions):
        table.create(conn, checkfirst=True)


def _v5_kept_details(conn: Connection) -> None:
    # Old rows keep NULL: nothing was kept beside their memory.
    _add_columns(conn, ("kept",))


def _v6_receipts(conn: Connection) -> None:
    # Old rows keep NULL: nothing was billed through them yet.
    _add_columns(conn, ("receipt",))


def _v7_tombstones(conn: Connection) -> None:
    # Old rows keep NULL: nothing was erased through them. The erasure key's table.
    _add_columns(conn, ("forgotten",))
    secrets.create(conn, checkfirst=True)


def _v8_writers(conn: Connection) -> None:
    # Old rows keep NULL: their model was offered the tool (no_writer is False).
    _add_columns(conn, ("no_writer",))
    model_notes.create(conn, checkfirst=True)


# Append new steps here; never edit a released one.
MIGRATIONS: tuple[Callable[[Connection], None], ...] = (
    _v1_initial,
    _v2_row_revisions,
    _v3_history_and_provenance,
    _v4_live_cache_in_sql,
    _v5_kept_details,
    _v6_receipts,
    _v7_tombstones,
    _v8_writers,
)


_ADVISORY_LOCK = 72100591


def _lock(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        # Two processes starting together must not both run a step (or both create
        # the version table). SQLite writers are serialised by BEGIN IMMEDIATE.
        conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({_ADVISORY_LOCK})"))


def current_version(engine: sa.Engine) -> int:
    """The newest applied migration (0 for an empty database), read without a write
    lock, so start-up works while another connection holds the database's write lock."""
    with engine.connect() as conn:
        conn = conn.execution_options(stm_read=True)
        if not sa.inspect(conn).has_table(schema_version.name):
            return 0
        return int(conn.execute(sa.select(sa.func.max(schema_version.c.version))).scalar() or 0)


def migrate(engine: sa.Engine) -> int:
    """Bring the database to the newest version; returns that version. Idempotent."""
    if current_version(engine) >= len(MIGRATIONS):
        return len(MIGRATIONS)
    with engine.begin() as conn:
        _lock(conn)
        schema_version.create(conn, checkfirst=True)
    for number, step in enumerate(MIGRATIONS, start=1):
        with engine.begin() as conn:
            _lock(conn)
            done = conn.execute(
                sa.select(schema_version.c.version).where(schema_version.c.version == number)
            ).first()
            if done is None:
                step(conn)
                conn.execute(sa.insert(schema_version).values(version=number))
    return len(MIGRATIONS)

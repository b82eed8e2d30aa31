"""The durable-store seam: one base class of sync methods (the engine's ``a*`` methods
run its sync path in a thread, so a store has no async twins to keep in step).

Row writes carry the whole entry and its revision, so they are idempotent and
ordered by themselves (see :meth:`MemoryStore.put_rows`). Deletes take an optional
``op_id``: when given (outbox replay), the store records it in the same transaction
as the delete's last change and skips an id it has already applied, which makes
their replay exactly-once. A bulk delete (a channel, a user, the janitor's sweep)
runs in batches of bounded size, one transaction each: interrupted between two, it
has not been applied, and its replay finishes it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime

from stm_memory.model import Category, MemoryEntry, ServerSettings, UserSettings

__all__ = ["MemoryStore"]


class MemoryStore(ABC):
    """Base class of SQL stores (SQLite and PostgreSQL share one implementation)."""

    @abstractmethod
    def setup(self) -> None:
        """Create or migrate the schema. Idempotent."""

    # -- memory rows ----------------------------------------------------------------

    @abstractmethod
    def put_rows(self, entries: Sequence[MemoryEntry], at: datetime) -> int:
        """Write each entry's snapshot (distilled content, counters, ``last_updated``,
        ``rev``) to its row, in one transaction: a missing row is inserted, a row with a
        lower ``rev`` replaced, and a row at the same or a newer ``rev`` left alone (a
        replay, or a write a newer one overtook). The counters come from the live
        cache's atomic mutation, so writes landing in any order, twice, or late count
        exactly. ``at`` stamps the row's activity (``updated_at``, the janitor's
        clock). Returns how many rows were written."""

    @abstractmethod
    def advance_rows(self, entries: Sequence[MemoryEntry], at: datetime) -> int:
        """Like :meth:`put_rows` for rows that exist, but never inserts one (repair:
        a row deleted meanwhile must stay deleted). Returns how many were written."""

    @abstractmethod
    def load_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """Rows as entries (no messages), exactly as the cache held them when written."""

    @abstractmethod
    def load_server(self, server_id: str) -> list[MemoryEntry]:
        """Every server-scope row of a server."""

    @abstractmethod
    def load_user(self, user_id: str) -> list[MemoryEntry]:
        """Every user-scope row of a user (all servers and DMs)."""

    @abstractmethod
    def delete_channel(
        self, channel_id: str, *, op_id: str | None = None, at: datetime | None = None
    ) -> int:
        """Delete every row of a channel (any server, user, persona) and record, in
        the same transactions, that the channel was reset (at ``at``, default now).
        Returns the rows deleted."""

    @abstractmethod
    def channel_reset_at(self, channel_id: str) -> datetime | None:
        """When :meth:`delete_channel` last reset the channel, or None."""

    @abstractmethod
    def delete_user(self, user_id: str, *, op_id: str | None = None) -> int:
        """Delete every user-scope row of a user; returns how many."""

    @abstractmethod
    def forget_user(self, user_id: str, at: datetime, *, op_id: str | None = None) -> int:
        """Erase a user: delete their user-scope rows (recording their DM channels as
        reset), and clear the distilled memory (summary, categories, provenance) of
        every row whose provenance names them (``rev`` moves on as in
        :meth:`clear_summary` at ``at``; the rows' ``last_updated`` and ``updated_at``
        stay: an erasure is not activity and extends neither an entry's life nor a
        row's). Returns the rows deleted or cleared."""

    def compact(self) -> None:  # noqa: B027 - optional hook: a server database has its own
        """Make deleted rows leave the database's files (an embedded SQLite file
        checkpoints and truncates its write-ahead log)."""

    @abstractmethod
    def clear_summary(self, keys: Sequence[str], at: datetime, *, op_id: str | None = None) -> int:
        """Null the summary and empty the categories of the rows, dated ``at`` (their
        ``rev`` moves on as a cache mutation at ``at`` would move it)."""

    @abstractmethod
    def keys_older_than(self, cutoff: datetime) -> Iterator[list[str]]:
        """Janitor: the (entry) keys of the rows whose ``updated_at`` is before
        ``cutoff``, in batches read one at a time as the iterator is advanced (each
        batch a read of its own: nothing is held open between them)."""

    @abstractmethod
    def delete_older_than(self, cutoff: datetime) -> int:
        """Janitor: delete rows whose ``updated_at`` is before ``cutoff``, and the
        applied-op ids recorded before it; returns the rows deleted."""

    @abstractmethod
    def count_rows(self) -> int: ...

    @abstractmethod
    def list_rows(
        self, *, server_id: str | None = None, user_id: str | None = None, limit: int = 1000
    ) -> list[MemoryEntry]:
        """Rows for administration (CLI ``list``), newest first."""

    # -- settings -------------------------------------------------------------------

    @abstractmethod
    def get_server_settings(self, server_id: str) -> ServerSettings | None: ...

    @abstractmethod
    def put_server_settings(
        self, server_id: str, settings: ServerSettings, at: datetime
    ) -> None: ...

    @abstractmethod
    def get_categories(self, server_id: str) -> list[Category]: ...

    @abstractmethod
    def set_categories(self, server_id: str, categories: Sequence[Category]) -> None: ...

    @abstractmethod
    def get_user_settings(self, user_id: str) -> UserSettings | None: ...

    @abstractmethod
    def put_user_settings(self, user_id: str, settings: UserSettings, at: datetime) -> None: ...

    @abstractmethod
    def secret(self, name: str, make: str) -> str:
        """The secret ``name`` of this database: ``make`` stored the first time it is
        asked for, the stored value ever after (every host reads the same one; two
        that ask first at once both get the one that was stored)."""

    @abstractmethod
    def note_model(self, model: str, note: str, at: datetime) -> None:
        """Keep what a turn learnt about ``model`` (``note``: ``"tools as text"``), for
        every process of this database; a model noted before keeps its first note."""

    @abstractmethod
    def model_notes(self) -> dict[str, tuple[str, datetime]]:
        """Every model noted: its note and when it was first noted."""

    @abstractmethod
    def forget_model(self, model: str) -> bool:
        """Drop ``model``'s note (its server was fixed); False when it had none."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

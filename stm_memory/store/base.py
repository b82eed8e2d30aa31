"""The durable-store seam: one base class, sync methods and ``a``-prefixed async twins.

Every write method takes an optional ``op_id``. When given (outbox replay), the
store records it in the same transaction as the write and skips an id it has
already applied, which makes replay exactly-once.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime

from ..types import Category, MemoryEntry, ServerSettings, UserSettings

__all__ = ["MemoryStore"]


class MemoryStore(ABC):
    """Base class of SQL stores (SQLite and PostgreSQL share one implementation)."""

    @abstractmethod
    def setup(self) -> None:
        """Create or migrate the schema. Idempotent."""

    # -- memory rows ----------------------------------------------------------------

    @abstractmethod
    def write_memory(
        self,
        entries: Sequence[MemoryEntry],
        *,
        reset_key: str | None,
        summary: bool,
        categories: bool,
        op_id: str | None = None,
    ) -> bool:
        """Upsert rows in one transaction: the summary and/or categories of each entry;
        the row ``reset_key`` also gets ``turns_since_refresh = 0`` and
        ``last_refreshed_turn + 1`` (a new one: 0 and 1). Counters in SQL only ever
        change by such deltas, so writes landing in any order count exactly (the
        entries' own counters are not stored). Returns False when ``op_id`` was
        applied already."""

    @abstractmethod
    def ensure_rows(self, entries: Sequence[MemoryEntry], at: datetime) -> None:
        """Insert rows that do not exist yet (counters 0); leave existing rows untouched."""

    @abstractmethod
    def increment_turns(
        self, entry: MemoryEntry, at: datetime, *, op_id: str | None = None
    ) -> bool:
        """Insert-or-add-one on ``turns_since_refresh`` of the entry's row (a new row
        starts at 1, with ``last_refreshed_turn`` 0)."""

    @abstractmethod
    def load_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        """Rows as entries (no messages; ``last_updated`` = ``updated_at``)."""

    @abstractmethod
    def load_server(self, server_id: str) -> list[MemoryEntry]:
        """Every server-scope row of a server."""

    @abstractmethod
    def load_user(self, user_id: str) -> list[MemoryEntry]:
        """Every user-scope row of a user (all servers and DMs)."""

    @abstractmethod
    def delete_channel(self, channel_id: str, *, op_id: str | None = None) -> int:
        """Delete every row of a channel (any server, user, persona)."""

    @abstractmethod
    def delete_user(self, user_id: str, *, op_id: str | None = None) -> int:
        """Delete every user-scope row of a user."""

    @abstractmethod
    def clear_summary(self, keys: Sequence[str], at: datetime, *, op_id: str | None = None) -> int:
        """Null the summary and empty the categories of the rows."""

    @abstractmethod
    def keys_older_than(self, cutoff: datetime) -> list[str]:
        """Janitor: keys of the rows whose ``updated_at`` is before ``cutoff``."""

    @abstractmethod
    def delete_older_than(self, cutoff: datetime) -> int:
        """Janitor: delete rows whose ``updated_at`` is before ``cutoff``."""

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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""

    # -- async twins (a thread hop: SQLAlchemy's sync engine is the one we tune) ------

    async def aload_many(self, keys: Sequence[str]) -> dict[str, MemoryEntry]:
        return await asyncio.to_thread(self.load_many, keys)

    async def aload_server(self, server_id: str) -> list[MemoryEntry]:
        return await asyncio.to_thread(self.load_server, server_id)

    async def aload_user(self, user_id: str) -> list[MemoryEntry]:
        return await asyncio.to_thread(self.load_user, user_id)

    async def adelete_channel(self, channel_id: str, *, op_id: str | None = None) -> int:
        return await asyncio.to_thread(self.delete_channel, channel_id, op_id=op_id)

    async def adelete_user(self, user_id: str, *, op_id: str | None = None) -> int:
        return await asyncio.to_thread(self.delete_user, user_id, op_id=op_id)

    async def adelete_older_than(self, cutoff: datetime) -> int:
        return await asyncio.to_thread(self.delete_older_than, cutoff)

"""Hold a SQLite database's write lock from another connection: the "database down"
of the embedded backend (reads still work in WAL mode, writes time out)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["SqliteWriteLock"]


class SqliteWriteLock:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._conn: sqlite3.Connection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(self) -> Self:
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=5)
        conn.execute("BEGIN EXCLUSIVE")
        self._conn = conn
        return self

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.execute("ROLLBACK")
            conn.close()

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

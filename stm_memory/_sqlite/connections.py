"""One ``sqlite3`` connection per thread (and per process) to one database file.

Shared by the raw SQLite row writer (``_sqlite/raw``) and the diskcache table
access (``cache/_disk_rows``): both run their hot paths on plain ``sqlite3``
connections, which may not be shared between threads in a transaction, nor between a
parent and a forked child.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from contextlib import suppress

__all__ = ["ThreadConnections"]


class ThreadConnections:
    """Opens a thread's connection on first use, with ``setup`` run on it once."""

    def __init__(
        self, path: str, *, timeout: float, setup: Callable[[sqlite3.Connection], None]
    ) -> None:
        self.path = path
        self.timeout = timeout
        self._setup = setup
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[sqlite3.Connection] = []

    def get(self) -> sqlite3.Connection:
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            # A forked child must not use its parent's connection (SQLite forbids it).
            local.pid = os.getpid()
            local.con = None
        con: sqlite3.Connection | None = local.con
        if con is None:
            # check_same_thread=False only so that close() can close every thread's
            # connection; each is used by the thread that opened it.
            con = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            self._setup(con)
            local.con = con
            with self._lock:
                self._open.append(con)
        return con

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database and truncate it to zero bytes, so
        what was deleted (with ``secure_delete`` on, zeroed in the database) is no
        longer in the log either. Best effort while another connection reads: the
        log is then truncated by the next checkpoint."""
        self.get().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def close(self) -> None:
        """Close every thread's connection; a later :meth:`get` opens a new one."""
        with self._lock:
            open_, self._open = self._open, []
        for con in open_:
            with suppress(sqlite3.Error):
                con.close()
        self._local = threading.local()

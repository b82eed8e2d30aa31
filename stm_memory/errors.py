"""The exception tree of stm-memory.

Developer-facing errors are exceptions; model-facing failures are *tool results*
(``{"status": "tool_execution_failed", ...}``) and never exceptions, because a
model cannot catch anything and an agent loop must never die of a bad tool call.

::

    StmError
    ├── ConfigurationError      a setting, category list or constructor option is invalid
    ├── ValidationError         an argument (id, scope, message list) is malformed
    ├── TurnOrderError          a MemoryTurn step was called out of the turn's order
    └── StorageError            a backend failed in a way the caller must see
        ├── CacheError          the live cache cannot be opened or used
        └── DatabaseError       the SQL store cannot be opened, migrated or queried
            └── RejectedWriteError  the database refuses this data (never retried)

Persistence failures *during a turn* are not raised: they are logged and queued in
the outbox (see :mod:`stm_memory.durability.outbox`); ``StorageError`` surfaces at construction, in
administrative calls (``configure_server`` …) and in ``flush()`` diagnostics.
"""

from __future__ import annotations

__all__ = [
    "CacheError",
    "ConfigurationError",
    "DatabaseError",
    "RejectedWriteError",
    "StmError",
    "StorageError",
    "TurnOrderError",
    "ValidationError",
]


class StmError(Exception):
    """Root of every exception raised by stm-memory."""


class ConfigurationError(StmError, ValueError):
    """A setting, category list or constructor option is invalid."""


class ValidationError(StmError, ValueError):
    """An argument given by the developer is malformed (ids, scopes, messages)."""


class TurnOrderError(StmError, RuntimeError):
    """A :class:`~stm_memory.MemoryTurn` step was called out of the turn's order
    (begin → assemble → request context / place, tool, memory call → finish): a bug in
    the integration driving it, raised so it cannot send a request without its memory
    or write after the turn ended."""


class StorageError(StmError):
    """A storage backend failed in a way the caller has to know about."""


class CacheError(StorageError):
    """The live cache could not be opened or used."""


class DatabaseError(StorageError):
    """The SQL store could not be opened, migrated or queried."""


class RejectedWriteError(DatabaseError):
    """The database refused this particular data (a constraint or data error).

    Unlike an outage, retrying the same operation can never succeed, so the outbox
    must not keep it: one rejected item at the head of the queue would otherwise
    hold back every later write of every user.
    """

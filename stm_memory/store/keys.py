"""How a cache key is stored in a SQL key column: as itself, or as a digest when it is
too long for the column.

Ids may be 512 characters and ":" escapes to three, so a key can reach ~4,600
characters / ~6 KB: past the key columns (2,200) and PostgreSQL's b-tree entry limit
(2,704 bytes). The rows table and the SQL live cache both store keys this way.
"""

from __future__ import annotations

import hashlib

__all__ = ["db_key", "is_digest_key"]

# Keys longer than this (in UTF-8 bytes) are stored as a digest.
_MAX_KEY_BYTES = 1024
_DIGEST_PREFIX = "sha256:"


def db_key(key: str) -> str:
    """The column value that stands for ``key``: the key, or its digest if it is long."""
    raw = key.encode("utf-8")
    if len(raw) <= _MAX_KEY_BYTES:
        return key
    return _DIGEST_PREFIX + hashlib.sha256(raw).hexdigest()


def is_digest_key(stored: str) -> bool:
    """Whether a stored column value is a digest (the key must be rebuilt from the row)."""
    return stored.startswith(_DIGEST_PREFIX)

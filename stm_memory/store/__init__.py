"""Durable stores."""

from stm_memory.store.base import MemoryStore
from stm_memory.store.keys import db_key, is_digest_key
from stm_memory.store.sql import SqlStore, create_sql_engine

__all__ = ["MemoryStore", "SqlStore", "create_sql_engine", "db_key", "is_digest_key"]

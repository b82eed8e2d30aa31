"""Durable stores."""

from .base import MemoryStore
from .sql import SqlStore, create_sql_engine

__all__ = ["MemoryStore", "SqlStore", "create_sql_engine"]

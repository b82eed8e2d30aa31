"""stm-memory: LangChain-compatible short-term memory for chat agents.

The public surface is re-exported here; everything else is private.
"""

from .config import Limits
from .engine import ShortTermMemory
from .errors import (
    CacheError,
    ConfigurationError,
    DatabaseError,
    RejectedWriteError,
    StmError,
    StorageError,
    ValidationError,
)
from .settings import DEFAULT_CATEGORY
from .turn import TOOL_NAME, TurnContext
from .types import (
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    StoredMessage,
    UserSettings,
)

__all__ = [
    "DEFAULT_CATEGORY",
    "TOOL_NAME",
    "CacheError",
    "Category",
    "ConfigurationError",
    "DatabaseError",
    "Limits",
    "MemoryEntry",
    "RejectedWriteError",
    "Scope",
    "ServerSettings",
    "ShortTermMemory",
    "StmError",
    "StorageError",
    "StoredMessage",
    "TurnContext",
    "UserSettings",
    "ValidationError",
]

__version__ = "0.1.0"

"""stm-memory: LangChain-compatible short-term memory for chat agents.

The public surface is re-exported here; everything else is private.
"""

from stm_memory.config import Limits
from stm_memory.engine import ShortTermMemory
from stm_memory.errors import (
    CacheError,
    ConfigurationError,
    DatabaseError,
    RejectedWriteError,
    StmError,
    StorageError,
    TurnOrderError,
    ValidationError,
)
from stm_memory.model import (
    DEFAULT_CATEGORY,
    Category,
    MemoryEntry,
    Scope,
    ServerSettings,
    StoredMessage,
    UserSettings,
)
from stm_memory.providers.options import TurnOptions
from stm_memory.providers.turn import MemoryTurn
from stm_memory.tool.turn import TOOL_NAME, TurnContext

__all__ = [
    "DEFAULT_CATEGORY",
    "TOOL_NAME",
    "CacheError",
    "Category",
    "ConfigurationError",
    "DatabaseError",
    "Limits",
    "MemoryEntry",
    "MemoryTurn",
    "RejectedWriteError",
    "Scope",
    "ServerSettings",
    "ShortTermMemory",
    "StmError",
    "StorageError",
    "StoredMessage",
    "TurnContext",
    "TurnOptions",
    "TurnOrderError",
    "UserSettings",
    "ValidationError",
]

__version__ = "0.1.0"

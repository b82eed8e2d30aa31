"""stm-memory: LangChain-compatible short-term memory for chat agents.

The public surface is re-exported here; everything else is private.
"""

from typing import TYPE_CHECKING, Any

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
from stm_memory.model.receipt import DayTotals, Savings, TurnBill
from stm_memory.prompt.quiet import Writing
from stm_memory.tool.turn import TOOL_NAME, TurnContext

if TYPE_CHECKING:
    # The integration kit sits above the engine: the root imports no layer above it
    # at import time (tests/unit/test_layers.py); these two load on first use.
    from stm_memory.kit.options import TurnOptions
    from stm_memory.kit.turn import MemoryTurn
    from stm_memory.kit.writer import Writer, WriteRequest
    from stm_memory.tool.memory_tool import ShortTermMemoryTool

__all__ = [
    "DEFAULT_CATEGORY",
    "TOOL_NAME",
    "CacheError",
    "Category",
    "ConfigurationError",
    "DatabaseError",
    "DayTotals",
    "Limits",
    "MemoryEntry",
    "MemoryTurn",
    "RejectedWriteError",
    "Savings",
    "Scope",
    "ServerSettings",
    "ShortTermMemory",
    "ShortTermMemoryTool",
    "StmError",
    "StorageError",
    "StoredMessage",
    "TurnBill",
    "TurnContext",
    "TurnOptions",
    "TurnOrderError",
    "UserSettings",
    "ValidationError",
    "WriteRequest",
    "Writer",
    "Writing",
]

__version__ = "0.1.0"

#: Loaded on first use: the kit sits above the engine, and the tool imports LangChain.
_LAZY = {
    "MemoryTurn": "stm_memory.kit.turn",
    "ShortTermMemoryTool": "stm_memory.tool.memory_tool",
    "TurnOptions": "stm_memory.kit.options",
    "WriteRequest": "stm_memory.kit.writer",
    "Writer": "stm_memory.kit.writer",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

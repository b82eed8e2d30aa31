"""The memory call every entry point runs (:mod:`stm_memory.tool.call`, where the
LangChain tool runs it too): re-exported for ``MemoryTurn.memory_call``."""

from stm_memory.tool.call import run_memory_call

__all__ = ["run_memory_call"]

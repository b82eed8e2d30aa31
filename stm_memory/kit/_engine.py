"""What :class:`~stm_memory.kit.MemoryTurn` needs of the engine, and nothing more.

The engine a turn drives is typed with :class:`TurnEngine`, not with
:class:`~stm_memory.ShortTermMemory`: the turn calls a dozen of the engine's methods (the
sync and async twin of each step it runs), and naming them here says which, keeps the
turn from reaching for anything else, and lets a test hand it a stand-in. The real
engine satisfies it structurally (``mypy --strict`` checks every place an integration
hands one to ``MemoryTurn.begin``).

A leaf of the kit: it imports no other kit module, and not the engine (the types it
names are the model's, the prompt's and the tool layer's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from stm_memory.tool.call import MemoryWriter

if TYPE_CHECKING:
    from stm_memory.model import MemoryEntry, Scope
    from stm_memory.model.tool_results import KeptResult
    from stm_memory.prompt.placement import MemoryContext
    from stm_memory.tool.turn import TurnContext, TurnRecord

__all__ = ["TurnEngine"]


class TurnEngine(MemoryWriter, Protocol):
    """The engine as a :class:`~stm_memory.kit.MemoryTurn` drives it: what a memory call
    runs (:class:`~stm_memory.tool.call.MemoryWriter`: ``limits``, ``update``,
    ``aupdate``; the LangChain tool takes the same), and each step's method with its
    async twin."""

    def begin_turn(
        self,
        scope: Scope,
        *,
        provider: str | None = ...,
        user_message: str | None = ...,
        tools_available: bool = ...,
    ) -> TurnContext: ...

    async def abegin_turn(
        self,
        scope: Scope,
        *,
        provider: str | None = ...,
        user_message: str | None = ...,
        tools_available: bool = ...,
    ) -> TurnContext: ...

    def default_turn(self, scope: Scope, *, provider: str | None = ...) -> TurnContext: ...

    def note_user_message(self, turn: TurnContext, text: str | None) -> None: ...

    def build_context(self, turn: TurnContext) -> MemoryContext: ...

    async def abuild_context(self, turn: TurnContext) -> MemoryContext: ...

    def get(self, scope: Scope) -> MemoryEntry | None: ...

    async def aget(self, scope: Scope) -> MemoryEntry | None: ...

    def commit(self, record: TurnRecord) -> None: ...

    async def acommit(self, record: TurnRecord) -> None: ...

    def kept_result(self, scope: Scope, call_id: str) -> KeptResult | None: ...

    async def akept_result(self, scope: Scope, call_id: str) -> KeptResult | None: ...

    def writes_tools_as_text(self, model: str) -> bool:
        """Whether ``model`` was seen writing its tool calls as text."""
        ...

    def note_text_caller(self, model: str) -> bool:
        """``model`` just wrote a tool call as text; True the first time it is said."""
        ...

    async def anote_text_caller(self, model: str) -> bool: ...

"""``MessageRecord``: the default full record behind a ``ShortTermMemoryHistory``."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

__all__ = ["MessageRecord"]


class MessageRecord(BaseChatMessageHistory):
    """The default full record: a list in memory (``InMemoryChatMessageHistory``
    without its deprecation warning)."""

    def __init__(self, messages: Sequence[BaseMessage] = ()) -> None:
        self._messages: list[BaseMessage] = list(messages)
        self._lock = threading.Lock()

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        with self._lock:
            return list(self._messages)

    async def aget_messages(self) -> list[BaseMessage]:
        return self.messages

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        with self._lock:
            self._messages.extend(messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        self.add_messages(messages)

    def clear(self) -> None:
        with self._lock:
            self._messages.clear()

    async def aclear(self) -> None:
        self.clear()

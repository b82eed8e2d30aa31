"""Messages that are not a wire format's own: LangChain's shorthand ``(role, content)``
tuples and bare strings (a user's words), and any other object, which has no role.
They carry no calls; a list of them is written in the Chat format."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from stm_memory.wire.base import MessageView, Role, content_text, normal_role

__all__ = ["SHORTHAND", "ShorthandReader"]


class ShorthandReader:
    name = "shorthand"

    def role(self, message: Any) -> Role:
        if isinstance(message, tuple):
            return normal_role(message[0]) if message else "other"
        return "user" if isinstance(message, str) else "other"

    def text(self, message: Any) -> str:
        if isinstance(message, tuple):
            return content_text(message[1]) if len(message) == 2 else ""
        return message if isinstance(message, str) else ""

    def view(self, message: Any) -> MessageView | None:
        return None  # no fields: counted from the value itself

    def user_words(self, message: Any) -> bool:
        return self.role(message) == "user"

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        return set()

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        return message

    def calls(self, message: Any) -> list[tuple[str, str]]:
        return []

    def results(self, message: Any) -> list[tuple[str, str]]:
        return []

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        return message

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        return None

    def follows_reasoning(self, message: Any) -> bool:
        return False


SHORTHAND = ShorthandReader()

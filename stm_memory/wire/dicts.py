"""What the three dict formats (OpenAI Chat, Responses, Anthropic Messages) read alike:
a ``role`` key, a ``content`` key, every other key something the model reads too."""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from stm_memory.wire.base import MessageView, Role, content_text, normal_role

__all__ = ["DictReader"]


class DictReader:
    """The reading every dict codec shares; each format's codec adds its own calls."""

    name = "dict"
    system_apart = False

    def role(self, message: Any) -> Role:
        return normal_role(message.get("role"))

    def text(self, message: Any) -> str:
        return content_text(message.get("content"))

    def view(self, message: Any) -> MessageView | None:
        if not isinstance(message, Mapping):
            return None
        rest = {k: v for k, v in message.items() if k not in ("role", "name", "content")}
        if rest.get("type") == "message":  # a Responses message item says only its role
            rest.pop("type")
        return MessageView(
            label=str(message.get("role") or message.get("type") or ""),
            name=str(message.get("name") or ""),
            content=message.get("content"),
            extra=rest or None,
        )

    def user_words(self, message: Any) -> bool:
        return self.role(message) == "user"

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        return None

    def follows_reasoning(self, message: Any) -> bool:
        return False

    def calls(self, message: Any) -> list[tuple[str, str]]:
        return []

    def results(self, message: Any) -> list[tuple[str, str]]:
        return []

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        return message

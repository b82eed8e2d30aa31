"""One captured dialogue turn, as the live cache holds it (rows keep no raw turns)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

__all__ = ["Role", "StoredMessage"]

Role: TypeAlias = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """One captured dialogue turn."""

    role: Role
    content: str
    timestamp: datetime
    # Display name, for rendering; two people may share one.
    name: str | None = None
    # Who said it (user messages): what erasure and full privacy go by.
    user_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "timestamp": self.timestamp.isoformat(),
            "name": self.name,
            "user_id": self.user_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoredMessage:
        return cls(
            role="assistant" if data["role"] == "assistant" else "user",
            content=str(data["content"]),
            timestamp=datetime.fromisoformat(data["timestamp"]),
            name=data.get("name"),
            user_id=data.get("user_id"),
        )

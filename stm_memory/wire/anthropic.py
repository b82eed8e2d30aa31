"""Anthropic Messages dicts: calls as ``tool_use`` blocks of an assistant turn, results
as ``tool_result`` blocks of a user turn, no system role in the list (the ``system``
parameter instead), and user and assistant turns that strictly alternate — so injected
text is merged into a neighbouring user turn rather than added as a message; the
``system`` parameter checked, turns merged for the wire, and tool results sent back in
one user message."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence, Set
from typing import Any

from stm_memory.errors import ValidationError
from stm_memory.wire.base import Role, ToolCall, has_block, normal_role
from stm_memory.wire.dicts import DictReader

__all__ = [
    "ANTHROPIC",
    "AnthropicCodec",
    "AnthropicSystem",
    "anthropic_system",
    "anthropic_tool_results",
    "append_system",
    "has_tool_blocks",
    "is_failed_result",
    "is_memory_block",
    "text_blocks",
    "text_parts",
    "tool_result_only",
    "wire_messages",
]

AnthropicSystem = str | list[dict[str, Any]] | None


def text_blocks(content: Any) -> list[Any]:
    """Anthropic content as a block list (a string becomes one text block)."""
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": content}] if content else []


def text_parts(texts: Sequence[str]) -> list[dict[str, Any]]:
    """One ``text`` block per text."""
    return [{"type": "text", "text": t} for t in texts]


def has_tool_blocks(messages: Sequence[Any]) -> bool:
    """Some message carries ``tool_use`` or ``tool_result`` blocks."""
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if has_block(content, "tool_use") or has_block(content, "tool_result"):
            return True
    return False


def tool_result_only(content: Any) -> bool:
    """A user turn made only of ``tool_result`` blocks (no words of the user's)."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    )


def is_memory_block(block: Any, ids: Set[str]) -> bool:
    """A ``tool_use`` or ``tool_result`` block of one of the calls ``ids``."""
    if not isinstance(block, Mapping):
        return False
    kind = block.get("type")
    if kind == "tool_use":
        return str(block.get("id")) in ids
    if kind == "tool_result":
        return str(block.get("tool_use_id")) in ids
    return False


def tool_use_ids(content: Any, tool: str) -> set[str]:
    """Ids of the ``tool_use`` blocks of ``tool`` (LangChain keeps Anthropic's blocks in
    an ``AIMessage``'s content)."""
    if not isinstance(content, list):
        return set()
    return {
        str(b.get("id"))
        for b in content
        if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("name") == tool
    }


def append_system(system: AnthropicSystem, text: str) -> AnthropicSystem:
    """``text`` after the ``system`` parameter: a block of its own after the caller's,
    so the caller's prompt stays a prefix every channel shares and a cache breakpoint
    can end right after it."""
    if system is None or system == "" or system == []:
        return text
    return [*text_blocks(system), {"type": "text", "text": text}]


class AnthropicCodec(DictReader):
    name = "anthropic"

    def role(self, message: Any) -> Role:
        role = normal_role(message.get("role"))
        if role == "user" and has_block(message.get("content"), "tool_result"):
            return "tool"
        return role

    def user_words(self, message: Any) -> bool:
        # A user turn whose results are followed by the user's words is one.
        if self.role(message) == "user":
            return True
        content = message.get("content")
        return (
            message.get("role") == "user"
            and isinstance(content, list)
            and any(isinstance(b, Mapping) and b.get("type") != "tool_result" for b in content)
        )

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        if message.get("role") != "assistant":
            return set()
        return tool_use_ids(message.get("content"), tool)

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        content = message.get("content")
        if not isinstance(content, list) or not any(is_memory_block(b, ids) for b in content):
            return message
        rest = [b for b in content if not is_memory_block(b, ids)]
        return {**message, "content": rest} if rest else None

    def system_at(self, top: bool) -> bool:
        return False  # no system role in the list: top content goes to ``system=``

    def system_message(self, text: str, messages: Sequence[Any]) -> Any:
        raise ValidationError(
            "Anthropic messages have no system role; the system parameter takes it"
        )

    def user_message(self, texts: Sequence[str]) -> Any:
        return {"role": "user", "content": text_parts(texts)}

    def can_prepend(self, message: Any) -> bool:
        return isinstance(message, Mapping) and self.role(message) == "user"

    def can_append(self, message: Any) -> bool:
        # A user turn of tool_result blocks takes text after them (the API requires the
        # results first), so appending is fine where prepending is not.
        return isinstance(message, Mapping) and message.get("role") == "user"

    def prepend(self, message: Any, texts: Sequence[str]) -> Any:
        return {**message, "content": [*text_parts(texts), *text_blocks(message.get("content"))]}

    def append(self, message: Any, texts: Sequence[str]) -> Any:
        return {**message, "content": [*text_blocks(message.get("content")), *text_parts(texts)]}

    def merged(self, message: Any, texts: Sequence[str], *, before: bool = False) -> Any:
        # Messages turns are blocks: the same as prepend and append.
        return self.prepend(message, texts) if before else self.append(message, texts)


ANTHROPIC = AnthropicCodec()


# Tool results sent with is_error: the memory's failures and a caller's tool that raised.
_FAILED_STATUSES = frozenset({"tool_execution_failed", "error"})


def is_failed_result(content: str) -> bool:
    """``content`` is a tool result reporting a failure (``{"status": …}`` JSON)."""
    if not content.startswith("{"):
        return False
    try:
        value = json.loads(content)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("status") in _FAILED_STATUSES


def wire_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The messages as the API takes them: ``role`` and ``content`` only (a speaker
    ``name`` kept for capture is not an API field), and consecutive messages of one
    role merged into one turn (several users speaking in a row; a user message after a
    turn that ended with tool results), so roles strictly alternate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role, content = message.get("role"), message.get("content")
        if out and out[-1]["role"] == role and role in ("user", "assistant"):
            merged = [*text_blocks(out[-1]["content"]), *text_blocks(content)]
            out[-1] = {"role": role, "content": merged}
        else:
            out.append({"role": role, "content": content})
    return out


def anthropic_system(system: object) -> str | list[dict[str, Any]] | None:
    """``system=`` checked: a string, or a list of text blocks (copied)."""
    if system is None or isinstance(system, str):
        return system
    if isinstance(system, Mapping) or not isinstance(system, Sequence):
        raise ValidationError("system must be a string or a list of text blocks")
    blocks: list[dict[str, Any]] = []
    for block in system:
        if not isinstance(block, Mapping):
            raise ValidationError("system must be a string or a list of text blocks")
        blocks.append(dict(block))
    return blocks


def anthropic_tool_results(results: Sequence[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
    """All results of one assistant message in ONE user message (the API wants them
    together), ``is_error`` set on the failed ones."""
    blocks: list[dict[str, Any]] = []
    for call, content in results:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id}
        if content:  # an empty text block is refused; no content is allowed
            block["content"] = content
        block["is_error"] = is_failed_result(content)
        blocks.append(block)
    return [{"role": "user", "content": blocks}]

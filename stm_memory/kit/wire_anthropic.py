"""Anthropic Messages wire helpers: content blocks, strictly alternating turns, the
``system`` parameter, and tool results sent back in one user message. The format's
block readers live with its codec (:mod:`stm_memory.wire.anthropic`) and are
re-exported here for the loops."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stm_memory.errors import ValidationError
from stm_memory.wire.anthropic import has_tool_blocks, text_blocks, tool_result_only

if TYPE_CHECKING:
    from stm_memory.kit.replies import ToolCall

__all__ = [
    "anthropic_system",
    "anthropic_tool_results",
    "has_tool_blocks",
    "is_failed_result",
    "text_blocks",
    "tool_result_only",
    "wire_messages",
]

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

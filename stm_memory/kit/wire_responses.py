"""OpenAI Responses wire helpers: call items, and tool results sent back as
``*_call_output`` items (where memory goes among input items: :mod:`.placing`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from stm_memory.wire.responses import is_call_item

if TYPE_CHECKING:
    from stm_memory.kit.replies import ToolCall

__all__ = ["is_call_item", "responses_tool_results"]


def responses_tool_results(
    results: Sequence[tuple[ToolCall, str]], custom_calls: Collection[str] = ()
) -> list[dict[str, Any]]:
    """One output item per call: ``custom_tool_call_output`` for the ids in
    ``custom_calls`` (free-text tools), ``function_call_output`` for the others."""
    return [
        {
            "type": "custom_tool_call_output"
            if call.id in custom_calls
            else "function_call_output",
            "call_id": call.id,
            "output": content,
        }
        for call, content in results
    ]

"""OpenAI Responses wire helpers: call items, where memory goes among input items, and
tool results sent back as ``*_call_output`` items."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stm_memory.providers.loop import ToolCall
from stm_memory.wire.responses import is_call_item

if TYPE_CHECKING:
    from stm_memory.prompt.placement import MemoryContext

__all__ = ["is_call_item", "place_memory", "place_with_instructions", "responses_tool_results"]


def place_memory(context: MemoryContext, items: Sequence[Any]) -> list[Any]:
    """``context.apply`` for Responses input items, treating an assistant message and the
    call items right after it as one unit, as Chat Completions has one assistant message
    with several ``tool_calls``: parallel calls of one response are never split and no
    injection lands between a reply's text and its calls. The history cut runs first,
    on the items themselves (it keeps a reply's items together on its own)."""
    items = context.cut(items)
    view: list[Any] = []
    units: dict[int, list[Any]] = {}
    i = 0
    while i < len(items):
        j = i + 1 if isinstance(items[i], Mapping) and items[i].get("role") == "assistant" else i
        while j < len(items) and is_call_item(items[j]):
            j += 1
        if j - i < 2:  # a lone item: nothing to keep together
            view.append(items[i])
            i += 1
            continue
        stand_in = dict(items[j - 1])  # a call item, so placement sees a tool call
        units[id(stand_in)] = list(items[i:j])
        view.append(stand_in)
        i = j
    placed = context.apply(view, provider="openai", trim=False)
    return [part for item in placed for part in units.get(id(item), [item])]


def place_with_instructions(
    context: MemoryContext, items: Sequence[Any], instructions: str | None
) -> tuple[str | None, list[Any]]:
    """:func:`place_memory` for a request whose caller's prompt is its ``instructions``:
    ``(instructions, input)``. In the portable form (``memory_role="inline"``) what goes
    at the top joins the instructions, which a server renders as the one leading system
    message; otherwise the instructions are left as they are."""
    if context.role != "inline" or not instructions:
        return instructions, place_memory(context, items)
    lead = {"role": "system", "content": instructions}
    first, *rest = place_memory(context, [lead, *items])
    return str(first["content"]), rest


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

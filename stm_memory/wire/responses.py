"""OpenAI Responses input items: messages with a ``role`` (read as Chat messages), and
items without one — ``*_call`` items the model made, ``*_call_output`` results, and
``reasoning`` items, each of which must stay right before the item it precedes.
Injections are written as in Chat: the two APIs take the same system and user
messages. Tool results go back as ``*_call_output`` items; a tool is a flat function
entry."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set
from typing import Any

from stm_memory.wire.base import Placement, Role, ToolCall, ToolSpec, Wire, result_text
from stm_memory.wire.openai_chat import ChatCodec

__all__ = [
    "RESPONSES",
    "RESPONSES_WIRE",
    "ResponsesCodec",
    "is_call_item",
    "is_item",
    "responses_tool",
    "responses_tool_results",
]

# The call items whose results the history cut drops with them (matched by call_id).
_FUNCTION_ITEMS = ("function_call", "function_call_output")


def is_item(message: Any) -> bool:
    """A dict without a role: a Responses item that is not a message."""
    return isinstance(message, Mapping) and message.get("role") is None


def is_call_item(item: Any) -> bool:
    """``function_call``, ``custom_tool_call`` and the built-in ``*_call`` items: no
    role, a call type."""
    return (
        isinstance(item, Mapping)
        and "role" not in item
        and str(item.get("type", "")).endswith("_call")
    )


class ResponsesCodec(ChatCodec):
    name = "openai_responses"
    part = "input_text"

    def role(self, message: Any) -> Role:
        if not is_item(message):
            return super().role(message)
        kind = str(message.get("type", ""))
        if kind.endswith("_call_output"):
            return "tool"
        if kind == "reasoning":
            return "reasoning"
        return "assistant" if kind.endswith("_call") else "other"

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        if not is_item(message):
            return super().memory_call_ids(message, tool)
        if message.get("type") == "function_call" and message.get("name") == tool:
            return {str(message.get("call_id"))}
        return set()

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if message.get("type") in _FUNCTION_ITEMS:
            return None if str(message.get("call_id")) in ids else message
        return message if is_item(message) else super().without_calls(message, ids)

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if message.get("type") in _FUNCTION_ITEMS:
            return message if str(message.get("call_id")) in ids else None
        return None if is_item(message) else super().only_calls(message, ids)

    def calls(self, message: Any) -> list[tuple[str, str]]:
        if not is_item(message):
            return super().calls(message)
        if message.get("type") in ("function_call", "custom_tool_call"):
            return [(str(message.get("call_id")), str(message.get("name") or ""))]
        return []

    def results(self, message: Any) -> list[tuple[str, str]]:
        if not is_item(message):
            return super().results(message)
        if not str(message.get("type", "")).endswith("_call_output"):
            return []
        text = result_text(message.get("output"))
        return [] if text is None else [(str(message.get("call_id")), text)]

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        if not is_item(message):
            return super().with_results(message, texts)
        if not str(message.get("type", "")).endswith("_call_output"):
            return message
        text = texts.get(str(message.get("call_id")))
        return message if text is None else {**message, "output": text}

    def follows_reasoning(self, message: Any) -> bool:
        # The API refuses a reasoning item with nothing after it: dropping the call it
        # preceded drops it too.
        return bool(message.get("type") == "function_call")


RESPONSES = ResponsesCodec()


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


def responses_tool(spec: ToolSpec) -> dict[str, Any]:
    """Responses API function tool (flat shape)."""
    return {
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": spec.schema(),
        "strict": spec.strict,
    }


def _units_placed(context: Placement, items: Sequence[Any], style: str | None = None) -> list[Any]:
    """``context.apply`` for Responses input items, an assistant message and the call
    items right after it kept as one unit, as Chat Completions has one assistant
    message with several ``tool_calls``: no injection lands between a reply's text and
    its calls. The history cut runs first, on the items themselves (it keeps a reply's
    items together on its own)."""
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


def _with_instructions(
    context: Placement, items: Sequence[Any], instructions: Any, style: str | None
) -> tuple[Any, list[Any]]:
    """A Responses request whose caller's prompt is its ``instructions``. In the
    portable form (``memory_role="inline"``) what goes at the top joins the
    instructions, which a server renders as the one leading system message; otherwise
    the instructions are left as they are."""
    if context.role != "inline" or not instructions:
        return instructions, _units_placed(context, items)
    lead = {"role": "system", "content": instructions}
    first, *rest = _units_placed(context, [lead, *items])
    return str(first["content"]), rest


#: The Responses API: input items beside ``instructions`` (module docstring).
RESPONSES_WIRE = Wire(
    name="openai-responses",
    family="openai",
    cache_key=True,
    strips_speaker_ids=True,
    place=_with_instructions,
    view=_units_placed,
    codec=RESPONSES,
)

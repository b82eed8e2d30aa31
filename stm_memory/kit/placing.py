"""Where a request's memory goes, in each form a request is written in: the one place
``MemoryTurn.prepare`` and ``MemoryTurn.view`` call (an integration calls them, never
the functions here).

- ``"messages"``: one list of messages (OpenAI Chat dicts, LangChain messages …), the
  caller's system prompt in it: :meth:`MemoryContext.apply`.
- ``"responses"``: Responses input items beside ``instructions``: an assistant message
  and the call items after it are one unit (a reply's parallel calls are never split),
  and in the portable form what goes at the top joins the instructions.
- ``"anthropic"``: Messages API turns beside the ``system`` parameter: the history cut
  reads the transcript as it is, then turns are merged for strict alternation and the
  top goes to ``system`` (:meth:`MemoryContext.apply_anthropic`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from stm_memory.wire.anthropic import wire_messages
from stm_memory.wire.responses import is_call_item

if TYPE_CHECKING:
    from stm_memory.prompt.placement import MemoryContext

__all__ = ["RequestForm", "as_sent", "place_request", "place_view"]

#: How a request holds its dialogue and its caller's system prompt (module docstring).
RequestForm = Literal["messages", "responses", "anthropic"]


def place_request(
    context: MemoryContext,
    messages: Sequence[Any],
    *,
    form: RequestForm,
    system: Any = None,
    provider: str | None = None,
) -> tuple[Any, list[Any]]:
    """``(system, messages)`` of one request with ``context`` placed (the history cut
    first, when ``context`` has a history window). Raises what placement raises: the
    turn decides what a failure sends."""
    if form == "responses":
        return _with_instructions(context, messages, system)
    if form == "anthropic":
        # The cut reads turns on the transcript as it is: merged for the wire, a new
        # user message would join the tool results before it and hide the turn.
        kept = wire_messages(context.cut(messages))
        placed_system, placed = context.apply_anthropic(kept, system, trim=False)
        return placed_system, wire_messages(placed)
    return system, context.apply(messages, provider=provider)


def as_sent(messages: Sequence[Any], *, form: RequestForm) -> list[Any]:
    """``messages`` as a request of ``form`` takes them with nothing placed (Messages
    turns strictly alternate)."""
    return wire_messages(messages) if form == "anthropic" else list(messages)


def place_view(
    context: MemoryContext,
    earlier: Sequence[Any],
    stand_in: Any,
    *,
    form: RequestForm,
    provider: str | None = None,
) -> list[Any]:
    """``earlier`` (the turns before the current one, read before the user's new message
    exists: a history or session view) with ``context`` placed as it will be once that
    message follows: ``stand_in`` holds its place and is returned where placement left
    it (with what was merged into it), for the caller to drop or keep."""
    items = [*earlier, stand_in]
    if form == "responses":
        return _units_placed(context, items)
    return context.apply(items, provider=provider)


def _units_placed(context: MemoryContext, items: Sequence[Any]) -> list[Any]:
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
    context: MemoryContext, items: Sequence[Any], instructions: str | None
) -> tuple[str | None, list[Any]]:
    """A Responses request whose caller's prompt is its ``instructions``. In the
    portable form (``memory_role="inline"``) what goes at the top joins the
    instructions, which a server renders as the one leading system message; otherwise
    the instructions are left as they are."""
    if context.role != "inline" or not instructions:
        return instructions, _units_placed(context, items)
    lead = {"role": "system", "content": instructions}
    first, *rest = _units_placed(context, [lead, *items])
    return str(first["content"]), rest

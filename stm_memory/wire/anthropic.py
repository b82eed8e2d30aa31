"""Anthropic Messages dicts: calls as ``tool_use`` blocks of an assistant turn, results
as ``tool_result`` blocks of a user turn, no system role in the list (the ``system``
parameter instead), and user and assistant turns that strictly alternate — so injected
text is merged into a neighbouring user turn rather than added as a message; the
``system`` parameter checked, turns merged for the wire, and tool results sent back in
one user message; and where its prompt-cache breakpoints go.

The API caches only up to ``cache_control`` breakpoints, at most four per request,
counting the caller's own (on tools, system blocks, message blocks, or the top-level
automatic one). Ours go, in order of value: on the last block of the dialogue before
what changes every turn — the current user message's own last block, ahead of the
briefings merged after it (the next turn reads it back) — then on the last system block
(this channel's memory: read back after the dialogue changes), and on the caller's last
system block when the memory follows it (the caller's prompt is shared by every
channel). Each is added only while the request stays within four; a block that already
has one is left alone; ours take the TTL the caller's breakpoints use, so a request
never mixes them in an order the API refuses. Which requests get them is the turn's
decision (``PreparedRequest.breakpoints``); nothing here mutates its input."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

from stm_memory.errors import ValidationError
from stm_memory.wire.base import (
    Placement,
    Role,
    ToolCall,
    ToolSpec,
    Wire,
    agreed_ttl,
    breakpoint_markers,
    has_block,
    is_memory_block,
    normal_role,
    result_text,
    text_blocks,
    text_parts,
    tool_use_ids,
)
from stm_memory.wire.dicts import DictReader

__all__ = [
    "ANTHROPIC",
    "ANTHROPIC_WIRE",
    "MAX_BREAKPOINTS",
    "AnthropicCodec",
    "AnthropicSystem",
    "Breakpoints",
    "anthropic_breakpoints",
    "anthropic_system",
    "anthropic_tool_results",
    "append_system",
    "breakpoint_budget",
    "breakpoint_marker",
    "count_breakpoints",
    "dialogue_breakpoint",
    "is_failed_result",
    "messages_tool",
    "system_placed",
    "tool_result_only",
    "wire_messages",
]

AnthropicSystem = str | list[dict[str, Any]] | None


def tool_result_only(content: Any) -> bool:
    """A user turn made only of ``tool_result`` blocks (no words of the user's)."""
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)
    )


def append_system(system: AnthropicSystem, text: str) -> AnthropicSystem:
    """``text`` after the ``system`` parameter: a block of its own after the caller's,
    so the caller's prompt stays a prefix every channel shares and a cache breakpoint
    can end right after it."""
    if system is None or system == "" or system == []:
        return text
    return [*text_blocks(system), {"type": "text", "text": text}]


class AnthropicCodec(DictReader):
    name = "anthropic"
    system_apart = True

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

    def calls(self, message: Any) -> list[tuple[str, str]]:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            return []
        return [
            (str(b.get("id")), str(b.get("name") or ""))
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "tool_use"
        ]

    def results(self, message: Any) -> list[tuple[str, str]]:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            return []
        found: list[tuple[str, str]] = []
        for b in content:
            if isinstance(b, Mapping) and b.get("type") == "tool_result":
                text = result_text(b.get("content") or "")
                if text is not None:
                    found.append((str(b.get("tool_use_id")), text))
        return found

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            return message
        out = [
            {**b, "content": texts[str(b.get("tool_use_id"))]}
            if isinstance(b, Mapping)
            and b.get("type") == "tool_result"
            and str(b.get("tool_use_id")) in texts
            else b
            for b in content
        ]
        return {**message, "content": out} if out != content else message

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            return None
        kept = [b for b in content if is_memory_block(b, ids)]
        return {**message, "content": kept} if kept else None

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

    def marked(self, message: Any, marker: Mapping[str, str]) -> Any | None:
        return None  # OpenAI's breakpoint; Anthropic's are cache_control (see below)


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


def messages_tool(spec: ToolSpec) -> dict[str, Any]:
    """Messages API ``tools=[...]`` entry."""
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.schema(),
    }


# -- prompt-cache breakpoints ----------------------------------------------------------


def _current_user_index(messages: Sequence[Any]) -> int | None:
    """The current user message of a Messages body: the last user turn with words of
    its own (a turn of tool results alone is not one)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and ANTHROPIC.user_words(message):
            return index
    return None


#: The Messages API refuses a request with more ``cache_control`` breakpoints.
MAX_BREAKPOINTS = 4


def breakpoint_budget(existing: int, *, reserved: int = 0) -> int:
    """How many breakpoints we may add to a request that has ``existing`` ones, keeping
    ``reserved`` for a layer that adds its own after ours (a caching middleware inside
    ours): the one budget of every request we mark."""
    return MAX_BREAKPOINTS - existing - reserved


def count_breakpoints(request: Mapping[str, Any]) -> int:
    """Breakpoints a Messages request already has, the top-level automatic one included."""
    return len(breakpoint_markers(request))


def breakpoint_marker(ttl: str | None) -> dict[str, str]:
    """A ``cache_control`` marker with ``ttl`` (none: the API's 5 minutes)."""
    return {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}


def _mark_last(content: Any, marker: Mapping[str, str]) -> Any | None:
    """``content`` as blocks with ``marker`` on its last block; None when that block
    cannot carry one (empty, thinking) or already has one."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list) or not blocks or not isinstance(blocks[-1], Mapping):
        return None
    last = blocks[-1]
    if last.get("cache_control") or last.get("type") in ("thinking", "redacted_thinking"):
        return None
    if last.get("type") == "text" and not last.get("text"):
        return None  # the API refuses a breakpoint on an empty text block
    return [*blocks[:-1], {**last, "cache_control": dict(marker)}]


def anthropic_breakpoints(
    request: Mapping[str, Any],
    *,
    caller_system_blocks: int = 0,
    injected: Collection[str] = (),
) -> dict[str, Any]:
    """``request`` (a Messages API body) with our breakpoints added (see the module
    docstring). ``caller_system_blocks``: how many leading system blocks are the
    caller's own (the memory block follows them); ``injected``: the texts placement
    merged into user turns this turn (briefings, nudge), which change every turn."""
    out = dict(request)
    budget = breakpoint_budget(count_breakpoints(request))
    marker = breakpoint_marker(agreed_ttl(breakpoint_markers(request)))
    steps: list[Callable[[dict[str, Any]], bool]] = [
        lambda body: _mark_dialogue(body, marker, frozenset(injected)),
        lambda body: _mark_system(body, marker, None),
    ]
    if caller_system_blocks:
        steps.append(lambda body: _mark_system(body, marker, caller_system_blocks - 1))
    for step in steps:
        if budget <= 0:
            break
        if step(out):
            budget -= 1
    return out


def _mark_dialogue(
    body: dict[str, Any], marker: Mapping[str, str], injected: frozenset[str]
) -> bool:
    messages = list(body.get("messages") or ())
    current = _current_user_index(messages)
    if current is None:
        return False
    contents = [m.get("content") if isinstance(m, Mapping) else None for m in messages]
    found = dialogue_breakpoint(contents, current, marker, injected)
    if found is None:
        return False
    index, content = found
    messages[index] = {**messages[index], "content": content}
    body["messages"] = messages
    return True


def dialogue_breakpoint(
    contents: Sequence[Any],
    current: int,
    marker: Mapping[str, str],
    injected: Collection[str] = (),
    *,
    text_only: bool = False,
) -> tuple[int, list[Any]] | None:
    """Where the dialogue's breakpoint goes, given the messages' ``contents`` and the
    index of the current user message: ``(index, new content)`` with ``marker`` on the
    current message's own last block (ahead of the ``injected`` texts), else on the
    message before it; None when neither can carry one. ``text_only``: only a text
    block qualifies (LangChain AI messages carry their tool calls outside ``content``)."""
    for index in (current, current - 1):
        if index < 0:
            break
        own = _own_blocks(contents[index], injected)
        last = own[-1] if own else None
        if last is not None and (not text_only or _is_text(last)):
            content = _mark_own_last(contents[index], marker, injected)
            if content is not None:
                return index, content
        if own:
            return None  # its own last block cannot carry one: look no further back
    return None


@dataclass(frozen=True, slots=True)
class Breakpoints:
    """Where one request's Anthropic ``cache_control`` breakpoints go, as the turn decided
    them (:attr:`PreparedRequest.breakpoints`; the rules: the Messages API's wire
    module, :mod:`stm_memory.wire.anthropic`): at the end of the dialogue, ahead of
    the texts placed after it that change every turn (``injected``), then on the
    memory's system block and on the caller's last one (``caller_system_blocks`` of
    them lead the system prompt), each while the request stays within the one
    budget."""

    injected: tuple[str, ...] = ()
    caller_system_blocks: int = 0

    @classmethod
    def of(cls, injected: Sequence[str], system: Any, placed_system: Any) -> Breakpoints:
        """The breakpoints of a request whose caller's ``system`` became
        ``placed_system``: the caller's blocks come first, the memory block, if one was
        placed there, after them."""
        ahead = len(text_blocks(system)) if placed_system != system else 0
        return cls(tuple(injected), ahead)

    def on_body(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A Messages API ``body`` (system, messages, tools, the caller's settings) with
        the breakpoints added; the caller's own are counted and left alone."""
        return anthropic_breakpoints(
            body, caller_system_blocks=self.caller_system_blocks, injected=self.injected
        )

    def on_dialogue(
        self,
        contents: Sequence[Any],
        current: int | None,
        *,
        markers: Sequence[Any],
        reserved: int = 0,
        text_only: bool = True,
    ) -> tuple[int, list[Any]] | None:
        """For a framework that holds its messages as objects of its own (LangChain),
        the one breakpoint at the end of the dialogue: ``(index, content)`` of the
        message to mark (``contents``: the messages' contents, ``current``: the index of
        the user's message), with the TTL the request's ``markers`` (the breakpoints it
        already carries) agree on; None when there is no room within the budget, with
        ``reserved`` kept for a layer that adds its own after ours, or no block can
        carry it. ``text_only``: only a text block qualifies (tool calls carried
        outside ``content``)."""
        if current is None or breakpoint_budget(len(markers), reserved=reserved) < 1:
            return None
        marker = breakpoint_marker(agreed_ttl(markers))
        return dialogue_breakpoint(contents, current, marker, self.injected, text_only=text_only)


def _is_text(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "text"


def _as_blocks(content: Any) -> list[Any]:
    """Message content as a block list (a string is one text block). Not
    :func:`text_blocks`: an empty string stays a block here, so a message whose own
    last block is empty stops the search for a breakpoint instead of being skipped."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _own_blocks(content: Any, injected: Collection[str]) -> list[Any]:
    """The blocks up to the last one that is not an ``injected`` text (the briefings and
    nudge placement merged in this turn)."""
    blocks = _as_blocks(content)
    end = len(blocks)
    while end and isinstance(blocks[end - 1], Mapping) and blocks[end - 1].get("text") in injected:
        end -= 1
    return blocks[:end]


def _mark_own_last(
    content: Any, marker: Mapping[str, str], injected: Collection[str] = ()
) -> list[Any] | None:
    """``content`` as blocks with ``marker`` on its own last block (ahead of the
    ``injected`` texts); None when that block cannot carry one."""
    own = _own_blocks(content, injected)
    marked = _mark_last(own, marker) if own else None
    if marked is None:
        return None
    return [*marked, *_as_blocks(content)[len(own) :]]


def _mark_system(body: dict[str, Any], marker: Mapping[str, str], index: int | None) -> bool:
    system = body.get("system")
    if not system:
        return False
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    at = len(blocks) - 1 if index is None else index
    if not 0 <= at < len(blocks) or (index is not None and at == len(blocks) - 1):
        return False
    marked = _mark_last(blocks[: at + 1], marker)
    if marked is None:
        return False
    body["system"] = [*marked, *blocks[at + 1 :]]
    return True


# -- placement -------------------------------------------------------------------------


def system_placed(
    context: Placement,
    messages: Sequence[Any],
    system: AnthropicSystem = None,
    *,
    trim: bool = True,
) -> tuple[AnthropicSystem, list[Any]]:
    """The Messages API's placement: what goes at the top joins the end of the
    ``system`` parameter (after any cached prefix), the rest goes into user turns.
    Returns ``(system, messages)``; neither input is mutated."""
    rest = context
    top = context.top()
    if top and context.role in ("system", "inline"):
        system = append_system(system, top)
        rest = context.without_memory()
    return system, rest.apply(messages, provider="anthropic", trim=trim)


def _placed(
    context: Placement, messages: Sequence[Any], system: Any, style: str | None
) -> tuple[Any, list[Any]]:
    # The cut reads turns on the transcript as it is: merged for the wire, a new user
    # message would join the tool results before it and hide the turn.
    kept = wire_messages(context.cut(messages))
    placed_system, placed = system_placed(context, kept, system, trim=False)
    return placed_system, wire_messages(placed)


#: The Messages API: turns beside the ``system`` parameter, strictly alternating.
ANTHROPIC_WIRE = Wire(
    name="anthropic-messages",
    family="anthropic",
    none_choice={"type": "none"},
    tool_blocks_need_a_tool=True,
    breakpoints=True,
    place=_placed,
    sent=wire_messages,
)

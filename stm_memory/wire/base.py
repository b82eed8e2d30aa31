"""What every codec shares: the codec protocol, the normalised roles and the reading of
a message's content (a string or a list of parts), which is the same in every dict
format; and the two values every API's module reads and writes, a tool call off a reply
(:class:`ToolCall`) and a tool as a request describes it (:class:`ToolSpec`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from stm_memory.errors import ValidationError

__all__ = [
    "MESSAGES_WIRE",
    "ROLE_ALIASES",
    "Codec",
    "MessageView",
    "Placement",
    "Reader",
    "Role",
    "ToolCall",
    "ToolSpec",
    "Wire",
    "agreed_ttl",
    "breakpoint_markers",
    "content_text",
    "has_block",
    "has_tool_blocks",
    "is_empty",
    "is_memory_block",
    "merged_content",
    "normal_role",
    "result_text",
    "text_blocks",
    "text_parts",
    "tool_use_ids",
]

Role = Literal["system", "user", "assistant", "tool", "reasoning", "other"]

# Every role name a format writes, mapped to the normalised role.
ROLE_ALIASES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call a model's reply asks for, read off its API's reply: ``arguments``
    as the API gave them (JSON text, or already a mapping), ``truncated`` when the reply
    was cut off before they were complete."""

    id: str
    name: str
    arguments: str | Mapping[str, Any] | None
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a request describes it, in no API's format: its name, its description
    and its JSON-schema parameters. Each API's wire module writes it in its own
    (``chat_tool``, ``responses_tool``, ``messages_tool``), each with a deep copy: a
    request may be edited by its caller."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    #: OpenAI's strict mode (every property required): off for a tool with an
    #: optional parameter.
    strict: bool = True

    def schema(self) -> dict[str, Any]:
        """The parameters as a fresh JSON schema (a deep copy: the spec is the turn's,
        and a framework may edit the schema it is handed)."""
        return {k: _copied(v) for k, v in self.parameters.items()}


def _copied(value: Any) -> Any:
    """A copy of a JSON value, every mapping and list anew (``deepcopy`` in a fraction
    of its time: the memo and dispatch are for objects JSON does not hold)."""
    if isinstance(value, Mapping):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    return value


def normal_role(name: object) -> Role:
    """The normalised role of a role name as written ("other" when unknown)."""
    return ROLE_ALIASES.get(str(name), "other")


@dataclass(frozen=True, slots=True)
class MessageView:
    """A message as written, for token counting and request reading: its role or item
    type (``label``), speaker name, content, and whatever else the model reads (tool
    calls, call ids; None when nothing)."""

    label: str
    name: str
    content: Any
    extra: Any = None


class Reader(Protocol):
    """How one message format answers what placement and the history cut ask of a
    message. Every method takes one message of the format and never mutates it."""

    name: str

    def role(self, message: Any) -> Role: ...

    def text(self, message: Any) -> str:
        """The visible text (what a user or the assistant said)."""
        ...

    def view(self, message: Any) -> MessageView | None: ...

    def user_words(self, message: Any) -> bool:
        """The message carries words of the user's (not only tool results)."""
        ...

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        """Ids of the calls of tool ``tool`` the message makes."""
        ...

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        """The message less the calls and results with these ids (the same object
        when it has none of them); None when nothing of it is left."""
        ...

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        """The message reduced to the calls with these ids, without its text (what
        :func:`stm_memory.kit.answer_last` keeps in place of a reply that answered and
        then wrote the memory); None when it makes none of them."""
        ...

    def follows_reasoning(self, message: Any) -> bool:
        """A reasoning item right before the message belongs to it (and must go with
        it when it is dropped)."""
        ...

    def calls(self, message: Any) -> list[tuple[str, str]]:
        """``(call id, tool name)`` of each tool call the message makes."""
        ...

    def results(self, message: Any) -> list[tuple[str, str]]:
        """``(call id, text)`` of each tool result the message carries whose content
        is text alone (a result with an image or a file is never cleared: its text
        would not be all of it)."""
        ...

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        """The message with the content of its results for the calls in ``texts``
        replaced by their text (the same object when it carries none of them)."""
        ...


class Codec(Reader, Protocol):
    """A wire format a request's list can be written in: reading, plus how injections
    (memory, briefings, nudge) are written into a list of the format."""

    #: The format keeps the system prompt apart from its turns (the Messages API's
    #: ``system`` parameter): its turns are merged already, and what the portable form
    #: puts at the top goes there, not into a user turn.
    system_apart: bool

    def system_at(self, top: bool) -> bool:
        """Whether an injection at the top (``top``) or further down may be a system
        message in this format."""
        ...

    def system_message(self, text: str, messages: Sequence[Any]) -> Any: ...

    def user_message(self, texts: Sequence[str]) -> Any: ...

    def can_prepend(self, message: Any) -> bool:
        """Injected user text may go in front of this message's content."""
        ...

    def can_append(self, message: Any) -> bool:
        """Injected user text may go after this message's content."""
        ...

    def prepend(self, message: Any, texts: Sequence[str]) -> Any: ...

    def append(self, message: Any, texts: Sequence[str]) -> Any: ...

    def merged(self, message: Any, texts: Sequence[str], *, before: bool = False) -> Any:
        """``message`` with ``texts`` after its content (``before``: ahead of it), in the
        content's own shape (a string stays one string, paragraphs apart): the portable form
        (``memory_role="inline"``), for chat templates that take one leading system
        message and strict user/assistant alternation."""
        ...

    def marked(self, message: Any, marker: Mapping[str, str]) -> Any | None:
        """``message`` with OpenAI's explicit cache breakpoint ``marker`` on its last
        text block (text content becomes one block); None when the format or the
        message takes none (not a system or user message, no text, one already)."""
        ...


def has_block(content: Any, kind: str) -> bool:
    """``content`` is a list of parts with one of type ``kind``."""
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == kind for b in content
    )


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


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [content] if isinstance(content, Mapping) else []


def breakpoint_markers(request: Mapping[str, Any]) -> list[Any]:
    """Every ``cache_control`` marker a Messages request carries: the top-level automatic
    one, then tools, system blocks and message blocks."""
    found = [request.get("cache_control")]
    found += [t.get("cache_control") for t in request.get("tools") or () if isinstance(t, Mapping)]
    blocks = list(_blocks(request.get("system")))
    for message in request.get("messages") or ():
        if isinstance(message, Mapping):
            blocks += _blocks(message.get("content"))
    found += [b.get("cache_control") for b in blocks if isinstance(b, Mapping)]
    return [marker for marker in found if marker]


def agreed_ttl(markers: Iterable[Any]) -> str | None:
    """The TTL every one of ``markers`` uses, when they agree (else the default): ours
    take it, since the API refuses a shorter TTL ahead of a longer one."""
    found = {m.get("ttl") for m in markers if isinstance(m, Mapping)}
    return found.pop() if len(found) == 1 else None


def merged_content(
    content: Any, texts: Sequence[str], *, part: str = "text", before: bool = False
) -> Any:
    """``content`` (a string or a list of parts) with ``texts`` after it (``before``:
    ahead of it): one string when it is a string (text after the caller's keeps the
    caller's as its byte prefix, so a prompt cache still serves it), else one ``part``
    part per text beside the caller's parts."""
    if content is None or isinstance(content, str):
        own = [content] if content else []
        return "\n\n".join([*texts, *own] if before else [*own, *texts])
    parts = [{"type": part, "text": t} for t in texts]
    return [*parts, *content] if before else [*content, *parts]


def result_text(content: Any) -> str | None:
    """A tool result's content as text when text is all it holds (a string, or text
    parts only); None when it holds anything else (an image, a file)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, Mapping) and b.get("type") in ("text", "input_text", "output_text")
        for b in content
    ):
        return "\n".join(str(b.get("text") or "") for b in content)
    return None


def content_text(content: Any) -> str:
    """Visible text of a message's content: a string, or the text parts of a block list
    (OpenAI ``text``/``input_text``/``output_text`` parts, Anthropic ``text`` blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Iterable) and not isinstance(content, bytes | Mapping):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") in (
                "text",
                "input_text",
                "output_text",
            ):
                parts.append(str(block.get("text") or ""))
        return "\n".join(p for p in parts if p)
    raise ValidationError(f"unsupported message content of type {type(content).__name__}")


def is_empty(content: Any) -> bool:
    """Content with nothing left in it (after calls were taken out)."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, list):
        return len(content) == 0
    return False


def _is_marked(block: Any) -> bool:
    return isinstance(block, Mapping) and "prompt_cache_breakpoint" in block


def breakpoints_in(message: Any) -> int:
    """OpenAI explicit cache breakpoints on ``message``'s content blocks (a dict's or a
    message object's)."""
    content = (
        message.get("content")
        if isinstance(message, Mapping)
        else getattr(message, "content", None)
    )
    if not isinstance(content, list):
        return 0
    return sum(_is_marked(b) for b in content)


def marked_content(content: Any, marker: Mapping[str, str], *, part: str) -> list[Any] | None:
    """``content`` (a string or a list of blocks) with ``marker`` as the
    ``prompt_cache_breakpoint`` of its last text block; None without text or when a
    block already has one."""
    if isinstance(content, str):
        if not content:
            return None
        return [{"type": part, "text": content, "prompt_cache_breakpoint": dict(marker)}]
    if not isinstance(content, list) or any(_is_marked(b) for b in content):
        return None
    for i in range(len(content) - 1, -1, -1):
        block = content[i]
        if isinstance(block, Mapping) and block.get("type") in ("text", "input_text"):
            blocks = list(content)
            blocks[i] = {**block, "prompt_cache_breakpoint": dict(marker)}
            return blocks
    return None


class Placement(Protocol):
    """What a wire's placement asks of the memory to place (a request's
    :class:`~stm_memory.prompt.placement.MemoryContext`): this layer holds the rules of
    each API, the prompt layer what goes where in a list."""

    @property
    def role(self) -> str: ...

    def cut(self, messages: Sequence[Any]) -> list[Any]: ...

    def apply(
        self, messages: Sequence[Any], *, provider: str | None = None, trim: bool = True
    ) -> list[Any]: ...

    def top(self) -> str | None: ...

    def without_memory(self) -> Placement: ...


#: ``(context, messages, system, style) -> (system, messages)``: one request placed.
Place = Callable[[Placement, Sequence[Any], Any, "str | None"], tuple[Any, list[Any]]]
#: ``(context, items, style) -> items``: a view placed (the stand-in for the user's
#: message last among ``items``).
PlaceView = Callable[[Placement, Sequence[Any], "str | None"], list[Any]]


def place_messages(
    context: Placement, messages: Sequence[Any], system: Any, style: str | None
) -> tuple[Any, list[Any]]:
    """One list of messages, the caller's system prompt in it (or kept apart, as it
    came): the history cut, then the memory placed in ``style``'s messages."""
    return system, context.apply(messages, provider=style)


def view_messages(context: Placement, items: Sequence[Any], style: str | None) -> list[Any]:
    return context.apply(items, provider=style)


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """One API a request is written for, as one value: its rules and how memory is
    placed in it. Each API's module exports its own (``CHAT_WIRE``, ``RESPONSES_WIRE``,
    ``ANTHROPIC_WIRE``); :data:`MESSAGES_WIRE` is a list of messages for an API we write
    no hints for, and :func:`stm_memory.wire.wire_for` maps a chat model's provider to
    its wire. ``MemoryTurn.prepare`` reads the answers here; no ``if`` on an API's name
    elsewhere (pydantic-ai's habit)."""

    name: str
    #: The family of cache hints and tool words the API takes (``"openai"``,
    #: ``"anthropic"``), also the message style placement writes in when the request
    #: names no provider; None: hints we do not write.
    family: str | None = None
    #: Keeps a tool defined but uncallable (a described memory tool).
    none_choice: str | Mapping[str, str] = "none"
    #: Refuses a request whose history holds tool blocks when it defines no tool; the
    #: memory tool is then described, uncallable. Holds through any endpoint in front of
    #: the API (an OpenAI-compatible proxy before Anthropic).
    tool_blocks_need_a_tool: bool = False
    #: Takes OpenAI's ``prompt_cache_key`` setting and explicit breakpoints.
    cache_key: bool = False
    #: Takes Anthropic's ``cache_control`` breakpoints.
    breakpoints: bool = False
    #: A message dict's ``user_id`` (ours, for capture) is not one of its fields.
    strips_speaker_ids: bool = False
    place: Place = place_messages
    view: PlaceView = view_messages
    #: ``messages`` as the API takes them with nothing placed.
    sent: Callable[[Sequence[Any]], list[Any]] = list
    #: The codec its messages are written in, where the API fixes one whatever the list
    #: holds (Responses input); None: read off the list.
    codec: Codec | None = None

    def no_tool_choice(self) -> str | dict[str, str]:
        """:attr:`none_choice`, a fresh copy (the caller's request may be edited)."""
        choice = self.none_choice
        return choice if isinstance(choice, str) else dict(choice)

    def as_messages(self) -> Wire:
        """This API's rules for a list of messages a chat model converts for it (a
        LangChain model's): placed as a list, the API's hints and refusals kept."""
        return replace(
            self,
            name=f"{self.name}-converted",
            place=place_messages,
            view=view_messages,
            sent=list,
            codec=None,
        )


#: A list of messages for an API we write no hints for (LangChain messages a chat model
#: converts, an OpenAI-compatible session's portable form).
MESSAGES_WIRE = Wire(name="messages")

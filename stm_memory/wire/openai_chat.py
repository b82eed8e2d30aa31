"""OpenAI Chat Completions dicts: calls in an assistant message's ``tool_calls``, results
in ``role: "tool"`` messages, injections as messages of their own; the calls read off a
reply, the results sent back, a tool's ``tools=[...]`` entry; and OpenAI's explicit
prompt-cache breakpoints (Responses writes them the same way, in its own part type).

From gpt-5.6 on, OpenAI matches a cached prefix only where a breakpoint ends it: one
implicit, at the end of the newest message, and explicit ones on content blocks
(``prompt_cache_breakpoint``; at most three written beside the implicit one, four
without it). A prefix that changes before the newest message is then cached only up to
the last explicit breakpoint ahead of the change, so ours mark, in order of value: the
end of the dialogue ahead of the texts placed after it that change every turn (the
nudge), the memory block (read back until the next swap), and the caller's system
prompt (shared by every channel). Older models refuse the field (400): which requests
get them is the turn's decision (the model's profile says); nothing here mutates its
input."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set
from typing import Any

from stm_memory.wire.base import (
    Codec,
    ToolCall,
    ToolSpec,
    Wire,
    breakpoints_in,
    is_empty,
    marked_content,
    merged_content,
    result_text,
)
from stm_memory.wire.dicts import DictReader

__all__ = [
    "BREAKPOINT",
    "CHAT",
    "CHAT_WIRE",
    "ChatCodec",
    "breakpoint_indices",
    "cache_mode",
    "calls_without",
    "chat_tool",
    "chat_tool_call",
    "chat_tool_results",
    "explicit_breakpoints",
    "function_call",
    "tool_call_ids",
]

#: An explicit prompt-cache breakpoint, on a content block (gpt-5.6 and later).
BREAKPOINT: Mapping[str, str] = {"mode": "explicit"}
#: Explicit breakpoints one request writes: the latest three beside the implicit one,
#: four when ``prompt_cache_options.mode`` is ``"explicit"`` (no implicit one).
_WRITTEN = {"implicit": 3, "explicit": 4}


def tool_call_ids(calls: Any, tool: str) -> set[str]:
    """Ids of the ``tool_calls`` entries (``{"id", "function": {"name"}}``) of ``tool``.
    LangChain keeps the same list in an ``AIMessage``'s ``additional_kwargs``."""
    if not isinstance(calls, list):
        return set()
    return {
        str(c.get("id"))
        for c in calls
        if isinstance(c, Mapping)
        and isinstance(c.get("function"), Mapping)
        and c["function"].get("name") == tool
    }


def calls_without(calls: list[Any], ids: Set[str]) -> list[Any]:
    """``tool_calls`` entries whose id is not in ``ids``."""
    return [c for c in calls if not (isinstance(c, Mapping) and str(c.get("id")) in ids)]


class ChatCodec(DictReader):
    """Chat messages. Memory and briefings become messages of their own: system ones
    (``developer`` when the list opens with one), or user ones with string content,
    which Chat and Responses alike accept several of in a row."""

    name = "openai_chat"

    def memory_call_ids(self, message: Any, tool: str) -> set[str]:
        if message.get("role") != "assistant":
            return set()
        return tool_call_ids(message.get("tool_calls"), tool)

    def without_calls(self, message: Any, ids: Set[str]) -> Any | None:
        if message.get("role") == "tool":
            return None if str(message.get("tool_call_id")) in ids else message
        calls = message.get("tool_calls")
        if not isinstance(calls, list):
            return message
        rest = calls_without(calls, ids)
        if len(rest) == len(calls):
            return message
        new = {**message, "tool_calls": rest}
        if not rest:
            del new["tool_calls"]
            if is_empty(new.get("content")):
                return None
        return new

    def calls(self, message: Any) -> list[tuple[str, str]]:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            return []
        return [
            (str(c.get("id")), str(c["function"].get("name") or ""))
            for c in calls
            if isinstance(c, Mapping) and isinstance(c.get("function"), Mapping)
        ]

    def results(self, message: Any) -> list[tuple[str, str]]:
        if message.get("role") != "tool":
            return []
        text = result_text(message.get("content"))
        return [] if text is None else [(str(message.get("tool_call_id")), text)]

    def with_results(self, message: Any, texts: Mapping[str, str]) -> Any:
        if message.get("role") != "tool":
            return message
        text = texts.get(str(message.get("tool_call_id")))
        return message if text is None else {**message, "content": text}

    def only_calls(self, message: Any, ids: Set[str]) -> Any | None:
        calls = message.get("tool_calls")
        if message.get("role") != "assistant" or not isinstance(calls, list):
            return None
        kept = [c for c in calls if isinstance(c, Mapping) and str(c.get("id")) in ids]
        return {**message, "content": None, "tool_calls": kept} if kept else None

    def system_at(self, top: bool) -> bool:
        return True

    def system_message(self, text: str, messages: Sequence[Any]) -> Any:
        first = messages[0] if messages else None
        developer = isinstance(first, Mapping) and first.get("role") == "developer"
        return {"role": "developer" if developer else "system", "content": text}

    def user_message(self, texts: Sequence[str]) -> Any:
        return {"role": "user", "content": "\n\n".join(texts)}

    # Chat and Responses content parts differ, so injected text is never merged into a
    # message of the caller's: it is a user message of its own.
    def can_prepend(self, message: Any) -> bool:
        return False

    def can_append(self, message: Any) -> bool:
        return False

    def prepend(self, message: Any, texts: Sequence[str]) -> Any:
        return message

    def append(self, message: Any, texts: Sequence[str]) -> Any:
        return message

    #: The content part type text goes in (Responses input messages say input_text).
    part = "text"

    def merged(self, message: Any, texts: Sequence[str], *, before: bool = False) -> Any:
        content = merged_content(message.get("content"), texts, part=self.part, before=before)
        return {**message, "content": content}

    def marked(self, message: Any, marker: Mapping[str, str]) -> Any | None:
        if self.role(message) not in ("system", "user"):
            return None
        content = marked_content(message.get("content"), marker, part=self.part)
        return {**message, "content": content} if content is not None else None


CHAT = ChatCodec()

#: Chat Completions: one list of messages, the caller's system prompt in it.
CHAT_WIRE = Wire(name="openai-chat", family="openai", cache_key=True, strips_speaker_ids=True)


def function_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A Chat ``tool_calls`` entry of type ``function``."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chat_tool_call(raw: Mapping[str, Any], truncated: bool) -> ToolCall:
    """One ``tool_calls`` entry: a function call (JSON text arguments), or a caller's
    custom (free-text) tool, whose input becomes ``{"input": text}``."""
    if raw.get("type") == "custom":
        custom = raw.get("custom") or {}
        args = {"input": custom.get("input", "")}
        return ToolCall(str(raw.get("id")), str(custom.get("name", "")), args, truncated)
    function = raw.get("function") or {}
    return ToolCall(
        str(raw.get("id")), str(function.get("name", "")), function.get("arguments"), truncated
    )


def chat_tool_results(results: Sequence[tuple[ToolCall, str]]) -> list[dict[str, Any]]:
    """One ``role: "tool"`` message per call, in the calls' order."""
    return [
        {"role": "tool", "tool_call_id": call.id, "content": content} for call, content in results
    ]


def chat_tool(spec: ToolSpec) -> dict[str, Any]:
    """Chat Completions ``tools=[...]`` entry."""
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.schema(),
            "strict": spec.strict,
        },
    }


def explicit_breakpoints(
    messages: Sequence[Any], at: Sequence[int], *, codec: Codec, mode: str | None = None
) -> list[Any]:
    """``messages`` (of ``codec``'s format) with an explicit breakpoint on each message
    indexed in ``at`` (in order of value) while the request writes them all: the
    caller's own are counted first and left alone (``mode``: the caller's
    ``prompt_cache_options.mode``). A copy."""
    out = list(messages)
    room = _WRITTEN.get(mode or "implicit", 3) - sum(breakpoints_in(m) for m in out)
    for index in at:
        if room <= 0:
            break
        if 0 <= index < len(out):
            marked = codec.marked(out[index], BREAKPOINT)
            if marked is not None:
                out[index] = marked
                room -= 1
    return out


def _leading_system(messages: Sequence[Any], codec: Codec) -> int:
    n = 0
    for message in messages:
        if codec.role(message) != "system":
            break
        n += 1
    return n


def breakpoint_indices(
    given: Sequence[Any], placed: Sequence[Any], transient: Collection[str], *, codec: Codec
) -> list[int]:
    """Where our breakpoints go in ``placed`` (the request as placed from the caller's
    ``given`` messages), in order of value: the last message ahead of the trailing
    ``transient`` ones (the dialogue's end, which the next turn reads back: the
    implicit breakpoint falls after the nudge), the memory block (the last system
    message placement added ahead of the dialogue) and the caller's last system
    message."""
    out: list[int] = []
    end = len(placed)
    while end > 0 and codec.text(placed[end - 1]) in transient:
        end -= 1
    if 0 < end < len(placed):
        out.append(end - 1)
    caller, ahead = _leading_system(given, codec), _leading_system(placed, codec)
    if ahead > caller:
        out.append(ahead - 1)
    if caller:
        out.append(caller - 1)
    return out


def cache_mode(settings: Mapping[str, Any]) -> str | None:
    """The caller's ``prompt_cache_options.mode`` (``"implicit"``, ``"explicit"``), if set."""
    options = settings.get("prompt_cache_options")
    mode = options.get("mode") if isinstance(options, Mapping) else None
    return mode if isinstance(mode, str) else None

"""Provider-neutral reply specs and the FIFO script a test fills.

A test says what the model "says" next (text, tool calls, a truncated reply, an
HTTP error); the endpoint the client happens to call decides the wire shape.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "ErrorReply",
    "Reply",
    "ReplyFn",
    "Script",
    "ScriptEntry",
    "ToolCall",
]


@dataclass(frozen=True)
class ToolCall:
    """One function/tool call the model makes.

    ``arguments`` is either a mapping (serialised as compact JSON) or a raw JSON
    string sent verbatim, e.g. a partial JSON prefix for a truncated call.
    ``id`` overrides the deterministic call id the server would otherwise assign.
    """

    name: str
    arguments: Mapping[str, Any] | str
    id: str | None = None

    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Reply:
    """What the model produces in one turn.

    ``truncated`` means the output limit was hit: OpenAI Chat ``finish_reason``
    "length", Responses ``status`` "incomplete" with ``incomplete_details.reason``
    "max_output_tokens", Anthropic ``stop_reason`` "max_tokens". The last part of
    the reply (the last tool call, else the text) is the one that was cut.
    ``input_tokens``/``output_tokens`` override the approximate usage counts.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    truncated: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error the provider returns instead of a completion.

    Rendered in the called provider's error JSON shape. ``error_type`` defaults
    to the provider's usual type for ``status`` (e.g. 429 -> rate limit).
    """

    status: int
    message: str
    error_type: str | None = None
    code: str | None = None


ReplyFn: TypeAlias = Callable[[dict[str, Any]], Reply | ErrorReply]
ScriptEntry: TypeAlias = Reply | ErrorReply | ReplyFn

ToolCallLike: TypeAlias = ToolCall | tuple[str, Mapping[str, Any] | str]


def _as_tool_call(call: ToolCallLike) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    name, arguments = call
    return ToolCall(name=name, arguments=arguments)


class Script:
    """Thread-safe FIFO of scripted replies; each request consumes one entry.

    Every ``reply_*`` method returns the script so calls can be chained.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: deque[ScriptEntry] = deque()

    # -- enqueueing -----------------------------------------------------------------

    def push(self, entry: ScriptEntry) -> Script:
        """Enqueue a ready-made :class:`Reply`, :class:`ErrorReply` or callable."""
        with self._lock:
            self._entries.append(entry)
        return self

    def reply_text(self, text: str) -> Script:
        return self.push(Reply(text=text))

    def reply_tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        text_before: str | None = None,
        id: str | None = None,
    ) -> Script:
        return self.push(Reply(text=text_before, tool_calls=(ToolCall(name, arguments, id),)))

    def reply_tool_calls(
        self, calls: Iterable[ToolCallLike], *, text_before: str | None = None
    ) -> Script:
        """Several tool calls in one reply (parallel tool calls)."""
        tool_calls = tuple(_as_tool_call(c) for c in calls)
        if not tool_calls:
            raise ValueError("reply_tool_calls needs at least one call")
        return self.push(Reply(text=text_before, tool_calls=tool_calls))

    def reply_truncated_tool_call(
        self, name: str, partial_json: str, *, text_before: str | None = None
    ) -> Script:
        """A tool call whose arguments were cut off by the output-token limit."""
        return self.push(
            Reply(text=text_before, tool_calls=(ToolCall(name, partial_json),), truncated=True)
        )

    def reply_truncated_text(self, text: str) -> Script:
        """Text cut off by the output-token limit."""
        return self.push(Reply(text=text, truncated=True))

    def reply_error(
        self,
        status: int,
        message: str,
        *,
        error_type: str | None = None,
        code: str | None = None,
    ) -> Script:
        return self.push(
            ErrorReply(status=status, message=message, error_type=error_type, code=code)
        )

    def reply_with(self, fn: ReplyFn) -> Script:
        """Decide the reply when the request arrives: ``fn(parsed_body) -> Reply``."""
        return self.push(fn)

    # -- inspection / consumption ---------------------------------------------------------

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def pop(self) -> ScriptEntry | None:
        """Take the next entry, or ``None`` when the script is empty."""
        with self._lock:
            return self._entries.popleft() if self._entries else None

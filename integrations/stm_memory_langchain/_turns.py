"""Turn helpers the chat history, its chain wrapper and the Agents SDK session share
(pure but for the engine calls they wrap; langchain-core only, and every message
format: LangChain messages, OpenAI / Anthropic dicts, Responses items)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from typing import Any

from stm_memory import TOOL_NAME, StoredMessage
from stm_memory.model.messages import message_text
from stm_memory.model.roles import message_role
from stm_memory.providers.loop import Op
from stm_memory.tool.vetting import run_memory_call, tool_result_text

from ._dialogue import is_summary_message

__all__ = [
    "attempt",
    "content_of",
    "dialogue_for_capture",
    "is_dialogue",
    "memory_calls",
    "needs_previous",
    "op",
    "run_memory_call",
    "stored_as_dicts",
]

log = logging.getLogger("stm_memory.langchain")

#: A tool result as the text its message carries (one function for every integration).
content_of = tool_result_text


def op(fn: Callable[..., Any], afn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> Op:
    """An :class:`Op` calling ``fn`` (blocking drivers) or ``afn`` (async drivers)."""
    return Op(lambda: fn(*args, **kw), lambda: afn(*args, **kw), getattr(fn, "__name__", ""))


def attempt(step: Op, what: str) -> Generator[Op, Any, Any]:
    """Run ``step``; on failure log and return None: memory never fails the user's turn."""
    try:
        return (yield step)
    except Exception:
        log.exception("stm-memory: %s failed; the turn continues without it", what)
        return None


def memory_calls(message: Any) -> list[dict[str, Any]]:
    """The ``update_short_term_memory`` calls of a LangChain AI message (parsed ones)."""
    calls = getattr(message, "tool_calls", None) or []
    return [dict(c) for c in calls if c.get("name") == TOOL_NAME]


def _text(message: Any) -> str:
    content = (
        message.get("content") if isinstance(message, dict) else getattr(message, "content", None)
    )
    try:
        return message_text(content)
    except Exception:  # exotic content is simply not dialogue
        return ""


def is_dialogue(message: Any) -> bool:
    """A user or assistant message with visible text (what capture keeps)."""
    return (
        message_role(message) in ("user", "assistant")
        and not is_summary_message(message)
        and bool(_text(message).strip())
    )


def needs_previous(messages: Sequence[Any], start: int) -> bool:
    """Nothing before this turn (``messages[start:]``) is dialogue: capture, which
    replaces the channel's recent messages, needs the stored ones put in front."""
    return not any(is_dialogue(m) for m in messages[:start])


def stored_as_dicts(messages: Iterable[StoredMessage]) -> list[dict[str, Any]]:
    """Stored messages as capture takes them back (their speakers kept)."""
    return [
        {"role": m.role, "content": m.content, "name": m.name, "user_id": m.user_id}
        for m in messages
    ]


def dialogue_for_capture(
    messages: Sequence[Any], start: int, previous: Sequence[StoredMessage] = ()
) -> list[Any]:
    """What to hand to ``ShortTermMemory.capture`` (which keeps the last turns): the
    recent record when it holds dialogue before this turn, else the channel's stored
    messages followed by this turn. Summaries of earlier history are not dialogue."""
    if not needs_previous(messages, start):
        return [m for m in messages if not is_summary_message(m)]
    current = [m for m in messages[start:] if not is_summary_message(m)]
    return [*stored_as_dicts(previous), *current]

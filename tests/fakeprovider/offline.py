"""The fake server's model, for long conversations: the shipped
:class:`stm_memory.testing.OfflineModel` decides each reply from the request body
(answer; call ``update_short_term_memory`` when the prompt nudges it), and the server
renders it in its own wire format with its own counter ids.

    offline_replies(server.script, "chat", turns=40)

One decision per request, whichever endpoint: ``chat`` (Chat Completions), ``responses``
or ``anthropic`` tells how to read the body.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from stm_memory.testing import OfflineModel
from stm_memory.testing.offline import (
    anthropic_message_body,
    openai_chat_body,
    openai_responses_body,
)

from .script import Reply, Script, ToolCall

__all__ = ["offline_replies"]

_BODIES: dict[str, Callable[[OfflineModel, Mapping[str, Any]], dict[str, Any]]] = {
    "chat": openai_chat_body,
    "responses": openai_responses_body,
    "anthropic": anthropic_message_body,
}


def _reply(api: str, body: Mapping[str, Any]) -> Reply:
    """The offline model's reply as a :class:`Reply` (text and tool calls)."""
    if api == "chat":
        message = body["choices"][0]["message"]
        calls = [
            ToolCall(c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in message.get("tool_calls") or []
        ]
        return Reply(text=message.get("content"), tool_calls=tuple(calls))
    parts = body["output"] if api == "responses" else body["content"]
    texts: list[str] = []
    calls = []
    for part in parts:
        kind = part.get("type")
        if kind == "message":
            texts += [c["text"] for c in part["content"] if c.get("type") == "output_text"]
        elif kind == "text":
            texts.append(part["text"])
        elif kind == "function_call":
            calls.append(ToolCall(part["name"], json.loads(part["arguments"])))
        elif kind == "tool_use":
            calls.append(ToolCall(part["name"], dict(part["input"])))
    return Reply(text="\n".join(texts) or None, tool_calls=tuple(calls))


def offline_replies(
    script: Script, api: str, *, turns: int, model: OfflineModel | None = None
) -> OfflineModel:
    """Enqueue enough offline-model replies for ``turns`` turns (up to three requests
    each); returns the model (its counters tell how often it called the tool)."""
    offline = model or OfflineModel()
    make = _BODIES[api]
    for _ in range(turns * 3):
        script.reply_with(lambda body: _reply(api, make(offline, body)))
    return offline

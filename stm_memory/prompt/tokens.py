"""Token accounting for requests: approximate by default, exact with your tokenizer.

The default is LangChain's ``count_tokens_approximately`` (about four characters a
token plus a few per message, :func:`stm_memory.wire.approximate_tokens`), which needs
no model files and is stable across runs — right for comparing prompts with and without memory.
Pass ``counter=`` (text → tokens, e.g. ``lambda s: len(enc.encode(s))`` with tiktoken)
for exact counts of one model family.

Accepted messages: LangChain messages, OpenAI Chat Completions dicts (tool calls,
``tool`` results), Anthropic Messages dicts (``text``/``tool_use``/``tool_result``
blocks) and Responses input items. Anything the LangChain converter does not take is
counted from its JSON text, so counting never fails on an unfamiliar shape.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from stm_memory.wire import approximate_tokens, codec_of

__all__ = ["PER_MESSAGE_TOKENS", "count_tokens", "message_text", "text_tokens"]

TextCounter = Callable[[str], int]

#: Framing tokens per message (role markers, separators) in the OpenAI cookbook
#: estimate; the same constant the approximate counter uses.
PER_MESSAGE_TOKENS = 3
_CHARS_PER_TOKEN = 4.0


def text_tokens(text: str | None) -> int:
    """``text``'s estimated tokens without a tokenizer: four characters a token,
    rounded up (the hot path's estimate: the cut and the swap rule)."""
    return -(-len(text or "") // 4)


def _json(value: Any) -> str:
    # sort_keys: the same message must count the same whatever order its dict was built in.
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            else:
                parts.append(_json(block))
        return "\n".join(parts)
    return _json(content)


def message_text(message: Any) -> str:
    """Everything in a message that the model reads: role, name, content, tool calls."""
    view = codec_of(message).view(message)
    if view is not None:
        parts = [view.label, view.name, _content_text(view.content)]
        if view.extra:
            parts.append(_json(view.extra))
        return "\n".join(p for p in parts if p)
    if isinstance(message, tuple):  # (role, content) shorthand: each part's text
        return "\n".join(_content_text(part) for part in message)
    return _content_text(message)


def _approximate(message: Any) -> int:
    try:
        return approximate_tokens(message)
    except Exception:  # an unfamiliar shape: count its text rather than fail
        chars = len(message_text(message))
        return math.ceil(chars / _CHARS_PER_TOKEN) + PER_MESSAGE_TOKENS


def count_tokens(
    messages: Iterable[Any],
    *,
    counter: TextCounter | None = None,
    system: str | Sequence[Mapping[str, Any]] | None = None,
) -> int:
    """Tokens of a request's messages (plus an Anthropic-style ``system`` parameter).

    Without ``counter`` the count is approximate; with it, each message's text
    (:func:`message_text`) is counted by ``counter`` plus :data:`PER_MESSAGE_TOKENS`.
    """
    items: list[Any] = list(messages)
    if system:
        items.insert(0, {"role": "system", "content": system})
    if counter is None:
        return sum(_approximate(m) for m in items)
    return sum(int(counter(message_text(m))) + PER_MESSAGE_TOKENS for m in items)

"""A call of ``update_short_term_memory`` written as text. Pure.

Small open models served without a tool-call parser (llama.cpp with a template whose
tool-call tokens the model never emits, vLLM without ``--enable-auto-tool-choice``) write
the call in their message content, and the server returns no ``tool_calls``: a JSON
object naming the tool with its arguments, bare, in a Markdown code fence, or inside
Hermes-style ``<tool_call>`` tags. Read here, it is still the model's memory write (run
through the same guards as a real call) and never the user's answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from stm_memory.tool.turn import TOOL_NAME

__all__ = ["text_call"]

_DECODER = json.JSONDecoder()
# Where a JSON object may start: a fence's or a tag's body, or anywhere.
_OPENERS = re.compile(r"\{")


def _arguments(value: Any) -> Mapping[str, Any] | None:
    """The arguments of one decoded call object naming our tool, else None."""
    if not isinstance(value, Mapping):
        return None
    if isinstance(value.get("function"), Mapping):  # {"type": "function", "function": {...}}
        value = value["function"]
    if value.get("name") != TOOL_NAME:
        return None
    args = next((value[k] for k in ("arguments", "parameters", "args") if k in value), None)
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, Mapping) else None


def text_call(text: str) -> Mapping[str, Any] | None:
    """The arguments of the first call of the memory tool written in ``text``, or None
    when it holds none. Only an object that names the tool counts: any other JSON (an
    answer that quotes some) is the model's answer."""
    if TOOL_NAME not in text:
        return None  # the common case, at the cost of one substring search
    for found in _OPENERS.finditer(text):
        try:
            value, _ = _DECODER.raw_decode(text, found.start())
        except ValueError:
            continue
        args = _arguments(value)
        if args is not None:
            return args
    return None

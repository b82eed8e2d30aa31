"""What one model step hands back and what a whole turn returns: the tool calls a
reply asks for, its usage, the parsed reply, the turn's result.

Plain frozen data with no imports from the rest of the kit: the loop
(:mod:`.loop`) returns them. A :class:`ToolCall` is read off a reply by its API's wire
module (:mod:`stm_memory.wire`), where it lives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stm_memory.model.receipt import TurnBill
from stm_memory.prompt.quiet import Writing
from stm_memory.prompt.swap import SwapDecision
from stm_memory.tool.turn import TOOL_NAME
from stm_memory.wire import codec_of
from stm_memory.wire.base import ToolCall

__all__ = [
    "ModelReply",
    "ToolCall",
    "TurnResult",
    "Usage",
    "answer_last",
    "answered_then_remembered",
    "usage_of",
]


def answered_then_remembered(text: str, call_names: Sequence[str]) -> bool:
    """One rule for every entry point: a model reply that answered the user (visible
    text, ``text``) and called only the memory tool (``call_names``) ends the turn once
    those calls are answered — the memory call was the epilogue of an answer the user
    already has, and another model call would only cost a request. A reply that also
    called a tool of the caller's goes on: the model must see that tool's result."""
    return bool(text.strip()) and bool(call_names) and all(n == TOOL_NAME for n in call_names)


def answer_last(reply: Sequence[Any], results: Sequence[Any]) -> list[Any]:
    """A turn's last step when it answered and then wrote its memory
    (:func:`answered_then_remembered`): the reply's memory calls, their ``results``,
    then what it said. The caller's usual "last message" is then the answer, never the
    memory tool's JSON; nothing is lost, and what a later turn's cut keeps of it (the
    text, the memory calls stripped) is the same bytes as before."""
    ids: set[str] = set()
    for message in reply:
        ids |= codec_of(message).memory_call_ids(message, TOOL_NAME)
    if not ids:
        return [*reply, *results]
    calls = [c for m in reply if (c := codec_of(m).only_calls(m, ids)) is not None]
    said = [s for m in reply if (s := codec_of(m).without_calls(m, ids)) is not None]
    return [*calls, *results, *said]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one request, or summed over a turn's steps.

    ``input_tokens`` is every input token of the request, cached or not (Anthropic's
    ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``);
    ``cached_input_tokens`` of them were read from the provider's prompt cache and
    ``cache_write_tokens`` written to it (billed above the input price by Anthropic).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def usage_of(message: Any) -> Usage | None:
    """A LangChain ``AIMessage``'s ``usage_metadata`` as :class:`Usage` (None: a message
    that reports none, or not a model's)."""
    meta = getattr(message, "usage_metadata", None)
    if not isinstance(meta, Mapping):
        return None
    details = meta.get("input_token_details") or {}
    return Usage(
        input_tokens=int(meta.get("input_tokens") or 0),
        output_tokens=int(meta.get("output_tokens") or 0),
        cached_input_tokens=int(details.get("cache_read") or 0),
        cache_write_tokens=int(details.get("cache_creation") or 0),
    )


@dataclass(frozen=True, slots=True)
class ModelReply:
    """What an adapter parsed from one model response."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    transcript: tuple[Any, ...]  # provider-format messages/items to append to the dialogue
    usage: Usage = Usage()


@dataclass(frozen=True, slots=True)
class TurnResult:
    """The outcome of ``run_turn``."""

    text: str
    messages: list[Any]
    stm_updated: bool
    usage: Usage
    steps: int
    requests: list[dict[str, Any]] = field(default_factory=list, repr=False)
    #: What the turn's requests showed and why: swap or hold, the rule, the estimate in
    #: tokens (``str()`` says it in a line); None when memory was off.
    decision: SwapDecision | None = None
    #: Whether the channel's memory is being written (:class:`~stm_memory.Writing`:
    #: ``not_writing`` once its model ignored the nudges; docs/open-models.md); None
    #: when memory was off.
    writing: Writing | None = None
    #: What the turn's requests were billed (the API's usage) and what the full
    #: history would have been, priced alike (:class:`~stm_memory.TurnBill`:
    #: ``saved``); None when memory was off or the API reported no usage.
    bill: TurnBill | None = None

"""A long turn's own tool results: what its requests carry of them, and reading one back.

One :class:`LongTurn` per memory turn (``MemoryTurn``), for an entry point that routes
the retrieval tool (``Ask.recall``). At each request it decides which results of the
turn leave (:func:`~stm_memory.prompt.clearing.to_clear`, the bill's rule) and writes
what it decided into the request as placed; what left once stays left, in the same
bytes. It answers the retrieval tool (:data:`~stm_memory.prompt.clearing.RECALL_TOOL`)
from the results it cleared and from the model input the turn was last given (the
caller's record, which keeps every result: only requests are cut), page by page. No
I/O: everything it reads the turn was handed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stm_memory.model.tool_results import KeptResult
from stm_memory.prompt.clearing import (
    RECALL_TOOL,
    ClearingRule,
    ToolResult,
    block_due,
    placeholder,
    results_index,
    to_clear,
    turn_results,
    with_cleared,
)
from stm_memory.prompt.placement import current_turn_index
from stm_memory.tool.turn import TOOL_NAME, failure
from stm_memory.wire.base import ToolSpec

__all__ = ["RECALL_SPEC", "LongTurn", "RecallAsk", "recall_ask", "recall_page"]

RECALL_SPEC = ToolSpec(
    RECALL_TOOL,
    "Return a tool result that was cleared from this conversation to keep it within the "
    "context, exactly as the tool returned it, by the call id its placeholder names. "
    "Long results come in pages: pass the offset the page's end names for the next.",
    {
        "type": "object",
        "properties": {
            "call_id": {"type": "string", "description": "The call id the placeholder names."},
            "offset": {
                "type": "integer",
                "description": "Character offset to read from (default 0).",
            },
        },
        "required": ["call_id"],
        "additionalProperties": False,
    },
    strict=False,
)


#: At most this many decisions a request (each leaves more, or ends them).
_PASSES = 8


class LongTurn:
    """What one turn cleared of its tool results and can read back (see the module
    docstring). ``rule`` sizes the batches from the model's window."""

    def __init__(
        self, rule: ClearingRule, *, keep: Sequence[str] = (), carried: Sequence[str] = ()
    ) -> None:
        self.rule = rule
        #: Tools whose results never leave (``TurnOptions.keep_tool_results``).
        self.keep = tuple(keep)
        #: What earlier turns' requests left out (``ShownState.cleared``): still out.
        self._carried = frozenset(carried)
        self._lock = threading.Lock()
        #: Call id -> what stands in the result's place; in the order they left.
        self._placeholders: dict[str, str] = {}
        #: Call id -> the result as the model first read it.
        self._texts: dict[str, str] = {}
        #: Call id -> tool, of the cleared results this turn's own calls returned.
        self._own: dict[str, str] = {}
        #: The model input the turn was last given (the caller's record).
        self._given: Sequence[Any] = ()
        #: A request of this turn lacks a result its input holds (dropped or cleared).
        self._missing = False
        #: The provider refused the last request as too long: the next clears all
        #: but the newest result.
        self._force = False
        #: The index of earlier turns' results the cut left out (decided once).
        self._index: str | None = None
        self._indexed = False
        #: The progress nudge went (once a turn).
        self._progressed = False

    @property
    def page(self) -> int:
        """Characters one read returns: a result that entered whole comes back in one
        (nearly: up to ``single`` tokens), an oversized one in pages under that size."""
        return max(1000, (self.rule.single - 64) * 4)

    @property
    def offered(self) -> bool:
        """The retrieval tool goes with this turn's requests from its first clear on,
        or from a request that lacks a batch's worth of results its input holds (an
        earlier long turn's, dropped by the history cut): the tool list changes once.
        A conversation whose few results the cut drops is not sent it (the tool list
        heads every request's cached prefix)."""
        return self._missing

    def placed(
        self,
        messages: Sequence[Any],
        placed: Sequence[Any],
        tokens: Callable[[Sequence[Any]], int],
    ) -> list[Any]:
        """``placed`` (``messages`` as the request carries them, memory placed and the
        history cut) without the results that left: those that left before, and those
        the rule lets leave now, judged on the request's ``tokens`` (after a refusal,
        :meth:`refit`: every clearable one but the newest). The rule reads every result
        the request carries: an earlier long turn the history cut keeps is cleared as
        its own turn was, in the same bytes."""
        results = turn_results(placed)
        with self._lock:
            self._given = messages
            force, self._force = self._force, False
            if self._carried:
                # Left out by an earlier turn's requests: out again, in the same bytes
                # (this turn's own results are this turn's to decide).
                start = current_turn_index(placed)
                for r in results:
                    carried = r.call_id in self._carried and r.call_id not in self._placeholders
                    if r.index < start and carried:
                        self._leave(r)
            out = with_cleared(placed, self._placeholders)
            rule = ClearingRule(window=self.rule.window, keep=1) if force else self.rule
            mine: set[str] | None = None
            # Decided again on the request as it will go, until nothing more leaves: the
            # high mark's decision rests on an estimate of what leaving saves, and the
            # same request built again must leave out exactly the same (a fixed point).
            for _ in range(_PASSES):
                leaving = to_clear(
                    results,
                    self._placeholders,
                    rule=rule,
                    request_tokens=self.rule.high if force else tokens(out),
                    exclude=self.keep,
                ) if results else []  # fmt: skip
                if not leaving:
                    break
                if mine is None:
                    start = current_turn_index(messages)
                    mine = {r.call_id for r in turn_results(messages, start)}
                for result in leaving:
                    self._leave(result)
                    if result.call_id in mine:
                        self._own[result.call_id] = result.tool
                out = with_cleared(placed, self._placeholders)
            self._missing = self._missing or bool(self._placeholders)
            return out

    def progress_due(self, messages: Sequence[Any]) -> bool:
        """Whether this request of the turn (``messages``, the caller's record) is the
        one to ask the model to note its progress: a whole block of this turn's results
        is about to leave (:func:`~stm_memory.prompt.clearing.block_due`). Once a turn:
        the SPEC allows one memory update per turn, so the first batch is asked for."""
        with self._lock:
            if self._progressed:
                return False
            start = current_turn_index(messages)
            results = turn_results(messages, start)
            due = bool(results) and block_due(
                results, self._placeholders, rule=self.rule, exclude=self.keep
            )
            self._progressed = due
            return due

    def index(self, messages: Sequence[Any], kept: Callable[[], Sequence[Any]]) -> str | None:
        """The index of the earlier turns' results ``messages`` (the caller's record, less
        what erasure removed) hold and the history cut leaves out of the request
        (``kept()``: the record as cut), when they hold a batch's tokens: the request
        names each by its call id, and the retrieval tool is offered from this request
        on. Decided once a turn, at its first request (the cut is fixed for the turn);
        None when nothing of weight is left out, or the record holds no results."""
        with self._lock:
            if self._indexed:
                return self._index
            self._indexed = True
        held = [r for r in turn_results(messages) if r.tool != TOOL_NAME]
        if not held:
            return None
        sent = {r.call_id for r in turn_results(kept())}
        gone = [r for r in held if r.call_id not in sent]
        if sum(r.tokens for r in gone) < self.rule.batch:
            return None
        with self._lock:
            self._index = results_index(gone)
            self._missing = True
            return self._index

    def _leave(self, result: ToolResult) -> None:
        head = self.page if result.tokens > self.rule.single else None
        self._placeholders[result.call_id] = placeholder(result, head=head)
        self._texts[result.call_id] = result.text

    def refit(self, messages: Sequence[Any]) -> bool:
        """The provider refused a request built on ``messages`` as longer than the
        model's context: the next request clears every result of the turn but the
        newest, if any is left to clear (False: none is)."""
        results = turn_results(messages, current_turn_index(messages))
        with self._lock:
            never = {TOOL_NAME, *self.keep}
            self._force = any(
                r.call_id not in self._placeholders and r.tool not in never for r in results[:-1]
            )
            return self._force

    def recall(self, arguments: Any) -> str:
        """The retrieval tool's answer from what this turn holds (see :func:`recall_ask`,
        :meth:`text_of`, :func:`recall_page`): a failed tool result for an id it does not
        hold."""
        ask = recall_ask(arguments)
        if isinstance(ask, str):
            return ask
        return recall_page(self.text_of(ask.call_id), ask, self.page)

    def text_of(self, call_id: str) -> str | None:
        """The result of ``call_id`` as the model first read it: one this turn cleared,
        or one in the input it was last given; None when it holds none."""
        with self._lock:
            text = self._texts.get(call_id)
            given = self._given
        if text is not None:
            return text
        for result in turn_results(given):
            if result.call_id == call_id and result.tool != TOOL_NAME:
                return result.text
        return None

    def cleared_ids(self) -> tuple[str, ...]:
        """The call ids of every result this turn's requests left out, in the order
        they left (the shown state keeps them for later turns)."""
        with self._lock:
            return tuple(self._placeholders)

    def cleared(self) -> tuple[KeptResult, ...]:
        """The results of this turn's own tool calls (after its user message) that its
        requests left out: what the turn keeps to be read back later. An earlier turn's
        results, cleared again here, were kept by their own turn (or erased since: a
        later turn never brings them back)."""
        with self._lock:
            return tuple(
                KeptResult(call_id, tool, self._texts[call_id])
                for call_id, tool in self._own.items()
            )


@dataclass(frozen=True, slots=True)
class RecallAsk:
    """A retrieval call's arguments, checked: the call id and the character offset."""

    call_id: str
    offset: int


def recall_ask(arguments: Any) -> RecallAsk | str:
    """The retrieval tool's arguments (a JSON object or its text) checked, or the failed
    tool result naming what is wrong with them."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            return _failed("Arguments must be a JSON object with a call_id.")
    if not isinstance(arguments, Mapping):
        return _failed("Arguments must be a JSON object with a call_id.")
    call_id, offset = arguments.get("call_id"), arguments.get("offset", 0)
    if not isinstance(call_id, str) or not call_id.strip():
        return _failed("call_id must be the call id a placeholder names (a string).")
    if offset is None:
        offset = 0
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return _failed("offset must be a whole number of characters, 0 or more.")
    return RecallAsk(call_id.strip(), offset)


def recall_page(text: str | None, ask: RecallAsk, page: int) -> str:
    """One page of ``text`` (the result of ``ask.call_id``; None: none is held) from
    ``ask.offset``, byte for byte, then (when more follows) where the next page starts;
    a failed tool result for an unknown id or an offset past the end."""
    call_id, offset = ask.call_id, ask.offset
    if text is None:
        return _failed(f"No tool result with call id {call_id!r} in this conversation.")
    if offset > len(text) or (offset == len(text) and text):
        return _failed(f"offset {offset} is past the result's end ({len(text)} characters).")
    end = min(len(text), offset + page)
    if end == len(text):
        return text[offset:]
    return (
        text[offset:end] + f"\n[{len(text) - end} more characters: {RECALL_TOOL}("
        f'call_id="{call_id}", offset={end})]'
    )


def _failed(reason: str) -> str:
    return json.dumps(failure(reason) | {"tool_name": RECALL_TOOL})

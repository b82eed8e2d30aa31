"""Clearing inside a turn: which tool results of the current turn leave a request, and
what stands in their place. Pure, no I/O.

A turn that reads forty files before it answers grows with every step, past the
model's window; between turns the history cut bounds a request, inside one nothing
did. Here the turn's own tool results leave once they are old, in batches, each
leaving a short placeholder that names the call (the tool, the call id, how long the
result was, its first line); the result itself stays readable through the retrieval
tool (:data:`RECALL_TOOL`, the turn's ``recall_call``), byte for byte. The call stays
with its placeholder, so no call is ever parted from its result.

When (the bill decides, :class:`ClearingRule`): a cleared result changes the prompt
from its place on, which the provider bills as a cache write, so results leave only
in a batch large enough to pay that back (``batch``), or when the request nears the
model's window (``high``), whichever comes first, and then every clearable result
leaves at once. Never the newest ``keep`` (the model is working with them), never a
result of the memory tool or of a tool the caller excludes. A result larger than
``single`` enters as its head and a handle at once, the newest too. Once cleared, a
result stays cleared in the same bytes in every later request of the turn: each
batch rewrites the cache once.

Formats: each message is read by its codec (:func:`stm_memory.wire.codec_of`): OpenAI
``tool`` messages, Responses ``*_call_output`` items, Anthropic ``tool_result``
blocks, LangChain ``ToolMessage``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stm_memory.prompt.tokens import PER_MESSAGE_TOKENS, text_tokens
from stm_memory.tool.turn import TOOL_NAME
from stm_memory.wire import codec_of

__all__ = [
    "INDEX_TITLE",
    "RECALL_TOOL",
    "ClearingRule",
    "ToolResult",
    "block_due",
    "placeholder",
    "results_index",
    "to_clear",
    "turn_results",
    "with_cleared",
]

#: The retrieval tool: a cleared result by its call id.
RECALL_TOOL = "read_tool_result"
#: The newest results a batch leaves in place (the model is working with them).
KEEP_NEWEST = 3
#: The largest batch the bill waits for: a batch's cache write is paid back after a
#: few steps of reading 0.1x less (for ~2k-token results, 10-15k was the cheapest).
BILL_BATCH = 12_000
#: How much of a result its placeholder quotes (its first line, cut to this): each
#: placeholder stays in every later request of the turn, so it is kept short.
_HEAD_CHARS = 80
#: About what a placeholder costs in a request (its call stays too).
PLACEHOLDER_TOKENS = 50


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool result of a request: the message holding it (``index``), the call it
    answers (``call_id``, ``tool``: the name that call gives, "" when none), its text
    as the model reads it and that text's estimated tokens."""

    index: int
    call_id: str
    tool: str
    text: str
    tokens: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClearingRule:
    """When a turn's results leave, sized from the model's ``window`` (tokens): a batch
    leaves once the clearable results hold ``batch`` tokens (a quarter of the window,
    at most :data:`BILL_BATCH`) or the request holds ``high`` (half the window); a
    single result over ``single`` (an eighth of the window) enters as its head. The
    newest ``keep`` stay."""

    window: int
    keep: int = KEEP_NEWEST

    @property
    def batch(self) -> int:
        return max(1, min(self.window // 4, BILL_BATCH))

    @property
    def high(self) -> int:
        return max(1, self.window // 2)

    @property
    def single(self) -> int:
        return max(1, self.window // 8)


def turn_results(messages: Sequence[Any], start: int = 0) -> list[ToolResult]:
    """The tool results of ``messages`` from ``start`` on, in order, each with the name
    of the call it answers (a call before ``start`` names none: a turn's results answer
    the turn's calls, and a request reads only its own turn)."""
    names: dict[str, str] = {}
    found: list[ToolResult] = []
    for index in range(start, len(messages)):
        message = messages[index]
        codec = codec_of(message)
        for call_id, name in codec.calls(message):
            names[call_id] = name
        for call_id, text in codec.results(message):
            found.append(
                ToolResult(index, call_id, "", text, text_tokens(text) + PER_MESSAGE_TOKENS)
            )
    return [
        ToolResult(r.index, r.call_id, names.get(r.call_id, ""), r.text, r.tokens) for r in found
    ]


def to_clear(
    results: Sequence[ToolResult],
    cleared: Collection[str],
    *,
    rule: ClearingRule,
    request_tokens: int,
    exclude: Collection[str] = (),
) -> list[ToolResult]:
    """The results that leave now (besides ``cleared``, which stay gone).

    Decided from the results alone, so the same results give the same answer in any
    request, turn or process: the clearable results, oldest first, fall into blocks of
    ``rule.batch`` tokens (by the tokens before each); a block leaves whole once the
    newest ``rule.keep`` are all past it. Besides: a single result larger than
    ``rule.single`` at once; and when the request (``request_tokens``, as it would go)
    reaches the high mark, every clearable one, and the older of the newest too until it
    would be half a batch under the mark (never the newest one). Clearable: not among
    the newest ``rule.keep``, not the memory tool's, nor of a tool in ``exclude`` (a
    result read back leaves again in its turn: its pages are never oversized)."""
    open_, kept, oversized, blocks, first_kept = _blocks(results, rule, exclude)
    leaving = oversized | {i for i, block in blocks.items() if block < first_kept}
    if request_tokens >= rule.high:
        leaving |= {r.call_id for r in open_ if r.call_id not in kept}
        # A request this full falls half a batch under the high mark, so the mark
        # fires again only some results later (a large system prompt would otherwise
        # hold it at the mark: a rewrite at every step). The older of the newest leave
        # too when they must; the newest one never does.
        # What leaving saves: all but a placeholder; an oversized one keeps its head.
        after = request_tokens - sum(
            max(0, r.tokens - (rule.single if r.call_id in oversized else PLACEHOLDER_TOKENS))
            for r in open_
            if r.call_id in leaving and r.call_id not in cleared
        )
        for r in [r for r in open_ if r.call_id in kept][:-1]:
            if after <= rule.high - rule.batch // 2:
                break
            if r.call_id not in leaving and r.tokens > PLACEHOLDER_TOKENS:
                leaving.add(r.call_id)
                after -= r.tokens - PLACEHOLDER_TOKENS
    return [r for r in open_ if r.call_id in leaving and r.call_id not in cleared]


def _blocks(
    results: Sequence[ToolResult], rule: ClearingRule, exclude: Collection[str]
) -> tuple[list[ToolResult], set[str], set[str], dict[str, int], int]:
    """:func:`to_clear`'s reading of ``results``: the clearable ones, the newest kept,
    the oversized, each other one's block, and the first block a kept one is in."""
    never = {TOOL_NAME, *exclude}
    open_ = [r for r in results if r.tool not in never]
    kept = {r.call_id for r in open_[len(open_) - rule.keep :]} if rule.keep else set()
    # A page read back is never oversized: it was sized to enter whole.
    oversized = {r.call_id for r in open_ if r.tokens > rule.single and r.tool != RECALL_TOOL}
    blocks: dict[str, int] = {}
    before = 0
    for r in open_:
        if r.call_id not in oversized:
            blocks[r.call_id] = before // rule.batch
            before += r.tokens
    # Blocks before the one the oldest kept result is in leave whole: one cache write a
    # block, never a result at a time as the newest ones move on.
    first_kept = min((blocks[i] for i in kept if i in blocks), default=None)
    if first_kept is None:  # nothing kept, or only oversized ones: every block is done
        first_kept = max(blocks.values(), default=-1) + 1
    return open_, kept, oversized, blocks, first_kept


def block_due(
    results: Sequence[ToolResult],
    cleared: Collection[str],
    *,
    rule: ClearingRule,
    exclude: Collection[str] = (),
) -> bool:
    """Whether a block of ``results`` is whole (a later result begins the next) and
    still in the request, waiting only for the newest ``rule.keep`` to move past it: it
    leaves within that many steps, and not in this request (the progress nudge's
    moment, while the model still sees what it read)."""
    _open, _kept, _oversized, blocks, first_kept = _blocks(results, rule, exclude)
    last = max(blocks.values(), default=0)
    return any(
        first_kept <= block < last and call_id not in cleared for call_id, block in blocks.items()
    )


def placeholder(result: ToolResult, *, head: int | None = None) -> str:
    """What stands in a cleared result's place: the tool, the call id, the result's
    length, how to read it back, and the start of its first line. ``head``: a result
    too large to enter whole enters as its first ``head`` characters and where the
    rest is read from. The same result always gets the same bytes."""
    tool, call, size = result.tool or "a tool", result.call_id, len(result.text)
    if head is not None:
        return (
            f"[Result of {tool} (call {call}): {size} characters, more than this context "
            f'holds at once. {RECALL_TOOL}(call_id="{call}", offset={head}) returns the '
            f"rest. Its first {head} characters:]\n{result.text[:head]}"
        )
    first = result.text.lstrip().split("\n", 1)[0]
    more = len(first) > _HEAD_CHARS or "\n" in result.text.strip()
    quoted = first[:_HEAD_CHARS] + ("…" if more else "")
    return (
        f"[{tool} result cleared from this request ({size} characters); "
        f'{RECALL_TOOL}(call_id="{call}") returns it. It began: {quoted}]'
    )


#: The title of the index of earlier turns' results the history cut left out.
INDEX_TITLE = (
    f"Tool results of earlier turns, not in this conversation any more ({RECALL_TOOL} "
    "returns one by its call id):"
)
#: Lines an index keeps: the first and the last half of this (the first results read
#: are the ones a later question most often needs; the last, what the turn ended on).
INDEX_LINES = 200


def results_index(results: Sequence[ToolResult]) -> str:
    """The index of ``results`` (earlier turns' results a request no longer carries):
    one line each, the call id, the tool and the start of the result's first line, in
    their order; past :data:`INDEX_LINES`, the first and the last half of them."""
    lines = [
        f"- {r.call_id} ({r.tool or 'a tool'}): "
        + " ".join(r.text.lstrip().split("\n", 1)[0][:_HEAD_CHARS].split())
        for r in results
    ]
    if len(lines) > INDEX_LINES:
        half = INDEX_LINES // 2
        skipped = len(lines) - 2 * half
        lines = [*lines[:half], f"- ({skipped} more)", *lines[-half:]]
    return "\n".join([INDEX_TITLE, *lines])


def with_cleared(messages: Sequence[Any], texts: Mapping[str, str]) -> list[Any]:
    """``messages`` with the results of the calls in ``texts`` replaced by their texts
    (new messages where one changes; the caller's are never mutated)."""
    if not texts:
        return list(messages)
    return [codec_of(m).with_results(m, texts) for m in messages]

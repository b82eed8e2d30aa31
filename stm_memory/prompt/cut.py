"""The history cut: which of a caller's dialogue the model is sent. Pure, no I/O.

The distilled memory replaces the raw turns it covers. A caller may pass its whole
history (a LangChain checkpointer thread, ``result.messages`` fed back); what goes to
the model is:

- the leading system/developer messages;
- the last ``keep_turns`` earlier turns (the turns since the live memory was last
  written, plus a small overlap of covered ones — the engine counts them exactly and
  puts the number in :class:`HistoryWindow`); all of them when nothing covers the
  dialogue, but never more than the token budget (``history_token_budget``, sized for
  the model's context) — so a model that never writes its memory is sent what a
  full-history caller sends (no regret) until the budget, and only then are the
  oldest uncovered turns dropped, in large steps;
- the current turn, whole.

Earlier turns also lose the model's own ``update_short_term_memory`` calls and their
results: the memory block already shows what they wrote (any text the assistant said
in that message stays).

A *turn* starts at a user message that follows a non-user message (so a group
channel's several user messages before one answer are one turn) and runs up to the
next such message: cuts fall on turn boundaries only, never between an assistant's
tool call and its results, so every request stays valid for its provider.

Formats: OpenAI Chat dicts, Responses items, Anthropic dicts and LangChain messages
(each message read by its codec, :func:`stm_memory.wire.codec_of`). The cut is
idempotent: cutting its own output again changes nothing.

Why a count of turns rather than matching content: a caller's messages carry no
stable ids or timestamps in most formats, while the engine counts every turn of a
scope atomically (across processes and hosts) and stores the count with the row.
The cut moves only when the memory is rewritten (the count falls back to the
overlap), so successive requests between two refreshes share their prefix and
provider prompt caches hit. The budget drops turns in steps of half the budget, counted
from the first turn the window keeps, for the same reason: the first kept turn moves
only when the kept dialogue has grown by another half budget. The trade-offs are in
``docs/design.md#the-history-cut``.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from stm_memory.model.messages import dialogue_of
from stm_memory.model.tombstones import Forgetting
from stm_memory.prompt.tokens import PER_MESSAGE_TOKENS, message_text, text_tokens
from stm_memory.tool.turn import TOOL_NAME
from stm_memory.wire import codec_of, message_role

__all__ = [
    "HistoryCut",
    "HistoryWindow",
    "cut_history",
    "earlier_turns",
    "forget_erased",
    "kept_turns",
    "split_turns",
    "strip_calls",
    "turn_tokens",
    "without_forgotten",
]


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """How much earlier dialogue a turn may send.

    ``keep_turns``: earlier turns to keep before the current one; ``None`` when no
    memory covers the dialogue (then only the budget bounds it).
    ``token_budget``: the most tokens (estimated, about four characters a token) the
    kept earlier turns may hold; ``None``: no budget. ``max_raw_turns``: a cap in turns
    as well (``0``: none, the default since the budget replaced it). ``forgetting``:
    the marks of erased messages, which no request sends again.
    """

    keep_turns: int | None
    max_raw_turns: int = 0
    token_budget: int | None = None
    # What erasure removed from the channel (model/tombstones.py): left out of the
    # earlier turns, with the rest of each turn it answered. None: nothing was erased.
    forgetting: Forgetting | None = None
    # Erasure is the only bound (an untrimmed request: the caller windows its history).
    forget_only: bool = False


@dataclass(frozen=True, slots=True)
class HistoryCut:
    """The cut dialogue, with what it dropped (for logs and tests)."""

    messages: list[Any]
    dropped_turns: int
    capped: bool  # the safety cap dropped turns that no memory covers
    # Messages dropped because they were only earlier memory-tool calls or results.
    memory_messages_removed: int


def split_turns(messages: Sequence[Any]) -> tuple[list[Any], list[list[Any]]]:
    """``(leading system messages, turns)``; each turn a list of messages."""
    roles = [message_role(m) for m in messages]
    lead = 0
    while lead < len(roles) and roles[lead] == "system":
        lead += 1
    turns: list[list[Any]] = []
    previous = None
    for message, role in zip(messages[lead:], roles[lead:], strict=True):
        if not turns or (role == "user" and previous not in ("user", None)):
            turns.append([])
        turns[-1].append(message)
        if role != "system":  # a system note inside a turn is not a boundary
            previous = role
    return list(messages[:lead]), turns


def _capped(keep: int, cap: int) -> int:
    """``keep`` brought under ``cap`` in steps of half the cap, so the first kept turn
    moves only every ``cap // 2`` turns (prompt caches keep their prefix)."""
    if cap <= 0 or keep <= cap:
        return keep
    step = max(1, cap // 2)
    excess = keep - cap
    return keep - -(-excess // step) * step


def turn_tokens(turn: Sequence[Any]) -> int:
    """A turn's estimated tokens: about four characters a token, plus each message's
    framing (the approximate counter's rule, without loading a tokenizer: the cut runs
    on every request)."""
    return sum(text_tokens(message_text(m)) + PER_MESSAGE_TOKENS for m in turn)


def _budgeted(turns: Sequence[Sequence[Any]], budget: int) -> int:
    """How many of ``turns`` (the earliest first) to drop so that the rest fit in
    ``budget``: whole turns covering the excess rounded up to half-budget steps,
    counted from the first of ``turns``. Appending a turn changes the answer only
    when the total crosses another step, so between drops each request extends the
    last."""
    sizes = [turn_tokens(t) for t in turns]
    excess = sum(sizes) - budget
    if excess <= 0:
        return 0
    step = max(1, budget // 2)
    target = -(-excess // step) * step
    dropped = covered = 0
    while dropped < len(sizes) and covered < target:
        covered += sizes[dropped]
        dropped += 1
    return dropped


def earlier_turns(messages: Sequence[Any]) -> tuple[list[Any], list[list[Any]], list[Any]]:
    """``(leading system messages, earlier turns, current turn)`` of ``messages``, the
    earlier turns without the memory tool's calls (what the cut chooses from)."""
    return _parts(messages)[:3]


def _parts(messages: Sequence[Any]) -> tuple[list[Any], list[list[Any]], list[Any], int]:
    """:func:`earlier_turns`, and how many messages removing the memory calls took."""
    lead, turns = split_turns(messages)
    if not turns:
        return lead, [], [], 0
    flat = [m for turn in turns[:-1] for m in turn]
    stripped = strip_memory_calls(flat)
    # Turns are counted on what is left: removing a call can join two turns, and
    # counting before would make a second cut of the output cut again.
    earlier = split_turns(stripped)[1] if stripped is not flat else turns[:-1]
    return lead, earlier, turns[-1], len(flat) - len(stripped)


def kept_turns(earlier: Sequence[Sequence[Any]], window: HistoryWindow) -> tuple[int, int]:
    """``(turns kept, turns wanted)`` of ``earlier`` under ``window``."""
    wanted = len(earlier) if window.keep_turns is None else min(len(earlier), window.keep_turns)
    keep = _capped(wanted, window.max_raw_turns)
    if window.token_budget is not None and keep:
        keep -= _budgeted(earlier[len(earlier) - keep :], window.token_budget)
    return keep, wanted


def cut_history(messages: Sequence[Any], window: HistoryWindow) -> HistoryCut:
    """The dialogue the model is sent (see the module docstring). A new list; the
    input and its messages are never mutated."""
    lead, earlier, current, removed = _parts(messages)
    if not current:
        return HistoryCut(list(messages), 0, False, 0)
    keep, wanted = kept_turns(earlier, window)
    chosen = earlier[len(earlier) - keep :] if keep else []
    if window.forgetting:
        chosen = without_forgotten(earlier, window.forgetting)[len(earlier) - keep :]
    kept = [m for turn in chosen for m in turn]
    return HistoryCut(
        [*lead, *kept, *current],
        dropped_turns=len(earlier) - keep,
        capped=keep < wanted,
        memory_messages_removed=removed,
    )


# -- leaving out what erasure removed ---------------------------------------------------


def without_forgotten(turns: Sequence[Sequence[Any]], forgetting: Forgetting) -> list[list[Any]]:
    """``turns`` (a caller's earlier turns, in order) less the messages erasure removed:
    an erased user message, and every message of a turn that answered one (or that
    holds an erased reply) but the other users' messages — so no tool call loses its
    result and no reply stays without its question. Marks are read over the whole
    sequence: each message's mark depends on the dialogue said before it."""
    flat = [m for turn in turns for m in turn]
    erased = iter(forgetting.forgotten(dialogue_of(m) for m in flat))
    out: list[list[Any]] = []
    for turn in turns:
        gone = [next(erased) for _ in turn]
        if not any(gone):
            out.append(list(turn))
            continue
        roles = [message_role(m) for m in turn]
        out.append([m for m, g, r in zip(turn, gone, roles, strict=True) if r == "user" and not g])
    return out


def forget_erased(messages: Sequence[Any], forgetting: Forgetting | None) -> list[Any]:
    """``messages`` less what erasure removed (:func:`without_forgotten` on the earlier
    turns, the current turn whole) and nothing else: for a caller that windows its own
    history, which no erasure may reach past."""
    items = list(messages)
    if not forgetting:
        return items
    lead, turns = split_turns(items)
    if len(turns) < 2:
        return items
    earlier = without_forgotten(turns[:-1], forgetting)
    return [*lead, *(m for turn in earlier for m in turn), *turns[-1]]


# -- removing the model's own memory-tool calls ----------------------------------------


def _memory_call_ids(messages: Sequence[Any]) -> set[str]:
    ids: set[str] = set()
    for m in messages:
        ids |= codec_of(m).memory_call_ids(m, TOOL_NAME)
    ids.discard("None")  # a call without an id matches nothing
    return ids


def strip_memory_calls(messages: list[Any]) -> list[Any]:
    """``messages`` without the memory tool's calls and results (the same list object
    when there are none). A reasoning item left without the call it preceded goes too
    (a Responses reasoning item must be followed by its own item)."""
    return strip_calls(messages, _memory_call_ids(messages))


def strip_calls(messages: list[Any], ids: Set[str]) -> list[Any]:
    """``messages`` without the calls with these ids and their results (the same list
    object when ``ids`` is empty), as :func:`strip_memory_calls`."""
    if not ids:
        return messages
    out: list[Any] = []
    for m in messages:
        codec = codec_of(m)
        new = codec.without_calls(m, ids)
        if new is None:
            if codec.follows_reasoning(m) and out and message_role(out[-1]) == "reasoning":
                out.pop()
            continue
        out.append(new)
    return out

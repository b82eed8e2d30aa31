"""When the prompt changes: the swap rule (SPEC §6, "the bill decides"). Pure.

A channel's requests show one *form* — a written memory, the cut that goes with it,
a briefing set (:class:`~stm_memory.model.shown.ShownState`) — and keep showing it
while the model writes newer memory: every request then extends the last, and a
provider's prompt cache serves all of it but the new turn. Showing the newest memory
(*swapping*) drops the dialogue it covers, but re-bills everything from the memory
block on, at the cache-write rate. :func:`decide` swaps when that pays:

1. ``first`` — nothing is known of what was shown (a new channel, a flushed cache, a
   restart, an erasure): the newest form, there is no cached prefix to keep.
2. ``lapsed`` — the cached prefix has expired (the channel's last request is older
   than the retention in force: OpenAI's in-memory minutes or ``24h``, Anthropic's
   TTL; or the provider billed it as a miss where a hit was predicted), so the swap
   re-bills nothing that would not be re-billed anyway: the request takes the
   smallest form of what is written now (the newest memory, the least overlap,
   fresh briefings).
3. ``budget`` — the held form outgrew the token budget (``history_token_budget``):
   holding would drop turns anyway, which changes the prefix too.
4. ``pays`` — over the turns expected ahead, the tokens the swap stops re-reading
   cost more than what it re-bills now::

       horizon × read × (held − swapped)  >  write × swapped − read × held

   ``held`` / ``swapped``: the estimated tokens from the memory block to the current
   turn in each form (memory, briefings, kept dialogue); ``read`` / ``write``: the
   profile's cached-read and cache-write multipliers (OpenAI 0.1 / 1.0, 1.25 from
   gpt-5.6 on; Anthropic 0.1 / 1.25 for 5 minutes, 2.0 for an hour; the model's
   name chooses them, :mod:`stm_memory.model.rates`). The horizon is a Lindy estimate: a form
   that has been shown for ``n`` turns is expected to be asked for about ``n`` more,
   at least 1 and at most :data:`MAX_HORIZON` (a conversation's future is not known;
   one that has gone on long tends to go on). An expiry-only rule never fires in an
   active conversation (context-guru #270: 0 swaps in 53 turns), so this one is what
   moves a busy channel; the hold-then-apply replay of agentcore-public-stack (a
   computed cut held until the cache expired or a ceiling) paid 73.70 against 102.64.
5. else ``hold``.

``newest`` — the entry point sends no dialogue of its own (a classic memory buffer), or
the caller windows its own history (``trim_history=False``): no dialogue is dropped
by a swap, so holding saves nothing; the newest memory is what it shows.

Below the profile's minimum cacheable prefix nothing is cached (``uncached``): there is
no cached prefix to keep, the two forms differ by a few hundred tokens at most, and the
newest shows what the model wrote (a short conversation sees its memory at once). A
form with nothing newer written is never swapped (``unchanged``), whatever the cache
did: a swap would only shed briefing copies, and a copy of another channel's raw turns
holds words its fresh briefing no longer shows (``prompt/assembly.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from stm_memory.model.rates import CacheProfile
from stm_memory.prompt.cut import earlier_turns, kept_turns, turn_tokens
from stm_memory.prompt.placement import MemoryContext
from stm_memory.prompt.tokens import text_tokens

__all__ = [
    "MAX_HORIZON",
    "MIN_WRITE_TOKENS",
    "SwapDecision",
    "SwapInputs",
    "SwapRule",
    "choose",
    "decide",
    "newest",
    "write_pays",
]

#: The most turns ahead a swap's saving is counted over.
MAX_HORIZON = 32

SwapRule = Literal["first", "newest", "unchanged", "lapsed", "uncached", "budget", "pays", "hold"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SwapInputs:
    """What the rule weighs, in estimated tokens (about four characters a token)."""

    #: A form was shown before (the stored state exists).
    known: bool
    #: The swapped form differs from the held one (the memory was written since).
    differs: bool
    #: Tokens from the memory block to the current turn, held and swapped.
    held: int = 0
    swapped: int = 0
    #: Tokens before the memory block (the caller's system prompt, estimated).
    before: int = 0
    #: Time since the channel's last request (None: unknown).
    idle: timedelta | None = None
    #: Turns the held form has been shown: the horizon's estimate.
    age: int = 0
    #: The hard budget of the held form's tokens (None: none).
    budget: int | None = None
    #: The provider billed the last request as a miss where a hit was predicted.
    missed: bool = False


@dataclass(frozen=True, slots=True)
class SwapDecision:
    """What a turn shows and why: said on the turn result and logged at debug."""

    swap: bool
    rule: SwapRule
    #: Estimated tokens of the two forms, and what the swap saves over the horizon
    #: against what it re-bills now, in uncached-input-token units.
    held: int = 0
    swapped: int = 0
    saving: float = 0.0
    cost: float = 0.0
    #: The nudge went out before the cadence because a write pays (:func:`write_pays`).
    nudged: bool = False
    #: Details kept beside the memory shown because it leaves them out (their turns
    #: were cut; stm_memory/model/kept.py), as said.
    kept: tuple[str, ...] = ()

    def __str__(self) -> str:
        verb = "swap" if self.swap else "hold"
        said = _PLAIN.get(self.rule)
        if said is None:
            said = (
                f"{verb} ({self.rule}): held {self.held} tokens, swapped {self.swapped}; "
                f"saves {self.saving:.0f} against {self.cost:.0f}"
            )
        if self.nudged:
            said += "; a write pays: nudged"
        if self.kept:
            listed = ", ".join(self.kept[:8]) + (", …" if len(self.kept) > 8 else "")
            said += (
                f"; {len(self.kept)} detail(s) kept beside the memory, which leaves them "
                f"out: {listed}"
            )
        return said


#: What a decision without an estimate says.
_PLAIN: dict[str, str] = {
    "first": "swap (first): no form shown before, the newest",
    "newest": "swap (newest): no dialogue of ours to hold, the newest",
    "unchanged": "hold (unchanged): nothing newer to show",
}


def decide(inputs: SwapInputs, profile: CacheProfile) -> SwapDecision:
    """Swap or hold (see the module docstring)."""
    held, swapped = inputs.held, inputs.swapped
    horizon = min(MAX_HORIZON, max(1, inputs.age))
    read, write = profile.read_multiplier, profile.write_multiplier
    saving = horizon * read * (held - swapped)
    cost = write * swapped - read * held

    def out(swap: bool, rule: SwapRule) -> SwapDecision:
        return SwapDecision(swap, rule, held, swapped, saving, cost)

    if not inputs.known:
        return out(True, "first")
    if not inputs.differs:
        return out(False, "unchanged")
    if inputs.missed or (inputs.idle is not None and inputs.idle >= profile.ttl):
        return out(True, "lapsed")
    if inputs.before + held < profile.min_tokens:
        return out(True, "uncached")
    if inputs.budget is not None and held > inputs.budget and swapped < held:
        return out(True, "budget")
    if saving > cost:
        return out(True, "pays")
    return out(False, "hold")


#: The fewest output tokens a write is priced at (a first summary of a few turns).
MIN_WRITE_TOKENS = 100


def write_pays(
    *, uncovered: int, turns: int, memory: int, after: int, lapsed: bool, profile: CacheProfile
) -> bool:
    """Whether asking the model to write its memory now pays (SPEC §6: the nudge when a
    write pays; the cadence stays the staleness bound). The dialogue the memory does
    not cover (``uncovered`` tokens, ``turns`` turns of it) is paid for at every
    request until a write lets a swap drop it — at the cached-read rate while the
    cache is warm, in full once it has ``lapsed`` — about ``rate × uncovered × turns /
    2`` since the last write, growing with the square of the turns. A write costs its
    output (``memory`` tokens, the summary it re-emits, at the profile's output
    multiplier) and the swap that shows it (``after`` tokens re-billed at the write
    rate). The nudge goes when what the uncovered dialogue has cost reaches what a
    write costs: the balance of an order's fixed cost against its carrying cost,
    which puts the writes ``sqrt(2 × write / (rate × tokens per turn))`` turns apart
    (about nine turns apart warm, three cold, on the bench's conversation)."""
    if turns <= 0 or uncovered <= 0:
        return False
    rate = 1.0 if lapsed else profile.read_multiplier
    carried = rate * uncovered * turns / 2
    write = profile.output_multiplier * max(memory, MIN_WRITE_TOKENS)
    return carried >= write + profile.write_multiplier * after


def choose(
    context: MemoryContext,
    messages: Sequence[Any],
    *,
    profile: CacheProfile,
    budget: int | None,
) -> tuple[MemoryContext, SwapDecision | None]:
    """The form a turn sends, given the dialogue its first request carries: the newest
    (``context``) or the held one (its ``alternative``, assembly's: set only when the
    memory was written since), by :func:`decide`, and the decision (None: a context
    built by hand, nothing to decide). The form chosen has no alternative left; it
    carries the nudge early when a write pays (:func:`write_pays`)."""
    if context.shown is None:
        return context, None  # a context built by hand
    held = context.alternative
    lapsed = context.missed or (context.idle is not None and context.idle >= profile.ttl)
    if held is None:
        decision = decide(SwapInputs(known=not _is_swap(context), differs=False), profile)
        if context.nudge is not None or context.early_nudge is None:
            return context, decision  # no nudge to weigh: the dialogue is not read
        earlier = earlier_turns(messages)[1]
        return _nudged(context, context, decision, earlier, lapsed, profile)
    lead, earlier, _current = earlier_turns(messages)
    sizes = [turn_tokens(t) for t in earlier]
    fresh, held = replace(context, alternative=None), replace(held, alternative=None)
    if context.history is None:  # the entry point does not cut: neither form does
        fresh, held = replace(fresh, history=None), replace(held, history=None)

    def tokens(form: MemoryContext) -> int:
        text = text_tokens(form.content)
        if form.history is None:
            return text + sum(sizes)
        keep, _wanted = kept_turns(earlier, form.history)
        return text + sum(sizes[len(sizes) - keep :])

    shown = held.shown
    decision = decide(
        SwapInputs(
            known=True,
            differs=True,
            held=tokens(held),
            swapped=tokens(fresh),
            before=turn_tokens(lead),
            idle=context.idle,
            age=shown.turns if shown is not None else 0,
            budget=budget,
            missed=context.missed,
        ),
        profile,
    )
    return _nudged(fresh if decision.swap else held, fresh, decision, earlier, lapsed, profile)


def _nudged(
    chosen: MemoryContext,
    fresh: MemoryContext,
    decision: SwapDecision,
    earlier: Sequence[Sequence[Any]],
    lapsed: bool,
    profile: CacheProfile,
) -> tuple[MemoryContext, SwapDecision]:
    """``chosen`` with the early nudge when a write pays (``fresh``: the newest form,
    whose counters say how much of the ``earlier`` turns its memory does not cover)."""
    if chosen.nudge is not None or chosen.early_nudge is None or fresh.shown is None:
        return chosen, decision
    turns = min(fresh.shown.turns, len(earlier))
    uncovered = earlier[len(earlier) - turns :] if turns else ()
    last = turn_tokens(earlier[-1]) if earlier else 0
    if not write_pays(
        uncovered=sum(turn_tokens(t) for t in uncovered),
        turns=turns,
        memory=text_tokens(fresh.memory),
        after=text_tokens(fresh.content) + last,
        lapsed=lapsed,
        profile=profile,
    ):
        return chosen, decision
    return replace(chosen, nudge=chosen.early_nudge), replace(decision, nudged=True)


def newest(context: MemoryContext) -> MemoryContext:
    """The form showing the newest memory (what an entry point that sends no dialogue
    of its own shows): ``context`` itself (its alternative, if any, is the held one),
    without the alternative."""
    return context if context.alternative is None else replace(context, alternative=None)


def _is_swap(context: MemoryContext) -> bool:
    """``context`` shows a form newer than the one stored (a swap to it)."""
    return context.shown is not None and context.shown.swap == context.shown_base + 1

"""``MemoryTurn``: one memory turn, written once, that every entry point drives.

A turn's lifecycle is the same whichever framework runs the model::

    begin ──► note the user's message ──► assemble ──► prepare / view ─────────┐
      │            (intent guard)          (once)      (per model request)       │
      │                                                                          ▼
      │                          memory call (one rule set) ◄── the model calls the tool
      │                                                                          │
      └──► abandon (a step failed: counted, not captured) ──► finish (capture with
                                                              speakers, count, end)

``MemoryTurn`` owns that lifecycle and holds its state: where it stands in it
(:class:`TurnPhase`: begun, assembled, finished; every step checked against the one
table of :mod:`stm_memory.kit.state`), the engine's :class:`~stm_memory.TurnContext`
and the assembled :class:`MemoryContext`, read together as one :class:`TurnStatus`
(``status``). It reaches
the engine through :class:`TurnEngine` (the engine methods it calls, nothing more). It
does no I/O itself: each step that reads or writes memory is a generator of
:class:`~stm_memory.kit.Op` that the caller runs with ``drive`` (blocking) or
``adrive`` (awaiting), so a sync hook and its async twin share one body. Integrations
translate their framework's hooks onto these steps (which hook calls which:
``docs/design.md#a-turn-in-every-entry-point``); none of them re-implements one.

Each model request is decided here, whole (:meth:`MemoryTurn.prepare`, a
:class:`PreparedRequest`): the messages and system prompt with the memory placed, the
memory tool offered, described or left out with the ``tool_choice`` that goes with it
(:meth:`MemoryTurn.request_tools`, one policy), and the cache hints
(:func:`~stm_memory.kit.request_hints`, :class:`Breakpoints`). An integration maps it onto its
framework's types; it writes no hint and offers no tool of its own
(``tests/unit/test_kit_imports.py``).

Memory never fails the user's turn: a storage error while beginning, assembling,
capturing or ending is logged and the turn goes on without memory (a turn that could
not begin is *off*: no memory, no tool). A mistake of the caller's (a scope that is
not a :class:`~stm_memory.Scope`) is raised, typed, before anything runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from stm_memory._ops import Op, attempt, op
from stm_memory.endpoints.window import context_exceeded_error, history_budget, hosted_window
from stm_memory.errors import TurnOrderError, ValidationError
from stm_memory.kit._engine import TurnEngine
from stm_memory.kit.cache_hints import cache_retention, request_hints
from stm_memory.kit.capture import (
    MARGIN,
    capture_read,
    capture_start,
    dialogue_for_capture,
    needs_previous,
)
from stm_memory.kit.long_turn import RECALL_SPEC, LongTurn, recall_ask, recall_page
from stm_memory.kit.options import TurnOptions
from stm_memory.kit.prepared import (
    Ask,
    Breakpoints,
    PlacedView,
    PreparedRequest,
    ToolOffer,
    ToolRequest,
)
from stm_memory.kit.replies import Usage
from stm_memory.kit.requests import forces_tool, has_tool_traffic, text_of
from stm_memory.kit.state import ORDER, Move, TurnEvent, TurnPhase, TurnStatus, advance
from stm_memory.kit.writer import Writer, write_request, written_arguments
from stm_memory.model import MemoryEntry, Scope, StoredMessage
from stm_memory.model.kept import kept_details
from stm_memory.model.messages import without_speaker_ids
from stm_memory.model.rates import CacheProfile, model_profile, profile_for
from stm_memory.model.receipt import TurnBill, bill_turn
from stm_memory.model.tool_results import KeptResult
from stm_memory.prompt.clearing import RECALL_TOOL, ClearingRule
from stm_memory.prompt.cut import earlier_turns, forget_erased, kept_turns, turn_tokens
from stm_memory.prompt.placement import MemoryContext
from stm_memory.prompt.quiet import NUDGE_TRIES, ToolStep, Writing, nudge_due, tool_step
from stm_memory.prompt.render import nudge_text, progress_text
from stm_memory.prompt.swap import SwapDecision, choose, newest
from stm_memory.prompt.tokens import PER_MESSAGE_TOKENS, text_tokens
from stm_memory.tool.call import run_memory_call
from stm_memory.tool.schema import tool_spec
from stm_memory.tool.textcall import text_call
from stm_memory.tool.turn import TOOL_NAME, TurnRecord, failure
from stm_memory.tool.vetting import tool_result_text
from stm_memory.wire import OPENAI_PROVIDERS, codec_for, message_role, wire_for
from stm_memory.wire.base import MESSAGES_WIRE, ToolSpec, Wire
from stm_memory.wire.openai_chat import breakpoint_indices, cache_mode, explicit_breakpoints

if TYPE_CHECKING:
    from stm_memory.tool.turn import TurnContext

__all__ = [
    "Ask",
    "Breakpoints",
    "MemoryTurn",
    "PlacedView",
    "PreparedRequest",
    "ToolOffer",
    "ToolRequest",
    "TurnEngine",
    "TurnPhase",
    "TurnStatus",
]

log = logging.getLogger("stm_memory")

_UNAVAILABLE = "Short-term memory is not available in this conversation."
#: ``name_model``'s host when the client is not OpenAI-style (None is OpenAI's own).
_NO_HOST: Final = object()


#: The share of a refused request's stated limit a refit aims for.
_REFIT_MARGIN = 0.85
#: The ``stm_event`` of the judgement's warning record, for a harness to filter it.
NOT_WRITING_EVENT = "not_writing"
#: The ``stm_event`` of the warning that a model writes its tool calls as text.
TEXT_CALLS_EVENT = "tool_calls_as_text"
_warned_models: set[str] = set()
_warned_lock = threading.Lock()


def _warn_not_writing(model: str | None, scope: Scope | None) -> None:
    """One warning per model name (per process) when a channel judges its model not to
    write its memory: what it means and what to do."""
    name = model or ""
    with _warned_lock:
        if name in _warned_models:
            return
        _warned_models.add(name)
    log.warning(
        "stm-memory: model %s has not written its short-term memory in %d nudged turns "
        "(channel %s): memory is not being written. Its requests now leave out the "
        "nudge, and the memory tool where that costs nothing; briefings, the history "
        "cut at the context budget and erasure still work. If the model can call tools, "
        "serve it with a chat template that supports them (llama.cpp: --jinja); if it "
        "cannot, pass tool_calling=False. See docs/open-models.md.",
        repr(model) if model else "(unnamed)",
        NUDGE_TRIES,
        scope.live_key if scope is not None else "-",
        extra={"stm_event": NOT_WRITING_EVENT},
    )


def _budgeted(context: MemoryContext, budget: int) -> MemoryContext:
    """``context`` (and the held form it may show instead) with the history budget at
    most ``budget`` tokens."""
    history = context.history
    if history is None or (history.token_budget is not None and history.token_budget <= budget):
        return context
    alternative = context.alternative
    return replace(
        context,
        history=replace(history, token_budget=budget),
        alternative=_budgeted(alternative, budget) if alternative is not None else None,
    )


def _budget_of(context: MemoryContext, default: int) -> int:
    history = context.history
    return history.token_budget if history is not None and history.token_budget else default


#: Decisions whose request extends the channel's last one: a warm cache serves its prefix.
_EXTENDS = frozenset({"hold", "unchanged"})


def _estimate(messages: Sequence[Any], system: Any) -> int:
    """Estimated tokens of ``messages`` and a ``system`` prompt kept apart: the same
    estimate on both sides of a difference (stm_memory.model.receipt)."""
    total = sum(text_tokens(text_of(m)) + PER_MESSAGE_TOKENS for m in messages)
    if isinstance(system, str):
        return total + text_tokens(system)
    if system is not None:
        return total + text_tokens(text_of(system)) + PER_MESSAGE_TOKENS
    return total


def _previous_request_end(messages: Sequence[Any]) -> int:
    """Where a full-history caller's previous request ended in ``messages``: after the
    turn before the current one (what it has sent since is new)."""
    users = [i for i, m in enumerate(messages) if message_role(m) == "user"]
    return users[-2] + 1 if len(users) >= 2 else 0


@dataclass(frozen=True, slots=True)
class _Billing:
    """What a turn's bill is priced from: the rates and the prediction (settle), the
    caller's dialogue less what the first request carried, and the dialogue new since
    the caller's previous request (the first request)."""

    profile: CacheProfile | None = None
    warm: bool = False
    predicted_hit: bool | None = None
    delta: int | None = None
    new: int = 0

    def bill(self, usage: Sequence[Usage]) -> TurnBill | None:
        if self.profile is None or not usage or self.delta is None:
            return None
        total = sum(usage, Usage())
        if not total.input_tokens:
            return None  # the API reported no usage: nothing to bill
        return bill_turn(
            profile=self.profile,
            calls=len(usage),
            input_tokens=total.input_tokens,
            cached_tokens=total.cached_input_tokens,
            written_tokens=total.cache_write_tokens,
            placed_delta=self.delta,
            new_tokens=self.new,
            warm=self.warm,
            predicted_hit=self.predicted_hit,
            first_cached=usage[0].cached_input_tokens if usage[0].input_tokens else None,
        )


class MemoryTurn:
    """One responding turn's memory (see the module docstring). Build it with
    :meth:`begin`; a turn whose scope is ``None`` or whose beginning failed is *off*
    (``status.active`` False): it places nothing, offers no tool and writes nothing."""

    __slots__ = (
        "_billing",
        "_context",
        "_decision",
        "_lock",
        "_long",
        "_memory",
        "_model",
        "_options",
        "_phase",
        "_scope",
        "_spec",
        "_withdrawn",
        "kept",
        "state",
    )

    def __init__(
        self,
        memory: TurnEngine,
        scope: Scope | None,
        state: TurnContext | None = None,
        *,
        options: TurnOptions | None = None,
    ) -> None:
        """A turn as it stands: built by :meth:`begin`; built directly without a
        ``state`` it is *off* (no I/O): a placeholder for a turn not begun yet, or what
        a framework asks for the scope's tool description before a turn exists (the
        cache hints need no turn: :func:`~stm_memory.kit.request_hints`)."""
        self._memory = memory  # the engine, as the turn drives it
        self._scope = scope
        #: The engine's per-turn state (guards, snapshot, the one update); None: off.
        self.state = state
        self._options = options or TurnOptions()
        # The model's name, where the entry point knows it (name_model: a framework
        # names its model only at its call, before the first request).
        self._model: str | None = None
        self._phase = TurnPhase.BEGUN  # moves forward only, under the lock
        self._context: MemoryContext | None = None  # set with ASSEMBLED, kept after
        # What the turn shows, decided at its first request (stm_memory.prompt.swap).
        self._decision: SwapDecision | None = None
        # One lock per turn: the engine's state's own, when there is one.
        self._lock = state.lock if state is not None else threading.RLock()
        # The tool left out of this turn's requests: its model was judged not to write
        # (stm_memory.prompt.quiet.tool_step), decided with the form at settle.
        self._withdrawn = False
        self._spec: ToolSpec | None = None  # the memory tool, described once per turn
        # The turn's own tool results, for an entry point that routes the retrieval
        # tool (Ask.recall): made at its first request, when the model is known.
        self._long: LongTurn | None = None
        # How the turn's bill is priced: set at settle and by its first request.
        self._billing = _Billing()
        #: What an integration keeps for this turn, under a key of its own (the LangChain
        #: tool object: stm_memory_langchain._tool); the kit knows no framework.
        self.kept: dict[str, Any] = {}

    # -- begin --------------------------------------------------------------------------

    @classmethod
    def begin(
        cls,
        memory: TurnEngine,
        scope: Scope | None,
        *,
        options: TurnOptions | None = None,
        user_message: str | None = None,
        tools_available: bool = True,
        model: str | None = None,
        updated: bool = False,
    ) -> Generator[Op, Any, MemoryTurn]:
        """Begin the turn of ``scope`` (None: memory is off for it): the settings and
        category snapshot, the guards, the long-term intent of ``user_message``.
        ``model``: the model's name where the entry point knows it (the judgement of
        whether it writes is said once per name; another model is judged afresh).
        ``updated``: a turn resumed after its update (a framework's run state says
        so) begins with its one update taken."""
        options = options or TurnOptions()
        # The caller's mistakes are raised here, typed, before anything runs (inside
        # the attempt below they would only turn memory off).
        if scope is not None and not isinstance(scope, Scope):
            raise ValidationError(f"scope must be a Scope, got {type(scope).__name__}")
        if user_message is not None and not isinstance(user_message, str):
            raise ValidationError("user_message must be a string or None")
        state: TurnContext | None = None
        if scope is not None:
            state = yield from attempt(
                op(
                    memory.begin_turn,
                    memory.abegin_turn,
                    scope,
                    provider=options.provider,
                    user_message=user_message or None,
                    # A writer writes where the model cannot: the memory stays on.
                    tools_available=tools_available
                    and (options.tool_calling or options.writer is not None),
                ),
                "beginning the turn",
            )
        if state is not None and updated:
            state.claim_update()
        turn = cls(memory, scope, state, options=options)
        turn._model = model
        # With a writer the model is offered no tool and sent no nudge.
        turn._withdrawn = options.writer is not None
        if memory.writes_tools_as_text(model or ""):
            turn._text_caller()
        return turn

    def _text_caller(self) -> None:
        """The turn's model writes its tool calls as text: no tool, no nudge; and with
        no writer to stand in, nobody writes the memory (its status says ``off``)."""
        self._withdrawn = True
        if self.state is not None and self._options.writer is None:
            self.state.unwritten = True

    # -- what the turn knows --------------------------------------------------------------

    @property
    def status(self) -> TurnStatus:
        """What the turn knows, read at once (:class:`TurnStatus`): its phase, whether
        memory is on, the tool offered, the one update, the judgement of whether the
        model writes, what its requests show and the context it assembled."""
        with self._lock:
            context = self._context
            return TurnStatus(
                phase=self._phase,
                active=self.state is not None,
                tool_offered=self._offered(),
                updated=self.state is not None and self.state.updated,
                writing=self._writing(context),
                decision=self._decision,
                context=context if context is not None else MemoryContext(),
                bill=self.state.bill if self.state is not None else None,
            )

    def _writing(self, context: MemoryContext | None) -> Writing | None:
        if self.state is None or context is None:
            return None
        # Known as a text caller only once the model was named, after assembly.
        return Writing.OFF if self.state.no_writer else context.writing

    def name_model(
        self, name: str | None, *, host: object = _NO_HOST, window: int | None = None
    ) -> TurnOptions:
        """The entry point names the turn's model once it knows it (a framework names
        its model only at its call), before the turn's first request: its ``name`` (a
        name given before stays: the turn's model does not change) and, for an
        OpenAI-style client, the base URL it is served from (``host``; None: the SDK's
        default, OpenAI's): with no form named, the host settles it
        (:meth:`TurnOptions.for_host`); the context ``window`` its server lists, unless
        one was named. Returns the options the turn's requests go by."""
        with self._lock:
            self._model = self._model or name
            if self._memory.writes_tools_as_text(self._model or ""):
                self._text_caller()
            if host is not _NO_HOST:
                self._options = self._options.for_host(host)
            if window is not None and self._options.context_window is None:
                self._options = replace(self._options, context_window=window)
            return self._options

    def _step(self, event: TurnEvent) -> Move:
        """The table's move for ``event`` (:mod:`stm_memory.kit.state`), taken under the
        lock, where every step but ``assemble`` writes the phase (``assemble`` writes it
        once its read is done: a concurrent step then sees the turn not assembled yet,
        and a read cut short can be run again)."""
        with self._lock:
            move = advance(self._phase, event)
            if move.runs:
                self._phase = move.to
            return move

    def _offered(self) -> bool:
        return self.state is not None and self.state.tool_offered and not self._withdrawn

    def _settle(
        self,
        messages: Sequence[Any] | None,
        *,
        provider: str | None = None,
        retention: timedelta | None = None,
    ) -> None:
        """Decide, once, which form this turn's requests show (the one shown before or
        the newest written, :mod:`stm_memory.prompt.swap`), on the dialogue the first
        request carries (``messages``; None: the entry point sends no dialogue of its
        own, so the newest is shown, as it is when the caller windows its own history:
        ``trim_history=False``) priced at ``provider``'s rates (``Limits.cache_profile``
        names others) with the cache ``retention`` the request asks for, if it says
        (:func:`~stm_memory.kit.cache_retention`: OpenAI ``prompt_cache_retention``,
        Anthropic breakpoint TTLs). Every request settles first; an entry point that
        reads ``status.context`` alone assembles with ``dialogue=False``."""
        context = self._context
        if context is None or self._decision is not None:
            return
        with self._lock:
            if self._decision is not None or self._context is None:
                return
            context = self._context
            # The model's context window bounds the history budget: known by now, as
            # the model is.
            window = self._window()
            if window is not None:
                context = _budgeted(context, history_budget(window))
            profile = profile_for(
                provider or self._options.provider,
                self._memory.limits.cache_profile,
                model=self._model,
                retention=retention,
            )
            if context.alternative is not None and (
                messages is None or not self._options.trim_history or context.history is None
            ):
                # No dialogue of ours to hold (a buffer), or the caller windows its own
                # history (untrimmed): nothing a held form saves, the newest shows.
                chosen, decision = newest(context), SwapDecision(True, "newest")
            else:
                try:
                    chosen, found = choose(
                        context,
                        messages or (),
                        profile=profile,
                        budget=_budget_of(context, self._memory.limits.history_token_budget),
                    )
                except Exception:
                    log.exception("stm-memory: deciding what to show failed; showing the newest")
                    chosen, found = newest(context), SwapDecision(True, "first")
                if found is None:
                    return
                decision = found
            if chosen.shown is not None and chosen.shown.kept:
                decision = replace(decision, kept=tuple(kept_details(chosen.shown)))
            # The tool list heads the prompt, before the system prompt every channel of
            # the cache key shares: it changes for free only when that head is cold.
            cold = context.head_idle is not None and context.head_idle >= profile.ttl
            chosen = self._tool_step(chosen, fresh=cold)
            self._context = chosen
            self._decision = decision
            lapsed = context.missed or (context.idle is not None and context.idle >= profile.ttl)
            warm = context.idle is not None and not lapsed
            # A held form extends the channel's last request: its prefix is cached.
            predicted = True if warm and decision.rule in _EXTENDS else None
            self._billing = replace(
                self._billing, profile=profile, warm=warm, predicted_hit=predicted
            )
        if self.state is not None and chosen.ledger is not None:
            self.state.note_briefings(
                chosen.ledger, chosen.ledger_epoch, shown=chosen.shown, base=chosen.shown_base
            )
        log.debug("stm-memory: %s: %s", self._scope.live_key if self._scope else "-", decision)

    def _tool_step(self, chosen: MemoryContext, *, fresh: bool) -> MemoryContext:
        """``chosen`` with the memory tool's step for this turn (SPEC §6, "no regret":
        a model judged not to write stops paying for the tool and the nudge,
        :func:`~stm_memory.prompt.quiet.tool_step`); warns once per model name."""
        shown, status = chosen.shown, chosen.writing
        if shown is None or status is None or self.state is None:
            return chosen
        model = self._model
        if status is Writing.NOT_WRITING:
            _warn_not_writing(model, self._scope)
        step = tool_step(
            status=status,
            withdrawn_for=shown.withdrawn_for,
            withdrawn_at=shown.withdrawn_at,
            model=model,
            turns_since_refresh=shown.turns,
            fresh=fresh,
        )
        if step is ToolStep.KEEP:
            return chosen
        if step is ToolStep.REOFFER:
            state = self.state
            nudge = nudge_text(
                categories=state.categories,
                summary_mode=state.summary_mode,
                override=state.settings.update_nudge_override,
            )
            shown = replace(shown, withdrawn_for=None, withdrawn_at=0)
            return replace(chosen, shown=shown, nudge=nudge if state.tool_offered else None)
        self._withdrawn = True
        if step is ToolStep.WITHDRAW:
            shown = replace(shown, withdrawn_for=model or "", withdrawn_at=shown.turns)
        return replace(chosen, shown=shown, nudge=None, early_nudge=None)

    def _settled(
        self,
        messages: Sequence[Any] | None,
        context: MemoryContext,
        provider: str | None,
        retention: timedelta | None = None,
    ) -> MemoryContext:
        """``context`` (a request's, derived from the assembled one) as the form the
        turn settled on."""
        if context.alternative is None and context.shown is None:
            return context  # built by hand: nothing to decide
        self._settle(messages, provider=provider, retention=retention)
        chosen = self._context
        if chosen is None or chosen is context:
            return context
        # The request's own say over the nudge: held back, both nudges are gone.
        allowed = context.nudge_allowed
        return chosen.for_request(
            role=context.role, trim=context.history is not None, nudge=allowed
        )

    def refit(self, messages: Sequence[Any], error: BaseException) -> bool:
        """``error`` is the provider's: when it refused the request as longer than the
        model's context (:func:`~stm_memory.kit.context_exceeded_error`, with the limit
        and the request's tokens where its body says them), lower this turn's history
        budget so the next request built on ``messages`` fits, dropping the oldest
        earlier turns it still sends (never the current turn), and, in a long turn
        (``Ask.recall``), clear the current turn's results but the newest
        (docs/concepts/long-turns.md). False for any other error, or when there is
        nothing left to drop (or the turn has no say over the dialogue): the error
        stands. The entry point retries once (docs/open-models.md)."""
        exceeded = context_exceeded_error(error)
        if exceeded is None:
            return False
        # A long turn's own results leave first (all but the newest).
        cleared = self._long is not None and self._long.refit(messages)
        limit, requested = exceeded.limit, exceeded.requested
        with self._lock:
            context = self._context
            if context is None or context.history is None:
                return cleared
            lead, earlier, current = earlier_turns(messages)
            keep, _wanted = kept_turns(earlier, context.history)
            sent = sum(turn_tokens(t) for t in earlier[len(earlier) - keep :])
            if keep == 0 or sent == 0:
                return cleared
            if limit and requested:
                # Scaled into our estimate's units (the server's tokenizer and ours,
                # about four characters a token, disagree) with a margin; llama.cpp
                # refuses at a request of exactly its context, so ``requested`` may
                # equal ``limit``.
                total = turn_tokens(lead) + sent + turn_tokens(current)
                total += text_tokens(context.content or "")
                fits = total * limit / max(requested, limit) * _REFIT_MARGIN
                budget = max(0, int(sent - (total - fits)))
            else:
                budget = sent // 2  # the error names no numbers (Ollama's, Responses')
            self._context = _budgeted(context, min(budget, sent - 1))
        log.warning(
            "stm-memory: %s: the request exceeded the model's context (%s); the oldest "
            "earlier turns are dropped to fit and the request is sent again",
            self._scope.live_key if self._scope else "-",
            f"{requested} > {limit} tokens" if limit and requested else "limit not stated",
        )
        return True

    def _window(self) -> int | None:
        """The model's context window: named (or found on its server), else the table
        of hosted models'; None when neither says."""
        return self._options.context_window or (hosted_window(self._model) if self._model else None)

    def _long_turn(self) -> LongTurn:
        """The turn's :class:`LongTurn`, its batches sized from the model's window
        (named, found on its server, in the hosted table; else the history budget's)."""
        with self._lock:
            if self._long is None:
                window = self._window()
                if window is None:
                    window = self._memory.limits.history_token_budget * 4 // 3
                shown = self._context.shown if self._context is not None else None
                self._long = LongTurn(
                    ClearingRule(window=window),
                    keep=self._options.keep_tool_results,
                    carried=shown.cleared if shown is not None else (),
                )
            return self._long

    def recall_call(self, arguments: Any) -> Generator[Op, Any, str]:
        """The retrieval tool's call (``PreparedRequest.recall_spec``): a result this
        turn's requests left out, or one an earlier turn of this user in this channel
        kept (read from the live cache only then), by its call id, one page, byte for
        byte (the tool result to send back as it is); a failed tool result naming the
        problem (bad arguments, an id no result of this conversation has)."""
        if self.state is None or self._scope is None:
            return tool_result_text(failure(f"{RECALL_TOOL} is not available: memory is off."))
        long = self._long_turn()
        ask = recall_ask(arguments)
        if isinstance(ask, str):
            return ask
        text = long.text_of(ask.call_id)
        if text is None:
            m = self._memory
            kept = yield from attempt(
                op(m.kept_result, m.akept_result, self._scope, ask.call_id),
                "reading a kept tool result",
            )
            text = kept.text if isinstance(kept, KeptResult) else None
        return recall_page(text, ask, long.page)

    def tool_spec(self) -> ToolSpec:
        """The memory tool as this turn describes it (:class:`~stm_memory.kit.ToolSpec`:
        the server's description override or the mode's default, the parameters of this
        turn's categories), fixed for the turn; for a turn that is off, the defaults' (a
        request that must still describe the tool, e.g. Anthropic history with tool
        blocks, offered with no call). For a framework that builds its own tool object;
        a request carries it as :attr:`PreparedRequest.tool_spec`."""
        spec = self._spec
        if spec is None:
            state = self.state
            if state is None:
                if self._scope is None:
                    raise ValidationError("a turn without a scope has no memory tool")
                state = self._memory.default_turn(self._scope, provider=self._options.provider)
            spec = self._spec = tool_spec(state, limit=self._memory.limits.max_summary_length)
        return spec

    def note_user_message(self, text: str | None) -> None:
        """Hand a turn begun before its user message existed that message, so the
        long-term-intent guard sees it before the tool is offered or runs (no I/O)."""
        self._step(TurnEvent.NOTE_USER)
        if self.state is not None:
            self._memory.note_user_message(self.state, text)

    # -- the request ------------------------------------------------------------------------

    def assemble(self, *, dialogue: bool = True) -> Generator[Op, Any, MemoryContext]:
        """Read the memory this turn shows (once; later calls return the same).
        ``dialogue=False``: the entry point sends no dialogue of ours, and reads
        ``status.context`` alone (a classic memory buffer): what its requests show is
        decided now, the newest memory (nothing a held form would save)."""
        with self._lock:
            move = advance(self._phase, TurnEvent.ASSEMBLE)
        if move.runs:
            built: Any = None
            if self.state is not None:
                m = self._memory
                if self._options.writer is not None:
                    yield from self._write_by_writer(self._options.writer)
                built = yield from attempt(
                    op(m.build_context, m.abuild_context, self.state), "assembling memory"
                )
            context = built if isinstance(built, MemoryContext) else MemoryContext()
            with self._lock:
                if self._context is None:  # a concurrent step may have assembled first
                    self._context = context
                # Moved on once the memory is read (a read cut short leaves the turn
                # BEGUN, to assemble again), unless finish() came meanwhile.
                if self._phase is TurnPhase.BEGUN:
                    self._phase = move.to
        if not dialogue:
            self._settle(None)
        return self._context if self._context is not None else MemoryContext()

    def _write_by_writer(self, writer: Writer) -> Generator[Op, Any, None]:
        """The ``writer=`` option's write, before the memory is read: when the
        cadence's nudge would go (:func:`~stm_memory.prompt.quiet.nudge_due`) and a
        guard lets the memory be written, the writer is asked (one call of its own)
        and its answer runs as this turn's memory call, through the same guards and
        the lossy-writer check. A failure is logged; the turn goes on."""
        state, scope, m = self.state, self._scope, self._memory
        if state is None or scope is None or not state.tool_offered:
            return
        entry = yield from attempt(op(m.get, m.aget, scope), "reading memory for the writer")
        if not isinstance(entry, MemoryEntry):
            return
        if not nudge_due(entry.turns_since_refresh, state.settings.refresh_cadence):
            return
        request = write_request(
            entry,
            state.categories,
            summary_mode=state.summary_mode,
            limit=m.limits.max_summary_length,
        )
        if request is None:
            return
        where = scope.live_key
        try:
            text = yield op(writer.write, writer.awrite, request)
        except Exception as exc:
            log.warning("stm-memory: the writer failed for %s: %s", where, exc)
            return
        arguments = written_arguments(text if isinstance(text, str) else "", request)
        if arguments is None:
            log.warning("stm-memory: the writer answered no memory for %s", where)
            return
        result = yield from self.memory_call(arguments)
        if result.get("status") != "completed":
            log.warning("stm-memory: the writer's memory for %s was refused: %s", where, result)

    def _request_context(self, *, nudge: bool | None = None) -> MemoryContext:
        """What one model request of this turn carries: the options' memory role, the
        history cut when trimming, the nudge only while the tool is offered
        (``nudge=False`` holds it back, e.g. until the user's message is known)."""
        self._step(TurnEvent.REQUEST)
        context = self._context
        if context is None:  # FINISHED without having assembled
            raise TurnOrderError(f"prepare() before assemble(): {ORDER}")
        offered = self._offered() if nudge is None else nudge and self._offered()
        return context.for_request(
            role=self._options.form, trim=self._options.trim_history, nudge=offered
        )

    def prepare(
        self,
        messages: Sequence[Any],
        *,
        wire: Wire = MESSAGES_WIRE,
        ask: Ask | None = None,
    ) -> PreparedRequest:
        """One model request, whole (:class:`PreparedRequest`): ``messages`` (and the
        caller's system prompt, for a ``wire`` that keeps it apart) with this request's
        memory placed as ``wire``'s API takes it, and what the caller's request says
        besides (``ask``, :class:`Ask`): the options' memory role, the history cut when
        trimming, the nudge while the tool is offered; ``messages`` are the model's whole
        input with nothing of the memory's in it (an entry point places once: here, or
        in a :meth:`view` it sends as it is). The memory tool and ``tool_choice``
        (:meth:`request_tools`, on the messages as placed); the cache hints
        (:func:`request_hints`, :class:`Breakpoints`) the wire takes, from the caller's
        settings (a hint there wins). The retention they ask for (or ``ask.retention``)
        prices the turn's one decision of what to show (made at its first request).
        With ``ask.recall`` the turn's older tool results leave in batches, readable
        back with the retrieval tool (``recall_spec``, :meth:`recall_call`).
        Every entry point sends this, unedited. A placing error is logged and the
        caller's messages go as they came, without memory (the tool and hints still
        decided): never a failed turn."""
        ask = ask or Ask()
        system, provider = ask.system, ask.provider
        given = dict(ask.settings or {})
        retention = ask.retention
        if retention is None and ask.settings is not None:
            retention = cache_retention(given, system)
        context = ask.context if ask.context is not None else self._request_context(nudge=ask.nudge)
        context = self._settled(messages, context, provider, retention)
        record = messages
        if ask.recall and self.state is not None:
            # What erasure removed is read back by no one; earlier turns' results the
            # cut leaves out are named in the block, to be read back by their ids.
            window = context.history
            record = forget_erased(messages, window.forgetting if window else None)
            long = self._long_turn()
            index = long.index(record, lambda: context.cut(messages))
            if index is not None:
                context = replace(context, index=index)
            if self._progress_asked(ask, context) and long.progress_due(record):
                # At the request's end, for this request alone: the next one extends
                # the one before it (SPEC: one update a turn, so asked once).
                context = replace(
                    context, nudge=progress_text(), nudge_depth=0, cache_ordered=False
                )
        placed_system, placed = system, None
        transient: tuple[str, ...] = ()
        # The message style is the wire's: a request written for an API is written in
        # its messages whoever serves the model behind it (the ``provider`` option
        # names that: its exclusion, its prices, its API's rules for the tool; how
        # memory is written is ``memory_role``'s). Without an API (LangChain messages),
        # the model's provider, which its chat model converts them for.
        style = provider if provider is not None else (wire.family or self._options.provider)
        if not context.is_empty:
            try:
                placed_system, placed = wire.place(context, messages, system, style)
                transient = tuple(context.transient)
            except Exception:
                log.exception("stm-memory: placing memory in the request failed; sending without")
                placed_system, placed = system, None
        if placed is None:
            placed = wire.sent(messages)  # nothing placed: as the API takes them
        recall = None
        if ask.recall and self.state is not None:
            # A long turn's older results leave the request, readable back.
            long = self._long_turn()
            apart = placed_system
            placed = long.placed(record, placed, lambda p: _estimate(p, apart))
            recall = RECALL_SPEC if long.offered else None
        if self._billing.delta is None and self.state is not None:
            self._billing = replace(
                self._billing,
                delta=_estimate(messages, system) - _estimate(placed, placed_system),
                new=_estimate(messages[_previous_request_end(messages) :], None),
            )
        hinted = self._hinted(ask.cache_hints)
        if wire.strips_speaker_ids:
            # A dict's "user_id" (ours, for capture) is not an API field.
            placed = without_speaker_ids(placed)
        if wire.cache_key and hinted and self._takes_breakpoints():
            placed_system, placed = self._marked(
                messages, placed, placed_system, transient, wire=wire, style=style, settings=given
            )
        tools = self.request_tools(
            placed, wire=wire, other_tools=ask.other_tools, tool_choice=ask.tool_choice
        )
        breakpoints = None
        if hinted and wire.breakpoints and self._scope is not None:
            breakpoints = Breakpoints.of(transient, system, placed_system)
        return PreparedRequest(
            placed,
            placed_system,
            transient,
            tools.tool,
            tools.tool_choice,
            request_hints(self._scope, given, wire=wire, send=hinted),
            breakpoints,
            self.tool_spec() if tools.tool else None,
            recall,
        )

    def _progress_asked(self, ask: Ask, context: MemoryContext) -> bool:
        """Whether this request may carry a long turn's progress nudge: the memory tool
        offered and not yet written this turn, no other nudge in it, nudges allowed,
        and not the portable form (which would join it to the turn's user message, a
        rewrite of the turn twice over)."""
        state = self.state
        return (
            state is not None
            and not state.updated
            and self._offered()
            and ask.nudge is not False
            and context.nudge is None
            and self._options.form != "inline"
        )

    def request_tools(
        self,
        messages: Sequence[Any],
        *,
        wire: Wire = MESSAGES_WIRE,
        other_tools: bool = False,
        tool_choice: Any = None,
    ) -> ToolRequest:
        """How a request whose input is ``messages`` carries the memory tool, and the
        ``tool_choice`` it sends (the caller's ``tool_choice`` in, as given): the one
        policy (:meth:`_tool_offer`) on the request as it goes — tool traffic read from
        ``messages`` in any format, ``wire``'s rules and those of the API of the turn's
        provider (:func:`~stm_memory.wire.wire_for`: an OpenAI-compatible endpoint in
        front of Anthropic refuses what Anthropic refuses). :meth:`prepare` calls it;
        an entry point that builds its tool list apart from its messages (the Agents
        SDK's model) calls it there."""
        refused = (
            wire.tool_blocks_need_a_tool or wire_for(self._options.provider).tool_blocks_need_a_tool
        )
        # Tool traffic matters only where the tool may be described (every request
        # reads it otherwise: a walk over the whole input, on the hot path).
        traffic = not self._offered() and refused and not other_tools and has_tool_traffic(messages)
        offer = self._tool_offer(other_tools=other_tools, tool_traffic=traffic)
        if offer == "describe":
            # Defined but never callable, in the API's own words.
            return ToolRequest(offer, wire.no_tool_choice())
        if tool_choice is not None and (
            not (offer or other_tools) or (offer is None and forces_tool(tool_choice, TOOL_NAME))
        ):
            # Refused without tools; never forcing a tool that is not offered.
            return ToolRequest(offer, None)
        return ToolRequest(offer, tool_choice)

    @staticmethod
    def _marked(
        given: Sequence[Any],
        placed: list[Any],
        system: Any,
        transient: Sequence[str],
        *,
        wire: Wire,
        style: str | None,
        settings: Mapping[str, Any],
    ) -> tuple[Any, list[Any]]:
        """``(system, placed)`` with OpenAI's explicit breakpoints (the rule:
        :mod:`stm_memory.wire.openai_chat`). A system prompt kept apart as a message (a
        LangChain agent's) leads the list it is sent ahead of; Responses
        ``instructions`` (text) take none."""
        # Responses input is written in its own part type, whatever the list holds.
        codec = wire.codec or codec_for(placed, style)
        apart = system is not None and not isinstance(system, str)
        ahead = [system] if apart else []
        marked = explicit_breakpoints(
            [*ahead, *placed],
            breakpoint_indices([*ahead, *given], [*ahead, *placed], transient, codec=codec),
            codec=codec,
            mode=cache_mode(settings),
        )
        return (marked[0], marked[1:]) if apart else (system, marked)

    def _takes_breakpoints(self) -> bool:
        """This turn's model takes OpenAI's explicit cache breakpoints (gpt-5.6 and
        later, by its name; never one that refuses them, whatever profile prices it),
        served by OpenAI itself: an OpenAI-compatible server renders what it is sent."""
        if self._scope is None or not self._model:
            return False
        if (self._options.provider or "openai") not in OPENAI_PROVIDERS:
            return False
        profile = model_profile(self._model)
        return profile is not None and profile.breakpoints

    def _hinted(self, cache_hints: bool | None) -> bool:
        """This request sends cache hints: ``cache_hints`` when given, else the options'."""
        return self._options.cache_hints if cache_hints is None else cache_hints

    def view(
        self,
        earlier: Sequence[Any],
        stand_in: Any,
        *,
        wire: Wire = MESSAGES_WIRE,
        provider: str | None = None,
        nudge: bool | None = None,
        retention: timedelta | None = None,
    ) -> PlacedView | None:
        """``earlier`` (the turns before this one, read before the user's new message
        exists: a history or session view) with this request's memory placed as it
        will stand once that message follows; ``stand_in`` holds its place and comes
        back in :attr:`PlacedView.items` where placement left it, for the caller to
        drop. ``nudge`` and ``retention``: as for :meth:`prepare` (the first request of
        the turn decides what it shows, and a view is one). None when nothing is
        placed: memory is off or empty, the portable form (written on the model's
        whole input, by :meth:`prepare`), or a placing error (logged)."""
        context = self._request_context(nudge=nudge)
        if context.role == "inline" or context.is_empty:
            return None
        context = self._settled(earlier, context, provider, retention)
        if context.is_empty:
            return None
        try:
            items = wire.view(context, [*earlier, stand_in], provider or self._options.provider)
        except Exception:
            log.exception("stm-memory: placing memory in the view failed; sending without")
            return None
        return PlacedView(tuple(items), context.nudge)

    def _tool_offer(self, *, other_tools: bool, tool_traffic: bool) -> ToolOffer:
        """How a request carries the memory tool, the one policy every request of every
        entry point goes by (through :meth:`prepare` / :meth:`request_tools`; no
        integration calls it): offered while no guard of the turn hides it; else, for an
        API that refuses a request with tool blocks and no tools (``tool_traffic``: such
        blocks, where the API refuses them), described but uncallable when nothing else
        (``other_tools``) defines one; else not at all."""
        if self._offered():
            return "offer"
        if tool_traffic and not other_tools and self._scope:
            return "describe"
        return None

    def memory_call(
        self, arguments: str | Mapping[str, Any] | None, *, truncated: bool = False
    ) -> Generator[Op, Any, dict[str, Any]]:
        """Run one ``update_short_term_memory`` call: vetted, every guard checked again,
        one update per turn; a result dict, never an exception (a call after
        :meth:`finish` is the integration's bug: :class:`TurnOrderError`)."""
        self._step(TurnEvent.MEMORY_CALL)
        if self.state is None:
            return failure(_UNAVAILABLE)
        return (
            yield from run_memory_call(self._memory, self.state, arguments, truncated=truncated)
        )

    def text_call(self, text: str) -> Generator[Op, Any, dict[str, Any] | None]:
        """A reply with no tool calls whose ``text`` is a call of the memory tool written
        as text (:func:`~stm_memory.tool.textcall.text_call`): run it as the model's
        memory write (every guard checked, as any call), and from now on offer this
        model no tool, in this turn and every later one: its answers outrank the cached
        head. Returns the call's result; None when ``text`` is an answer (or the tool
        was not offered: then nothing the model wrote is ours to run). The entry point
        then asks once more, without the tool, for the answer the user gets."""
        if not self._offered():
            return None
        arguments = text_call(text)
        if arguments is None:
            return None
        result = yield from self.memory_call(dict(arguments))
        with self._lock:
            self._text_caller()
        model = self._model or ""
        m = self._memory
        if (yield op(m.note_text_caller, m.anote_text_caller, model)):
            log.warning(
                "stm-memory: model %s wrote its tool call as text (channel %s): the server "
                "returned no tool_calls, so the reply was JSON, not an answer. stm-memory "
                "ran it as the memory write, asked once more without the tool, and offers "
                "this model no tool from now on. To make tool calls work, serve it with "
                "the model's tool-call parser (vLLM: --enable-auto-tool-choice "
                "--tool-call-parser hermes, or the model's; llama.cpp: --jinja with a "
                "template that emits its tool-call tokens); or pass tool_calling=False. "
                "See docs/open-models.md.",
                repr(model) if model else "(unnamed)",
                self._scope.live_key if self._scope is not None else "-",
                extra={"stm_event": TEXT_CALLS_EVENT},
            )
        return result

    # -- the end ------------------------------------------------------------------------------

    def abandon(self) -> Generator[Op, Any, None]:
        """A step of the turn failed: count the turn now (ending is idempotent, so a
        caller that recovers can still :meth:`finish`, which then only captures)."""
        move = self._step(TurnEvent.ABANDON)
        if move.runs and self.state is not None:
            yield from self._commit(TurnRecord(turn=self.state), "ending the turn")

    def _commit(self, record: TurnRecord, what: str) -> Generator[Op, Any, None]:
        m = self._memory
        with self._lock:
            long = self._long
        if long is not None:  # its cleared results go with the turn's one write
            record = replace(record, cleared=long.cleared())
            record.turn.cleared_ids = long.cleared_ids()
        yield from attempt(op(m.commit, m.acommit, record), what)

    def finish(
        self, messages: Sequence[Any], *, start: int, usage: Sequence[Usage] = ()
    ) -> Generator[Op, Any, None]:
        """Capture the recent dialogue and end the turn (once; later calls do nothing).

        ``messages`` is the dialogue as the caller keeps it (the whole record will do:
        only the capture window is read, :meth:`capture_window`), this turn's messages
        from ``start``. Capture replaces the channel's recent messages, so when nothing
        before ``start`` is dialogue (a caller that passes only the new message) the
        stored ones go in front; stored messages keep their speakers. ``usage``: what
        the API reported for each of the turn's model calls, in order: the turn's bill
        (``status.bill``), kept in the channel's receipt with the turn's count."""
        if not self._step(TurnEvent.FINISH).runs:
            return
        if self.state is None or self._scope is None:
            return
        bill = self.state.bill = self._billing.bill(usage)
        if bill is not None and bill.missed:
            log.info(
                "stm-memory: %s: the provider billed no cached input where the turn's "
                "request extended the last one within the cache's retention (evicted, or "
                "routed to another machine); the next decision counts the cache as lapsed",
                self._scope.live_key,
            )
        m, scope = self._memory, self._scope
        start = max(0, min(start, len(messages)))
        # The one capture window: enough dialogue before this turn, never a long walk.
        since = capture_start(messages, start, MARGIN * m.limits.messages_kept)
        if since:
            messages, start = messages[since:], start - since
        previous: Sequence[StoredMessage] = ()
        readable = True
        read = needs_previous(messages, start)
        if read and self.state.seen_turns is not None:
            # Assembly read the stored turns: the engine's write follows them, and
            # checks they are still the channel's (no second read on the way out).
            dialogue = dialogue_for_capture(messages, start)
            record = TurnRecord(turn=self.state, dialogue=dialogue, follows_seen=True)
            yield from self._commit(record, "capturing dialogue and ending the turn")
            return
        if read:
            try:
                entry = yield op(m.get, m.aget, scope)
                previous = entry.messages if entry is not None else ()
            except Exception:
                # Capture replaces the stored messages: with them unreadable, this
                # turn alone would overwrite them. Skip it; the turn still counts.
                log.exception("stm-memory: reading memory failed; the dialogue is not captured")
                readable = False
        if not readable:
            yield from self._commit(TurnRecord(turn=self.state), "ending the turn")
            return
        # Capture and count share one cache transaction and one SQL transaction; the
        # turns read here are what capture matches speakers against (not read twice),
        # and, for a turn passed alone, what it follows (handed over as they are).
        dialogue = dialogue_for_capture(messages, start)  # this turn alone when read
        record = TurnRecord(turn=self.state, dialogue=dialogue, follows=previous if read else None)
        yield from self._commit(record, "capturing dialogue and ending the turn")

    def capture_window(self, added: int, tail: Sequence[Any] | None = None) -> int | None:
        """For a record read from its end (a session's): how many items :meth:`finish`
        needs when this turn added ``added`` — first a window; then, given the ``tail``
        that read returned, ``None`` when the whole record must be read (the window
        held too little dialogue), else ``len(tail)``. The one capture window of every
        entry point (a record in memory is handed to :meth:`finish` whole)."""
        return capture_read(added, self._memory.limits.messages_kept, tail)

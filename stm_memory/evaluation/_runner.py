"""One runner for every strategy and any chat model: :func:`run_eval`.

Each strategy gets the same conversation set, turn by turn, on a frozen clock that moves
``minutes_per_turn`` a turn (the memory's expiry and the prompt cache's retention see
the conversation's pace, not the run's); each probe's answer is scored; the recorded
requests are priced with the project's prompt-cache model. Before a run with a real
model, :func:`estimate_cost` prices the same run done offline by the ``perfect``
scripted model, and ``max_cost`` refuses a run estimated (or, while it runs, billed)
above it.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from stm_memory.errors import ConfigurationError, StmError
from stm_memory.evaluation._conversation import ConversationSet
from stm_memory.evaluation._generator import generate_conversation
from stm_memory.evaluation._kept import measure_kept
from stm_memory.evaluation._models import ResolvedModel, ScriptedSpec, resolve_model
from stm_memory.evaluation._pricing import (
    Price,
    bill,
    cache_profile_for,
    price_for,
    reported_cost,
)
from stm_memory.evaluation._recording import RecordedTurn
from stm_memory.evaluation._report import (
    SCRIPTED_NOTICE,
    EvalReport,
    ProbeResult,
    Recall,
    StrategyResult,
)
from stm_memory.evaluation._scoring import score_answer
from stm_memory.evaluation._strategies import (
    DEFAULT_STRATEGIES,
    STRATEGIES,
    StrategyOptions,
    Unavailable,
    open_strategy,
)
from stm_memory.kit import Usage
from stm_memory.kit.turn import NOT_WRITING_EVENT
from stm_memory.testing.clock import FrozenClock
from stm_memory.testing.prompt_cache import CACHE_PROFILES, CacheProfile, request_parts

#: OpenAI's extended prompt-cache retention.
_DAY = timedelta(hours=24)
#: The model a scripted run names when its cache profile matches at breakpoints.
_BREAKPOINT_MODEL = "gpt-5.6"

__all__ = ["BudgetExceeded", "CostEstimate", "Progress", "estimate_cost", "run_eval"]

#: progress(phase, done, total): a phase per strategy, done counting its turns.
Progress = Callable[[str, int, int], None]
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
#: Output tokens assumed per model call when estimating a real run: real answers are
#: longer than the scripted model's one-liners.
ASSUMED_OUTPUT_TOKENS = 150


class BudgetExceeded(StmError):
    """The run would cost (or has cost) more than ``max_cost``; nothing more is sent."""

    def __init__(
        self, message: str, *, estimate: CostEstimate | None = None, spent_usd: float = 0.0
    ) -> None:
        super().__init__(message)
        self.estimate = estimate
        self.spent_usd = spent_usd


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """What a run is expected to cost: the requests of the same run done offline by the
    ``perfect`` scripted model, priced with the model's profile, with
    ``assumed_output_tokens`` per model call."""

    model: str
    cache_profile: str
    usd: float | None
    units: float
    input_tokens: int
    model_calls: int
    per_strategy: tuple[tuple[str, float | None], ...] = field(default=())
    assumed_output_tokens: int = ASSUMED_OUTPUT_TOKENS

    def describe(self) -> str:
        money = f"about ${self.usd:.2f}" if self.usd is not None else "unknown in USD (no price)"
        return (
            f"Estimated cost for {self.model}: {money} — {self.input_tokens:,} input tokens "
            f"over {self.model_calls:,} model calls, priced with {self.cache_profile}, "
            f"assuming {self.assumed_output_tokens} output tokens a call."
        )


def _price(value: Price | tuple[float, float] | None, model_name: str) -> Price | None:
    if value is None:
        return price_for(model_name)
    return value if isinstance(value, Price) else Price(*value)


def _profile(name: str | None, model: ResolvedModel) -> CacheProfile:
    if name is None:
        return cache_profile_for(model.provider, model.model_name)
    if name not in CACHE_PROFILES:
        raise ConfigurationError(f"cache_profile must be one of {sorted(CACHE_PROFILES)}")
    return CACHE_PROFILES[name]


def _strategies(keys: Sequence[str]) -> tuple[str, ...]:
    unknown = [k for k in keys if k not in STRATEGIES]
    if unknown or not keys:
        raise ConfigurationError(f"strategies must be among {list(STRATEGIES)}; got {unknown}")
    return tuple(dict.fromkeys(keys))


class _Budget:
    """What the run has spent so far (usage as reported, else as modelled)."""

    def __init__(self, limit: float | None, profile: CacheProfile, price: Price | None) -> None:
        self.limit, self.profile, self.price = limit, profile, price
        self.spent = 0.0

    def charge(self, turn: RecordedTurn) -> None:
        if self.limit is None or self.price is None:
            return
        if turn.reported.input_tokens:
            cost = reported_cost(turn.reported, self.profile, self.price).usd or 0.0
        else:
            # A model that reports no usage is charged its requests' tokens, uncached: the
            # guard errs on the side of stopping early.
            sent = sum(
                part.tokens
                for request in (*turn.side_requests, *turn.requests)
                for part in request_parts(request.body, provider=request.api)
            )
            output = turn.output_tokens + turn.side_output_tokens
            cost = (sent * self.price.input_per_mtok + output * self.price.output_per_mtok) / 1e6
        self.spent += cost
        if self.spent > self.limit:
            raise BudgetExceeded(
                f"stopped: ${self.spent:.4f} spent, above max_cost ${self.limit:.4f}",
                spent_usd=self.spent,
            )


def _run_strategy(
    key: str,
    conversation: ConversationSet,
    model: ResolvedModel,
    *,
    workdir: Path,
    options: StrategyOptions,
    minutes_per_turn: float,
    profile: CacheProfile,
    price: Price | None,
    budget: _Budget,
    progress: Progress | None,
) -> StrategyResult:
    label = STRATEGIES[key]
    clock = FrozenClock(START)
    started = time.perf_counter()
    try:
        strategy = open_strategy(
            key, conversation, model, workdir=workdir / key, clock=clock, options=options
        )
    except Unavailable as exc:
        return StrategyResult(key, label, Recall.of(()), skipped=str(exc))
    probes = {p.id: p for p in conversation.probes}
    turns: list[RecordedTurn] = []
    answers: list[ProbeResult] = []
    total = len(conversation.turns)
    try:
        for n, utterance in enumerate(conversation.turns):
            if n:
                clock.advance(timedelta(minutes=minutes_per_turn))
            turn = strategy.turn(utterance, clock())
            turns.append(turn)
            budget.charge(turn)
            if utterance.probe_id is not None:
                probe = probes[utterance.probe_id]
                answers.append(ProbeResult.of(probe, turn.answer, score_answer(probe, turn.answer)))
            if progress is not None:
                progress(label, n + 1, total)
        entries = strategy.memory_entries()  # what the memory holds at the end
    finally:
        strategy.close()
    reported = Usage()
    for turn in turns:
        reported = reported + turn.reported
    calls = sum(len(t.requests) + len(t.side_requests) for t in turns)
    return StrategyResult(
        key=key,
        label=label,
        recall=Recall.of(answers),
        probes=tuple(answers),
        cost=bill(turns, profile, price),
        reported=reported_cost(reported, profile, price),
        model_calls=calls,
        extra_calls=calls - len(turns),
        memory_writes=sum(t.memory_written for t in turns),
        seconds=time.perf_counter() - started,
        turns=tuple(turns),
        kept=measure_kept(entries, turns),
    )


def _conversation(conversation: ConversationSet | None, turns: int, seed: int) -> ConversationSet:
    return (
        conversation if conversation is not None else generate_conversation(seed=seed, turns=turns)
    )


def _offline_run(
    conversation: ConversationSet,
    strategies: Sequence[str],
    options: StrategyOptions,
    minutes_per_turn: float,
    profile: CacheProfile,
    price: Price | None,
    workdir: Path,
) -> list[StrategyResult]:
    model = resolve_model(ScriptedSpec("perfect"))
    budget = _Budget(None, profile, price)
    return [
        _run_strategy(
            key,
            conversation,
            model,
            workdir=workdir,
            options=options,
            minutes_per_turn=minutes_per_turn,
            profile=profile,
            price=price,
            budget=budget,
            progress=None,
        )
        for key in strategies
    ]


def estimate_cost(
    model: Any,
    *,
    conversation: ConversationSet | None = None,
    turns: int = 120,
    seed: int = 7,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    model_name: str | None = None,
    options: StrategyOptions | None = None,
    cache_profile: str | None = None,
    price: Price | tuple[float, float] | None = None,
    minutes_per_turn: float = 2.0,
) -> CostEstimate:
    """What :func:`run_eval` with the same arguments is expected to cost (no model is
    called: the run is done offline by the ``perfect`` scripted model)."""
    resolved = resolve_model(model, model_name=model_name)
    return _estimate(
        resolved,
        _conversation(conversation, turns, seed),
        _strategies(strategies),
        options or StrategyOptions(),
        _profile(cache_profile, resolved),
        _price(price, resolved.model_name),
        minutes_per_turn,
    )


def _estimate(
    model: ResolvedModel,
    conversation: ConversationSet,
    strategies: Sequence[str],
    options: StrategyOptions,
    profile: CacheProfile,
    price: Price | None,
    minutes_per_turn: float,
) -> CostEstimate:
    with tempfile.TemporaryDirectory(prefix="stm-eval-estimate-") as tmp:
        # Only the strategies this model can run are estimated.
        runnable = [k for k in strategies if not (k == "stm-loop" and model.loop_factory is None)]
        dry = _offline_run(
            conversation, runnable, options, minutes_per_turn, profile, None, Path(tmp)
        )
    per: list[tuple[str, float | None]] = []
    units = 0.0
    usd_total: float | None = 0.0 if price is not None else None
    input_tokens = calls = 0
    for result in dry:
        c = result.cost
        output = max(c.output_tokens, ASSUMED_OUTPUT_TOKENS * result.model_calls)
        strategy_units = c.units - c.output_tokens * profile.output_multiplier
        strategy_units += output * profile.output_multiplier
        usd = None
        if price is not None:
            input_units = strategy_units - output * profile.output_multiplier
            usd = (input_units * price.input_per_mtok + output * price.output_per_mtok) / 1e6
            usd_total = (usd_total or 0.0) + usd
        units += strategy_units
        input_tokens += c.input_tokens
        calls += result.model_calls
        per.append((result.key, usd))
    return CostEstimate(
        model.label, profile.name, usd_total, units, input_tokens, calls, tuple(per)
    )


class _NotWritingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return getattr(record, "stm_event", None) != NOT_WRITING_EVENT


@contextlib.contextmanager
def _judged_quietly() -> Iterator[None]:
    """The run without the library's "model does not write its memory" warning: the
    report's write count says it for each strategy, and a toolless model is one of the
    scripted kinds measured on purpose."""
    logger, quiet = logging.getLogger("stm_memory"), _NotWritingFilter()
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def run_eval(
    model: Any,
    *,
    conversation: ConversationSet | None = None,
    turns: int = 120,
    seed: int = 7,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    model_name: str | None = None,
    options: StrategyOptions | None = None,
    cache_profile: str | None = None,
    price: Price | tuple[float, float] | None = None,
    max_cost: float | None = None,
    minutes_per_turn: float = 2.0,
    workdir: str | Path | None = None,
    progress: Progress | None = None,
    on_estimate: Callable[[CostEstimate], None] | None = None,
) -> EvalReport:
    """Run every strategy in ``strategies`` over one conversation set with ``model``.

    ``model``: a LangChain chat model, an ``init_chat_model`` string
    (``"openai:gpt-4.1-mini"``), an OpenAI or Anthropic client with ``model_name``, or a
    scripted model (``"scripted:perfect"`` / ``"scripted:forgetful"`` /
    ``"scripted:paraphrase"`` / ``"scripted:recent"`` / ``"scripted:toolless"``) for an
    offline run. ``conversation`` defaults to :func:`generate_conversation` of ``seed``
    and ``turns``. ``price`` (USD per million input, output tokens) defaults to the
    listed price of the model, if known; ``cache_profile`` to the model's. With a real
    model the run is estimated first (``on_estimate`` receives it) and ``max_cost`` (USD)
    raises :class:`BudgetExceeded` before the first call when the estimate is above it,
    or as soon as the usage the API reports passes it.
    """
    resolved = resolve_model(model, model_name=model_name)
    conv = _conversation(conversation, turns, seed)
    keys = _strategies(strategies)
    opts = options or StrategyOptions()
    profile = _profile(cache_profile, resolved)
    if resolved.scripted is not None and profile.breakpoints and model_name is None:
        # A cache matched only at breakpoints (gpt-5.6 on) is billed as the model that
        # takes them: the scripted model's requests name one, so ours carry them.
        resolved = resolve_model(ScriptedSpec(resolved.scripted), model_name=_BREAKPOINT_MODEL)
    if opts.cache_retention is None and profile.provider == "openai" and profile.ttl >= _DAY:
        # Priced with the day's retention: our requests ask for it, as a careful user's.
        opts = replace(opts, cache_retention="24h")
    priced = _price(price, resolved.model_name)
    if minutes_per_turn <= 0:
        raise ConfigurationError("minutes_per_turn must be positive")
    real = resolved.scripted is None
    if real and max_cost is not None and priced is None:
        raise ConfigurationError(
            f"max_cost needs a price for {resolved.model_name}: pass price=(input, output) "
            "in USD per million tokens"
        )
    if real and (on_estimate is not None or max_cost is not None):
        estimate = _estimate(resolved, conv, keys, opts, profile, priced, minutes_per_turn)
        if on_estimate is not None:
            on_estimate(estimate)
        if max_cost is not None and estimate.usd is not None and estimate.usd > max_cost:
            raise BudgetExceeded(
                f"estimated ${estimate.usd:.2f} is above max_cost ${max_cost:.2f}; nothing "
                "was sent",
                estimate=estimate,
            )
    budget = _Budget(max_cost if real else None, profile, priced)
    with tempfile.TemporaryDirectory(prefix="stm-eval-") as tmp, _judged_quietly():
        root = Path(workdir) if workdir is not None else Path(tmp)
        results = tuple(
            _run_strategy(
                key,
                conv,
                resolved,
                workdir=root,
                options=opts,
                minutes_per_turn=minutes_per_turn,
                profile=profile,
                price=priced,
                budget=budget,
                progress=progress,
            )
            for key in keys
        )
    notice = (
        SCRIPTED_NOTICE
        if not real
        else (
            f"Recall of {resolved.label} on the conversation set {conv.name}, scored by value "
            "match without a judge model; one run of one conversation set, not a benchmark."
        )
    )
    return EvalReport(
        model=resolved.label,
        scripted=resolved.scripted,
        conversation=conv.name,
        seed=conv.seed,
        turns=len(conv.turns),
        probes=len(conv.probes),
        cache_profile=profile.name,
        price=priced,
        strategies=results,
        notice=notice,
    )

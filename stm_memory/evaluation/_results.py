"""What one strategy scored in a run: recall per probe kind, each probe's answer, tokens
and cost. Frozen data only; the whole run's report (:mod:`._report`) and its plot
(:mod:`._plot`) both read it, so it imports neither."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stm_memory.evaluation._conversation import Probe
from stm_memory.evaluation._pricing import Cost
from stm_memory.evaluation._recording import RecordedTurn

__all__ = ["KeptDetails", "ProbeResult", "Recall", "Score", "StrategyResult"]


@dataclass(frozen=True, slots=True)
class Score:
    correct: int = 0
    total: int = 0

    @property
    def rate(self) -> float | None:
        """The share answered right; None when nothing of this kind was asked."""
        return self.correct / self.total if self.total else None


@dataclass(frozen=True, slots=True)
class Recall:
    overall: Score
    same_channel: Score
    cross_channel: Score
    corrected: Score  # probes about a fact that was corrected (either channel)

    @classmethod
    def of(cls, results: Sequence[ProbeResult]) -> Recall:
        def score(rows: Iterable[ProbeResult]) -> Score:
            rows = list(rows)
            return Score(sum(r.correct for r in rows), len(rows))

        return cls(
            overall=score(results),
            same_channel=score(r for r in results if r.kind == "same_channel"),
            cross_channel=score(r for r in results if r.kind == "cross_channel"),
            corrected=score(r for r in results if r.corrected),
        )


@dataclass(frozen=True, slots=True)
class ProbeResult:
    probe_id: str
    fact_id: str
    kind: str
    corrected: bool
    turn: int
    channel: str
    expected: str
    stale: tuple[str, ...]
    answer: str
    correct: bool

    @classmethod
    def of(cls, probe: Probe, answer: str, correct: bool) -> ProbeResult:
        return cls(
            probe.id,
            probe.fact_id,
            probe.kind,
            probe.corrected,
            probe.turn,
            probe.channel,
            probe.expected,
            probe.stale,
            answer,
            correct,
        )


@dataclass(frozen=True, slots=True)
class KeptDetails:
    """What a strategy's memory kept outside its notes: excerpts of turns whose details
    the written memory left out (:mod:`stm_memory.model.details`).

    Read from each channel's live entry at the end of the run: ``details``, the details
    the excerpts hold that the memory does not carry (``left_out``); ``excerpts``, how
    many; ``tokens``, their rendered lines' estimated tokens (four characters a token).
    Over the run: ``sent_tokens``, the tokens of the lines kept excerpts added to every
    recorded request (their title, the excerpts, the notes' title), summed; an upper
    bound of what keeping them cost, in uncached input-token units (a prompt cache
    serves part of them for less); ``requests``, the requests that carried any."""

    details: int = 0
    excerpts: int = 0
    tokens: int = 0
    sent_tokens: int = 0
    requests: int = 0


@dataclass(frozen=True, slots=True)
class StrategyResult:
    """One strategy's run. ``cost`` is the prompt-cache model applied to ``turns``
    (the requests as recorded); ``reported`` is the usage the API reported, priced the
    same way. ``extra_calls`` are model calls beyond one per turn (a summarizer's, a
    second step). ``kept`` is what the memory kept outside its notes; None for a
    strategy that keeps no memory."""

    key: str
    label: str
    recall: Recall
    probes: tuple[ProbeResult, ...] = ()
    cost: Cost = field(default_factory=Cost)
    reported: Cost = field(default_factory=Cost)
    model_calls: int = 0
    extra_calls: int = 0
    memory_writes: int = 0
    seconds: float = 0.0
    turns: tuple[RecordedTurn, ...] = ()
    skipped: str | None = None
    kept: KeptDetails | None = None

    def row(self) -> dict[str, Any]:
        """The table row (rates rounded to 3 places, None where nothing was asked)."""

        def rate(score: Score) -> float | None:
            return None if score.rate is None else round(score.rate, 3)

        kept = self.kept or KeptDetails()  # no memory: nothing kept
        return {
            "strategy": self.key,
            "label": self.label,
            "recall": rate(self.recall.overall),
            "same_channel": rate(self.recall.same_channel),
            "cross_channel": rate(self.recall.cross_channel),
            "corrected": rate(self.recall.corrected),
            "probes": self.recall.overall.total,
            "model_calls": self.model_calls,
            "extra_calls": self.extra_calls,
            "memory_writes": self.memory_writes,
            "input_tokens": self.cost.input_tokens,
            "cached_tokens": self.cost.cached_tokens,
            "output_tokens": self.cost.output_tokens,
            "cost_units": round(self.cost.units, 1),
            "cost_usd": None if self.cost.usd is None else round(self.cost.usd, 6),
            "reported_input_tokens": self.reported.input_tokens,
            "reported_cached_tokens": self.reported.cached_tokens,
            "reported_output_tokens": self.reported.output_tokens,
            "reported_usd": None if self.reported.usd is None else round(self.reported.usd, 6),
            "kept_details": kept.details,
            "kept_excerpts": kept.excerpts,
            "kept_tokens": kept.tokens,
            "kept_sent_tokens": kept.sent_tokens,
            "kept_sent_share": (
                round(kept.sent_tokens / self.cost.input_tokens, 4)
                if self.cost.input_tokens
                else 0.0
            ),
            "skipped": self.skipped or "",
        }

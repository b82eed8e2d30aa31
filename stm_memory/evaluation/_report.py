"""The report of a run: recall per probe kind, tokens and cost per strategy, as frozen
data with a table (Markdown, CSV, JSON) and files written to a directory."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stm_memory.evaluation._conversation import Probe
from stm_memory.evaluation._pricing import Cost, Price
from stm_memory.evaluation._recording import RecordedTurn

__all__ = ["EvalReport", "ProbeResult", "Recall", "Score", "StrategyResult"]

SCRIPTED_NOTICE = (
    "Scripted model: these figures measure the harness (what each strategy puts in front "
    "of a model that reads perfectly and writes memory as scripted), not any real model."
)


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
class StrategyResult:
    """One strategy's run. ``cost`` is the prompt-cache model applied to ``turns``
    (the requests as recorded); ``reported`` is the usage the API reported, priced the
    same way. ``extra_calls`` are model calls beyond one per turn (a summarizer's, a
    second step)."""

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

    def row(self) -> dict[str, Any]:
        """The table row (rates rounded to 3 places, None where nothing was asked)."""

        def rate(score: Score) -> float | None:
            return None if score.rate is None else round(score.rate, 3)

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
            "skipped": self.skipped or "",
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    """A whole run: which model, which conversation, and one result per strategy."""

    model: str
    scripted: str | None
    conversation: str
    seed: int | None
    turns: int
    probes: int
    cache_profile: str
    price: Price | None
    strategies: tuple[StrategyResult, ...]
    notice: str

    def strategy(self, key: str) -> StrategyResult:
        for result in self.strategies:
            if result.key == key:
                return result
        raise KeyError(key)

    def rows(self) -> list[dict[str, Any]]:
        return [s.row() for s in self.strategies]

    def to_dict(self) -> dict[str, Any]:
        """Everything but the recorded request bodies (kept on the Python object)."""
        return {
            "notice": self.notice,
            "model": self.model,
            "scripted": self.scripted,
            "conversation": self.conversation,
            "seed": self.seed,
            "turns": self.turns,
            "probes": self.probes,
            "cache_profile": self.cache_profile,
            "price_usd_per_mtok": asdict(self.price) if self.price else None,
            "strategies": [
                {**s.row(), "answers": [asdict(p) for p in s.probes]} for s in self.strategies
            ],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1)

    def to_csv(self) -> str:
        out = io.StringIO()
        rows = self.rows()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["strategy"])
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()

    def to_markdown(self) -> str:
        def pct(value: float | None) -> str:
            return "—" if value is None else f"{value:.0%}"

        usd = self.price is not None
        head = [
            "strategy",
            "recall",
            "same ch.",
            "cross ch.",
            "corrected",
            "input tok.",
            "cached",
            "output tok.",
            "cost (units)",
            *(["cost $"] if usd else []),
            "reported in/cached/out",
            "extra calls",
            "memory writes",
        ]
        lines = [
            f"_{self.notice}_",
            "",
            f"Model `{self.model}`; conversation `{self.conversation}` ({self.turns} turns, "
            f"{self.probes} probes); priced with the `{self.cache_profile}` prompt-cache "
            "profile (cost units: one uncached input token = 1).",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
        ]
        for s in self.strategies:
            if s.skipped:
                lines.append(f"| {s.label} | skipped: {s.skipped} |" + " |" * (len(head) - 2))
                continue
            r, c, rep = s.recall, s.cost, s.reported
            cells = [
                s.label,
                pct(r.overall.rate),
                pct(r.same_channel.rate),
                pct(r.cross_channel.rate),
                pct(r.corrected.rate),
                f"{c.input_tokens:,}",
                f"{c.cached_tokens:,}",
                f"{c.output_tokens:,}",
                f"{c.units:,.0f}",
                *([f"{c.usd:.4f}" if c.usd is not None else "—"] if usd else []),
                f"{rep.input_tokens:,} / {rep.cached_tokens:,} / {rep.output_tokens:,}",
                str(s.extra_calls),
                str(s.memory_writes),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | Path, *, plot: bool = True) -> dict[str, Path]:
        """``report.json``, ``table.md``, ``table.csv`` and (``plot=True``, needs the
        ``plot`` extra) ``recall_vs_cost.png`` in ``out_dir``; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = {
            "json": out / "report.json",
            "markdown": out / "table.md",
            "csv": out / "table.csv",
        }
        paths["json"].write_text(self.to_json() + "\n", encoding="utf-8")
        paths["markdown"].write_text(self.to_markdown(), encoding="utf-8")
        paths["csv"].write_text(self.to_csv(), encoding="utf-8")
        if plot:
            from stm_memory.evaluation._plot import plot_recall_vs_cost

            paths["plot"] = plot_recall_vs_cost(self, out / "recall_vs_cost.png")
        return paths

"""The report of a run: recall per probe kind, tokens and cost per strategy, as frozen
data with a table (Markdown, CSV, JSON) and files written to a directory."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stm_memory.evaluation._plot import plot_recall_vs_cost
from stm_memory.evaluation._pricing import Price

# The per-strategy results live in a leaf module, which the plot reads too; re-exported
# here, where they were first declared.
from stm_memory.evaluation._results import (
    KeptDetails,
    ProbeResult,
    Recall,
    Score,
    StrategyResult,
)

__all__ = ["EvalReport", "KeptDetails", "ProbeResult", "Recall", "Score", "StrategyResult"]

SCRIPTED_NOTICE = (
    "Scripted model: these figures measure the harness (what each strategy puts in front "
    "of a model that reads perfectly and writes memory as scripted), not any real model."
)


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
            "kept",
            "kept tok.",
            "kept sent tok.",
        ]
        lines = [
            f"_{self.notice}_",
            "",
            f"Model `{self.model}`; conversation `{self.conversation}` ({self.turns} turns, "
            f"{self.probes} probes); priced with the `{self.cache_profile}` prompt-cache "
            "profile (cost units: one uncached input token = 1). Kept: details of the turns "
            "a write let the history cut drop that the memory left out, kept beside it as "
            "excerpts at the end of the run (— without a memory); kept tok.: their "
            "estimated tokens; kept sent tok.: the tokens their lines added to every "
            "request, summed (at most that many cost units).",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
        ]
        for s in self.strategies:
            if s.skipped:
                lines.append(f"| {s.label} | skipped: {s.skipped} |" + " |" * (len(head) - 2))
                continue
            r, c, rep, k = s.recall, s.cost, s.reported, s.kept
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
                *(
                    ["—"] * 3
                    if k is None
                    else [f"{k.details:,}", f"{k.tokens:,}", f"{k.sent_tokens:,}"]
                ),
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
            paths["plot"] = plot_recall_vs_cost(self, out / "recall_vs_cost.png")
        return paths

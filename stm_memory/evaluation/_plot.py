"""Recall against cost, one point per strategy (matplotlib, from the ``plot`` extra)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from stm_memory.errors import ConfigurationError
from stm_memory.evaluation._pricing import Price
from stm_memory.evaluation._results import StrategyResult

__all__ = ["PlottedReport", "plot_recall_vs_cost"]


class PlottedReport(Protocol):
    """What the plot reads of a report (an :class:`~stm_memory.evaluation.EvalReport`).

    A protocol, not the report class: the report writes its plot, so this module
    imports nothing of the report's (the dependency runs one way)."""

    @property
    def model(self) -> str: ...

    @property
    def scripted(self) -> str | None: ...

    @property
    def turns(self) -> int: ...

    @property
    def price(self) -> Price | None: ...

    @property
    def strategies(self) -> Sequence[StrategyResult]: ...


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigurationError(
            'The recall-vs-cost plot needs matplotlib: pip install "stm-memory[plot]"'
        ) from exc
    matplotlib.use("Agg")  # files only: no display needed, none opened
    import matplotlib.pyplot as plt

    return plt


def plot_recall_vs_cost(report: PlottedReport, path: str | Path) -> Path:
    """Write the plot to ``path`` (PNG) and return it. Cost is in US dollars when the
    report has a price, else in cost units."""
    plt = _pyplot()
    usd = report.price is not None
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    markers = "osD^vP*X"
    costs = []
    for n, s in enumerate(report.strategies):
        if s.skipped or s.recall.overall.rate is None:
            continue
        cost = s.cost.usd if usd and s.cost.usd is not None else s.cost.units
        costs.append(cost)
        # A legend, not labels by the points: strategies often share a point.
        ax.scatter(
            [cost],
            [s.recall.overall.rate],
            s=70,
            marker=markers[n % len(markers)],
            label=s.label,
            alpha=0.8,
        )
    if costs:
        ax.set_xlim(0, max(costs) * 1.15 or 1)
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("cost as billed, prompt cache modelled " + ("(USD)" if usd else "(units)"))
    ax.set_ylabel("recall (share of probes answered right)")
    ax.set_ylim(-0.05, 1.05)
    ax.grid(alpha=0.3)
    title = f"Recall vs cost: {report.model}, {report.turns} turns"
    if report.scripted:
        title += "\n(scripted model: measures the harness, not a model)"
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out

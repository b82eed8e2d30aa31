"""The cost/recall frontier: how stale a channel's memory and its news may be → bill, recall.

Writing the memory less often and letting other channels' news wait longer lower the
bill (fewer writes and swaps, fewer briefings sent on their own) and cost recall (the
news arrives after the question about it). SPEC §6: the default keeps recall; the
trade is one documented option with its measured frontier. Each point is measured as:

- **bill**: ours (``OpenAIChatLoop`` on the ``cost`` case's conversation: 200 turns, 3
  channels, an agent-sized prefix) over the best peer (full history or
  SummarizationMiddleware), warm (``openai-gpt-5-24h``), as ``make bench``'s
  ``cost_warm_ours_vs_best_peer_openai``;
- **recall**: ``stm-memory eval``'s cross-channel recall of ``stm-loop`` (behind the
  same agent-sized system prompt, a day's cache), pooled over the seeds: ``scripted:perfect`` and
  ``scripted:forgetful`` at 200 turns, ``scripted:perfect`` at 120 (questions come
  sooner after the news in a shorter conversation).

A point is a server's ``refresh_cadence`` (the option) and the briefings' wait
(:data:`stm_memory.prompt.briefings.WAIT_TURNS`, pinned here to see what it moves).
Rows merge into ``benchmarks/results/frontier.json``; the table (``frontier.md``, shown
in ``docs/cost-recall.md``) and the plot (``docs/assets/frontier.png``) are drawn from all
of them::

    python -m benchmarks.frontier --cadence 3 5 8 10 15 20
    python -m benchmarks.frontier --wait 6 8 12
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks import token_growth
from benchmarks.cost import (
    OPENAI_OPTIONS,
    REGIMES,
    agent_system_prompt,
    as_is,
    bill,
    chat_tools,
    langchain_tools,
)
from benchmarks.run import replace_between
from benchmarks.token_growth import (
    Turn,
    run_full,
    run_ours_loop,
    run_summarization,
    user_messages,
)
from stm_memory.evaluation import Score, StrategyOptions, generate_conversation, run_eval
from stm_memory.model.settings import ServerSettings
from stm_memory.prompt.briefings import WAIT_TURNS

TURNS = 200
#: Questions come sooner in a short conversation: a longer wait shows there first.
SHORT = 120
SEEDS = (3, 5, 7, 11, 13)
#: The defaults: ServerSettings.refresh_cadence and stm_memory.prompt.briefings.WAIT_TURNS.
DEFAULT = (ServerSettings().refresh_cadence, WAIT_TURNS)
DEFAULT_WAIT = WAIT_TURNS
RESULTS = Path(__file__).resolve().parent / "results"
START, END = "<!-- frontier:table:start -->", "<!-- frontier:table:end -->"
#: The plot lives with the docs page that shows it (the site serves only docs/).
PLOT = Path(__file__).resolve().parents[1] / "docs" / "assets" / "frontier.png"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One point: the bill (the bench's conversation) and the recall (eval, pooled)."""

    cadence: int
    wait: int
    warm_vs_best_peer: float
    perfect: Score
    forgetful: Score
    perfect_short: Score
    seeds: tuple[int, ...]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        scores = {k: Score(**data[k]) for k in ("perfect", "forgetful", "perfect_short")}
        return cls(
            cadence=data["cadence"],
            wait=data["wait"],
            warm_vs_best_peer=data["warm_vs_best_peer"],
            seeds=tuple(data["seeds"]),
            **scores,
        )


@contextmanager
def _pinned(cadence: int, wait: int) -> Iterator[None]:
    """The bench's memories open with ``refresh_cadence=cadence``, the briefings' wait
    pinned to ``wait`` (a module constant, read at each call of plan_briefings)."""
    from stm_memory.prompt import briefings

    opened = token_growth.open_memory

    @contextmanager
    def configured(root: Path, **options: Any) -> Iterator[Any]:
        with opened(root, **options) as mem:
            mem.configure_server("g-heist", refresh_cadence=cadence)
            yield mem

    saved = briefings.WAIT_TURNS
    token_growth.open_memory = configured  # type: ignore[assignment]
    briefings.WAIT_TURNS = wait
    try:
        yield
    finally:
        token_growth.open_memory = opened
        briefings.WAIT_TURNS = saved


def _peers(texts: Sequence[str], system: str) -> float:
    full: list[Turn] = []
    run_full(texts, system=system, tools=chat_tools(), log=full, count=False)
    sm = run_summarization(texts, system=system, tools=langchain_tools())["log"]
    profile = REGIMES["warm"]["openai"]
    return min(
        bill(full, profile, as_is("openai_chat")).total(),
        bill(sm, profile, as_is("openai_chat")).total(),
    )


def _bill(root: Path, texts: Sequence[str], system: str) -> float:
    log = run_ours_loop(
        root, texts, system=system, tools=chat_tools(), request_options=OPENAI_OPTIONS["warm"]
    )["log"]
    return bill(log, REGIMES["warm"]["openai"], as_is("openai_chat")).total()


def _recall(cadence: int, kind: str, seeds: Sequence[int], turns: int) -> Score:
    """Cross-channel recall of ``stm-loop`` over ``seeds``, pooled (each probe counts once)."""
    correct = total = 0
    for seed in seeds:
        conversation = replace(
            generate_conversation(seed=seed, turns=turns), system_prompt=agent_system_prompt()
        )
        report = run_eval(
            f"scripted:{kind}",
            conversation=conversation,
            strategies=("stm-loop",),
            options=StrategyOptions(refresh_cadence=cadence),
            cache_profile="openai-gpt-5-24h",
        )
        score = report.strategy("stm-loop").recall.cross_channel
        correct, total = correct + score.correct, total + score.total
    return Score(correct, total)


def measure(points: Sequence[tuple[int, int]], seeds: Sequence[int]) -> list[Row]:
    """One row per (cadence, wait) point."""
    texts = user_messages(TURNS)
    system = agent_system_prompt()
    peer = _peers(texts, system)
    rows = []
    with tempfile.TemporaryDirectory(prefix="stm-frontier-") as tmp:
        for cadence, wait in points:
            with _pinned(cadence, wait):
                ours = _bill(Path(tmp) / f"c{cadence}-w{wait}", texts, system)
                row = Row(
                    cadence=cadence,
                    wait=wait,
                    warm_vs_best_peer=round(ours / peer, 3),
                    perfect=_recall(cadence, "perfect", seeds, TURNS),
                    forgetful=_recall(cadence, "forgetful", seeds, TURNS),
                    perfect_short=_recall(cadence, "perfect", seeds, SHORT),
                    seeds=tuple(seeds),
                )
            rows.append(row)
            print(json.dumps(asdict(row)), flush=True)
    return rows


def _rate(score: Score) -> float:
    return score.rate or 0.0


def _shown(score: Score) -> str:
    return f"{100 * _rate(score):.0f} % ({score.correct}/{score.total})"


def table(rows: Sequence[Row]) -> str:
    """The markdown table the docs show (docs/cost-recall.md), the default marked."""
    lines = [
        "| `refresh_cadence` | briefings' wait | warm bill vs best peer | cross-channel "
        f"recall, {TURNS} turns (perfect / forgetful writer) | cross-channel recall, "
        f"{SHORT} turns |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in sorted(rows, key=lambda r: (r.wait != DEFAULT_WAIT, r.cadence, r.wait)):
        mark = " (default)" if (row.cadence, row.wait) == DEFAULT else ""
        lines.append(
            f"| {row.cadence}{mark} | {row.wait} | {row.warm_vs_best_peer:.3f} | "
            f"{_shown(row.perfect)} / {_shown(row.forgetful)} | {_shown(row.perfect_short)} |"
        )
    return "\n".join(lines) + "\n"


def plot(path: Path, rows: Sequence[Row]) -> None:
    """Bill against recall (one panel per length of conversation), one point per row:
    the option's points joined in cadence order, the wait's at the default cadence, the
    default ringed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharex=True)
    option = sorted((r for r in rows if r.wait == DEFAULT_WAIT), key=lambda r: r.cadence)
    waits = sorted((r for r in rows if r.cadence == DEFAULT[0]), key=lambda r: r.wait)
    (default,) = (r for r in rows if (r.cadence, r.wait) == DEFAULT)
    panels: tuple[tuple[Any, Callable[[Row], Score], int], ...] = (
        (axes[0], lambda r: r.perfect, TURNS),
        (axes[1], lambda r: r.perfect_short, SHORT),
    )
    for ax, score, turns in panels:
        for series, label, style in (
            (option, f"refresh_cadence (the option), wait {DEFAULT_WAIT}", "o-"),
            (waits, f"the briefings' wait, cadence {DEFAULT[0]}", "s--"),
        ):
            ax.plot(
                [r.warm_vs_best_peer for r in series],
                [100 * _rate(score(r)) for r in series],
                style,
                label=label,
            )
        for r in rows:
            ax.annotate(
                f"c{r.cadence} w{r.wait}",
                (r.warm_vs_best_peer, 100 * _rate(score(r))),
                textcoords="offset points",
                xytext=(4, -10 if r.wait != DEFAULT_WAIT else 4),
                fontsize=7,
            )
        ax.scatter(
            [default.warm_vs_best_peer],
            [100 * _rate(score(default))],
            s=250,
            facecolors="none",
            edgecolors="black",
            label="default",
        )
        ax.set_xlabel("warm bill, ours / best peer (OpenAI, the bench's 200 turns)")
        ax.set_ylabel("cross-channel recall, % (perfect writer)")
        ax.set_title(f"stm-memory eval, {turns} turns, {len(default.seeds)} seeds")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle("The cost/recall frontier")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [Row.from_dict(d) for d in json.loads(path.read_text("utf-8"))]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cadence", type=int, nargs="*", default=[DEFAULT[0]])
    parser.add_argument("--wait", type=int, nargs="*", default=[DEFAULT_WAIT])
    parser.add_argument("--seed", type=int, nargs="*", default=list(SEEDS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    points = [(c, w) for c in args.cadence for w in args.wait]
    found = {(r.cadence, r.wait): r for r in load(args.out / "frontier.json")}
    found.update({(r.cadence, r.wait): r for r in measure(points, args.seed)})
    rows = sorted(found.values(), key=lambda r: (r.cadence, r.wait))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "frontier.json").write_text(
        json.dumps([asdict(r) for r in rows], indent=2) + "\n", "utf-8"
    )
    (args.out / "frontier.md").write_text(table(rows), "utf-8")
    if args.out == RESULTS:  # a run elsewhere (--out) leaves the docs' table and plot
        replace_between(PLOT.parents[1] / "cost-recall.md", START, END, table(rows))
        if DEFAULT in found:
            plot(PLOT, rows)


if __name__ == "__main__":
    main()

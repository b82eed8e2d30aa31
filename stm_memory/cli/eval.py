"""``stm-memory eval``: recall and cost of every strategy with the model you name.

Registered on the ``stm-memory`` app on import (``stm_memory/cli/__init__.py``). The
harness itself (:mod:`stm_memory.evaluation`) is imported when the command runs, so the
other commands start without it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from stm_memory.cli.commands import app
from stm_memory.errors import StmError

if TYPE_CHECKING:
    from stm_memory.evaluation import CostEstimate, EvalReport, StrategyResult

__all__ = ["eval_command"]

console = Console()
err_console = Console(stderr=True)
#: The headline table's width when the output is no terminal (a pipe, a file, a log).
TABLE_WIDTH = 100


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _table(report: EvalReport) -> Table:
    """The headline figures; every column is in the files --out writes."""
    usd = report.price is not None
    table = Table(title=f"{report.model}: {report.turns} turns, {report.probes} probes")
    for name in (
        "strategy",
        "recall",
        "same",
        "cross",
        "corr.",
        "cost $" if usd else "cost",
        "vs full",
        "extra",
        "kept",
        "kept tok",
    ):
        table.add_column(name, justify="left" if name == "strategy" else "right")
    base = _full(report)
    full = float(base.cost.units) if base is not None else None
    for s in report.strategies:
        if s.skipped:
            table.add_row(s.key, f"skipped: {s.skipped}", "", "", "", "", "", "", "", "")
            continue
        r = s.recall
        cost = f"{s.cost.usd:.4f}" if usd and s.cost.usd is not None else f"{s.cost.units:,.0f}"
        table.add_row(
            s.key,
            _pct(r.overall.rate),
            _pct(r.same_channel.rate),
            _pct(r.cross_channel.rate),
            _pct(r.corrected.rate),
            cost,
            _ratio(s.cost.units, full),
            str(s.extra_calls),
            "—" if s.kept is None else f"{s.kept.details:,}",
            "—" if s.kept is None else f"{s.kept.tokens:,}",
        )
    return table


def _full(report: EvalReport) -> StrategyResult | None:
    """The full history's result (the baseline every ratio is against), if it ran."""
    return next((s for s in report.strategies if s.key == "full-history" and not s.skipped), None)


def _ratio(units: float, full: float | None) -> str:
    return "—" if not full else f"{units / full:.2f}×"


def verdict(report: EvalReport, *, system_prompt: bool) -> str:
    """One line per memory strategy: its bill against the full history's and what its
    recall bought, then the regime the figures hold in (a bill depends on it)."""
    base = _full(report)
    lines = []
    for s in report.strategies:
        if s.skipped or not s.key.startswith("stm-") or base is None or not base.cost.units:
            continue
        ratio = s.cost.units / base.cost.units
        recall, theirs = _pct(s.recall.overall.rate), _pct(base.recall.overall.rate)
        word = "cheaper than" if ratio < 0.995 else "dearer than" if ratio > 1.005 else "as"
        lines.append(
            f"{s.key}: {ratio:.2f}× the full history's bill ({word} it) at {recall} recall "
            f"against its {theirs}."
        )
    prompt = "your system prompt" if system_prompt else "no system prompt"
    lines.append(
        f"regime: {report.turns} turns, {prompt}, priced as {report.cache_profile} bills "
        "(a cache that holds between turns bills the repeated prefix at about a tenth). "
        + (
            ""
            if system_prompt and report.turns >= 200
            else "A short conversation without an agent-sized system prompt is the memory's "
            "worst case: its block costs more than the little history it replaces; "
            "--system-prompt and --turns 200 measure the usual one (docs: Evaluate)."
        )
    )
    return "\n".join(lines)


def _price(raw: str | None) -> tuple[float, float] | None:
    if raw is None:
        return None
    try:
        given, _, out = raw.partition("/")
        return float(given), float(out or given)
    except ValueError as exc:
        raise typer.BadParameter(
            "--price is IN/OUT in USD per million tokens, e.g. 0.4/1.6"
        ) from exc


def _run(
    model: str,
    *,
    turns: int,
    seed: int,
    max_cost: float | None,
    strategies: list[str] | None,
    price: tuple[float, float] | None,
    cache_profile: str | None,
    locomo: Path | None,
    window: int,
    system_prompt: Path | None,
    quiet: bool,
) -> EvalReport:
    from stm_memory.evaluation import (
        DEFAULT_STRATEGIES,
        StrategyOptions,
        generate_conversation,
        load_locomo,
        run_eval,
    )

    conversation = (
        load_locomo(locomo) if locomo is not None else generate_conversation(seed=seed, turns=turns)
    )
    if system_prompt is not None:
        # The agent's own prompt, so the prompt caches see the prefix they would see.
        conversation = replace(conversation, system_prompt=system_prompt.read_text("utf-8"))

    def estimated(estimate: CostEstimate) -> None:
        console.print(escape(estimate.describe()), style="bold")
        if max_cost is not None:
            console.print(f"--max-cost: ${max_cost:.2f}")

    show_bars = not quiet and err_console.is_terminal
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        disable=not show_bars,
    ) as bars:
        tasks: dict[str, int] = {}

        def progress(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = int(bars.add_task(phase, total=total))
            bars.update(tasks[phase], completed=done)  # type: ignore[arg-type]

        return run_eval(
            model,
            conversation=conversation,
            strategies=strategies or DEFAULT_STRATEGIES,
            options=StrategyOptions(window_turns=window),
            cache_profile=cache_profile,
            price=price,
            max_cost=max_cost,
            progress=progress,
            on_estimate=estimated,
        )


def _long_turn(
    model: str,
    *,
    seed: int,
    reads: int,
    window: int,
    strategies: list[str] | None,
    system_prompt: str | None,
    out: Path | None,
) -> None:
    """``--scenario long-turn``: the table, one line per memory strategy, the files."""
    import json
    from dataclasses import asdict

    from stm_memory.evaluation import run_long_turn

    kind = model.removeprefix("scripted:")
    try:
        report = run_long_turn(
            kind,
            reads=reads,
            window=window,
            seed=seed,
            strategies=strategies,
            system_prompt=system_prompt,
        )
    except StmError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    title = f"{report.model}: one turn of {reads} reads at a {window:,}-token window, seed {seed}"
    table = Table(title=title)
    for name in ("strategy", "completed", "largest", "recall", "cost", "vs peer", "requests"):
        table.add_column(name, justify="left" if name == "strategy" else "right")
    peer = report.cheapest_peer()
    for o in report.outcomes:
        table.add_row(
            o.key,
            "yes" if o.completed else f"no ({o.refused} refused)",
            f"{o.largest_share:.2f}",
            f"{o.answered}/{o.asked}",
            f"{o.units:,.0f}",
            "—" if peer is None or not peer.units else f"{o.units / peer.units:.2f}×",
            str(o.requests),
        )
    (console if console.is_terminal else Console(width=TABLE_WIDTH)).print(table)
    console.print(
        "largest: the largest request as a share of the window; recall: questions about "
        "the reports answered after the turn; cost: the requests priced as a warm cache "
        "bills them (a repeated prefix at 0.1x), in units of one uncached input token; "
        "vs peer: against the cheapest strategy not ours that completed the turn.",
        markup=False,
    )
    for o in report.outcomes:
        if o.key.startswith("stm-"):
            against = (
                f", {o.units / peer.units:.2f}× the bill of {peer.key} (recall "
                f"{peer.answered}/{peer.asked})"
                if peer is not None and peer.units
                else ""
            )
            state = "completed" if o.completed else "did not complete"
            console.print(
                f"{o.key}: {state}, largest request {o.largest_share:.2f} of the window, "
                f"recall {o.answered}/{o.asked}{against}.",
                markup=False,
            )
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "long_turn.json"
        path.write_text(json.dumps(asdict(report), indent=2) + "\n", "utf-8")
        console.print(f"json: {path}", markup=False)


@app.command("eval")
def eval_command(
    model: Annotated[
        str,
        typer.Option(
            help="The model: an init_chat_model string (openai:gpt-4.1-mini, "
            "anthropic:claude-haiku-4-5, ...) or scripted:perfect / scripted:forgetful / "
            "scripted:paraphrase / scripted:recent / scripted:toolless / scripted:textcalls "
            "for an offline run "
            "of the harness itself."
        ),
    ] = "scripted:perfect",
    turns: Annotated[int, typer.Option(min=16, max=5000, help="Turns of the generated set.")] = 120,
    seed: Annotated[int, typer.Option(help="Seed of the generated conversation set.")] = 7,
    out: Annotated[
        Path | None,
        typer.Option(help="Write report.json, table.md, table.csv and recall_vs_cost.png here."),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(help="USD: abort when the estimate, or the spend so far, is above it."),
    ] = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            "-s",
            help="Run only these (repeat): stm-loop, stm-middleware, full-history, "
            "full-server, summarization, window.",
        ),
    ] = None,
    price: Annotated[
        str | None, typer.Option(help="IN/OUT price in USD per million tokens, e.g. 0.4/1.6.")
    ] = None,
    cache_profile: Annotated[
        str | None, typer.Option(help="Prompt-cache profile to price with (default: the model's).")
    ] = None,
    locomo: Annotated[
        Path | None,
        typer.Option(help="Use sample 0 of a LoCoMo-layout JSON file instead (read locally)."),
    ] = None,
    window: Annotated[int, typer.Option(min=1, help="Turns kept by the window strategy.")] = 6,
    system_prompt: Annotated[
        Path | None,
        typer.Option(
            exists=True,
            dir_okay=False,
            help="A file with your agent's system prompt, sent first by every strategy "
            "(prompt caches serve only prefixes of 1,024 tokens and more).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option(help="No progress bar.")] = False,
    scenario: Annotated[
        str,
        typer.Option(
            help="dialogue (the conversation set) or long-turn (one turn of many tool "
            "reads past the model's window, then questions about them; scripted models)."
        ),
    ] = "dialogue",
    reads: Annotated[int, typer.Option(min=4, help="long-turn: the reports read.")] = 30,
    context_window: Annotated[
        int, typer.Option(min=2048, help="long-turn: the model's context window, in tokens.")
    ] = 16_384,
) -> None:
    """Recall and cost of each memory strategy over one conversation set, or over one
    long turn (``--scenario long-turn``)."""
    from stm_memory.evaluation import BudgetExceeded

    if scenario == "long-turn":
        prompt = system_prompt.read_text("utf-8") if system_prompt is not None else None
        _long_turn(model, seed=seed, reads=reads, window=context_window, strategies=strategy,
                   system_prompt=prompt, out=out)  # fmt: skip
        return
    if scenario != "dialogue":
        raise typer.BadParameter("--scenario is dialogue or long-turn")
    try:
        report = _run(
            model,
            turns=turns,
            seed=seed,
            max_cost=max_cost,
            strategies=strategy,
            price=_price(price),
            cache_profile=cache_profile,
            locomo=locomo,
            window=window,
            system_prompt=system_prompt,
            quiet=quiet,
        )
    except BudgetExceeded as exc:
        err_console.print(f"[bold red]aborted:[/] {escape(str(exc))}")
        raise typer.Exit(4) from exc
    except StmError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from exc
    console.print(report.notice)
    # Piped or captured output is not cut to 80 columns: the table fits whole.
    (console if console.is_terminal else Console(width=TABLE_WIDTH)).print(_table(report))
    console.print(
        f"cost: prompt-cache model ({report.cache_profile}) over the recorded requests"
        + ("" if report.price else ", in units of one uncached input token")
        + "; extra: model calls beyond one per turn; kept: details the memory left out, "
        "kept beside it as excerpts at the end (kept tok: their tokens; —: no memory); "
        "vs full: the cost against the full history's."
    )
    console.print(verdict(report, system_prompt=system_prompt is not None), markup=False)
    if out is not None:
        try:
            paths = report.write(out)
        except StmError as exc:  # no matplotlib: the tables are still written
            paths = report.write(out, plot=False)
            err_console.print(f"[yellow]no plot:[/] {escape(str(exc))}")
        for kind, path in paths.items():
            console.print(f"{kind}: {path}", markup=False)

"""The ``stm-memory`` command line: inspect and administer a memory store.

Needs the ``cli`` extra (typer, rich).

The store is the one ``ShortTermMemory.from_url()`` opens with its defaults: the SQLite
file ``stm.db`` in the working directory, and the live cache that ``from_url`` derives
from it (``stm.db.stm-cache``). So the CLI run where the application runs reads the
application's memory, and one database has one cache. ``--database-url`` /
``STM_DATABASE_URL``, ``--cache-dir`` / ``STM_CACHE_DIR`` and ``--redis-url`` /
``STM_REDIS_URL`` point it elsewhere.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Annotated, Any

try:
    import typer
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError('The stm-memory CLI needs its extra: pip install "stm-memory[cli]"') from exc

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from stm_memory.bulk import ProgressCallback
from stm_memory.engine import TOOLS_AS_TEXT, ShortTermMemory
from stm_memory.errors import ConfigurationError, StmError, StorageError, ValidationError
from stm_memory.model import Category, MemoryEntry, Scope, ServerSettings
from stm_memory.model.kept import left_out, written
from stm_memory.model.receipt import DayTotals
from stm_memory.prompt.quiet import NUDGE_TRIES, Writing, nudges_sent, writing

__all__ = ["app", "main"]

app = typer.Typer(
    name="stm-memory",
    help="Inspect and administer stm-memory short-term memory stores.",
    no_args_is_help=True,
    add_completion=False,
)
categories_app = typer.Typer(help="Per-server memory categories.", no_args_is_help=True)
settings_app = typer.Typer(help="Per-server settings.", no_args_is_help=True)
app.add_typer(categories_app, name="categories")
app.add_typer(settings_app, name="settings")

console = Console()
err_console = Console(stderr=True)


@dataclass
class _Options:
    database_url: str | None = None
    cache_dir: str | None = None
    redis_url: str | None = None


_options = _Options()


#: The database when neither ``--database-url`` nor ``STM_DATABASE_URL`` is given: the
#: default of ``ShortTermMemory.from_url()`` (a test keeps the two equal), relative to the
#: working directory. The cache is left to ``from_url`` too (``stm.db.stm-cache``), so the
#: CLI and an application on the defaults never keep two caches of one database.
DEFAULT_DATABASE_URL = "sqlite:///stm.db"


def _no_store(path: str) -> str:
    return (
        f"no store at {os.path.abspath(path)} (the default, {DEFAULT_DATABASE_URL}, is "
        "relative to the working directory): run the command where your application "
        "keeps stm.db, or set STM_DATABASE_URL / --database-url"
    )


@app.callback()
def _root(
    database_url: Annotated[
        str | None,
        typer.Option(
            envvar="STM_DATABASE_URL",
            help="SQLAlchemy URL of the store (default: sqlite:///stm.db, in the working "
            "directory, as ShortTermMemory.from_url()).",
        ),
    ] = None,
    cache_dir: Annotated[
        str | None,
        typer.Option(
            envvar="STM_CACHE_DIR",
            help="diskcache directory of the live cache (default: from_url's, beside the "
            "SQLite file: stm.db.stm-cache).",
        ),
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option(envvar="STM_REDIS_URL", help="Redis URL (live cache).")
    ] = None,
) -> None:
    _options.database_url = database_url
    _options.cache_dir = cache_dir
    _options.redis_url = redis_url


def _fail(message: str, code: int = 2) -> typer.Exit:
    # The message is text, never markup: ``pip install "stm-memory[plot]"`` keeps its
    # brackets.
    err_console.print(f"[bold red]error:[/] {escape(message)}")
    return typer.Exit(code)


@contextmanager
def _memory(*, create: bool = False) -> Iterator[ShortTermMemory]:
    """The store the options name. On the default path a command that only reads or
    deletes (``create=False``) refuses to create an empty ``stm.db`` in whatever
    directory it was run from: it says where it looked instead."""
    url = _options.database_url or DEFAULT_DATABASE_URL
    if _options.database_url is None and not create:
        path = DEFAULT_DATABASE_URL.removeprefix("sqlite:///")
        if not os.path.exists(path):
            raise _fail(_no_store(path), 1)
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///") :])), exist_ok=True)
    try:
        # cache_dir=None: from_url's default beside the database (or Redis, when given).
        mem = ShortTermMemory.from_url(
            url, cache_dir=_options.cache_dir, redis_url=_options.redis_url
        )
    except StorageError as exc:
        raise _fail(f"cannot open the store at {url}: {exc}", 3) from exc
    try:
        yield mem
    except (ConfigurationError, ValidationError) as exc:
        raise _fail(str(exc)) from exc
    except StorageError as exc:
        raise _fail(str(exc), 3) from exc
    finally:
        mem.close()


def _store_name() -> str:
    """The database the command read, as the user would pass it (no password)."""
    url = _options.database_url or DEFAULT_DATABASE_URL
    if url.startswith("sqlite:///"):
        return os.path.abspath(url.removeprefix("sqlite:///"))
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "the store"


class _PhaseBars:
    """A progress callback (see ``stm_memory.bulk``) drawing a bar per phase."""

    def __init__(self, bars: Progress) -> None:
        self._bars = bars
        self._tasks: dict[str, TaskID] = {}
        self._done: dict[str, int] = {}

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        task = self._tasks.get(phase)
        # A phase counting from the start again is another operation (a delete queued
        # earlier, replayed first): it gets a bar of its own.
        if task is None or done < self._done[phase]:
            task = self._tasks[phase] = self._bars.add_task(phase, total=total)
        self._done[phase] = done
        self._bars.update(task, completed=done, total=total)


@contextmanager
def _progress(quiet: bool) -> Iterator[ProgressCallback | None]:
    """Progress bars on stderr while a bulk operation runs; none with ``--quiet`` or
    when stderr is not a terminal, so piped or captured output stays as it was."""
    if quiet or not err_console.is_terminal:
        yield None
        return
    with Progress(*_columns(), console=err_console) as bars:
        yield _PhaseBars(bars)


def _columns() -> tuple[ProgressColumn, ...]:
    """A bar's columns: the phase, the bar, rows done of the total, time taken."""
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )


def _scope(channel: str, user: str, server: str | None, persona: str | None) -> Scope:
    try:
        return Scope(channel_id=channel, user_id=user, server_id=server, persona_id=persona)
    except ValidationError as exc:
        raise _fail(str(exc)) from exc


def _entry_dict(entry: MemoryEntry) -> dict[str, Any]:
    return entry.to_dict()


def _print_entries(entries: list[MemoryEntry], *, as_json: bool, title: str) -> None:
    if as_json:
        console.print_json(json.dumps([_entry_dict(e) for e in entries], ensure_ascii=False))
        return
    table = Table(title=title)
    for column in ("key", "summary / categories", "msgs", "turns", "refreshes", "updated"):
        table.add_column(column, overflow="fold")
    for e in entries:
        body = e.summary or "; ".join(f"{k}: {v}" for k, v in e.categories.items()) or "—"
        table.add_row(
            e.key,
            body,
            str(len(e.messages)),
            str(e.turns_since_refresh),
            str(e.last_refreshed_turn),
            e.last_updated.isoformat(timespec="seconds"),
        )
    console.print(table)


ChannelArg = Annotated[str, typer.Argument(help="Channel (or thread) id.")]
UserOpt = Annotated[str, typer.Option("--user", "-u", help="User id.")]
ServerOpt = Annotated[str | None, typer.Option("--server", "-s", help="Server id (omit: DM).")]
PersonaOpt = Annotated[str | None, typer.Option("--persona", help="Persona id.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")]


@app.command()
def show(
    channel: ChannelArg,
    user: UserOpt,
    server: ServerOpt = None,
    persona: PersonaOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show the live memory of a scope (hydrating from SQL if needed)."""
    scope = _scope(channel, user, server, persona)
    with _memory() as mem:
        entry = mem.get(scope)
        if entry is None:
            raise _fail(f"no live memory for {scope.live_key} in {_store_name()}", 1)
        status = mem.writing_status(scope)
        if as_json:
            data = [{**_entry_dict(entry), "writing": status.value}]
            console.print_json(json.dumps(data, ensure_ascii=False))
            return
        _print_entries([entry], as_json=False, title=scope.live_key)
        settings = mem.server_settings(scope.server_id) if scope.server_id else ServerSettings()
        cadence = settings.refresh_cadence
        unanswered = nudges_sent(entry.turns_since_refresh, cadence)
        console.print(
            f"memory: {_WRITING_SAID[status]} ({entry.last_refreshed_turn} write(s); "
            f"{unanswered} nudge(s) unanswered since the last)"
        )
        if entry.kept:
            _print_kept(entry)


#: What each writing status means, said in a line (docs/open-models.md).
_WRITING_SAID: dict[Writing, str] = {
    Writing.OFF: "off (a guard hides the memory tool: memory disabled, or full privacy)",
    Writing.WAITING: "not written yet (its model has not been nudged enough to judge)",
    Writing.WRITING: "written by its model",
    Writing.NOT_WRITING: (
        f"NOT WRITTEN: its model ignored {NUDGE_TRIES} nudges in a row; requests leave "
        "out the nudge (and the tool where that is free). Check the model can call "
        "tools, or pass tool_calling=False (docs/open-models.md)"
    ),
}


@app.command()
def doctor(
    server: Annotated[
        str | None, typer.Option("--server", "-s", help="Only this server's channels.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows read, newest first.")] = 1000,
    retry_model: Annotated[
        str | None,
        typer.Option(
            "--retry-model",
            help="Forget that this model writes its tool calls as text (its server now "
            "parses them): its turns are offered the memory tool again.",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """List the models that write their tool calls as text (their server parses none),
    and the channels whose model does not write its memory (it ignored the nudges),
    from the stored rows, newest first. Exit 1 when there is one."""
    with _memory() as mem:
        if retry_model is not None:
            forgot = mem.forget_model(retry_model)
            said = "is offered the memory tool again" if forgot else "had no note"
            console.print(f"model {escape(retry_model)} {said}")
            return
        text_callers = {
            model: at for model, (note, at) in mem.model_notes().items() if note == TOOLS_AS_TEXT
        }
        rows = mem.stored_rows(server_id=server, limit=limit)
        found: dict[tuple[str | None, str], tuple[MemoryEntry, Writing, int]] = {}
        for row in rows:
            where = (row.server_id, row.channel_id)
            if where in found:
                continue  # the newest row of a channel speaks for it
            settings = mem.server_settings(row.server_id) if row.server_id else ServerSettings()
            status = writing(
                offered=settings.short_term_memory_enabled and not row.no_writer,
                writes=row.last_refreshed_turn,
                turns_since_refresh=row.turns_since_refresh,
                cadence=settings.refresh_cadence,
            )
            found[where] = (row, status, settings.refresh_cadence)
    silent = [
        (row, cadence) for row, status, cadence in found.values() if status is Writing.NOT_WRITING
    ]
    if as_json:
        listed = [
            {
                "server_id": row.server_id,
                "channel_id": row.channel_id,
                "turns_since_write": row.turns_since_refresh,
                "writes": row.last_refreshed_turn,
                "nudges_unanswered": nudges_sent(row.turns_since_refresh, cadence),
            }
            for row, cadence in silent
        ]
        models = [
            {"model": model, "noted_at": at.isoformat(timespec="seconds")}
            for model, at in text_callers.items()
        ]
        console.print_json(
            json.dumps(
                {"channels": len(found), "not_writing": listed, "tool_calls_as_text": models}
            )
        )
    elif not silent:
        _print_text_callers(text_callers)
        console.print(f"{len(found)} channel(s): every model that was asked writes its memory")
    else:
        _print_text_callers(text_callers)
        table = Table(title=f"{len(silent)} of {len(found)} channel(s): memory not written")
        columns = ("server", "channel", "turns since a write", "writes", "nudges unanswered")
        for column in columns:
            table.add_column(column, overflow="fold")
        for row, cadence in silent:
            table.add_row(
                row.server_id or "(DM)",
                row.channel_id,
                str(row.turns_since_refresh),
                str(row.last_refreshed_turn),
                str(nudges_sent(row.turns_since_refresh, cadence)),
            )
        console.print(table)
        console.print(_WRITING_SAID[Writing.NOT_WRITING])
    if silent or text_callers:
        raise typer.Exit(1)


def _print_text_callers(models: Mapping[str, datetime]) -> None:
    if not models:
        return
    table = Table(title=f"{len(models)} model(s) write their tool calls as text")
    for column in ("model", "seen since"):
        table.add_column(column, overflow="fold")
    for model, at in models.items():
        table.add_row(escape(model), at.isoformat(timespec="seconds"))
    console.print(table)
    console.print(
        "Their server returns no tool_calls, so their turns are offered no tool and their "
        "memory is not written. Serve them with their tool-call parser (vLLM: "
        "--enable-auto-tool-choice --tool-call-parser …; llama.cpp: --jinja with a "
        "template that emits the model's tool-call tokens), then run "
        "`stm-memory doctor --retry-model NAME`; or pass tool_calling=False, or writer= "
        "(docs/open-models.md)."
    )


def _print_kept(entry: MemoryEntry) -> None:
    """The excerpts kept beside the memory, and why: the details the memory left out."""
    memory = written(entry.summary, entry.categories.values())
    table = Table(title="kept beside the memory: details the last write left out")
    for column in ("said", "by", "left out", "excerpt"):
        table.add_column(column, overflow="fold")
    for m in entry.kept:
        table.add_row(
            m.timestamp.isoformat(timespec="seconds"),
            m.name or m.user_id or m.role,
            ", ".join(left_out([m], memory)),
            m.content,
        )
    console.print(table)


@app.command("list")
def list_entries(
    server: Annotated[
        str | None, typer.Option("--server", "-s", help="Only this server's entries.")
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Only this user's entries.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="Entries shown, newest first.")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """List stored rows of a server or a user, newest first."""
    if server is None and user is None:
        raise _fail("give --server or --user")
    with _memory() as mem:
        rows = mem.stored_rows(server_id=server, user_id=user, limit=limit)
        _print_entries(rows, as_json=as_json, title=f"rows ({len(rows)})")


@app.command("clear-channel")
def clear_channel(channel: ChannelArg, quiet: QuietOpt = False) -> None:
    """Forget a channel everywhere (the /refresh command)."""
    with _memory() as mem:
        with _progress(quiet) as progress:
            rows = mem.clear_channel(channel, progress=progress)
        console.print(f"cleared channel {channel!r}: {rows} row(s) deleted", markup=False)


@app.command("forget-user")
def forget_user(
    user: Annotated[str, typer.Argument(help="User id.")], quiet: QuietOpt = False
) -> None:
    """Erase a user: their own memories everywhere, their words in shared channels, and
    every summary their words may have reached."""
    with _memory() as mem:
        with _progress(quiet) as progress:
            rows = mem.clear_user(user, progress=progress)
        console.print(f"erased user {user!r}: {rows} row(s) deleted or cleared", markup=False)


@app.command("clear-summary")
def clear_summary(
    channel: ChannelArg, user: UserOpt, server: ServerOpt = None, persona: PersonaOpt = None
) -> None:
    """Drop the summary and categories of a scope; raw recent messages stay."""
    scope = _scope(channel, user, server, persona)
    with _memory() as mem:
        rows = mem.clear_summary(scope)
        console.print(
            f"cleared the summary of {scope.live_key}: {rows} row(s) updated", markup=False
        )


@app.command()
def janitor(quiet: QuietOpt = False) -> None:
    """Replay queued writes, repair the cache against SQL, and delete rows idle past the
    retention period."""
    with _memory() as mem:
        landed = mem.flush()
        # run_janitor also repairs, and reclaims expired cache space.
        with _progress(quiet) as progress:
            deleted = mem.run_janitor(progress=progress)
    console.print(f"janitor: {landed} queued write(s) landed, {deleted} idle row(s) deleted")


@app.command()
def repair(quiet: QuietOpt = False) -> None:
    """Compare the live cache with SQL and move the older side forward (what a start-up
    after a crash and every janitor run do)."""
    with _memory() as mem:
        mem.flush()
        if mem.has_queued_writes():
            # Queued writes are newer than their rows: repairing now would undo them.
            raise _fail("queued writes could not be replayed yet (is the database up?)", 3)
        with _progress(quiet) as progress:
            done = mem.repair(progress=progress)
    # Orphans: cached entries whose row does not exist.
    console.print(
        f"repair: {done.checked} checked, {done.rows_advanced} row(s) and"
        f" {done.entries_advanced} entr(ies) moved forward, {done.entries_dropped} orphan(s)"
        " dropped"
    )


@app.command()
def stats(as_json: JsonOpt = False) -> None:
    """Entries, rows, queued writes and expiry buckets."""
    with _memory() as mem:
        data = {**mem.stats(), "expiry": mem.expiry_buckets()}
    if as_json:
        console.print_json(json.dumps(data))
        return
    table = Table(title="stm-memory")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key in ("cache_entries", "rows", "queued_writes"):
        table.add_row(key, str(data[key]))
    for name, count in data["expiry"].items():
        table.add_row(f"expiry {name}", str(count))
    console.print(table)


def savings_verdict(total: DayTotals) -> str:
    """One sentence on what the memory did to the bill, said plainly either way."""
    if total.turns == 0:
        return "no turn was billed through the memory yet"
    if total.full_cost <= 0:
        return f"{total.turns} turn(s) billed; no full-history price to compare"
    ratio = total.cost / total.full_cost
    if total.saved >= 0:
        return (
            f"the memory saved {total.saved:,.0f} input-token units over {total.turns} "
            f"turn(s): {ratio:.2f}x the full history's bill"
        )
    return (
        f"the memory cost {-total.saved:,.0f} input-token units more than the full "
        f"history over {total.turns} turn(s) ({ratio:.2f}x its bill)"
    )


@app.command()
def savings(
    server: Annotated[str | None, typer.Option("--server", "-s", help="One server.")] = None,
    since: Annotated[str | None, typer.Option(help="From this UTC day on (YYYY-MM-DD).")] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Save a chart of the bill per day (the plot extra).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """What the memory did to the bill: each turn's input as the API billed it, beside
    the full history's priced with the same rates, per day and channel (units: one
    uncached input token)."""
    try:
        first = date.fromisoformat(since) if since else None
    except ValueError:
        raise _fail(f"--since must be a day as YYYY-MM-DD, got {since!r}") from None
    with _memory() as mem:
        report = mem.savings(server_id=server, since=first)
    days, total = report.by_day(), report.total
    if as_json:
        data = {
            "days": {day: t.to_dict() for day, t in days.items()},
            "channels": [
                {"server_id": s, "channel_id": c, **t.to_dict()}
                for (s, c), t in report.by_channel().items()
            ],
            "total": total.to_dict(),
            "verdict": savings_verdict(total),
        }
        console.print_json(json.dumps(data))
    else:
        table = Table(title="stm-memory savings" + (f" ({server})" if server else ""))
        for column in ("day", "turns", "ours, billed", "full history", "saved", "ratio"):
            table.add_column(column, justify="left" if column == "day" else "right")
        for day, t in [*days.items(), ("total", total)]:
            ratio = f"{t.cost / t.full_cost:.2f}x" if t.full_cost else "-"
            table.add_row(
                day, str(t.turns), f"{t.cost:,.0f}", f"{t.full_cost:,.0f}", f"{t.saved:,.0f}", ratio
            )
        console.print(table)
        console.print(savings_verdict(total))
    if plot is not None:
        try:
            plot_savings(days, plot)
        except ImportError:
            raise _fail("--plot needs the plot extra: pip install 'stm-memory[plot]'") from None
        err_console.print(f"chart: {plot}", markup=False)


def plot_savings(days: Mapping[str, DayTotals], path: Path) -> None:
    """Ours as billed and the full history's price, per day, as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(days)
    fig, ax = plt.subplots(figsize=(max(6.0, len(labels) * 0.6), 3.6))
    xs = range(len(labels))
    ax.bar([x - 0.2 for x in xs], [d.full_cost for d in days.values()], 0.4, label="full history")
    ax.bar([x + 0.2 for x in xs], [d.cost for d in days.values()], 0.4, label="stm-memory")
    ax.set_xticks(list(xs), labels, rotation=45, ha="right")
    ax.set_ylabel("input-token units")
    ax.set_title("The bill per day, as billed and as the full history's")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


@categories_app.command("get")
def categories_get(
    server: Annotated[str, typer.Argument(help="Server id.")], as_json: JsonOpt = False
) -> None:
    """Show a server's categories."""
    with _memory() as mem:
        cats = mem.categories(server)
    if as_json:
        rows = [{"label": c.label, "description": c.description, "slug": c.slug} for c in cats]
        console.print_json(json.dumps(rows, ensure_ascii=False))
        return
    table = Table(title=f"categories of {server}")
    for column in ("#", "label", "slug", "description"):
        table.add_column(column)
    for i, c in enumerate(cats):
        table.add_row(str(i), c.label, c.slug, c.description)
    console.print(table)


@categories_app.command("set")
def categories_set(
    server: Annotated[str, typer.Argument(help="Server id.")],
    categories: Annotated[
        list[str] | None,
        typer.Argument(help='"Label: description" items (none restores summary mode).'),
    ] = None,
) -> None:
    """Replace a server's categories (at most 5)."""
    items = []
    for raw in categories or []:
        label, _, description = raw.partition(":")
        items.append(Category(label.strip(), description.strip()))
    with _memory(create=True) as mem:
        final = mem.set_categories(server, items)
    console.print(", ".join(f"{c.label} ({c.slug})" for c in final))


def _parse_setting(raw: str) -> tuple[str, Any]:
    name, sep, value = raw.partition("=")
    if not sep:
        raise _fail(f"settings are NAME=VALUE, got {raw!r}")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value  # bare strings need no quotes
    if name.strip() == "private_channel_ids" and isinstance(parsed, str):
        parsed = [p for p in parsed.split(",") if p]
    return name.strip(), parsed


@settings_app.command("get")
def settings_get(
    server: Annotated[str, typer.Argument(help="Server id.")], as_json: JsonOpt = False
) -> None:
    """Show a server's settings."""
    with _memory() as mem:
        data = mem.server_settings(server).to_dict()
    if as_json:
        console.print_json(json.dumps(data))
        return
    table = Table(title=f"settings of {server}")
    table.add_column("setting")
    table.add_column("value")
    for key, value in data.items():
        table.add_row(key, json.dumps(value))
    console.print(table)


@settings_app.command("set")
def settings_set(
    server: Annotated[str, typer.Argument(help="Server id.")],
    assignments: Annotated[list[str], typer.Argument(help="NAME=VALUE (JSON values).")],
) -> None:
    """Change server settings, e.g. refresh_cadence=3 render_mode=supersede."""
    changes = dict(_parse_setting(a) for a in assignments)
    with _memory(create=True) as mem:
        new = mem.configure_server(server, **changes)
    console.print_json(json.dumps(new.to_dict()))


@app.command()
def demo(
    plot: Annotated[
        str | None, typer.Option(help="Write a PNG plot of prompt tokens per turn here.")
    ] = None,
    provider: Annotated[
        str, typer.Option(help="offline (default), or openai / anthropic with an API key.")
    ] = "offline",
    turns: Annotated[
        int, typer.Option(min=4, max=400, help="Turns of the scripted conversation.")
    ] = 60,
    model: Annotated[str | None, typer.Option(help="Model name for a real provider.")] = None,
    store: Annotated[
        Path | None,
        typer.Option(
            help="Keep the demo's store in this folder (made anew each run), so that "
            "`stm-memory savings` can read its receipt; default: a temporary folder."
        ),
    ] = None,
) -> None:
    """A scripted multi-channel conversation showing what the memory saves."""
    from stm_memory.cli.demo import run_demo

    try:
        run_demo(console, plot=plot, provider=provider, turns=turns, model=model, store=store)
    except StmError as exc:
        raise _fail(str(exc)) from exc


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # pragma: no cover
        sys.exit(130)
    except ImportError as exc:
        # A command that needs an extra says which, in one line (ours name the
        # ``pip install`` line: kit.missing_extra); any other import error is a bug.
        if "pip install" not in str(exc):
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(2)

"""Progress bars of the CLI's bulk commands: drawn on stderr while a terminal watches,
absent with ``--quiet`` or when stderr is captured, and the printed result the same."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

import stm_memory.cli.commands as cli
from stm_memory import Scope, ShortTermMemory
from stm_memory.bulk import (
    DELETE_ROWS,
    ERASE_CACHED,
    ERASE_ROWS,
    EVICT_CACHED,
    REPAIR_CACHED,
)
from stm_memory.durability.persister import Persister

runner = CliRunner()
SCOPES = [Scope(channel_id="c1", user_id=f"u{i}", server_id="g1") for i in range(3)]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'stm.db'}"
    with ShortTermMemory.from_url(url, cache_dir=tmp_path / "cache") as mem:
        for scope in SCOPES:
            turn = mem.begin_turn(scope)
            assert mem.update(turn, {"summary": f"{scope.user_id} was here"})["status"] == (
                "completed"
            )
    return {"STM_DATABASE_URL": url, "STM_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Console:
    """stderr as a terminal, recorded."""
    console = Console(file=io.StringIO(), force_terminal=True, width=120, record=True)
    monkeypatch.setattr(cli, "err_console", console)
    return console


PHASES = (EVICT_CACHED, ERASE_CACHED, REPAIR_CACHED, DELETE_ROWS, ERASE_ROWS)
BAR = re.compile(f"({'|'.join(PHASES)}) +━+ +(\\d+/[\\d?]+)")


def bars(console: Console) -> dict[str, str]:
    """The last drawn count (``done/total``) of each phase's bar."""
    return dict(BAR.findall(console.export_text()))


COMMANDS = [
    # One server row and three user rows in c1.
    (["clear-channel", "c1"], "cleared channel 'c1': 4 row(s) deleted\n"),
    # u0's row, and the shared c1 row whose summary u0 wrote.
    (["forget-user", "u0"], "erased user 'u0': 2 row(s) deleted or cleared\n"),
    (["janitor"], "janitor: 0 queued write(s) landed, 0 idle row(s) deleted\n"),
    (
        ["repair"],
        "repair: 4 checked, 0 row(s) and 0 entr(ies) moved forward, 0 orphan(s) dropped\n",
    ),
]


@pytest.mark.parametrize(("args", "printed"), COMMANDS, ids=lambda v: v[0] if v else "")
def test_without_a_terminal_the_output_is_the_result_alone(
    env: dict[str, str], args: list[str], printed: str
) -> None:
    result = runner.invoke(cli.app, args, env=env)
    assert result.exit_code == 0, result.output
    assert result.output == printed  # stdout and stderr both: no bar anywhere


@pytest.mark.parametrize(("args", "printed"), COMMANDS, ids=lambda v: v[0] if v else "")
def test_quiet_draws_no_bar(
    env: dict[str, str], terminal: Console, args: list[str], printed: str
) -> None:
    result = runner.invoke(cli.app, [*args, "--quiet"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output == printed
    assert terminal.export_text() == ""


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["clear-channel", "c1"], {EVICT_CACHED: "4/4", DELETE_ROWS: "4/4"}),
        (
            ["forget-user", "u0"],
            # u0's one cached entry evicted, the other three scanned; one row deleted,
            # the three others scanned for u0's words.
            {EVICT_CACHED: "1/1", ERASE_CACHED: "3/3", DELETE_ROWS: "1/1", ERASE_ROWS: "3/3"},
        ),
        (["janitor"], {REPAIR_CACHED: "4/4", EVICT_CACHED: "0/0", DELETE_ROWS: "0/0"}),
        (["repair"], {REPAIR_CACHED: "4/4"}),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_a_terminal_sees_a_bar_per_phase(
    env: dict[str, str], terminal: Console, args: list[str], expected: dict[str, str]
) -> None:
    result = runner.invoke(cli.app, args, env=env)
    assert result.exit_code == 0, result.output
    assert "━" not in result.output  # the result on stdout is plain
    assert bars(terminal) == expected


def test_a_phase_starting_over_gets_a_bar_of_its_own() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=120, record=True)
    with Progress(*cli._columns(), console=console) as progress:
        draw = cli._PhaseBars(progress)
        # A delete queued earlier is replayed first, then this command's own.
        for done in (3, 6):
            draw(DELETE_ROWS, done, 6)
        for done in (2, 4):
            draw(DELETE_ROWS, done, None)
        draw(DELETE_ROWS, 4, 4)
    assert len(progress.tasks) == 2
    assert [(t.completed, t.total) for t in progress.tasks] == [(6, 6), (4, 4)]


def test_repair_refuses_while_writes_are_queued(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ShortTermMemory.from_url(env["STM_DATABASE_URL"], cache_dir=env["STM_CACHE_DIR"]) as mem:
        mem._outbox.enqueue("delete_channel", {"channel_id": "c9"}, at=mem.now(), channel_id="c9")
    monkeypatch.setattr(Persister, "flush", lambda self, **_kw: 0)  # the database is down
    result = runner.invoke(cli.app, ["repair"], env=env)
    assert result.exit_code == 3
    assert "queued writes could not be replayed" in result.output
